#include "oneflow_like/compiler/plan/plan_index.h"

#include <cctype>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/compiler/plan/plan_errors.h"

namespace oneflow_like {
namespace compiler {
namespace {

absl::Status Error(const std::string& message) {
  return absl::InternalError(absl::StrCat("VerifyPlan: ", message));
}

}  // namespace

absl::StatusOr<PlanIndex> PlanIndex::Build(const PlanProto& plan) {
  PlanIndex index;
  index.plan_ = &plan;
  if (plan.rank_plans_size() != plan.ranks_size()) {
    return Error(absl::StrCat("the plan lists ", plan.ranks_size(), " ranks but has ",
                              plan.rank_plans_size(), " rank plans; they must match one to one"));
  }
  int64_t total_tasks = 0;
  int64_t total_registers = 0;
  for (const RankPlanProto& rank_plan : plan.rank_plans()) {
    total_tasks += rank_plan.tasks_size();
    total_registers += rank_plan.registers_size();
  }
  // Dense tables cover ids [0, 2 * count + 16): every id when ids are assigned 0, 1, 2, ...
  index.tasks_.reserve(total_tasks);
  index.holder_.reserve(total_tasks);
  index.dense_task_index_.assign(2 * total_tasks + 16, -1);
  index.dense_producing_.assign(2 * total_registers + 16, -1);
  auto dense = [](const std::vector<int64_t>& table, int64_t id) {
    return id >= 0 && id < static_cast<int64_t>(table.size());
  };
  absl::flat_hash_set<absl::string_view> variables;  // of the current rank
  for (int i = 0; i < plan.rank_plans_size(); ++i) {
    const RankPlanProto& rank_plan = plan.rank_plans(i);
    const int32_t rank = rank_plan.rank();
    if (rank != plan.ranks(i)) {
      return Error(absl::StrCat("rank_plans[", i, "] is for rank ", rank, " but ranks[", i, "] is ",
                                plan.ranks(i)));
    }
    if (i > 0 && plan.ranks(i) <= plan.ranks(i - 1)) {
      return RanksNotAscendingError(plan.ranks(i - 1), plan.ranks(i));
    }
    if (rank < 0 || rank >= plan.world_size()) {
      return RankOutsideWorldError(rank, plan.world_size());
    }
    index.ranks_[rank] = &rank_plan;
    variables.clear();
    for (const TensorBindingProto& binding : rank_plan.bindings()) {
      if (binding.kind() == TensorBindingProto::VARIABLE) variables.insert(binding.tensor_name());
    }
    for (const TaskProto& task : rank_plan.tasks()) {
      if (task.rank() != rank) {
        return Error(absl::StrCat(TaskLabel(task), " is listed in the plan of rank ", rank));
      }
      const int64_t position = static_cast<int64_t>(index.tasks_.size());
      int64_t previous = -1;
      if (dense(index.dense_task_index_, task.id())) {
        int64_t& slot = index.dense_task_index_[task.id()];
        if (slot >= 0) previous = slot;
        else slot = position;
      } else {
        auto [it, inserted] = index.task_index_.emplace(task.id(), position);
        if (!inserted) previous = it->second;
      }
      if (previous >= 0) {
        return TaskIdTwiceError(task.id(), TaskLabel(*index.tasks_[previous]), TaskLabel(task));
      }
      index.tasks_.push_back(&task);
      index.holder_.push_back(task.type() == TaskProto::SOURCE && task.has_io() &&
                              variables.contains(task.io().tensor_name()));
    }
    for (const RegisterProto& reg : rank_plan.registers()) {
      const RegisterProto* same = index.FindEntry(rank, reg.id());
      if (same != nullptr) {
        return Error(absl::StrCat("rank ", rank, " lists register id ", reg.id(), " twice ('",
                                  same->name(), "' and '", reg.name(), "')"));
      }
      if (reg.has_remote()) {
        index.entries_.emplace(std::make_pair(rank, reg.id()), &reg);
        continue;
      }
      const int64_t existing = index.ProducingIndex(reg.id());
      if (existing >= 0) {
        const RegisterProto* other = index.registers_[existing].second;
        return RegisterProducedTwiceError(reg.id(), other->name(), other->producer().rank(), reg.name(), rank);
      }
      const int64_t position = static_cast<int64_t>(index.registers_.size());
      if (dense(index.dense_producing_, reg.id())) {
        index.dense_producing_[reg.id()] = position;
      } else {
        index.producing_.emplace(reg.id(), position);
      }
      index.registers_.emplace_back(rank, &reg);
    }
  }
  return index;
}

int64_t PlanIndex::TaskIndex(int64_t task_id) const {
  if (task_id >= 0 && task_id < static_cast<int64_t>(dense_task_index_.size())) {
    return dense_task_index_[task_id];
  }
  auto it = task_index_.find(task_id);
  return it == task_index_.end() ? -1 : it->second;
}

const TaskProto* PlanIndex::FindTask(int64_t task_id) const {
  const int64_t index = TaskIndex(task_id);
  return index < 0 ? nullptr : tasks_[index];
}

int64_t PlanIndex::ProducingIndex(int64_t id) const {
  if (id >= 0 && id < static_cast<int64_t>(dense_producing_.size())) return dense_producing_[id];
  auto it = producing_.find(id);
  return it == producing_.end() ? -1 : it->second;
}

const RegisterProto* PlanIndex::FindRegister(int64_t id) const {
  const int64_t index = ProducingIndex(id);
  return index < 0 ? nullptr : registers_[index].second;
}

const RegisterProto* PlanIndex::FindEntry(int32_t rank, int64_t id) const {
  const int64_t index = ProducingIndex(id);
  if (index >= 0 && registers_[index].first == rank) return registers_[index].second;
  if (entries_.empty()) return nullptr;
  auto it = entries_.find(std::make_pair(rank, id));
  return it == entries_.end() ? nullptr : it->second;
}

const RankPlanProto* PlanIndex::FindRank(int32_t rank) const {
  auto it = ranks_.find(rank);
  return it == ranks_.end() ? nullptr : it->second;
}

bool PlanIndex::IsVariableHolder(const TaskProto& task) const {
  if (task.type() != TaskProto::SOURCE || !task.has_io()) return false;
  const int64_t index = TaskIndex(task.id());
  if (index >= 0 && tasks_[index] == &task) return holder_[index];
  const RankPlanProto* rank_plan = FindRank(task.rank());  // a task from outside the plan
  if (rank_plan == nullptr) return false;
  for (const TensorBindingProto& binding : rank_plan->bindings()) {
    if (binding.kind() == TensorBindingProto::VARIABLE &&
        binding.tensor_name() == task.io().tensor_name()) {
      return true;
    }
  }
  return false;
}

std::string PlanIndex::TaskLabel(const TaskProto& task) {
  return absl::StrCat("rank ", task.rank(), " task ", task.id(), " '", task.name(), "' (",
                      TaskProto::Type_Name(task.type()), ")");
}

std::string PlanIndex::RegisterLabel(int32_t rank, const RegisterProto& reg) {
  return absl::StrCat(reg.has_remote() ? "mirror register " : "register ", reg.id(), " '",
                      reg.name(), "' on rank ", rank);
}

int64_t DataTypeBytes(DataTypeProto dtype) {
  switch (dtype) {
    case DT_FLOAT32:
      return 4;
    case DT_FLOAT64:
      return 8;
    case DT_INT32:
      return 4;
    case DT_INT64:
      return 8;
    case DT_BOOL:
      return 1;
    case DT_BFLOAT16:
      return 2;
    case DT_FLOAT16:
      return 2;
    default:
      return 0;
  }
}

std::string SlotText(const TensorDescProto& desc) {
  std::string name = DataTypeProto_Name(desc.dtype());
  if (name.rfind("DT_", 0) == 0) name = name.substr(3);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return absl::StrCat(name, "[", absl::StrJoin(desc.dims(), ","), "]");
}

}  // namespace compiler
}  // namespace oneflow_like
