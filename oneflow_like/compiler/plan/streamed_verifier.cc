#include "oneflow_like/compiler/plan/streamed_verifier.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/plan/plan_checks.h"
#include "oneflow_like/compiler/plan/plan_errors.h"
#include "oneflow_like/compiler/plan/plan_index.h"
#include "oneflow_like/compiler/plan/plan_sim_graph.h"
#include "oneflow_like/compiler/plan/plan_skeleton.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace compiler {
namespace {

class SkeletonLabels : public SimLabels {
 public:
  explicit SkeletonLabels(const PlanSkeleton& skeleton) : skeleton_(skeleton) {}
  std::string TaskLabel(int64_t t) const override { return skeleton_.TaskLabel(t); }
  std::string RegisterLabel(int64_t r) const override { return skeleton_.RegisterLabel(r); }

 private:
  const PlanSkeleton& skeleton_;
};

template <typename T>
void Release(T& container) {
  T().swap(container);
}

// PlanIndex::Build's checks across ranks, for `rank_plan` against the parts added before.
absl::Status CheckIds(const PlanSkeleton& s, const SimGraphBuilder& builder, int32_t world_size,
                      const RankPlanProto& rank_plan) {
  const int32_t rank = rank_plan.rank();
  if (!s.ranks.empty() && rank <= s.ranks.back()) {
    return RanksNotAscendingError(s.ranks.back(), rank);
  }
  if (rank < 0 || rank >= world_size) {
    return RankOutsideWorldError(rank, world_size);
  }
  for (const TaskProto& task : rank_plan.tasks()) {
    const int32_t previous = builder.TaskIndex(task.id());
    if (previous < 0) continue;
    return TaskIdTwiceError(task.id(), s.TaskLabel(previous), PlanIndex::TaskLabel(task));
  }
  for (const RegisterProto& reg : rank_plan.registers()) {
    const int32_t previous = reg.has_remote() ? -1 : builder.RegisterIndex(reg.id());
    if (previous < 0) continue;
    return RegisterProducedTwiceError(reg.id(), s.strings.Name(s.register_name[previous]), s.register_rank[previous],
                                      reg.name(), rank);
  }
  return absl::OkStatus();
}

// Records `rank_plan`'s registers in the skeleton: labels, slots, cross-rank references.
void RecordRegisters(PlanSkeleton& s, int32_t first_register, const RankPlanProto& rank_plan) {
  const int32_t rank = rank_plan.rank();
  int32_t next = first_register;
  for (const RegisterProto& reg : rank_plan.registers()) {
    if (reg.has_remote()) {
      PlanSkeleton::Mirror& m = s.mirrors.emplace_back();
      m.id = reg.id();
      m.rank = rank;
      m.remote_rank = reg.remote().rank();
      m.producer = TaskRef{reg.producer().task_id(), reg.producer().rank()};
      m.slots = s.strings.AddSlots(reg);
      m.name = s.strings.AddName(reg.name());
      m.next_register = next;
      m.consumers_begin = static_cast<int64_t>(s.mirror_consumers.size());
      for (const TaskRefProto& c : reg.consumers()) s.mirror_consumers.push_back(TaskRef{c.task_id(), c.rank()});
      continue;
    }
    s.register_id.push_back(reg.id());
    s.register_rank.push_back(rank);
    s.register_name.push_back(s.strings.AddName(reg.name()));
    s.register_slots.push_back(s.strings.AddSlots(reg));
    for (const TaskRefProto& c : reg.consumers()) {
      if (c.rank() != rank) s.remote_consumers.emplace_back(next, TaskRef{c.task_id(), c.rank()});
    }
    ++next;
  }
}

// Records `rank_plan`'s tasks (the first member of each call not seen before).
void RecordTasks(PlanSkeleton& s, const PlanIndex& index, int32_t first_task, const RankPlanProto& rank_plan) {
  const int32_t rank = rank_plan.rank();
  int32_t t = first_task;
  for (const TaskProto& task : rank_plan.tasks()) {
    s.task_id.push_back(task.id());
    s.task_rank.push_back(rank);
    s.task_type.push_back(static_cast<uint8_t>(task.type()));
    s.task_name.push_back(s.strings.AddName(task.name()));
    if (task.type() == TaskProto::TRANSFER) {
      for (int64_t id : task.consumed_register_ids()) {
        const RegisterProto* entry = index.FindEntry(rank, id);
        if (entry != nullptr && entry->has_remote()) s.mirror_reads.emplace_back(id, task.id());
      }
    }
    if (task.type() == TaskProto::COLLECTIVE) {
      const CollectiveParams& params = task.collective();
      const auto [group, fresh] = s.groups.emplace(std::vector<int32_t>(params.ranks().begin(), params.ranks().end()),
                                                   static_cast<int32_t>(s.groups.size()));
      s.collectives.push_back({group->second, rank, params.global_order(), static_cast<int32_t>(params.kind()), t});
      auto [call, first] = s.first_of_call.try_emplace(params.global_order());
      if (first) call->second = {t, params.SerializeAsString()};
    }
    ++t;
  }
}

// EarlierCallMember for CheckStructure: compares a member with its call's first member on an
// earlier rank, keeping the first difference in s.call_difference (reported after check 6's
// sequences, as VerifyPlan orders them).
bool CompareWithEarlierMember(PlanSkeleton& s, const TaskProto& task) {
  const CollectiveParams& params = task.collective();
  auto call = s.first_of_call.find(params.global_order());
  if (call == s.first_of_call.end()) return false;
  if (s.call_difference.ok() && params.SerializeAsString() != call->second.second) {
    CollectiveParams reference;
    reference.ParseFromString(call->second.second);
    const std::string difference = CollectiveCallDifference(reference, params);
    if (!difference.empty()) {
      s.call_difference = CallDifferenceError(PlanIndex::TaskLabel(task), s.TaskLabel(call->second.first),
                                              params.global_order(), difference);
    }
  }
  return true;
}

}  // namespace

