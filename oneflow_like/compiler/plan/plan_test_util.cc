#include "oneflow_like/compiler/plan/plan_test_util.h"

#include <cstdio>
#include <cstdlib>

namespace oneflow_like {
namespace compiler {
namespace {

int64_t AlignedBytes(const std::vector<TensorDescProto>& slots, std::vector<int64_t>* offsets) {
  int64_t bytes = 0;
  for (const TensorDescProto& slot : slots) {
    offsets->push_back(bytes);
    int64_t size = 4;
    if (slot.dtype() == DT_FLOAT64 || slot.dtype() == DT_INT64) size = 8;
    if (slot.dtype() == DT_FLOAT16 || slot.dtype() == DT_BFLOAT16) size = 2;
    if (slot.dtype() == DT_BOOL) size = 1;
    for (int64_t dim : slot.dims()) size *= dim;
    bytes += (size + 63) / 64 * 64;
  }
  return bytes;
}

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "TestPlanBuilder: %s\n", what);
    std::abort();
  }
}

}  // namespace

TensorDescProto F32(std::vector<int64_t> dims) {
  TensorDescProto desc;
  desc.set_dtype(DT_FLOAT32);
  for (int64_t dim : dims) desc.add_dims(dim);
  return desc;
}

TestPlanBuilder::TestPlanBuilder(int32_t world_size, int64_t pieces_per_step) {
  plan_.set_job_name("test_plan");
  plan_.set_world_size(world_size);
  plan_.set_pieces_per_step(pieces_per_step);
}

RankPlanProto* TestPlanBuilder::Rank(int32_t rank) {
  RankPlanProto& rank_plan = ranks_[rank];
  rank_plan.set_rank(rank);
  return &rank_plan;
}

int64_t TestPlanBuilder::AddTask(int32_t rank, TaskProto::Type type, const std::string& name,
                                 int32_t stream) {
  RankPlanProto* rank_plan = Rank(rank);
  const int64_t id = next_task_id_++;
  task_at_[id] = {rank, rank_plan->tasks_size()};
  TaskProto* task = rank_plan->add_tasks();
  task->set_id(id);
  task->set_rank(rank);
  task->mutable_device()->set_type("cpu");
  task->set_stream_id(stream);
  task->set_stream_kind(stream == 0 ? STREAM_COMPUTE : STREAM_COMM);
  task->set_type(type);
  task->set_name(name);
  task->set_order_in_stream(next_order_[{rank, stream}]++);
  return id;
}

int64_t TestPlanBuilder::AddCountTask(int32_t rank, TaskProto::Type type, const std::string& name,
                                      int64_t count) {
  const int64_t id = AddTask(rank, type, name);
  task(id)->mutable_count()->set_count(count);
  return id;
}

int64_t TestPlanBuilder::AddCollective(int32_t rank, const std::string& name,
                                       std::vector<int32_t> group, int64_t global_order,
                                       CollectiveParams::Kind kind) {
  const int64_t id = AddTask(rank, TaskProto::COLLECTIVE, name, /*stream=*/1);
  CollectiveParams* params = task(id)->mutable_collective();
  params->set_kind(kind);
  for (int32_t member : group) params->add_ranks(member);
  params->set_global_order(global_order);
  const Box whole{{0, 0}, {2, 2}};
  SetCollectiveGeometry(id, {2, 2}, whole, std::vector<Box>(group.size(), whole),
                        std::vector<Box>(group.size(), whole));
  return id;
}

namespace {
RegionProto ToRegion(const TestPlanBuilder::Box& box) {
  RegionProto region;
  for (int64_t b : box.first) region.add_begin(b);
  for (int64_t e : box.second) region.add_end(e);
  return region;
}
}  // namespace

