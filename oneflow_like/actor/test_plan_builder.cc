#include "oneflow_like/actor/test_plan_builder.h"

#include "oneflow_like/core/attr_proto.h"
#include "oneflow_like/core/sbp.h"

namespace oneflow_like {
namespace actor {
namespace {

int64_t RoundUp(int64_t bytes) { return (bytes + 63) / 64 * 64; }

}  // namespace

TestPlanBuilder::TestPlanBuilder(int32_t world_size, int64_t pieces_per_step) {
  plan_.set_job_name("test_plan");
  plan_.set_world_size(world_size);
  plan_.set_pieces_per_step(pieces_per_step);
  for (int32_t r = 0; r < world_size; ++r) {
    plan_.add_ranks(r);
    plan_.add_rank_plans()->set_rank(r);
  }
}

int64_t TestPlanBuilder::AddRegister(int32_t rank, const std::string& name, int32_t count,
                                     const std::vector<TensorDesc>& slots, bool persistent) {
  RegisterProto* reg = rank_plan(rank).add_registers();
  reg->set_id(next_register_++);
  reg->set_name(name);
  reg->set_count(count);
  reg->mutable_producer()->set_rank(rank);
  if (slots.empty()) return reg->id();
  MemoryLocationProto* mem = reg->mutable_memory();
  mem->set_block_id(persistent ? 0 : 1);
  int64_t stride = 0;
  for (const TensorDesc& d : slots) {
    *reg->add_slots() = TensorDescToProto(d);
    mem->add_slot_offsets(stride);
    stride += RoundUp(d.byte_size());
  }
  int64_t& used = block_used_[{rank, persistent}];
  mem->set_offset(used);
  mem->set_buffer_bytes(stride);
  used += stride * count;
  return reg->id();
}

void TestPlanBuilder::AddMirror(int32_t rank, int64_t register_id) {
  for (const RankPlanProto& rp : plan_.rank_plans()) {
    for (const RegisterProto& reg : rp.registers()) {
      if (reg.id() != register_id || reg.has_remote()) continue;
      RegisterProto* mirror = rank_plan(rank).add_registers();
      *mirror = reg;
      mirror->clear_memory();
      mirror->mutable_remote()->set_rank(rp.rank());
      return;
    }
  }
}

int TestPlanBuilder::SlotCount(int64_t register_id) const {
  for (const RankPlanProto& rp : plan_.rank_plans()) {
    for (const RegisterProto& reg : rp.registers()) {
      if (reg.id() == register_id) return reg.slots_size();
    }
  }
  return 0;
}

TaskProto* TestPlanBuilder::AddTask(int32_t rank, TaskProto::Type type, const std::string& name,
                                    const std::vector<int64_t>& consumed, const std::vector<int64_t>& produced,
                                    int32_t stream) {
  TaskProto* task = rank_plan(rank).add_tasks();
  task->set_id(next_task_++);
  task->set_rank(rank);
  task->mutable_device()->set_type("cpu");
  task->set_stream_id(stream);
  task->set_type(type);
  task->set_name(name);
  task->set_order_in_stream(next_order_[{rank, stream}]++);
  // Payload: every slot of every register, as the compiler writes it (tests may edit it).
  for (int64_t id : consumed) {
    task->add_consumed_register_ids(id);
    for (int s = 0; s < SlotCount(id); ++s) {
      SlotRefProto* ref = task->add_inputs();
      ref->set_register_id(id);
      ref->set_slot(s);
    }
  }
  for (int64_t id : produced) {
    task->add_produced_register_ids(id);
    for (int s = 0; s < SlotCount(id); ++s) {
      SlotRefProto* ref = task->add_outputs();
      ref->set_register_id(id);
      ref->set_slot(s);
    }
  }
  return task;
}

TaskProto* TestPlanBuilder::AddCompute(int32_t rank, const std::string& name, const std::string& op_type,
                                       const AttrMap& attrs, const std::vector<int64_t>& consumed,
                                       const std::vector<int64_t>& produced, int32_t stream) {
  TaskProto* task = AddTask(rank, TaskProto::COMPUTE, name, consumed, produced, stream);
  task->set_op_name(name);
  task->mutable_compute()->set_op_type(op_type);
  AttrMapToProto(attrs, task->mutable_compute()->mutable_attrs());
  return task;
}

TaskProto* TestPlanBuilder::AddSource(int32_t rank, const std::string& name, const std::string& tensor,
                                      int64_t produced, const std::vector<int64_t>& consumed) {
  TaskProto* task = AddTask(rank, TaskProto::SOURCE, name, consumed, {produced});
  task->mutable_io()->set_tensor_name(tensor);
  return task;
}

TaskProto* TestPlanBuilder::AddSink(int32_t rank, const std::string& name, const std::string& tensor,
                                    int64_t consumed) {
  TaskProto* task = AddTask(rank, TaskProto::SINK, name, {consumed}, {});
  task->mutable_io()->set_tensor_name(tensor);
  return task;
}

void TestPlanBuilder::Bind(int32_t rank, const std::string& tensor, TensorBindingProto::Kind kind, int64_t register_id,
                           const Shape& logical, const std::vector<int64_t>& offset, const std::string& nd_sbp,
                           const InitializerProto* initializer) {
  TensorBindingProto* binding = rank_plan(rank).add_bindings();
  binding->set_tensor_name(tensor);
  binding->set_kind(kind);
  binding->mutable_slot()->set_register_id(register_id);
  binding->mutable_slot()->set_slot(0);
  for (int64_t d : logical.dims()) binding->mutable_shard()->add_logical_dims(d);
  for (int a = 0; a < logical.num_axes(); ++a) {
    binding->mutable_shard()->add_offset(offset.empty() ? 0 : offset[a]);
  }
  absl::StatusOr<NdSbp> sbp = NdSbp::Parse(nd_sbp);
  if (sbp.ok()) *binding->mutable_shard()->mutable_nd_sbp() = sbp->ToProto();
  if (initializer != nullptr) *binding->mutable_initializer() = *initializer;
}

void TestPlanBuilder::BindInput(int32_t rank, const std::string& tensor, int64_t register_id, const Shape& logical,
                                const std::vector<int64_t>& offset, const std::string& nd_sbp) {
  Bind(rank, tensor, TensorBindingProto::INPUT, register_id, logical, offset, nd_sbp, nullptr);
}
void TestPlanBuilder::BindOutput(int32_t rank, const std::string& tensor, int64_t register_id, const Shape& logical,
                                 const std::vector<int64_t>& offset, const std::string& nd_sbp) {
  Bind(rank, tensor, TensorBindingProto::OUTPUT, register_id, logical, offset, nd_sbp, nullptr);
}
void TestPlanBuilder::BindVariable(int32_t rank, const std::string& tensor, int64_t register_id, const Shape& logical,
                                   const InitializerProto& initializer, const std::vector<int64_t>& offset,
                                   const std::string& nd_sbp) {
  Bind(rank, tensor, TensorBindingProto::VARIABLE, register_id, logical, offset, nd_sbp, &initializer);
}

PlanProto TestPlanBuilder::Build() const {
  PlanProto plan = plan_;
  // Producers and consumers from the tasks (a consumer of a mirror is also listed on the
  // producing rank's register).
  std::map<int64_t, std::vector<RegisterProto*>> copies;  // id -> every entry with that id
  for (RankPlanProto& rp : *plan.mutable_rank_plans()) {
    for (RegisterProto& reg : *rp.mutable_registers()) copies[reg.id()].push_back(&reg);
  }
  for (const RankPlanProto& rp : plan.rank_plans()) {
    for (const TaskProto& task : rp.tasks()) {
      for (int64_t id : task.produced_register_ids()) {
        for (RegisterProto* reg : copies[id]) reg->mutable_producer()->set_task_id(task.id());
      }
      for (int64_t id : task.consumed_register_ids()) {
        for (RegisterProto* reg : copies[id]) {
          TaskRefProto* ref = reg->add_consumers();
          ref->set_task_id(task.id());
          ref->set_rank(rp.rank());
        }
      }
    }
  }
  for (RankPlanProto& rp : *plan.mutable_rank_plans()) {
    for (bool persistent : {true, false}) {
      auto it = block_used_.find({rp.rank(), persistent});
      MemoryBlockProto* block = rp.add_memory_blocks();
      block->set_id(persistent ? 0 : 1);
      block->mutable_device()->set_type("cpu");
      block->set_size_bytes(it == block_used_.end() ? 0 : it->second);
      block->set_persistent(persistent);
    }
  }
  return plan;
}

}  // namespace actor
}  // namespace oneflow_like