StreamedVerifier::StreamedVerifier(int32_t world_size, int64_t pieces_per_step, const PlanVerifierOptions& options)
    : world_size_(world_size),
      pieces_per_step_(pieces_per_step),
      options_(options),
      skeleton_(std::make_unique<PlanSkeleton>()),
      builder_(std::make_unique<SimGraphBuilder>(pieces_per_step)) {}

StreamedVerifier::~StreamedVerifier() = default;

absl::Status StreamedVerifier::AddRank(const PlanProto& part) {
  if (finished_) return absl::FailedPreconditionError("StreamedVerifier::AddRank after Finish");
  RETURN_IF_ERROR(CheckPerRankShape(part));
  if (part.world_size() != world_size_ || part.pieces_per_step() != pieces_per_step_) {
    return PlanError(absl::StrCat("the part of rank ", part.per_rank().rank(), " has world_size ", part.world_size(),
                                  " and pieces_per_step ", part.pieces_per_step(), ", but the plan's are ",
                                  world_size_, " and ", pieces_per_step_, "; the parts are not of one plan"));
  }
  ASSIGN_OR_RETURN(const PlanIndex index, PlanIndex::Build(part));
  if (part.rank_plans_size() == 1) {
    RETURN_IF_ERROR(CheckIds(*skeleton_, *builder_, world_size_, part.rank_plans(0)));
  }
  // Its memory entry is the whole plan's memory[k] for the k-th rank with work.
  PartPlace place;
  place.first_memory_entry = static_cast<int>(skeleton_->ranks.size());
  place.earlier_call = [this](const TaskProto& task) { return CompareWithEarlierMember(*skeleton_, task); };
  RETURN_IF_ERROR(CheckStructure(part, index, options_, /*across_ranks=*/false, place));
  if (part.rank_plans_size() == 0) return absl::OkStatus();  // a rank without work
  const RankPlanProto& rank_plan = part.rank_plans(0);
  PlanSkeleton& s = *skeleton_;
  s.ranks.push_back(rank_plan.rank());
  s.first_task.push_back(builder_->num_tasks());
  RecordRegisters(s, static_cast<int32_t>(builder_->num_registers()), rank_plan);
  RecordTasks(s, index, static_cast<int32_t>(builder_->num_tasks()), rank_plan);
  builder_->AddRank(index, rank_plan);
  return absl::OkStatus();
}

absl::Status StreamedVerifier::Finish() {
  if (finished_) return absl::FailedPreconditionError("StreamedVerifier::Finish called twice");
  finished_ = true;
  PlanSkeleton& s = *skeleton_;
  s.first_task.push_back(builder_->num_tasks());
  const SimGraph graph = builder_->Finish();
  RETURN_IF_ERROR(CheckAcrossRanks(s, *builder_, graph));
  // What only the checks across ranks needed.
  Release(s.remote_consumers);
  Release(s.mirrors);
  Release(s.mirror_consumers);
  Release(s.mirror_reads);
  Release(s.collectives);
  Release(s.first_of_call);
  Release(s.register_slots);
  if (options_.steps >= 1) {
    if (pieces_per_step_ < 1) {
      return PlanError(absl::StrCat("pieces_per_step is ", pieces_per_step_, "; must be >= 1"));
    }
    simulation_ = RunSimulation(graph, SkeletonLabels(s), options_.steps, options_.max_reported_tasks);
    if (!simulation_.completed) return PlanError(simulation_.report);
  }
  finished_ok_ = true;
  return absl::OkStatus();
}

absl::Status StreamedVerifier::CheckRank(const PlanProto& part) {
  if (!finished_ok_) return absl::FailedPreconditionError("StreamedVerifier::CheckRank before a successful Finish");
  if (options_.steps < 1 || !options_.check_memory_reuse || part.rank_plans_size() == 0) return absl::OkStatus();
  const PlanSkeleton& s = *skeleton_;
  const int32_t rank = part.rank_plans(0).rank();
  const auto it = std::lower_bound(s.ranks.begin(), s.ranks.end(), rank);
  const size_t k = static_cast<size_t>(it - s.ranks.begin());
  if (it == s.ranks.end() || *it != rank ||
      s.first_task[k + 1] - s.first_task[k] != part.rank_plans(0).tasks_size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("StreamedVerifier::CheckRank: the part of rank ", rank, " is not one AddRank was given"));
  }
  ASSIGN_OR_RETURN(const PlanIndex index, PlanIndex::Build(part));
  PlanSimulation counts;
  counts.completed = true;
  const auto first = static_cast<std::ptrdiff_t>(s.first_task[k]);
  const auto last = static_cast<std::ptrdiff_t>(s.first_task[k + 1]);
  counts.emitted_by_index.assign(simulation_.emitted_by_index.begin() + first,
                                 simulation_.emitted_by_index.begin() + last);
  counts.read_by_index.assign(simulation_.read_by_index.begin() + first, simulation_.read_by_index.begin() + last);
  const ForeignTaskLabel foreign = [this](int64_t task_id) {
    const int32_t t = builder_->TaskIndex(task_id);
    return t < 0 ? absl::StrCat("task ", task_id) : skeleton_->TaskLabel(t);
  };
  return CheckMemoryReuse(index, counts, options_.steps, foreign);
}

}  // namespace compiler
}  // namespace oneflow_like
