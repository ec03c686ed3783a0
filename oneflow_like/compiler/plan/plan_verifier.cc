#include "oneflow_like/compiler/plan/plan_verifier.h"

#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/plan/plan_checks.h"
#include "oneflow_like/compiler/plan/plan_errors.h"
#include "oneflow_like/compiler/plan/plan_index.h"
#include "oneflow_like/compiler/plan/plan_simulator.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace compiler {
namespace {

bool HasRef(const google::protobuf::RepeatedPtrField<TaskRefProto>& refs, int64_t task_id,
            int32_t rank) {
  return std::any_of(refs.begin(), refs.end(), [&](const TaskRefProto& ref) {
    return ref.task_id() == task_id && ref.rank() == rank;
  });
}

// A set of ids for duplicate checks: a linear scan for the short lists of one task or register
// (no allocation per task), hashed once a list grows long.
class SeenIds {
 public:
  bool Insert(int64_t id) {
    if (set_.empty() && ids_.size() < 32) {
      if (std::find(ids_.begin(), ids_.end(), id) != ids_.end()) return false;
      ids_.push_back(id);
      return true;
    }
    if (set_.empty()) set_.insert(ids_.begin(), ids_.end());
    return set_.insert(id).second;
  }
  void clear() {
    ids_.clear();
    set_.clear();
  }

