// The plan simulator: runs the abstract firing rules of a plan (docs/plan_format.md and the
// compiler contracts) for a number of steps, with credits but without data, to find
// deadlocks and rate mismatches before the runtime does. VerifyPlan uses it (check 7); tests
// may call it directly to assert how often each task fires.
//
// Rules simulated (N = pieces_per_step; every buffer is read by each consumer in production
// order; a register's buffer is free again once every consumer returned it; a register
// without consumers is always free):
//   SOURCE, input      fires N * steps times: needs every produced register free.
//   SOURCE, variable   (a VARIABLE binding on its rank: the holder) fires `steps` times; every
//                      firing but the first also reads and returns one buffer of each consumed
//                      register (the update back edge).
//   REPEAT(c)          takes one buffer of each input, emits c outputs one after another (each
//                      needs a free output buffer), then returns the inputs.
//   ACCUMULATE(c)      reads and returns one buffer of each input c times; the c-th read also
//                      needs free outputs and emits one buffer of each.
//   COLLECTIVE         a rendezvous: the tasks of one call (same CollectiveParams.ranks and
//                      global_order, one per member rank) fire together, once all of them
//                      could fire as ordinary tasks.
//   any other task     needs a readable buffer of each input and a free buffer of each output;
//                      reads, writes, returns. A task without inputs (e.g. a zero-filling
//                      BOXING_CONCAT) fires at most N * steps times (it is paced by its
//                      consumers; the cap only keeps a consumer-less one from running forever).
// The reachable final state does not depend on the order of firings (a task's enabling can
// only be taken away by itself), so one event-driven run decides. The run completes when every
// SOURCE fired its budget, no REPEAT / ACCUMULATE is half way, and every buffer was read by
// every consumer, except at most one last update per holder back edge and the buffers of
// input-less tasks.
//
// Example: a 1-rank plan with pieces_per_step 4: x.source -> r_x(count 1) -> X, Y; X -> ACC(4)
// -> REPEAT(4) -> Z; Y -> r_y -> Z. With r_y count 1 the run gets stuck after 2 pieces: Y holds
// piece 2 of r_x because r_y is full (Z needs the REPEAT, which needs all 4 pieces of X), so
// the source cannot emit piece 3. With r_y count 4 (or 3: r_x itself holds the 4th piece) it
// completes: every task but ACC and REPEAT fires 4 * steps times.
//
// Cost: O((tasks + edges) * firings per task), event-driven (a task is re-examined only when
// one of its registers changed). The rules run on a compact graph (plan_sim_graph.h: dense
// arrays, no object per task or register) that StreamedVerifier builds from per-rank parts too.
// Thread-compatible.
#ifndef ONEFLOW_LIKE_COMPILER_PLAN_PLAN_SIMULATOR_H_
#define ONEFLOW_LIKE_COMPILER_PLAN_PLAN_SIMULATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace compiler {

class PlanIndex;

struct PlanSimulation {
  bool completed = false;
  // When !completed: why (the blocked tasks and the registers they wait for), one paragraph.
  std::string report;
  // Per task id: buffers emitted on each produced register (REPEAT: emissions) and buffers
  // read from each consumed register (ACCUMULATE: inputs summed). Equal for ordinary tasks.
  // Filled by the PlanProto overload of SimulatePlan only.
  absl::flat_hash_map<int64_t, int64_t> emitted;
  absl::flat_hash_map<int64_t, int64_t> read;
  // The same per PlanIndex task index (plan order); filled by both overloads.
  std::vector<int64_t> emitted_by_index;
  std::vector<int64_t> read_by_index;
};

// REQUIRES: `plan` passes VerifyPlan(plan, {.steps = 0}) (ids resolve, lists agree); the
// simulator trusts its structure. InvalidArgument for steps < 1.
absl::StatusOr<PlanSimulation> SimulatePlan(const PlanProto& plan, int64_t steps,
                                            int max_reported_tasks = 4);

// The same on an existing index (used by VerifyPlan), but it fills only the *_by_index
// counts (no per-id maps).
absl::StatusOr<PlanSimulation> SimulatePlan(const PlanIndex& index, int64_t steps,
                                            int max_reported_tasks = 4);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_PLAN_PLAN_SIMULATOR_H_
