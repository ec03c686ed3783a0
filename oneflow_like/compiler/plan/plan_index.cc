#include "oneflow_like/compiler/plan/plan_index.h"

#include <cctype>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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
  for (int i = 0; i < plan.rank_plans_size(); ++i) {
    const RankPlanProto& rank_plan = plan.rank_plans(i);
    const int32_t rank = rank_plan.rank();
    if (rank != plan.ranks(i)) {
      return Error(absl::StrCat("rank_plans[", i, "] is for rank ", rank, " but ranks[", i, "] is ",
                                plan.ranks(i)));
    }
    if (i > 0 && plan.ranks(i) <= plan.ranks(i - 1)) {
      return Error(absl::StrCat("ranks must be strictly ascending: ", plan.ranks(i - 1), " then ",
                                plan.ranks(i)));
    }
    if (rank < 0 || rank >= plan.world_size()) {
      return Error(
          absl::StrCat("rank ", rank, " is outside the world of size ", plan.world_size()));
    }
    index.ranks_[rank] = &rank_plan;
    for (const TensorBindingProto& binding : rank_plan.bindings()) {
      if (binding.kind() == TensorBindingProto::VARIABLE) {
        index.variable_names_[{rank, binding.tensor_name()}] = true;
      }
    }
    for (const TaskProto& task : rank_plan.tasks()) {
      if (task.rank() != rank) {
        return Error(absl::StrCat(TaskLabel(task), " is listed in the plan of rank ", rank));
      }
      auto [it, inserted] = index.task_index_.emplace(task.id(), index.tasks_.size());
      if (!inserted) {
        return Error(absl::StrCat("task id ", task.id(), " is used twice: by ",
                                  TaskLabel(*index.tasks_[it->second]), " and by ", TaskLabel(task),
                                  "; task ids must be unique in the plan"));
      }
      index.tasks_.push_back(&task);
    }
    for (const RegisterProto& reg : rank_plan.registers()) {
      auto [it, inserted] = index.entries_.emplace(std::make_pair(rank, reg.id()), &reg);
      if (!inserted) {
        return Error(absl::StrCat("rank ", rank, " lists register id ", reg.id(), " twice ('",
                                  it->second->name(), "' and '", reg.name(), "')"));
      }
      if (reg.has_remote()) continue;
      auto [producing, fresh] = index.producing_.emplace(reg.id(), &reg);
      if (!fresh) {
        return Error(absl::StrCat("register id ", reg.id(), " is produced on two ranks ('",
                                  producing->second->name(), "' on rank ",
                                  producing->second->producer().rank(), " and '", reg.name(),
                                  "' on rank ", rank,
                                  "); register ids must be unique in the plan, only mirrors "
                                  "(with `remote`) may repeat an id"));
      }
      index.registers_.emplace_back(rank, &reg);
    }
  }
  return index;
}

int64_t PlanIndex::TaskIndex(int64_t task_id) const {
  auto it = task_index_.find(task_id);
  return it == task_index_.end() ? -1 : it->second;
}

const TaskProto* PlanIndex::FindTask(int64_t task_id) const {
  const int64_t index = TaskIndex(task_id);
  return index < 0 ? nullptr : tasks_[index];
}

const RegisterProto* PlanIndex::FindRegister(int64_t id) const {
  auto it = producing_.find(id);
  return it == producing_.end() ? nullptr : it->second;
}

const RegisterProto* PlanIndex::FindEntry(int32_t rank, int64_t id) const {
  auto it = entries_.find(std::make_pair(rank, id));
  return it == entries_.end() ? nullptr : it->second;
}

const RankPlanProto* PlanIndex::FindRank(int32_t rank) const {
  auto it = ranks_.find(rank);
  return it == ranks_.end() ? nullptr : it->second;
}

bool PlanIndex::IsVariableHolder(const TaskProto& task) const {
  return task.type() == TaskProto::SOURCE && task.has_io() &&
         variable_names_.contains(std::make_pair(task.rank(), task.io().tensor_name()));
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
