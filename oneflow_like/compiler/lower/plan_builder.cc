#include "oneflow_like/compiler/lower/plan_builder.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/proto_convert.h"

namespace oneflow_like {
namespace compiler {
namespace lower_internal {

int64_t PlanBuilder::ReserveTasks(int64_t n) {
  if (!partial()) return static_cast<int64_t>(tasks_.size());
  const int64_t first = next_task_;
  next_task_ += n;
  return first;
}

int64_t PlanBuilder::ReserveRegisters(int64_t n) {
  if (!partial()) return static_cast<int64_t>(registers_.size());
  const int64_t first = next_register_;
  next_register_ += n;
  return first;
}

int64_t PlanBuilder::AddTask(int64_t id, TaskInfo info) {
  if (!partial()) {
    if (id != static_cast<int64_t>(tasks_.size()) && id_error_.empty()) {
      id_error_ = absl::StrCat("task '", info.proto.name(), "' added as id ", id, ", expected ", tasks_.size());
    }
  } else {
    task_index_[id] = static_cast<int64_t>(tasks_.size());
  }
  info.proto.set_id(id);
  tasks_.push_back(std::move(info));
  return id;
}

int64_t PlanBuilder::AddRegister(int64_t id, int64_t task, const TensorDesc& desc, const std::string& name,
                                 bool step_rate) {
  if (!partial()) {
    if (id != static_cast<int64_t>(registers_.size()) && id_error_.empty()) {
      id_error_ = absl::StrCat("register '", name, "' added as id ", id, ", expected ", registers_.size());
    }
  } else {
    register_index_[id] = static_cast<int64_t>(registers_.size());
  }
  TaskProto& producer = tasks_[TaskIndex(task)].proto;
  RegisterInfo info;
  info.proto.set_id(id);
  info.proto.mutable_producer()->set_task_id(task);
  info.proto.mutable_producer()->set_rank(producer.rank());
  info.proto.set_count(1);
  *info.proto.add_slots() = TensorDescToProto(desc);
  info.proto.set_name(name);
  info.slot_bytes.push_back(desc.byte_size());
  info.step_rate = step_rate;
  registers_.push_back(std::move(info));
  producer.add_produced_register_ids(id);
  SlotRefProto* out = producer.add_outputs();
  out->set_register_id(id);
  out->set_slot(0);
  return id;
}

int32_t PlanBuilder::AddSlot(int64_t register_id, const TensorDesc& desc) {
  RegisterInfo& r = reg(register_id);
  const int32_t slot = r.proto.slots_size();
  *r.proto.add_slots() = TensorDescToProto(desc);
  r.slot_bytes.push_back(desc.byte_size());
  SlotRefProto* out = tasks_[TaskIndex(r.proto.producer().task_id())].proto.add_outputs();
  out->set_register_id(register_id);
  out->set_slot(slot);
  return slot;
}

void PlanBuilder::AddInput(int64_t task, int64_t register_id, int32_t slot) {
  AddControlInput(task, register_id);
  SlotRefProto* in = tasks_[TaskIndex(task)].proto.add_inputs();
  in->set_register_id(register_id);
  in->set_slot(slot);
}

void PlanBuilder::AddControlInput(int64_t task, int64_t register_id) {
  TaskProto& consumer = tasks_[TaskIndex(task)].proto;
  const auto& consumed = consumer.consumed_register_ids();
  if (std::find(consumed.begin(), consumed.end(), register_id) == consumed.end()) {
    consumer.add_consumed_register_ids(register_id);
  }
  if (partial() && !IsLocalRegister(register_id)) {  // a mirror: lists the local consumers
    RegisterProto& mirror = mirrors_.at(register_id);
    for (const TaskRefProto& ref : mirror.consumers()) {
      if (ref.task_id() == task) return;
    }
    TaskRefProto* ref = mirror.add_consumers();
    ref->set_task_id(task);
    ref->set_rank(consumer.rank());
    return;
  }
  RegisterInfo& r = reg(register_id);
  if (std::find(r.consumer_tasks.begin(), r.consumer_tasks.end(), task) == r.consumer_tasks.end()) {
    r.consumer_tasks.push_back(task);
    TaskRefProto* ref = r.proto.add_consumers();
    ref->set_task_id(task);
    ref->set_rank(consumer.rank());
  }
}

void PlanBuilder::AddRemoteConsumer(int64_t register_id, const TaskInfo& stub) {
  const int64_t task = stub.proto.id();
  remote_tasks_.try_emplace(task, stub);
  RegisterInfo& r = reg(register_id);
  if (std::find(r.consumer_tasks.begin(), r.consumer_tasks.end(), task) == r.consumer_tasks.end()) {
    r.consumer_tasks.push_back(task);
    TaskRefProto* ref = r.proto.add_consumers();
    ref->set_task_id(task);
    ref->set_rank(stub.proto.rank());
  }
}

void PlanBuilder::AddMirror(RegisterProto proto) {
  const int64_t id = proto.id();
  mirrors_.try_emplace(id, std::move(proto));
}

const TaskInfo& PlanBuilder::task(int64_t id) const {
  const int64_t index = TaskIndex(id);
  return index >= 0 ? tasks_[index] : remote_tasks_.at(id);
}

int64_t PlanBuilder::TaskIndex(int64_t id) const {
  if (!partial()) return id;
  auto it = task_index_.find(id);
  return it == task_index_.end() ? -1 : it->second;
}

RegisterInfo& PlanBuilder::reg(int64_t id) {
  return !partial() ? registers_[id] : registers_[register_index_.at(id)];
}

bool PlanBuilder::IsLocalRegister(int64_t id) const {
  return !partial() ? id >= 0 && id < static_cast<int64_t>(registers_.size()) : register_index_.contains(id);
}

absl::Status PlanBuilder::AssemblePartial(PlanProto* plan,
                                         std::map<int32_t, std::vector<int64_t>>* step_rate_mirrors) {
  std::map<int32_t, RankPlanProto*> by_rank;  // the ranks with tasks (a rank without work has no plan)
  for (const TaskInfo& t : tasks_) by_rank.emplace(t.proto.rank(), nullptr);
  if (by_rank.empty()) return absl::OkStatus();
  // Registers per rank: (id, entry), put in id order below.
  std::map<int32_t, std::vector<std::pair<int64_t, RegisterProto>>> entries;
  for (RegisterInfo& r : registers_) {
    const int32_t producer_rank = r.proto.producer().rank();
    std::vector<std::pair<int32_t, int64_t>> remote;  // consumers on other ranks of the range
    for (int64_t c : r.consumer_tasks) {
      const TaskInfo& consumer = task(c);
      const int32_t rank = consumer.proto.rank();
      if (rank == producer_rank || !Emits(rank)) continue;  // outside: its own lowering mirrors it
      if (consumer.proto.type() != TaskProto::TRANSFER) {
        return absl::InternalError(absl::StrCat("lowering: register '", r.proto.name(), "' on rank ", producer_rank,
                                                " is read by ", TaskProto::Type_Name(consumer.proto.type()),
                                                " task '", consumer.proto.name(), "' on rank ", rank,
                                                "; only TRANSFER tasks may read another rank's register"));
      }
      remote.emplace_back(rank, c);
    }
    std::stable_sort(remote.begin(), remote.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t begin = 0, end = 0; begin < remote.size(); begin = end) {
      const int32_t rank = remote[begin].first;
      RegisterProto mirror;
      mirror.set_id(r.proto.id());
      *mirror.mutable_producer() = r.proto.producer();
      for (end = begin; end < remote.size() && remote[end].first == rank; ++end) {
        TaskRefProto* ref = mirror.add_consumers();
        ref->set_task_id(remote[end].second);
        ref->set_rank(rank);
      }
      mirror.set_count(r.proto.count());
      *mirror.mutable_slots() = r.proto.slots();
      mirror.mutable_remote()->set_rank(producer_rank);
      mirror.set_name(r.proto.name());
      if (r.step_rate && step_rate_mirrors != nullptr) (*step_rate_mirrors)[rank].push_back(r.proto.id());
      entries[rank].emplace_back(r.proto.id(), std::move(mirror));
    }
    entries[producer_rank].emplace_back(r.proto.id(), std::move(r.proto));
  }
  // Mirrors of registers made outside the range: one per consuming rank, listing its consumers.
  for (auto& [id, mirror] : mirrors_) {
    std::map<int32_t, std::vector<const TaskRefProto*>> consumers;
    for (const TaskRefProto& ref : mirror.consumers()) consumers[ref.rank()].push_back(&ref);
    if (consumers.empty()) {  // a mirror no task reads: one rank's own; in a range, whose?
      if (num_ranks() > 1) {
        return absl::InternalError(absl::StrCat("lowering: mirror of register ", id, " '", mirror.name(),
                                                "' is read by no task of ranks ", first_rank_, " .. ", end_rank_ - 1));
      }
      entries[first_rank_].emplace_back(id, std::move(mirror));
      continue;
    }
    if (consumers.size() == 1) {
      const int32_t rank = consumers.begin()->first;
      entries[rank].emplace_back(id, std::move(mirror));
      continue;
    }
    for (const auto& [rank, refs] : consumers) {
      RegisterProto copy = mirror;
      copy.clear_consumers();
      for (const TaskRefProto* ref : refs) *copy.add_consumers() = *ref;
      entries[rank].emplace_back(id, std::move(copy));
    }
  }
  for (auto& [rank, rank_plan] : by_rank) {
    plan->add_ranks(rank);
    rank_plan = plan->add_rank_plans();
    rank_plan->set_rank(rank);
    auto it = entries.find(rank);
    if (it == entries.end()) continue;
    std::stable_sort(it->second.begin(), it->second.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    rank_plan->mutable_registers()->Reserve(static_cast<int>(it->second.size()));
    for (auto& [id, entry] : it->second) rank_plan->mutable_registers()->Add(std::move(entry));
    it->second.clear();
    it->second.shrink_to_fit();
  }
  for (; !tasks_.empty(); tasks_.pop_front()) {
    TaskInfo& t = tasks_.front();
    by_rank[t.proto.rank()]->mutable_tasks()->Add(std::move(t.proto));
  }
  registers_.clear();
  return absl::OkStatus();
}

absl::Status PlanBuilder::Assemble(PlanProto* plan, std::map<int32_t, std::vector<int64_t>>* step_rate_mirrors) {
  if (!id_error_.empty()) return absl::InternalError(absl::StrCat("lowering: ", id_error_));
  if (partial()) return AssemblePartial(plan, step_rate_mirrors);
  std::map<int32_t, RankPlanProto*> by_rank;
  std::vector<int32_t> ranks;
  for (const TaskInfo& t : tasks_) ranks.push_back(t.proto.rank());
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  for (int32_t r : ranks) {
    plan->add_ranks(r);
    RankPlanProto* rank_plan = plan->add_rank_plans();
    rank_plan->set_rank(r);
    by_rank[r] = rank_plan;
  }
  // The builder's entries are popped as they are moved into the plan, so their shells do not
  // coexist with the plan's copies (the peak of a large whole-plan compile).
  for (; !registers_.empty(); registers_.pop_front()) {
    RegisterInfo& reg = registers_.front();
    const int32_t producer_rank = reg.proto.producer().rank();
    // One mirror per remote rank, listing that rank's consumers (TRANSFER tasks only).
    std::vector<std::pair<int32_t, int64_t>> remote;  // (rank, task), sorted below
    for (int64_t c : reg.consumer_tasks) {
      const TaskProto& consumer = tasks_[c].proto;
      if (consumer.rank() == producer_rank) continue;
      if (consumer.type() != TaskProto::TRANSFER) {
        return absl::InternalError(absl::StrCat("lowering: register '", reg.proto.name(), "' on rank ", producer_rank,
                                                " is read by ", TaskProto::Type_Name(consumer.type()), " task '",
                                                consumer.name(), "' on rank ", consumer.rank(),
                                                "; only TRANSFER tasks may read another rank's register"));
      }
      remote.emplace_back(consumer.rank(), c);
    }
    std::stable_sort(remote.begin(), remote.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t begin = 0, end = 0; begin < remote.size(); begin = end) {
      const int32_t rank = remote[begin].first;
      RegisterProto mirror;
      mirror.set_id(reg.proto.id());
      *mirror.mutable_producer() = reg.proto.producer();
      for (end = begin; end < remote.size() && remote[end].first == rank; ++end) {
        TaskRefProto* ref = mirror.add_consumers();
        ref->set_task_id(remote[end].second);
        ref->set_rank(rank);
      }
      mirror.set_count(reg.proto.count());
      *mirror.mutable_slots() = reg.proto.slots();
      mirror.mutable_remote()->set_rank(producer_rank);
      mirror.set_name(reg.proto.name());
      *by_rank[rank]->add_registers() = std::move(mirror);
    }
    // Local entry (moved); a rank's registers stay in id order with its mirrors.
    by_rank[producer_rank]->mutable_registers()->Add(std::move(reg.proto));
  }
  for (; !tasks_.empty(); tasks_.pop_front()) {
    TaskInfo& t = tasks_.front();
    by_rank[t.proto.rank()]->mutable_tasks()->Add(std::move(t.proto));
  }
  return absl::OkStatus();
}

DeviceProto MakeDevice(DeviceType type) {
  DeviceProto device;
  device.set_type(DeviceTypeName(type));
  device.set_index(0);
  return device;
}

ShardInfoProto MakeShardInfo(const Shape& logical, const NdSbp& nd_sbp, const Placement& placement,
                             int64_t parallel_id) {
  ShardInfoProto info;
  for (int64_t d : logical.dims()) info.add_logical_dims(d);
  const ShardSlice slice = GetShardSlice(logical, nd_sbp, placement.hierarchy(), parallel_id);
  for (int64_t o : slice.offset) info.add_offset(o);
  *info.mutable_nd_sbp() = nd_sbp.ToProto();
  for (int64_t h : placement.hierarchy()) info.add_hierarchy(h);
  for (int64_t c : placement.Coordinates(parallel_id)) info.add_mesh_coords(c);
  return info;
}

RegionProto MakeRegion(const std::vector<int64_t>& begin, const std::vector<int64_t>& end) {
  RegionProto region;
  for (int64_t b : begin) region.add_begin(b);
  for (int64_t e : end) region.add_end(e);
  return region;
}

}  // namespace lower_internal
}  // namespace compiler
}  // namespace oneflow_like
