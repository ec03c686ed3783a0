#include "oneflow_like/compiler/plan/rank_plans.h"
#include "oneflow_like/compiler/plan/plan_hash.h"

#include <algorithm>
#include <string>
#include <utility>


#include "absl/strings/str_cat.h"

namespace oneflow_like {
namespace compiler {
namespace {


// The plan-level fields every part must share, serialized.
std::string Shared(const PlanProto& part) {
  PlanProto shared;
  shared.set_job_name(part.job_name());
  shared.set_world_size(part.world_size());
  shared.set_pieces_per_step(part.pieces_per_step());
  *shared.mutable_sbp_decisions() = part.sbp_decisions();
  *shared.mutable_boxing_choices() = part.boxing_choices();
  shared.ByteSizeLong();
  return DeterministicBytes(shared);
}

int32_t RankOf(const PlanProto& part) {
  return part.has_per_rank() ? part.per_rank().rank() : (part.ranks().empty() ? -1 : part.ranks(0));
}

}  // namespace

absl::StatusOr<PlanProto> MergeRankPlans(std::vector<PlanProto> parts) {
  PlanProto whole;
  if (parts.empty()) return whole;
  const std::string shared = Shared(parts.front());
  for (size_t i = 1; i < parts.size(); ++i) {
    if (Shared(parts[i]) == shared) continue;
    const PlanProto& a = parts.front();
    const PlanProto& b = parts[i];
    std::string field = "sbp_decisions or boxing_choices";
    if (a.job_name() != b.job_name()) field = "job_name";
    else if (a.world_size() != b.world_size()) field = "world_size";
    else if (a.pieces_per_step() != b.pieces_per_step()) field = "pieces_per_step";
    return absl::InvalidArgumentError(absl::StrCat("MergeRankPlans: the plans of rank ", RankOf(a), " and rank ",
                                                   RankOf(b), " differ in ", field, "; they are not of one job"));
  }
  std::stable_sort(parts.begin(), parts.end(),
                   [](const PlanProto& a, const PlanProto& b) { return RankOf(a) < RankOf(b); });
  whole.set_job_name(parts.front().job_name());
  whole.set_world_size(parts.front().world_size());
  whole.set_pieces_per_step(parts.front().pieces_per_step());
  *whole.mutable_sbp_decisions() = parts.front().sbp_decisions();
  *whole.mutable_boxing_choices() = parts.front().boxing_choices();
  for (PlanProto& part : parts) {
    if (part.rank_plans_size() == 0) continue;  // a rank without work
    if (part.rank_plans_size() != 1 || part.ranks_size() != 1 || part.memory_size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("MergeRankPlans: a part has ", part.rank_plans_size(),
                                                     " rank plans; a per-rank plan has one"));
    }
    if (whole.ranks_size() > 0 && whole.ranks(whole.ranks_size() - 1) >= part.ranks(0)) {
      return absl::InvalidArgumentError(absl::StrCat("MergeRankPlans: rank ", part.ranks(0), " is given twice"));
    }
    whole.add_ranks(part.ranks(0));
    *whole.add_rank_plans() = std::move(*part.mutable_rank_plans(0));
    *whole.add_memory() = std::move(*part.mutable_memory(0));
  }
  return whole;
}

}  // namespace compiler
}  // namespace oneflow_like
