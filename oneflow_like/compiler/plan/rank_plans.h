// Per-rank plans (CompileOptions::only_rank, LowerOptions::only_rank: each process lowers only
// its own rank) and the whole plan they are cut from.
//
//   std::vector<PlanProto> parts;   // one per rank 0 .. world_size - 1, from Compile(..., only_rank = r)
//   ASSIGN_OR_RETURN(PlanProto whole, MergeRankPlans(std::move(parts)));
//   SealPlan(&whole);               // equals the whole-plan compile's content_hash (tests check it)
//
// MergeRankPlans puts the rank plans and memory entries in rank order (ranks without work have
// none), takes the plan-level fields (job_name, world_size, pieces_per_step, sbp_decisions,
// boxing_choices) from the first part and requires every part to agree (InvalidArgument naming
// the field and the two ranks), and leaves per_rank and content_hash unset.
#ifndef ONEFLOW_LIKE_COMPILER_PLAN_RANK_PLANS_H_
#define ONEFLOW_LIKE_COMPILER_PLAN_RANK_PLANS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace compiler {

absl::StatusOr<PlanProto> MergeRankPlans(std::vector<PlanProto> parts);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_PLAN_RANK_PLANS_H_
