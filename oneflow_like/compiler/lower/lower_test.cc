// Lowering end to end: task counts of a data-parallel MLP, compute params and bindings, rate
// changes with micro-batches, the update back edge, determinism, preconditions.
#include <map>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "gtest/gtest.h"
#include "oneflow_like/compiler/lower/lower_test_util.h"
#include "oneflow_like/compiler/test_util.h"

namespace oneflow_like {
namespace compiler {
namespace testing {
namespace {

std::string Serialize(const PlanProto& plan) {
  std::string bytes;
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  plan.SerializeToCodedStream(&coded);
  coded.Trim();
  return bytes;
}

TEST(LowerTest, DataParallelMlpTaskCountsPerRank) {
  const PlanProto plan = LowerTextOrDie(MlpText(1), {}, AddMlpUpdates);
  EXPECT_EQ(plan.job_name(), "mlp");
  EXPECT_EQ(plan.world_size(), 2);
  EXPECT_EQ(plan.pieces_per_step(), 1);
  ASSERT_EQ(plan.ranks_size(), 2);
  for (int r : {0, 1}) {
    EXPECT_EQ(CountTasks(plan, TaskProto::SOURCE, r), 5);   // x, dy, w1, w2, buf
    EXPECT_EQ(CountTasks(plan, TaskProto::COMPUTE, r), 5);  // h, a, y, dw2, sgd
    EXPECT_EQ(CountTasks(plan, TaskProto::SINK, r), 1);     // y
    // dw2 is a partial sum; sgd_update wants it broadcast: one all-reduce (transfer + add).
    EXPECT_EQ(CountTasks(plan, TaskProto::TRANSFER, r), 1);
    EXPECT_EQ(CountTasks(plan, TaskProto::BOXING_ADD, r), 1);
    EXPECT_EQ(CountTasks(plan, TaskProto::BOXING_CONCAT, r) + CountTasks(plan, TaskProto::BOXING_SLICE, r), 0);
    EXPECT_EQ(CountTasks(plan, TaskProto::REPEAT, r) + CountTasks(plan, TaskProto::ACCUMULATE, r), 0);
    EXPECT_EQ(RankPlan(plan, r).tasks_size(), 13);
  }
}

// Regression: an op without inputs (fill; the autograd pass's loss gradient seed is one) had
// no consumed register, so the runtime rejected it (only SOURCE tasks fire without inputs).
// Each of its tasks is now paced, once per piece, by a control input: an input's register on
// its rank, else a variable's REPEAT there; a rank with neither is the user's error.
TEST(LowerTest, OpsWithoutInputsArePacedPerPieceByASourceOnTheirRank) {
  const std::string text =
      "config(name=\"fill\", micro_batches=2)\n"
      "x = input(shape=[4]) placement=cpu:[0,1] sbp=[S(0)]\n"
      "w = variable(shape=[2], init=ones) placement=cpu:[2] sbp=[B]\n"
      "c = fill(shape=[4], value=2.0) placement=cpu:[0,1] out_sbp=[[S(0)]]\n"
      "y = add(x, c)\n"
      "d = fill(shape=[2], value=3.0) placement=cpu:[2] out_sbp=[[B]]\n"
      "z = add(w, d)\n"
      "output(y, z)\n";
  absl::StatusOr<PlanProto> plan = LowerText(text);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (int r : {0, 1}) {
    const TaskProto& fill = FindTask(*plan, "c@r" + std::to_string(r));
    EXPECT_EQ(fill.inputs_size(), 0);
    ASSERT_EQ(fill.consumed_register_ids_size(), 1);
    EXPECT_EQ(fill.consumed_register_ids(0), FindRegisterByName(*plan, "x@r" + std::to_string(r)).id());
  }
  // Rank 2 holds only the variable (step rate): the fill is paced by its REPEAT (piece rate).
  const TaskProto& fill = FindTask(*plan, "d@r2");
  ASSERT_EQ(fill.consumed_register_ids_size(), 1);
  EXPECT_EQ(fill.consumed_register_ids(0), FindRegisterByName(*plan, "w.repeated@r2").id());

  absl::StatusOr<PlanProto> orphan = LowerText(
      "x = input(shape=[4]) placement=cpu:[0]\n"
      "c = fill(shape=[4]) placement=cpu:[1]\n"
      "output(x, c)\n");
  ExpectError(orphan.status(), absl::StatusCode::kInvalidArgument,
              {"op 'c' (fill) has no inputs", "rank 1 holds no input or variable"});
}

// A rank that holds no source but values produced before the op (the loss gradient's seed
// on the ranks that computed the loss from activations moved there): the latest such value
// paces it.
TEST(LowerTest, OpsWithoutInputsOnRanksWithoutSourcesArePacedByTheLatestValueThere) {
  absl::StatusOr<PlanProto> plan = LowerText(
      "x = input(shape=[4]) placement=cpu:[0]\n"
      "y = identity(x) placement=cpu:[1]\n"
      "y2 = relu(y)\n"
      "c = fill(shape=[4], value=2.0) placement=cpu:[1]\n"
      "z = add(y2, c)\n"
      "output(z)\n");
  ASSERT_TRUE(plan.ok()) << plan.status();
  const TaskProto& fill = FindTask(*plan, "c@r1");
  ASSERT_EQ(fill.consumed_register_ids_size(), 1);
  EXPECT_EQ(fill.consumed_register_ids(0), FindRegisterByName(*plan, "y2@r1").id());
}

TEST(LowerTest, ComputeParamsCarryAttrsAndShards) {
  const PlanProto plan = LowerTextOrDie(MlpText(1), {}, AddMlpUpdates);
  const TaskProto& h1 = FindTask(plan, "h@r1");
  EXPECT_EQ(h1.type(), TaskProto::COMPUTE);
  EXPECT_EQ(h1.op_name(), "h");
  EXPECT_EQ(h1.compute().op_type(), "matmul");
  ASSERT_EQ(h1.compute().input_shards_size(), 2);
  // x S(0): rank 1 holds rows [4,8) of [8,4]; w1 B: whole [4,6]; h S(0): rows [4,8) of [8,6].
  EXPECT_EQ(h1.compute().input_shards(0).logical_dims(0), 8);
  EXPECT_EQ(h1.compute().input_shards(0).offset(0), 4);
  EXPECT_EQ(h1.compute().input_shards(1).offset(0), 0);
  EXPECT_EQ(h1.compute().output_shards(0).logical_dims(1), 6);
  EXPECT_EQ(h1.compute().output_shards(0).offset(0), 4);
  EXPECT_EQ(h1.stream_kind(), STREAM_COMPUTE);
  const TaskProto& dw2 = FindTask(plan, "dw2@r0");
  ASSERT_TRUE(dw2.compute().attrs().count("transpose_a"));
  EXPECT_TRUE(dw2.compute().attrs().at("transpose_a").b());
  const RegisterProto& h_reg = FindRegisterByName(plan, "h@r1");
  EXPECT_EQ(h_reg.slots(0).dims(0), 4);
  EXPECT_EQ(h_reg.slots(0).dims(1), 6);
}

TEST(LowerTest, BindingsForInputsOutputsAndVariables) {
  const PlanProto plan = LowerTextOrDie(MlpText(1), {}, AddMlpUpdates);
  uint64_t w1_seed[2] = {0, 0};
  for (int r : {0, 1}) {
    std::map<std::string, const TensorBindingProto*> by_name;
    for (const TensorBindingProto& b : RankPlan(plan, r).bindings()) by_name[b.tensor_name()] = &b;
    ASSERT_EQ(by_name.size(), 6u);  // x, dy, w1, w2, buf, y
    EXPECT_EQ(by_name["x"]->kind(), TensorBindingProto::INPUT);
    EXPECT_EQ(by_name["x"]->shard().offset(0), 4 * r);
    EXPECT_EQ(by_name["y"]->kind(), TensorBindingProto::OUTPUT);
    EXPECT_EQ(by_name["y"]->slot().register_id(), FindTask(plan, "y.sink@r" + std::to_string(r)).inputs(0).register_id());
    const TensorBindingProto& w1 = *by_name["w1"];
    EXPECT_EQ(w1.kind(), TensorBindingProto::VARIABLE);
    EXPECT_EQ(w1.initializer().kind(), InitializerProto::NORMAL);
    EXPECT_NE(w1.initializer().seed(), 0u);
    w1_seed[r] = w1.initializer().seed();
    // The variable's register lives in the persistent block.
    const RegisterProto* reg = FindLocalRegister(plan, r, w1.slot().register_id());
    ASSERT_NE(reg, nullptr);
    EXPECT_EQ(reg->memory().block_id(), 0);
    EXPECT_TRUE(RankPlan(plan, r).memory_blocks(0).persistent());
  }
  EXPECT_EQ(w1_seed[0], w1_seed[1]);  // every shard generates its part of the same tensor
  EXPECT_EQ(w1_seed[0], DeriveInitializerSeed(5, "w1", 0));
  EXPECT_NE(DeriveInitializerSeed(5, "w1", 0), DeriveInitializerSeed(5, "w2", 0));
  EXPECT_EQ(DeriveInitializerSeed(5, "w1", 42), 42u);
}

TEST(LowerTest, UpdateIsABackEdgeIntoTheVariableHolder) {
  const PlanProto plan = LowerTextOrDie(MlpText(1), {}, AddMlpUpdates);
  for (int r : {0, 1}) {
    const std::string at = "@r" + std::to_string(r);
    const TaskProto& holder = FindTask(plan, "w2.source" + at);
    const TaskProto& sgd = FindTask(plan, "w2_new" + at);
    ASSERT_EQ(holder.consumed_register_ids_size(), 1);
    EXPECT_EQ(holder.consumed_register_ids(0), sgd.outputs(0).register_id());  // param_out
    const TaskProto& buf_holder = FindTask(plan, "buf.source" + at);
    ASSERT_EQ(buf_holder.consumed_register_ids_size(), 1);
    EXPECT_EQ(buf_holder.consumed_register_ids(0), sgd.outputs(1).register_id());  // momentum_buf_out
    const RegisterProto* update = FindLocalRegister(plan, r, sgd.outputs(0).register_id());
    ASSERT_NE(update, nullptr);
    EXPECT_EQ(update->count(), 1);
    ASSERT_EQ(update->consumers_size(), 1);
    EXPECT_EQ(update->consumers(0).task_id(), holder.id());
    // The holder's own register has count 1 and is read by the sgd directly.
    const RegisterProto* param = FindLocalRegister(plan, r, holder.outputs(0).register_id());
    ASSERT_NE(param, nullptr);
    EXPECT_EQ(param->count(), 1);
    // w1 has no update: its holder consumes nothing.
    EXPECT_EQ(FindTask(plan, "w1.source" + at).consumed_register_ids_size(), 0);
  }
}

TEST(LowerTest, MicroBatchesRepeatVariablesAndAccumulateGradients) {
  const PlanProto plan = LowerTextOrDie(MlpText(4), {}, AddMlpUpdates);
  EXPECT_EQ(plan.pieces_per_step(), 4);
  for (int r : {0, 1}) {
    const std::string at = "@r" + std::to_string(r);
    // w1 and w2 feed piece-rate matmuls; buf is read only by the step-rate sgd.
    const std::vector<const TaskProto*> repeats = TasksOfType(plan, TaskProto::REPEAT, r);
    ASSERT_EQ(repeats.size(), 2u);
    for (const TaskProto* t : repeats) EXPECT_EQ(t->count().count(), 4);
    EXPECT_EQ(FindTask(plan, "h" + at).inputs(1).register_id(), FindTask(plan, "w1.repeat" + at).outputs(0).register_id());
    // sgd reads w2 and buf straight from their holders (step rate).
    const TaskProto& sgd = FindTask(plan, "w2_new" + at);
    EXPECT_EQ(sgd.inputs(0).register_id(), FindTask(plan, "w2.source" + at).outputs(0).register_id());
    EXPECT_EQ(sgd.inputs(2).register_id(), FindTask(plan, "buf.source" + at).outputs(0).register_id());
    // dw2 is accumulated in its own (partial) layout, then all-reduced once per step.
    const std::vector<const TaskProto*> accumulates = TasksOfType(plan, TaskProto::ACCUMULATE, r);
    ASSERT_EQ(accumulates.size(), 1u);
    const TaskProto& acc = *accumulates[0];
    EXPECT_EQ(acc.count().count(), 4);
    EXPECT_EQ(acc.inputs(0).register_id(), FindTask(plan, "dw2" + at).outputs(0).register_id());
    const TaskProto& transfer = *TasksOfType(plan, TaskProto::TRANSFER, r)[0];
    const TaskProto& peer_acc = *TasksOfType(plan, TaskProto::ACCUMULATE, 1 - r)[0];
    EXPECT_EQ(transfer.inputs(0).register_id(), peer_acc.outputs(0).register_id());
  }
}

TEST(LowerTest, GradientAccumulationMultipliesPiecesPerStep) {
  const PlanProto plan = LowerTextOrDie(MlpText(2, 3), {}, AddMlpUpdates);
  EXPECT_EQ(plan.pieces_per_step(), 6);
  for (const TaskProto* t : TasksOfType(plan, TaskProto::REPEAT)) EXPECT_EQ(t->count().count(), 6);
  for (const TaskProto* t : TasksOfType(plan, TaskProto::ACCUMULATE)) EXPECT_EQ(t->count().count(), 6);
  EXPECT_EQ(CountTasks(plan, TaskProto::ACCUMULATE), 2);  // dw2 on each rank
}

TEST(LowerTest, SameGraphGivesByteIdenticalPlans) {
  LowerOptions options;
  const PlanProto a = LowerTextOrDie(kGptBlockText, options);
  const PlanProto b = LowerTextOrDie(kGptBlockText, options);
  EXPECT_GT(a.rank_plans_size(), 0);
  EXPECT_EQ(Serialize(a), Serialize(b));
  const PlanProto c = LowerTextOrDie(MlpText(4), options, AddMlpUpdates);
  const PlanProto d = LowerTextOrDie(MlpText(4), options, AddMlpUpdates);
  EXPECT_EQ(Serialize(c), Serialize(d));
}

TEST(LowerTest, UnannotatedGraphIsAnInternalErrorNamingTheTensor) {
  absl::StatusOr<PlanProto> plan = LowerText(MlpText(1), {}, nullptr, /*annotate=*/false);
  ExpectError(plan.status(), absl::StatusCode::kInternal, {"tensor 'x'", "nd_sbp", "SBP selection"});
}

TEST(LowerTest, OpWithoutSignatureIsAnInternalErrorNamingTheOp) {
  absl::StatusOr<PlanProto> plan = LowerText(MlpText(1), {}, [](Graph* g) {
    g->mutable_op(g->FindOp("a"))->nd_sbp_signature.reset();
  });
  ExpectError(plan.status(), absl::StatusCode::kInternal, {"relu 'a'", "nd_sbp_signature"});
}

TEST(LowerTest, OutputLayoutDifferentFromSignatureIsAnInternalError) {
  absl::StatusOr<PlanProto> plan = LowerText(MlpText(1), {}, [](Graph* g) {
    g->mutable_tensor(g->FindTensor("h"))->nd_sbp = NdSbp{Sbp::Broadcast()};
  });
  ExpectError(plan.status(), absl::StatusCode::kInternal, {"tensor 'h'", "matmul 'h'", "[S(0)]"});
}

TEST(LowerTest, BadAlignmentIsInvalidArgument) {
  LowerOptions options;
  options.alignment = 48;
  ExpectError(LowerText(MlpText(1), options).status(), absl::StatusCode::kInvalidArgument, {"alignment 48"});
}

TEST(LowerTest, TooSmallWorldSizeIsInvalidArgument) {
  LowerOptions options;
  options.world_size = 1;
  absl::StatusOr<PlanProto> plan = LowerText(MlpText(1), options);
  ExpectError(plan.status(), absl::StatusCode::kInvalidArgument, {"world_size 1", "rank 1"});
}

}  // namespace
}  // namespace testing
}  // namespace compiler
}  // namespace oneflow_like