 private:
  std::vector<int64_t> ids_;
  absl::flat_hash_set<int64_t> set_;
};

bool HasId(const google::protobuf::RepeatedField<int64_t>& ids, int64_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

bool SameDesc(const TensorDescProto& a, const TensorDescProto& b) {
  return a.dtype() == b.dtype() &&
         std::equal(a.dims().begin(), a.dims().end(), b.dims().begin(), b.dims().end());
}

absl::Status CheckMirror(const PlanIndex& index, int32_t rank, const RegisterProto& mirror) {
  auto label = [&] { return PlanIndex::RegisterLabel(rank, mirror); };  // built only for errors
  const int32_t source_rank = mirror.remote().rank();
  if (source_rank == rank) return PlanError(label() + " names its own rank as the remote producer");
  if (index.partial()) {  // the producing rank is not in the plan: only the local side
    for (const TaskRefProto& consumer : mirror.consumers()) {
      const TaskProto* task = index.FindTask(consumer.task_id());
      if (consumer.rank() != rank || task == nullptr || task->type() != TaskProto::TRANSFER) {
        return PlanError(absl::StrCat(label(), " lists consumer task ", consumer.task_id(), " on rank ",
                                      consumer.rank(), ", but a mirror's consumers must be TRANSFER tasks of rank ",
                                      rank));
      }
    }
    return absl::OkStatus();
  }
  const RegisterProto* source = index.FindEntry(source_rank, mirror.id());
  if (source == nullptr || source->has_remote()) {
    return MirrorWithoutSourceError(label(), source_rank, mirror.id());
  }
  if (mirror.producer().task_id() != source->producer().task_id() ||
      mirror.producer().rank() != source->producer().rank()) {
    return MirrorProducerError(label(), mirror.producer().task_id(), mirror.producer().rank(),
                               source->producer().task_id(), source->producer().rank(), source_rank);
  }
  if (!std::equal(mirror.slots().begin(), mirror.slots().end(), source->slots().begin(), source->slots().end(),
                  SameDesc)) {
    return CheckMirrorSlots(label(), source_rank, mirror.slots(), source->slots());
  }
  for (const TaskRefProto& consumer : mirror.consumers()) {
    const TaskProto* task = index.FindTask(consumer.task_id());
    if (consumer.rank() != rank || task == nullptr || task->rank() != rank ||
        task->type() != TaskProto::TRANSFER) {
      return PlanError(absl::StrCat(
          label(), " lists consumer task ", consumer.task_id(), " on rank ", consumer.rank(),
          ", but a mirror's consumers must be TRANSFER tasks of rank ", rank));
    }
    if (!HasRef(source->consumers(), consumer.task_id(), rank)) {
      return UnlistedMirrorConsumerError(PlanIndex::TaskLabel(*task), label(),
                                         PlanIndex::RegisterLabel(source_rank, *source));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckProducingRegister(const PlanIndex& index, int32_t rank,
                                    const RegisterProto& reg) {
  auto label = [&] { return PlanIndex::RegisterLabel(rank, reg); };  // built only for errors
  if (reg.count() < 1) return PlanError(absl::StrCat(label(), " has count ", reg.count(), " < 1"));
  const TaskProto* producer = index.FindTask(reg.producer().task_id());
  if (reg.producer().rank() != rank || producer == nullptr || producer->rank() != rank) {
    return PlanError(absl::StrCat(label(), " names producer task ", reg.producer().task_id(),
                                  " on rank ", reg.producer().rank(),
                                  producer == nullptr ? ", which does not exist" : "",
                                  "; a local register's producer must be a task of rank ", rank));
  }
  if (!HasId(producer->produced_register_ids(), reg.id())) {
    return PlanError(absl::StrCat(label(), " names producer ", PlanIndex::TaskLabel(*producer),
                                  ", which does not list it in produced_register_ids"));
  }
  if (reg.slots_size() > 0 && !reg.has_memory()) {
    return PlanError(
        absl::StrCat(label(), " has ", reg.slots_size(), " slot(s) but no memory location"));
  }
  for (int s = 0; s < reg.slots_size(); ++s) {
    const TensorDescProto& slot = reg.slots(s);
    const bool bad_dims =
        std::any_of(slot.dims().begin(), slot.dims().end(), [](int64_t d) { return d < 0; });
    if (DataTypeBytes(slot.dtype()) == 0 || bad_dims) {
      return PlanError(absl::StrCat(label(), " slot ", s, " has an invalid desc ", SlotText(slot)));
    }
  }
  SeenIds seen;
  for (const TaskRefProto& consumer : reg.consumers()) {
    if (!seen.Insert(consumer.task_id())) {
      return PlanError(absl::StrCat(label(), " lists consumer task ", consumer.task_id(), " twice"));
    }
    if (consumer.rank() != rank && index.partial()) continue;  // on a rank not in the plan
    const TaskProto* task = index.FindTask(consumer.task_id());
    if (task == nullptr || task->rank() != consumer.rank()) {
      return ConsumerMissingError(label(), consumer.task_id(), consumer.rank(), task == nullptr ? -1 : task->rank());
    }
    if (!HasId(task->consumed_register_ids(), reg.id())) {
      return ConsumerNotConsumingError(label(), PlanIndex::TaskLabel(*task));
    }
    if (consumer.rank() == rank) continue;
    const RegisterProto* mirror = index.FindEntry(consumer.rank(), reg.id());
    if (mirror == nullptr || !mirror->has_remote() || mirror->remote().rank() != rank ||
        !HasRef(mirror->consumers(), task->id(), task->rank())) {
      return NoMirrorError(label(), PlanIndex::TaskLabel(*task), consumer.rank(), rank);
    }
  }
  return absl::OkStatus();
}

// Slot refs of one task: each names a register of `ids` and a slot it has.
absl::Status CheckSlotRefs(const PlanIndex& index, const TaskProto& task,
                           const google::protobuf::RepeatedPtrField<SlotRefProto>& refs,
                           const google::protobuf::RepeatedField<int64_t>& ids, const char* what) {
  for (int i = 0; i < refs.size(); ++i) {
    const SlotRefProto& ref = refs.Get(i);
    const RegisterProto* entry = index.FindEntry(task.rank(), ref.register_id());
    if (!HasId(ids, ref.register_id()) || entry == nullptr) {
      return PlanError(absl::StrCat(PlanIndex::TaskLabel(task), ": ", what, " ", i,
                                    " names register ", ref.register_id(), ", which is not in its ",
                                    what == std::string("input") ? "consumed" : "produced",
                                    " registers"));
    }
    if (ref.slot() < 0 || ref.slot() >= entry->slots_size()) {
      return PlanError(absl::StrCat(PlanIndex::TaskLabel(task), ": ", what, " ", i, " names slot ",
                                    ref.slot(), " of ",
                                    PlanIndex::RegisterLabel(task.rank(), *entry), ", which has ",
                                    entry->slots_size(), " slot(s)"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckTaskParams(const PlanIndex& index, const TaskProto& task) {
  auto label = [&] { return PlanIndex::TaskLabel(task); };  // built only for errors
  switch (task.type()) {
    case TaskProto::TRANSFER: {
      if (!task.has_transfer()) return PlanError(label() + " has no TransferParams");
      const int32_t peer = task.transfer().peer_rank();
      if (peer == task.rank()) {
        return PlanError(absl::StrCat(label(), " has peer_rank ", peer,
                                      ", its own rank; a TRANSFER moves data between ranks, a move between two "
                                      "devices of one rank is a COPY"));
      }
      const RegisterProto* input = task.consumed_register_ids_size() == 1
                                       ? index.FindEntry(task.rank(), task.consumed_register_ids(0))
                                       : nullptr;
      if (input == nullptr || !input->has_remote() || input->remote().rank() != peer ||
          peer == task.rank()) {
        return PlanError(
            absl::StrCat(label(),
                         " must consume exactly one mirror register whose "
                         "producer is on its peer_rank ",
                         peer, "; it consumes ", task.consumed_register_ids_size(), " register(s)",
                         input != nullptr && input->has_remote()
                             ? absl::StrCat(", a mirror of rank ", input->remote().rank())
                             : ""));
      }
      return absl::OkStatus();
    }
    case TaskProto::COPY:
      return CheckCopyTask(index, task);
    case TaskProto::ACCUMULATE:
    case TaskProto::REPEAT:
      if (!task.has_count() || task.count().count() < 1) {
        return PlanError(absl::StrCat(label(), " needs CountParams with count >= 1, got ",
                                      task.has_count() ? task.count().count() : 0));
      }
      return absl::OkStatus();
    case TaskProto::COLLECTIVE: {
      if (!task.has_collective()) return PlanError(label() + " has no CollectiveParams");
      const auto& ranks = task.collective().ranks();
      absl::flat_hash_set<int32_t> members(ranks.begin(), ranks.end());
      if (members.size() != static_cast<size_t>(ranks.size()) || !members.contains(task.rank())) {
        return PlanError(label() +
                         "'s communicator group must list distinct ranks including its own");
      }
      return absl::OkStatus();
    }
    case TaskProto::SOURCE:
      if (!task.has_io()) return PlanError(label() + " has no IoParams");
      if (task.consumed_register_ids_size() > 0 && !index.IsVariableHolder(task)) {
        return PlanError(absl::StrCat(label(), " consumes registers, but '", task.io().tensor_name(),
                                      "' has no VARIABLE "
                                      "binding on rank ",
                                      task.rank(),
                                      "; only a variable holder consumes (its update)"));
      }
      return absl::OkStatus();
    case TaskProto::SINK:
      if (!task.has_io()) return PlanError(label() + " has no IoParams");
      if (task.produced_register_ids_size() > 0) return PlanError(label() + " produces registers");
      return absl::OkStatus();
    default:
      return absl::OkStatus();
  }
}

}  // namespace

absl::Status PlanError(const std::string& message) {
  return absl::InternalError(absl::StrCat("VerifyPlan: ", message));
}

absl::Status CheckRegisters(const PlanIndex& index) {
  for (const RankPlanProto& rank_plan : index.plan().rank_plans()) {
    for (const RegisterProto& reg : rank_plan.registers()) {
      RETURN_IF_ERROR(reg.has_remote() ? CheckMirror(index, rank_plan.rank(), reg)
                                       : CheckProducingRegister(index, rank_plan.rank(), reg));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckTasks(const PlanIndex& index) {
  SeenIds seen;
  for (int64_t t = 0; t < index.num_tasks(); ++t) {
    const TaskProto& task = index.task(t);
    auto label = [&] { return PlanIndex::TaskLabel(task); };  // built only for errors
    seen.clear();
    for (int64_t id : task.consumed_register_ids()) {
      const RegisterProto* entry = index.FindEntry(task.rank(), id);
      if (!seen.Insert(id))
        return PlanError(absl::StrCat(label(), " consumes register ", id, " twice"));
      if (entry == nullptr) {
        return PlanError(absl::StrCat(label(), ": consumed register ", id, " does not exist on rank ",
                                      task.rank(), " (neither produced there nor mirrored)",
                                      task.type() == TaskProto::COPY ? "; a COPY reads a register of its own rank" : ""));
      }
      if (!HasRef(entry->consumers(), task.id(), task.rank())) {
        return PlanError(absl::StrCat(label(), " consumes ",
                                      PlanIndex::RegisterLabel(task.rank(), *entry),
                                      ", which does not list it as a consumer"));
      }
      if (entry->has_remote() && task.type() == TaskProto::COPY) {
        return CopyAcrossRanksError(task, entry->remote().rank(), id);
      }
      if (entry->has_remote() && task.type() != TaskProto::TRANSFER) {
        return PlanError(absl::StrCat(label(), " consumes ",
                                      PlanIndex::RegisterLabel(task.rank(), *entry),
                                      "; only TRANSFER tasks may consume a mirror"));
      }
    }
    seen.clear();
    for (int64_t id : task.produced_register_ids()) {
      const RegisterProto* entry = index.FindEntry(task.rank(), id);
      if (!seen.Insert(id))
        return PlanError(absl::StrCat(label(), " produces register ", id, " twice"));
      if (entry == nullptr || entry->has_remote() || entry->producer().task_id() != task.id()) {
        return PlanError(absl::StrCat(
            label(), ": produced register ", id,
            entry == nullptr ? absl::StrCat(" does not exist on rank ", task.rank())
            : entry->has_remote()
                ? " is a mirror of another rank's register"
                : absl::StrCat(" names task ", entry->producer().task_id(), " as its producer")));
      }
    }
    RETURN_IF_ERROR(
        CheckSlotRefs(index, task, task.inputs(), task.consumed_register_ids(), "input"));
    RETURN_IF_ERROR(
        CheckSlotRefs(index, task, task.outputs(), task.produced_register_ids(), "output"));
    RETURN_IF_ERROR(CheckTaskParams(index, task));
  }
  for (const RankPlanProto& rank_plan : index.plan().rank_plans()) {
    for (const TensorBindingProto& binding : rank_plan.bindings()) {
      const RegisterProto* entry = index.FindEntry(rank_plan.rank(), binding.slot().register_id());
      if (entry == nullptr || entry->has_remote() || binding.slot().slot() < 0 ||
          binding.slot().slot() >= entry->slots_size()) {
        return PlanError(absl::StrCat("rank ", rank_plan.rank(), " binding of '",
                                      binding.tensor_name(), "' names register ",
                                      binding.slot().register_id(), " slot ", binding.slot().slot(),
                                      ", which is not a slot of a register produced on this rank"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckStructure(const PlanProto& plan, const PlanIndex& index, const PlanVerifierOptions& options,
                            bool across_ranks, const PartPlace& place) {
  if (plan.pieces_per_step() < 1) {
    return PlanError(absl::StrCat("pieces_per_step is ", plan.pieces_per_step(), "; must be >= 1"));
  }
  RETURN_IF_ERROR(CheckTasks(index));
  RETURN_IF_ERROR(CheckRegisters(index));
  RETURN_IF_ERROR(CheckMemoryLayout(index, options, place.first_memory_entry));
  RETURN_IF_ERROR(CheckRankDevices(index));
  const PlanStreams streams = GroupStreams(index);
  RETURN_IF_ERROR(CheckStreamOrder(index, streams));
  RETURN_IF_ERROR(CheckCollectiveOrder(streams, across_ranks));
  return CheckCollectiveGeometry(index, place.earlier_call);
}

absl::Status CheckPerRankShape(const PlanProto& plan) {
  if (!plan.has_per_rank()) {
    return PlanError(absl::StrCat("the plan of '", plan.job_name(), "' is not a per-rank plan (VerifyPlan checks it)"));
  }
  if (plan.ranks_size() > 1 || (plan.ranks_size() == 1 && plan.ranks(0) != plan.per_rank().rank())) {
    return PlanError(absl::StrCat("the per-rank plan of rank ", plan.per_rank().rank(), " lists ", plan.ranks_size(),
                                  " ranks; it holds its own rank's plan alone"));
  }
  return absl::OkStatus();
}

absl::Status VerifyPlan(const PlanProto& plan, const PlanVerifierOptions& options) {
  if (plan.has_per_rank()) {
    return PlanError(absl::StrCat("the plan of '", plan.job_name(), "' is rank ", plan.per_rank().rank(),
                                  "'s alone (per_rank); VerifyRankPlan checks it, the whole plan's checks need the "
                                  "whole plan (olplan verify)"));
  }
  ASSIGN_OR_RETURN(PlanIndex index, PlanIndex::Build(plan));
  RETURN_IF_ERROR(CheckStructure(plan, index, options, /*across_ranks=*/true));
  if (options.steps < 1) return absl::OkStatus();
  ASSIGN_OR_RETURN(PlanSimulation simulation,
                   SimulatePlan(index, options.steps, options.max_reported_tasks));
  if (!simulation.completed) return PlanError(simulation.report);
  if (options.check_memory_reuse) {
    RETURN_IF_ERROR(CheckMemoryReuse(index, simulation, options.steps));
  }
  return absl::OkStatus();
}

absl::Status VerifyRankPlan(const PlanProto& plan, const PlanVerifierOptions& options) {
  RETURN_IF_ERROR(CheckPerRankShape(plan));
  ASSIGN_OR_RETURN(PlanIndex index, PlanIndex::Build(plan));
  return CheckStructure(plan, index, options, /*across_ranks=*/false);
}

}  // namespace compiler
}  // namespace oneflow_like