void TestPlanBuilder::SetCollectiveGeometry(int64_t task_id, std::vector<int64_t> logical_dims,
                                            Box group_region, std::vector<Box> input_regions,
                                            std::vector<Box> output_regions) {
  CollectiveParams* params = task(task_id)->mutable_collective();
  params->clear_logical_dims();
  for (int64_t d : logical_dims) params->add_logical_dims(d);
  *params->mutable_group_region() = ToRegion(group_region);
  params->clear_input_regions();
  for (const Box& box : input_regions) *params->add_input_regions() = ToRegion(box);
  params->clear_output_regions();
  for (const Box& box : output_regions) *params->add_output_regions() = ToRegion(box);
}

int64_t TestPlanBuilder::AddRegister(int64_t producer_task, const std::string& name, int32_t count,
                                     std::vector<TensorDescProto> slots, bool persistent) {
  TaskProto* producer = task(producer_task);
  const int32_t rank = producer->rank();
  const int64_t id = next_register_id_++;
  producer->add_produced_register_ids(id);
  for (size_t s = 0; s < slots.size(); ++s) {
    SlotRefProto* output = producer->add_outputs();
    output->set_register_id(id);
    output->set_slot(static_cast<int32_t>(s));
  }
  RankPlanProto* rank_plan = Rank(rank);
  register_at_[id] = {rank, rank_plan->registers_size()};
  RegisterProto* reg = rank_plan->add_registers();
  reg->set_id(id);
  reg->set_name(name);
  reg->mutable_producer()->set_task_id(producer_task);
  reg->mutable_producer()->set_rank(rank);
  reg->set_count(count);
  if (slots.empty()) return id;
  std::vector<int64_t> offsets;
  const int64_t buffer_bytes = AlignedBytes(slots, &offsets);
  int64_t& used = persistent ? used_bytes_[rank].first : used_bytes_[rank].second;
  MemoryLocationProto* memory = reg->mutable_memory();
  memory->set_block_id(persistent ? 0 : 1);
  memory->set_offset(used);
  memory->set_buffer_bytes(buffer_bytes);
  for (int64_t offset : offsets) memory->add_slot_offsets(offset);
  used += count * buffer_bytes;
  for (TensorDescProto& slot : slots) *reg->add_slots() = std::move(slot);
  return id;
}

void TestPlanBuilder::Connect(int64_t register_id, int64_t consumer_task) {
  RegisterProto* reg = producing_register(register_id);
  TaskProto* consumer = task(consumer_task);
  Require(consumer->rank() == reg->producer().rank(), "Connect across ranks: use AddTransfer");
  TaskRefProto* ref = reg->add_consumers();
  ref->set_task_id(consumer_task);
  ref->set_rank(consumer->rank());
  consumer->add_consumed_register_ids(register_id);
  if (reg->slots_size() > 0) {
    SlotRefProto* input = consumer->add_inputs();
    input->set_register_id(register_id);
    input->set_slot(0);
  }
}

int64_t TestPlanBuilder::AddTransfer(int64_t register_id, int32_t to_rank,
                                     const std::string& name) {
  const int64_t transfer = AddTask(to_rank, TaskProto::TRANSFER, name, /*stream=*/1);
  RegisterProto* reg = producing_register(register_id);
  const int32_t from_rank = reg->producer().rank();
  task(transfer)->mutable_transfer()->set_peer_rank(from_rank);
  TaskRefProto* ref = reg->add_consumers();
  ref->set_task_id(transfer);
  ref->set_rank(to_rank);
  RegisterProto mirror;
  mirror.set_id(register_id);
  mirror.set_name(reg->name());
  *mirror.mutable_producer() = reg->producer();
  *mirror.add_consumers() = *ref;
  mirror.set_count(reg->count());
  *mirror.mutable_slots() = reg->slots();
  mirror.mutable_remote()->set_rank(from_rank);
  *Rank(to_rank)->add_registers() = std::move(mirror);
  TaskProto* pull = task(transfer);
  pull->add_consumed_register_ids(register_id);
  if (reg->slots_size() > 0) {
    SlotRefProto* input = pull->add_inputs();
    input->set_register_id(register_id);
    input->set_slot(0);
  }
  return transfer;
}

