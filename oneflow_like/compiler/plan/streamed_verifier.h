// Verifies a whole plan given as per-rank parts (CompileOptions::only_rank, LowerOptions::only_rank:
// a PlanProto with `per_rank` set holding one rank's RankPlanProto and memory entry, byte for
// byte the whole plan's), one part at a time, in bounded memory: the verdict of VerifyPlan on
// the plan the parts merge into (rank_plans.h), without ever holding that plan. `olplan verify`
// uses it for plans too large to hold as protos (4,096 ranks: 6.5M tasks, 15.7 GB as protos).
//
//   StreamedVerifier v(world_size, pieces_per_step, options);
//   for (each rank r ascending; ranks without work may be skipped) RETURN_IF_ERROR(v.AddRank(part_r));
//   RETURN_IF_ERROR(v.Finish());
//   for (each rank again, ascending, the same parts) RETURN_IF_ERROR(v.CheckRank(part_r));
//   // (CheckRank does something only if options.steps > 0 && options.check_memory_reuse.)
//
// The passes (check numbers of plan_verifier.h):
//   AddRank   what VerifyRankPlan checks on the part (1, 3, 2 for what the rank holds, 4, 5, 6
//             along its streams and its collectives' geometry), and across the parts so far:
//             world_size and pieces_per_step as given, ranks ascending and inside the world,
//             task ids unique in the plan, each register id produced on one rank; a
//             collective task whose params differ from its call's first member on an earlier
//             rank is remembered (reported by Finish after check 6's sequences). Then it records
//             the part in the skeleton (plan_skeleton.h, plan_sim_graph.h): dense arrays by
//             task, register and edge, names and slot lists interned.
//   Finish    2 across ranks: every mirror names a rank that produces the register, with the same
//             producer and slots, and the producer lists the mirror's TRANSFER consumers; every
//             consumer on another rank exists there, consumes the register and pulls it
//             through a mirror on its rank. 6 across ranks: every member rank of each group
//             issues the same sequence of (global_order, kind); then the remembered params
//             difference. Then the deadlock simulation 7 (options.steps > 0) on the skeleton,
//             its report naming tasks and registers as VerifyPlan's does.
//   CheckRank 8 (memory reuse) on the part with the simulation's counts of its tasks.
//
// Messages are VerifyPlan's ("VerifyPlan: rank 1 task 16 'dw.transfer@r1' (TRANSFER): ...") for
// the same defect found by the same check (the texts both give are written once, plan_errors.h;
// a part's memory entry is named by its place in the whole plan). Differences from VerifyPlan on
// the merged plan:
//   - with several defects, which one is reported first: VerifyPlan runs each check on every rank
//     before the next check; here rank r's own checks (3, 2, 4, 5, 6) run before rank r+1's id
//     checks, a register's checks of its own rank's consumers before those of other ranks', and
//     every rank's own checks before any check across ranks;
//   - what has no merged plan: a part that is not per_rank or lists another rank (VerifyRankPlan's
//     message), parts of another world_size or pieces_per_step (refused by AddRank; MergeRankPlans
//     refuses them too), a part without its memory entry (not compared; MergeRankPlans refuses
//     it), a malformed part ("rank_plans[0] is for rank ...": its index within the part).
//
// Errors: InternalError (a plan defect, as VerifyPlan), FailedPrecondition (calls out of order:
// AddRank after Finish, CheckRank before a successful Finish or with another rank's part).
// Cost: linear in the parts' tasks, registers and edges (the simulation as SimulatePlan). The
// 24-layer GPT at 4,096 ranks (6.40M tasks, 10.2M register entries; streamed_verifier_bench):
// 24-29 s of CPU for all three passes (parsing the parts included) and 1.96 GB peak RSS: about
// 300 bytes per task with its 1.6 registers and edges, the simulation's state included (512
// ranks: 4.0 s, 311 MB, where VerifyPlan takes 4.5 s and the whole plan 2.5 GB). A caller that parses many parts one after another should parse each on a
// google::protobuf::Arena: freeing a part's millions of small objects one by one makes glibc
// malloc consolidate its fragmented heap on every part (5x slower CheckRank pass at 4,096 ranks).
// Thread-compatible; the parts are only read, and nothing points into them after a call.
#ifndef ONEFLOW_LIKE_COMPILER_PLAN_STREAMED_VERIFIER_H_
#define ONEFLOW_LIKE_COMPILER_PLAN_STREAMED_VERIFIER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "oneflow_like/compiler/plan/plan_simulator.h"
#include "oneflow_like/compiler/plan/plan_verifier.h"
#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace compiler {

struct PlanSkeleton;
class SimGraphBuilder;

class StreamedVerifier {
 public:
  StreamedVerifier(int32_t world_size, int64_t pieces_per_step, const PlanVerifierOptions& options);
  ~StreamedVerifier();
  StreamedVerifier(const StreamedVerifier&) = delete;
  StreamedVerifier& operator=(const StreamedVerifier&) = delete;

  // REQUIRES: parts in ascending rank order, before Finish.
  absl::Status AddRank(const PlanProto& part);
  // REQUIRES: every part added. Call once.
  absl::Status Finish();
  // REQUIRES: Finish() returned OK; parts in ascending rank order, each as given to AddRank.
  absl::Status CheckRank(const PlanProto& part);

  // After Finish with options.steps > 0: the simulation's counts, by task in plan order (ranks
  // ascending, tasks as listed), as SimulatePlan(merged plan) gives them.
  const PlanSimulation& simulation() const { return simulation_; }

 private:
  const int32_t world_size_;
  const int64_t pieces_per_step_;
  const PlanVerifierOptions options_;
  std::unique_ptr<PlanSkeleton> skeleton_;
  std::unique_ptr<SimGraphBuilder> builder_;
  bool finished_ = false;
  bool finished_ok_ = false;
  size_t next_checked_ = 0;  // CheckRank: index into the skeleton's ranks
  PlanSimulation simulation_;
};

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_PLAN_STREAMED_VERIFIER_H_
