#include "oneflow_like/actor/plan_rates.h"

#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace oneflow_like {
namespace actor {

bool IsVariableHolder(const RankPlanProto& rank_plan, const TaskProto& task) {
  if (task.type() != TaskProto::SOURCE) return false;
  for (const TensorBindingProto& binding : rank_plan.bindings()) {
    if (binding.tensor_name() == task.io().tensor_name()) return binding.kind() == TensorBindingProto::VARIABLE;
  }
  return false;
}

absl::StatusOr<absl::flat_hash_map<int64_t, int64_t>> FiringsPerStep(const PlanProto& plan) {
  const int64_t pieces = std::max<int64_t>(1, plan.pieces_per_step());
  absl::flat_hash_map<int64_t, int64_t> producer_of;  // register id -> producing task id
  std::vector<std::pair<const RankPlanProto*, const TaskProto*>> pending;
  absl::flat_hash_map<int64_t, int64_t> rate;
  // A per-rank plan holds mirrors of other ranks' registers without their producers: the plan
  // says which fire once per step; the others fire pieces_per_step times.
  absl::flat_hash_map<int64_t, int64_t> mirror_rate;
  if (plan.has_per_rank()) {
    absl::flat_hash_set<int64_t> step_rate(plan.per_rank().step_rate_mirrors().begin(),
                                           plan.per_rank().step_rate_mirrors().end());
    for (const RankPlanProto& rank_plan : plan.rank_plans()) {
      for (const RegisterProto& reg : rank_plan.registers()) {
        if (reg.has_remote()) mirror_rate[reg.id()] = step_rate.contains(reg.id()) ? 1 : pieces;
      }
    }
  }
  for (const RankPlanProto& rank_plan : plan.rank_plans()) {
    for (const TaskProto& task : rank_plan.tasks()) {
      for (int64_t id : task.produced_register_ids()) producer_of[id] = task.id();
      if (task.type() == TaskProto::SOURCE) {
        rate[task.id()] = IsVariableHolder(rank_plan, task) ? 1 : pieces;
      } else {
        pending.emplace_back(&rank_plan, &task);
      }
    }
  }
  bool changed = true;
  while (changed) {
    changed = false;
    for (auto& [rank_plan, task] : pending) {
      if (task == nullptr) continue;
      int64_t input_rate = -1;
      bool known = true;
      for (int64_t id : task->consumed_register_ids()) {
        int64_t register_rate = -1;
        if (auto remote = mirror_rate.find(id); remote != mirror_rate.end()) {
          register_rate = remote->second;
        } else {
          auto producer = producer_of.find(id);
          auto r = producer == producer_of.end() ? rate.end() : rate.find(producer->second);
          if (r != rate.end()) register_rate = r->second;
        }
        if (register_rate < 0) {
          known = false;
          break;
        }
        if (input_rate >= 0 && register_rate != input_rate) {
          return absl::InvalidArgumentError(absl::StrCat(
              "task '", task->name(), "' (", task->id(), ") gets inputs at different rates per step (", input_rate,
              " and ", register_rate, " from register ", id, "): a REPEAT or ACCUMULATE is missing"));
        }
        input_rate = register_rate;
      }
      if (!known || input_rate < 0) continue;
      int64_t out = input_rate;
      if (task->type() == TaskProto::REPEAT) out = input_rate * std::max<int64_t>(1, task->count().count());
      if (task->type() == TaskProto::ACCUMULATE) {
        const int64_t count = std::max<int64_t>(1, task->count().count());
        if (input_rate % count != 0) {
          return absl::InvalidArgumentError(absl::StrCat("ACCUMULATE task '", task->name(), "' sums ", count,
                                                         " inputs but they arrive ", input_rate, " times per step"));
        }
        out = input_rate / count;
      }
      rate[task->id()] = out;
      task = nullptr;
      changed = true;
    }
  }
  for (auto& [rank_plan, task] : pending) {
    if (task != nullptr) rate[task->id()] = pieces;
  }
  return rate;
}

}  // namespace actor
}  // namespace oneflow_like