std::pair<int64_t, int64_t> TestPlanBuilder::AddInput(int32_t rank, const std::string& tensor,
                                                      int32_t count, TensorDescProto slot) {
  const int64_t source = AddTask(rank, TaskProto::SOURCE, tensor + ".source");
  task(source)->mutable_io()->set_tensor_name(tensor);
  const int64_t reg = AddRegister(source, tensor, count, {std::move(slot)});
  TensorBindingProto* binding = Rank(rank)->add_bindings();
  binding->set_tensor_name(tensor);
  binding->set_kind(TensorBindingProto::INPUT);
  binding->mutable_slot()->set_register_id(reg);
  return {source, reg};
}

std::pair<int64_t, int64_t> TestPlanBuilder::AddVariable(int32_t rank, const std::string& tensor) {
  const int64_t holder = AddTask(rank, TaskProto::SOURCE, tensor + ".holder");
  task(holder)->mutable_io()->set_tensor_name(tensor);
  const int64_t reg = AddRegister(holder, tensor, 1, {F32({2, 2})}, /*persistent=*/true);
  TensorBindingProto* binding = Rank(rank)->add_bindings();
  binding->set_tensor_name(tensor);
  binding->set_kind(TensorBindingProto::VARIABLE);
  binding->mutable_slot()->set_register_id(reg);
  return {holder, reg};
}

int64_t TestPlanBuilder::AddSink(int64_t register_id, const std::string& tensor) {
  const int32_t rank = producing_register(register_id)->producer().rank();
  const int64_t sink = AddTask(rank, TaskProto::SINK, tensor + ".sink");
  task(sink)->mutable_io()->set_tensor_name(tensor);
  Connect(register_id, sink);
  TensorBindingProto* binding = Rank(rank)->add_bindings();
  binding->set_tensor_name(tensor);
  binding->set_kind(TensorBindingProto::OUTPUT);
  binding->mutable_slot()->set_register_id(register_id);
  return sink;
}

TaskProto* TestPlanBuilder::task(int64_t id) {
  auto it = task_at_.find(id);
  Require(it != task_at_.end(), "unknown task id");
  return ranks_[it->second.first].mutable_tasks(it->second.second);
}

RegisterProto* TestPlanBuilder::producing_register(int64_t id) {
  auto it = register_at_.find(id);
  Require(it != register_at_.end(), "unknown register id");
  return ranks_[it->second.first].mutable_registers(it->second.second);
}

PlanProto TestPlanBuilder::Build() const {
  PlanProto plan = plan_;
  for (const auto& [rank, rank_plan] : ranks_) {
    plan.add_ranks(rank);
    RankPlanProto* out = plan.add_rank_plans();
    *out = rank_plan;
    auto used = used_bytes_.find(rank);
    const int64_t persistent = used == used_bytes_.end() ? 0 : used->second.first;
    const int64_t reusable = used == used_bytes_.end() ? 0 : used->second.second;
    for (int block = 0; block < 2; ++block) {
      MemoryBlockProto* proto = out->add_memory_blocks();
      proto->set_id(block);
      proto->mutable_device()->set_type("cpu");
      proto->set_persistent(block == 0);
      proto->set_size_bytes(block == 0 ? persistent : reusable);
    }
    RankMemoryProto* memory = plan.add_memory();
    memory->set_rank(rank);
    memory->set_planned_bytes(persistent + reusable);
    memory->set_naive_bytes(persistent + reusable);
  }
  return plan;
}

TaskProto* FindTask(PlanProto* plan, int64_t id) {
  for (RankPlanProto& rank_plan : *plan->mutable_rank_plans()) {
    for (TaskProto& task : *rank_plan.mutable_tasks()) {
      if (task.id() == id) return &task;
    }
  }
  return nullptr;
}

RegisterProto* FindEntry(PlanProto* plan, int32_t rank, int64_t register_id) {
  for (RankPlanProto& rank_plan : *plan->mutable_rank_plans()) {
    if (rank_plan.rank() != rank) continue;
    for (RegisterProto& reg : *rank_plan.mutable_registers()) {
      if (reg.id() == register_id) return &reg;
    }
  }
  return nullptr;
}

}  // namespace compiler
}  // namespace oneflow_like
