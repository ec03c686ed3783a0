// Training jobs whose data is fed on the host and whose model lives on cuda placements compile
// through the whole driver (SBP selection, autograd, AdamW, lowering, plan verification): the
// inputs reach the device through host -> device COPY tasks, the loss comes back to the host
// through device -> host COPY tasks for its sink, no rank transfers to itself, and every rank's
// own compile equals its part of the whole plan (merged and sealed: the same content hash).
#include <map>
#include <string>
#include <vector>


#include "gtest/gtest.h"
#include "oneflow_like/compiler/driver/compile.h"
#include "oneflow_like/compiler/plan/plan_hash.h"
#include "oneflow_like/compiler/plan/plan_verifier.h"
#include "oneflow_like/compiler/plan/rank_plans.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/models/gpt.h"

namespace oneflow_like {
namespace compiler {
namespace {


std::string TrainingText(const std::string& ranks) {
  return "config(name=\"host_data\", seed=5, micro_batches=2)\n"
         "x = input(shape=[8,16]) placement=cpu:[" + ranks + "] sbp=[S(0)]\n"
         "label = input(shape=[8], dtype=int64) placement=cpu:[" + ranks + "] sbp=[S(0)]\n"
         "w1 = variable(shape=[16,32], init=normal(0.02)) placement=cuda:[" + ranks + "]\n"
         "w2 = variable(shape=[32,10], init=normal(0.02)) placement=cuda:[" + ranks + "]\n"
         "h = matmul(x, w1) placement=cuda:[" + ranks + "]\n"
         "a = relu(h)\n"
         "logits = matmul(a, w2)\n"
         "loss = sparse_softmax_cross_entropy(logits, label)\n"
         "output(loss)\n"
         "train(loss, optimizer=adamw(lr=0.001, weight_decay=0.01))\n";
}

TEST(DeviceCopyCompileTest, HostDataCudaModelLossBackToHost) {
  std::unique_ptr<OpRegistry> registry = testing::BuiltinRegistry();
  for (const std::string ranks : {"0", "0,1"}) {
    SCOPED_TRACE(ranks);
    const int world = ranks == "0" ? 1 : 2;
    absl::StatusOr<GlobalDecisions> decisions =
        RunGlobalPasses(testing::ParseOrDie(TrainingText(ranks), *registry), CompileOptions{});
    ASSERT_TRUE(decisions.ok()) << decisions.status();
    absl::StatusOr<PlanProto> whole = LowerDecisions(*decisions);  // verified inside
    ASSERT_TRUE(whole.ok()) << whole.status();
    ASSERT_EQ(VerifyPlan(*whole), absl::OkStatus());
    for (const RankPlanProto& rank_plan : whole->rank_plans()) {
      int h2d = 0, d2h = 0;
      std::string copies;
      for (const TaskProto& t : rank_plan.tasks()) {
        if (t.type() == TaskProto::TRANSFER) {
          EXPECT_NE(t.transfer().peer_rank(), t.rank()) << t.name();
        }
        if (t.type() == TaskProto::COMPUTE) {
          EXPECT_EQ(t.device().type(), "cuda") << t.name();
        }
        if (t.type() == TaskProto::SINK) {
          EXPECT_EQ(t.device().type(), "cpu") << t.name();
        }
        if (t.type() != TaskProto::COPY) continue;
        copies += " " + t.name();
        EXPECT_EQ(t.stream_kind(), STREAM_COPY);
        if (t.copy().from().type() == "cpu") {
          ++h2d;
          EXPECT_EQ(t.stream_id(), 2) << t.name();
          EXPECT_TRUE(t.name().rfind("x.", 0) == 0 || t.name().rfind("label.", 0) == 0) << t.name();
        } else {
          ++d2h;
          EXPECT_EQ(t.stream_id(), 3) << t.name();
          EXPECT_EQ(t.name().rfind("loss.", 0), 0u) << t.name();
        }
      }
      EXPECT_EQ(h2d, 2) << "rank " << rank_plan.rank() << ": x and label to the device;" << copies;
      EXPECT_EQ(d2h, 1) << "rank " << rank_plan.rank() << ": the loss back to the host";
      EXPECT_EQ(whole->memory(rank_plan.rank()).devices_size(), 2);
    }
    // Each rank's own compile is its part of the whole plan.
    std::vector<PlanProto> parts;
    for (int r = 0; r < world; ++r) {
      CompileOptions options;
      options.only_rank = r;
      absl::StatusOr<PlanProto> part = LowerDecisions(*decisions, options);
      ASSERT_TRUE(part.ok()) << "rank " << r << ": " << part.status();
      EXPECT_EQ(VerifyRankPlan(*part), absl::OkStatus());
      ASSERT_EQ(part->rank_plans_size(), 1);
      EXPECT_TRUE(DeterministicBytes(part->rank_plans(0)) == DeterministicBytes(whole->rank_plans(r))) << "rank " << r << "'s plan differs";
      EXPECT_TRUE(DeterministicBytes(part->memory(0)) == DeterministicBytes(whole->memory(r))) << "rank " << r;
      parts.push_back(*std::move(part));
    }
    absl::StatusOr<PlanProto> merged = MergeRankPlans(std::move(parts));
    ASSERT_TRUE(merged.ok()) << merged.status();
    SealPlan(&*merged);
    EXPECT_EQ(merged->content_hash(), whole->content_hash());
  }
}

// Parameters and their AdamW update on the host, the matmuls on the device (optimizer offload):
// the weights go to the device once per step and are repeated per micro-batch there, the
// gradients are accumulated on the device and copied back once per step.
TEST(DeviceCopyCompileTest, HostOptimizerDeviceCompute) {
  std::unique_ptr<OpRegistry> registry = testing::BuiltinRegistry();
  const std::string text =
      "config(name=\"offload\", seed=5, micro_batches=2)\n"
      "x = input(shape=[8,16]) placement=cpu:[0,1] sbp=[S(0)]\n"
      "label = input(shape=[8], dtype=int64) placement=cpu:[0,1] sbp=[S(0)]\n"
      "w = variable(shape=[16,10], init=normal(0.02)) placement=cpu:[0,1]\n"
      "logits = matmul(x, w) placement=cuda:[0,1]\n"
      "loss = sparse_softmax_cross_entropy(logits, label)\n"
      "output(loss)\n"
      "train(loss, optimizer=adamw(lr=0.001))\n";
  absl::StatusOr<GlobalDecisions> decisions = RunGlobalPasses(testing::ParseOrDie(text, *registry), CompileOptions{});
  ASSERT_TRUE(decisions.ok()) << decisions.status();
  absl::StatusOr<PlanProto> whole = LowerDecisions(*decisions);
  ASSERT_TRUE(whole.ok()) << whole.status();
  for (const RankPlanProto& rank_plan : whole->rank_plans()) {
    int64_t weight_copy = -1, gradient_copy_input = -1;  // registers
    std::map<int64_t, const TaskProto*> producer;
    for (const TaskProto& t : rank_plan.tasks()) {
      for (int64_t id : t.produced_register_ids()) producer[id] = &t;
      if (t.type() == TaskProto::TRANSFER) {
        EXPECT_NE(t.transfer().peer_rank(), t.rank()) << t.name();
      }
      if (t.type() == TaskProto::COMPUTE && t.compute().op_type() == "adam_update") {
        EXPECT_EQ(t.device().type(), "cpu") << t.name();
      }
      if (t.type() != TaskProto::COPY) continue;
      if (t.name().rfind("w.", 0) == 0 && t.copy().to().type() == "cuda") weight_copy = t.outputs(0).register_id();
      if (t.name().rfind("w/grad", 0) == 0 && t.copy().to().type() == "cpu") {
        gradient_copy_input = t.inputs(0).register_id();
      }
    }
    ASSERT_GE(weight_copy, 0) << "rank " << rank_plan.rank() << ": w copied to the device";
    ASSERT_GE(gradient_copy_input, 0) << "rank " << rank_plan.rank() << ": its gradient copied back";
    // The step-rate weight is repeated per micro-batch on the device; the gradient summed there.
    bool repeated = false;
    for (const TaskProto& t : rank_plan.tasks()) {
      repeated |= t.type() == TaskProto::REPEAT && t.device().type() == "cuda" && t.inputs(0).register_id() == weight_copy;
    }
    EXPECT_TRUE(repeated) << "rank " << rank_plan.rank();
    ASSERT_TRUE(producer.count(gradient_copy_input));
    EXPECT_EQ(producer[gradient_copy_input]->type(), TaskProto::ACCUMULATE);
    EXPECT_EQ(producer[gradient_copy_input]->device().type(), "cuda");
  }
  for (int32_t r = 0; r < whole->world_size(); ++r) {
    CompileOptions options;
    options.only_rank = r;
    absl::StatusOr<PlanProto> part = LowerDecisions(*decisions, options);
    ASSERT_TRUE(part.ok()) << "rank " << r << ": " << part.status();
    EXPECT_TRUE(DeterministicBytes(part->rank_plans(0)) == DeterministicBytes(whole->rank_plans(r))) << "rank " << r << "'s plan differs";
  }
}

// The GPT builder on a cuda layout feeds idx and targets on the host: every rank of the first
// stage copies idx to its device, every rank of the last copies targets, the loss comes back.
TEST(DeviceCopyCompileTest, CudaGptFeedsItsDataFromTheHost) {
  std::unique_ptr<OpRegistry> registry = testing::BuiltinRegistry();
  const models::GptConfig config{.vocab = 64, .seq_len = 8, .n_layer = 2, .n_embd = 16, .n_head = 2, .batch = 4};
  models::TrainOptions train;
  train.micro_batches = 2;
  const models::ParallelLayout layout{.dp = 2, .tp = 1, .pp = 2, .device = DeviceType::kCuda};
  absl::StatusOr<Graph> graph = models::BuildGptJob(*registry, config, layout, train);
  ASSERT_TRUE(graph.ok()) << graph.status();
  CompileOptions options;
  options.boxing = BoxingStyle::kCollective;
  absl::StatusOr<GlobalDecisions> decisions = RunGlobalPasses(*std::move(graph), options);
  ASSERT_TRUE(decisions.ok()) << decisions.status();
  absl::StatusOr<PlanProto> whole = LowerDecisions(*decisions, options);
  ASSERT_TRUE(whole.ok()) << whole.status();
  for (const RankPlanProto& rank_plan : whole->rank_plans()) {
    std::string copies;
    for (const TaskProto& t : rank_plan.tasks()) {
      if (t.type() == TaskProto::TRANSFER) {
        EXPECT_NE(t.transfer().peer_rank(), t.rank()) << t.name();
      }
      if (t.type() == TaskProto::COPY) copies += t.name().substr(0, t.name().find('.')) + " ";
    }
    // Ranks 0-1 hold the first stage, 2-3 the last (the loss).
    EXPECT_EQ(copies, rank_plan.rank() < 2 ? "idx " : "targets loss ") << "rank " << rank_plan.rank();
  }
  for (int32_t r = 0; r < whole->world_size(); ++r) {
    options.only_rank = r;
    absl::StatusOr<PlanProto> part = LowerDecisions(*decisions, options);
    ASSERT_TRUE(part.ok()) << "rank " << r << ": " << part.status();
    EXPECT_TRUE(DeterministicBytes(part->rank_plans(0)) == DeterministicBytes(whole->rank_plans(r))) << "rank " << r << "'s plan differs";
  }
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
