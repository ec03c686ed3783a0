#include "oneflow_like/compiler/lower/plan_builder.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/proto_convert.h"

namespace oneflow_like {
namespace compiler {
namespace lower_internal {

int64_t PlanBuilder::AddTask(TaskInfo info) {
  const int64_t id = static_cast<int64_t>(tasks_.size());
  info.proto.set_id(id);
  tasks_.push_back(std::move(info));
  return id;
}

int64_t PlanBuilder::AddRegister(int64_t task, const TensorDesc& desc, const std::string& name, bool step_rate) {
  const int64_t id = static_cast<int64_t>(registers_.size());
  RegisterInfo info;
  info.proto.set_id(id);
  info.proto.mutable_producer()->set_task_id(task);
  info.proto.mutable_producer()->set_rank(tasks_[task].proto.rank());
  info.proto.set_count(1);
  *info.proto.add_slots() = TensorDescToProto(desc);
  info.proto.set_name(name);
  info.slot_bytes.push_back(desc.byte_size());
  info.step_rate = step_rate;
  registers_.push_back(std::move(info));
  TaskProto& producer = tasks_[task].proto;
  producer.add_produced_register_ids(id);
  SlotRefProto* out = producer.add_outputs();
  out->set_register_id(id);
  out->set_slot(0);
  return id;
}

int32_t PlanBuilder::AddSlot(int64_t register_id, const TensorDesc& desc) {
  RegisterInfo& reg = registers_[register_id];
  const int32_t slot = reg.proto.slots_size();
  *reg.proto.add_slots() = TensorDescToProto(desc);
  reg.slot_bytes.push_back(desc.byte_size());
  SlotRefProto* out = tasks_[reg.proto.producer().task_id()].proto.add_outputs();
  out->set_register_id(register_id);
  out->set_slot(slot);
  return slot;
}

void PlanBuilder::AddInput(int64_t task, int64_t register_id, int32_t slot) {
  AddControlInput(task, register_id);
  SlotRefProto* in = tasks_[task].proto.add_inputs();
  in->set_register_id(register_id);
  in->set_slot(slot);
}

void PlanBuilder::AddControlInput(int64_t task, int64_t register_id) {
  TaskProto& consumer = tasks_[task].proto;
  const auto& consumed = consumer.consumed_register_ids();
  if (std::find(consumed.begin(), consumed.end(), register_id) == consumed.end()) {
    consumer.add_consumed_register_ids(register_id);
  }
  RegisterInfo& reg = registers_[register_id];
  if (std::find(reg.consumer_tasks.begin(), reg.consumer_tasks.end(), task) == reg.consumer_tasks.end()) {
    reg.consumer_tasks.push_back(task);
    TaskRefProto* ref = reg.proto.add_consumers();
    ref->set_task_id(task);
    ref->set_rank(consumer.rank());
  }
}

absl::Status PlanBuilder::Assemble(PlanProto* plan) {
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
  for (RegisterInfo& reg : registers_) {
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
  for (TaskInfo& t : tasks_) by_rank[t.proto.rank()]->mutable_tasks()->Add(std::move(t.proto));
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
