// The worked example of docs/plan_format.md (2-rank data-parallel matmul), written out field by
// field as the document's tables give it: the verifier must accept it, including the byte
// sharing of r3 and r6, and reject the variants the document warns about.
#include <initializer_list>
#include <string>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/plan/plan_test_util.h"
#include "oneflow_like/compiler/plan/plan_verifier.h"

namespace oneflow_like {
namespace compiler {
namespace {

TaskProto* AddTask(RankPlanProto* rank_plan, int k, TaskProto::Type type, const std::string& name,
                   int stream, int order) {
  const int r = rank_plan->rank();
  TaskProto* task = rank_plan->add_tasks();
  task->set_id(10 * r + k);
  task->set_rank(r);
  task->mutable_device()->set_type("cpu");
  task->set_stream_id(stream);
  task->set_stream_kind(stream == 0 ? STREAM_COMPUTE : STREAM_COMM);
  task->set_type(type);
  task->set_name(name + "@r" + std::to_string(r));
  task->set_order_in_stream(order);
  return task;
}

// Register 10r + j (or `id` for the mirror) with one slot; task refs are (id, rank) pairs.
RegisterProto* AddRegister(RankPlanProto* rank_plan, int64_t id, std::pair<int64_t, int> producer,
                           std::initializer_list<std::pair<int64_t, int>> consumers,
                           std::vector<int64_t> dims, int count) {
  RegisterProto* reg = rank_plan->add_registers();
  reg->set_id(id);
  reg->mutable_producer()->set_task_id(producer.first);
  reg->mutable_producer()->set_rank(producer.second);
  for (const auto& [task, rank] : consumers) {
    TaskRefProto* ref = reg->add_consumers();
    ref->set_task_id(task);
    ref->set_rank(rank);
  }
  reg->set_count(count);
  *reg->add_slots() = F32(dims);
  return reg;
}

void Place(RegisterProto* reg, int block, int64_t offset) {
  reg->mutable_memory()->set_block_id(block);
  reg->mutable_memory()->set_offset(offset);
  reg->mutable_memory()->set_buffer_bytes(64);
  reg->mutable_memory()->add_slot_offsets(0);
}

void Wire(TaskProto* task, std::initializer_list<int64_t> consumed, int64_t produced) {
  for (int64_t id : consumed) {
    task->add_consumed_register_ids(id);
    task->add_inputs()->set_register_id(id);
  }
  if (produced < 0) return;
  task->add_produced_register_ids(produced);
  task->add_outputs()->set_register_id(produced);
}

void Bind(RankPlanProto* rank_plan, const std::string& name, TensorBindingProto::Kind kind,
          int64_t reg) {
  TensorBindingProto* binding = rank_plan->add_bindings();
  binding->set_tensor_name(name);
  binding->set_kind(kind);
  binding->mutable_slot()->set_register_id(reg);
}

PlanProto WorkedExample() {
  PlanProto plan;
  plan.set_job_name("dp_matmul");
  plan.set_world_size(2);
  plan.set_pieces_per_step(1);
  for (int r = 0; r < 2; ++r) {
    const int b = 10 * r, peer = 1 - r;
    plan.add_ranks(r);
    RankPlanProto* rp = plan.add_rank_plans();
    rp->set_rank(r);
    for (int block = 0; block < 2; ++block) {
      MemoryBlockProto* proto = rp->add_memory_blocks();
      proto->set_id(block);
      proto->mutable_device()->set_type("cpu");
      proto->set_persistent(block == 0);
      proto->set_size_bytes(block == 0 ? 64 : 384);
    }
    auto source = [&](int k, const std::string& tensor, int order) {
      TaskProto* task = AddTask(rp, k, TaskProto::SOURCE, tensor + ".source", 0, order);
      task->mutable_io()->set_tensor_name(tensor);
      return task;
    };
    Wire(source(0, "x", 0), {}, b + 0);
    Wire(source(1, "w", 1), {}, b + 1);
    Wire(source(4, "dy", 2), {}, b + 3);
    Wire(AddTask(rp, 2, TaskProto::COMPUTE, "y.matmul", 0, 3), {b + 0, b + 1}, b + 2);
    Wire(AddTask(rp, 5, TaskProto::COMPUTE, "dw.matmul", 0, 4), {b + 0, b + 3}, b + 4);
    TaskProto* transfer = AddTask(rp, 6, TaskProto::TRANSFER, "dw.transfer", 1, 0);
    transfer->mutable_transfer()->set_peer_rank(peer);
    Wire(transfer, {10 * peer + 4}, b + 5);
    Wire(AddTask(rp, 7, TaskProto::BOXING_ADD, "dw.all_reduce.add", 0, 5), {b + 4, b + 5}, b + 6);
    TaskProto* y_sink = AddTask(rp, 3, TaskProto::SINK, "y.sink", 0, 6);
    y_sink->mutable_io()->set_tensor_name("y");
    Wire(y_sink, {b + 2}, -1);
    TaskProto* dw_sink = AddTask(rp, 8, TaskProto::SINK, "dw.sink", 0, 7);
    dw_sink->mutable_io()->set_tensor_name("dw");
    Wire(dw_sink, {b + 6}, -1);

    Place(AddRegister(rp, b + 0, {b + 0, r}, {{b + 2, r}, {b + 5, r}}, {2, 3}, 2), 1, 0);
    Place(AddRegister(rp, b + 1, {b + 1, r}, {{b + 2, r}}, {3, 2}, 1), 0, 0);
    Place(AddRegister(rp, b + 2, {b + 2, r}, {{b + 3, r}}, {2, 2}, 1), 1, 128);
    Place(AddRegister(rp, b + 3, {b + 4, r}, {{b + 5, r}}, {2, 2}, 1), 1, 192);
    Place(AddRegister(rp, b + 4, {b + 5, r}, {{b + 7, r}, {10 * peer + 6, peer}}, {3, 2}, 1), 1,
          256);
    Place(AddRegister(rp, b + 5, {b + 6, r}, {{b + 7, r}}, {3, 2}, 1), 1, 320);
    Place(AddRegister(rp, b + 6, {b + 7, r}, {{b + 8, r}}, {3, 2}, 1), 1, 192);  // r3's bytes
    AddRegister(rp, 10 * peer + 4, {10 * peer + 5, peer}, {{b + 6, r}}, {3, 2}, 1)
        ->mutable_remote()
        ->set_rank(peer);
    Bind(rp, "w", TensorBindingProto::VARIABLE, b + 1);
    Bind(rp, "x", TensorBindingProto::INPUT, b + 0);
    Bind(rp, "dy", TensorBindingProto::INPUT, b + 3);
    Bind(rp, "y", TensorBindingProto::OUTPUT, b + 2);
    Bind(rp, "dw", TensorBindingProto::OUTPUT, b + 6);
    RankMemoryProto* memory = plan.add_memory();
    memory->set_rank(r);
    memory->set_planned_bytes(448);
    memory->set_naive_bytes(512);
  }
  return plan;
}

TEST(PlanVerifierExampleTest, WorkedExampleOfPlanFormatPasses) {
  const PlanProto plan = WorkedExample();
  EXPECT_TRUE(VerifyPlan(plan).ok()) << VerifyPlan(plan);
}

TEST(PlanVerifierExampleTest, HeaderExampleMessage) {
  // plan_verifier.h: dropping rank 1's mirror of register 4.
  PlanProto plan = WorkedExample();
  auto* registers = plan.mutable_rank_plans(1)->mutable_registers();
  registers->DeleteSubrange(registers->size() - 1, 1);
  EXPECT_EQ(VerifyPlan(plan).message(),
            "VerifyPlan: rank 1 task 16 'dw.transfer@r1' (TRANSFER): consumed register 4 does not "
            "exist on rank 1 (neither produced there nor mirrored)");
}

TEST(PlanVerifierExampleTest, SharingBytesWithALiveRegisterIsRejected) {
  // r6 (dw, orders 5..7) on r2's bytes (y, orders 3..6): both alive at orders 5 and 6.
  PlanProto plan = WorkedExample();
  FindEntry(&plan, 0, 6)->mutable_memory()->set_offset(128);
  const absl::Status status = VerifyPlan(plan);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(status.message().find("register 2 '' on rank 0 [128, 192) and register 6 '' on rank 0 "
                                  "[128, 192) share bytes of block 1 but are alive together"),
            std::string::npos)
      << status;
}

TEST(PlanVerifierExampleTest, SourcesOnACopyStreamForbidTheSharing) {
  // The document's warning: with dy.source on a copy stream, dy (r3) is written on another
  // stream than it is read: nothing makes the source wait for r6's readers before it writes r3
  // for the next piece, so the bytes they share are rejected.
  PlanProto plan = WorkedExample();
  FindTask(&plan, 4)->set_stream_id(2);
  FindTask(&plan, 4)->set_stream_kind(STREAM_COPY);
  FindTask(&plan, 4)->set_order_in_stream(0);
  for (int64_t id : {2, 5, 7, 3, 8}) {
    FindTask(&plan, id)->set_order_in_stream(FindTask(&plan, id)->order_in_stream() - 1);
  }
  const absl::Status status = VerifyPlan(plan);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(status.message().find(
                "register 3 '' on rank 0 [192, 256) and register 6 '' on rank 0 [192, 256) share "
                "bytes of block 1 but no chain of register dependencies and stream orders puts every "
                "use of one before the other's write, in this piece and into the next, either way: "
                "rank 0 task 7 'dw.all_reduce.add@r0' (BOXING_ADD) (stream cpu:0/0) does not happen "
                "before rank 0 task 4 'dy.source@r0' (SOURCE) (stream cpu:0/2) writes register 3 '' "
                "on rank 0 in the next piece"),
            std::string::npos)
      << status;
  // Giving r6 its own bytes fixes it.
  FindEntry(&plan, 0, 6)->mutable_memory()->set_offset(384);
  plan.mutable_rank_plans(0)->mutable_memory_blocks(1)->set_size_bytes(448);
  plan.mutable_memory(0)->set_planned_bytes(512);
  EXPECT_TRUE(VerifyPlan(plan).ok()) << VerifyPlan(plan);
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
