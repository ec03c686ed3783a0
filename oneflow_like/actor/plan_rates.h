// How many times each task of a Plan fires per step, from the firing rules
// (docs/plan_format.md): a SOURCE with an INPUT binding fires pieces_per_step times, a variable
// holder once; REPEAT multiplies its input's rate by `count`, ACCUMULATE divides it; every
// other task fires as often as its inputs arrive (all inputs must agree). A variable holder's
// update input is the plan's back edge and does not constrain its rate.
//
//   x.source (N=4) -> relu -> y.sink            rates 4, 4, 4
//   w.source (1) -> repeat(4) -> add(x, .) -> accumulate(4) -> sink     1, 4, 4, 1, 1
//
// A per-rank plan (PlanProto.per_rank) lacks the producers of its mirrors: a mirror listed in
// per_rank.step_rate_mirrors fires once per step, any other pieces_per_step times.
//
// A task whose rate cannot be derived (it sits on a cycle without a holder, which the
// compiler's verifier rejects) gets pieces_per_step. Pure function; thread-safe.
#ifndef ONEFLOW_LIKE_ACTOR_PLAN_RATES_H_
#define ONEFLOW_LIKE_ACTOR_PLAN_RATES_H_

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "oneflow_like/core/proto/plan.pb.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace actor {

// task id -> firings per step. InvalidArgument naming the task when its inputs arrive at
// different rates or an ACCUMULATE count does not divide its input rate.
absl::StatusOr<absl::flat_hash_map<int64_t, int64_t>> FiringsPerStep(const PlanProto& plan);

// Whether `task` is a SOURCE bound to a VARIABLE on its rank (a variable holder).
bool IsVariableHolder(const RankPlanProto& rank_plan, const TaskProto& task);

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_PLAN_RATES_H_
