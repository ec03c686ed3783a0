// In-place variable updates: which optimizer tasks of a rank plan may write the new value of a
// variable straight into the variable's own register, so that its holder has nothing to copy.
//
// In a plan, a variable holder H (a SOURCE bound to a VARIABLE) emits register RH once per
// step, and absorbs its update register RU (the optimizer's output) by copying it into RH once
// every reader of the step returned RH. For a large model that copy is a full pass over every
// parameter and optimizer state per step. When the optimizer's op allows it
// (OpDef::inplace_pairs: output k may alias input i), the runtime can instead point RU's slot
// at RH's bytes and let the optimizer task O write there, provided:
//   1. RU is a local register with count 1, produced by a COMPUTE task O on the same stream
//      (thread) as every holder involved;
//   2. every consumer of RU is a variable holder on this rank whose only consumed register is
//      RU, each reading a different slot, and every slot of RU is read by one of them;
//   3. for each such slot s (O's payload output k), O's op has an in-place pair (k, i) and O's
//      payload input i is exactly the variable's slot of RH (same dtype and shape), O consumes
//      RH through one port only, and RH has count 1; all the RH live in one memory block (the
//      persistent block);
//   4. every register O produces is such an update register (so nothing within the step
//      depends on O; else a reader of the variable could wait for O while O waits for it).
// Ordering: O then fires only once every other reader of each RH returned it this step (the
// holder wakes O when that happens; see Actor::AddInPlaceTarget), so no reader sees a half-
// updated variable, and the holder's copy becomes a no-op (CopyTensorData skips same bytes).
// RU's planned bytes go unused (the memory planner still reserves them).
//
// Example: fc1.weight.source (H) -> fc1.weight register (RH) -> fc1 (forward), fc1/grad0 and
// fc1.weight/sgd_update (O, sgd_plain_update, pair {0, 0}) -> fc1.weight/new (RU) -> H.
// FindInPlaceUpdates returns {RU, O, [{H, RH, slot 0}]}.
#ifndef ONEFLOW_LIKE_ACTOR_INPLACE_UPDATES_H_
#define ONEFLOW_LIKE_ACTOR_INPLACE_UPDATES_H_

#include <cstdint>
#include <map>
#include <vector>

#include "oneflow_like/core/op_registry.h"
#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace actor {

struct InPlaceTarget {
  int64_t holder_task = 0;        // H
  int64_t variable_register = 0;  // RH (count 1)
  int32_t variable_slot = 0;      // the variable's slot in RH
  int32_t update_slot = 0;        // the slot of RU that H absorbs
};

struct InPlaceUpdate {
  int64_t update_register = 0;  // RU
  int64_t optimizer_task = 0;   // O
  std::vector<InPlaceTarget> targets;
};

// Every update of `rank_plan` that satisfies the rules above, by ascending RU id. `registers`:
// the rank plan's registers by id. Never fails: a plan that does not fit the rules (or is
// malformed; Runtime::Create reports that) just yields no entry for that update.
std::vector<InPlaceUpdate> FindInPlaceUpdates(const RankPlanProto& rank_plan,
                                              const std::map<int64_t, const RegisterProto*>& registers,
                                              const OpRegistry& registry);

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_INPLACE_UPDATES_H_
