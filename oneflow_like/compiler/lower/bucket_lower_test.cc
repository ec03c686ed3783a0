// Gradient buckets (LowerOptions::bucket_bytes, lower.h): on a 3-layer data-parallel model
// whose optimizer reads three partial-sum gradients, the buckets hold the gradients in the order
// backward produces them (dw3, dw2, dw1, not the optimizer's w1, w2, w3), close at the byte
// threshold, put every part in one register read slot by slot by the optimizers, carry the
// staging slot for ZeRO's reduce-scatter, take accumulated gradients under micro-batches, and
// pass the verifier.
#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/lower/lower_test_util.h"
#include "oneflow_like/compiler/plan/plan_verifier.h"

namespace oneflow_like {
namespace compiler {
namespace testing {
namespace {

// dw3 [5,3] (15 floats, 60 B), dw2 [6,5] (120 B), dw1 [4,6] (96 B) are partial sums over
// cpu:[0,1]; the optimizers are written w1, w2, w3 (program order) but the gradients come
// dw3 first. `zero`: the variables are S(0), so the gradients go P -> S(0).
std::string ThreeLayerText(bool zero, int micro_batches = 1) {
  const std::string var_sbp = zero ? " sbp=[S(0)]" : "";
  std::string text = "config(name=\"dp3\", micro_batches=" + std::to_string(micro_batches) + ", seed=5)\n";
  text +=
      "x = input(shape=[8,4]) placement=cpu:[0,1] sbp=[S(0)]\n"
      "dy = input(shape=[8,3]) placement=cpu:[0,1] sbp=[S(0)]\n";
  for (const char* v : {"w1 = variable(shape=[4,6]", "w2 = variable(shape=[6,5]", "w3 = variable(shape=[5,3]",
                        "b1 = variable(shape=[4,6]", "b2 = variable(shape=[6,5]", "b3 = variable(shape=[5,3]"}) {
    text += std::string(v) + ", init=zeros) placement=cpu:[0,1]" + var_sbp + "\n";
  }
  text +=
      "h1 = matmul(x, w1)\n"
      "a1 = relu(h1)\n"
      "h2 = matmul(a1, w2)\n"
      "a2 = relu(h2)\n"
      "y = matmul(a2, w3)\n"
      "dw3 = matmul(a2, dy, transpose_a=true)\n"
      "g2 = matmul(dy, w3, transpose_b=true)\n"
      "dw2 = matmul(a1, g2, transpose_a=true)\n"
      "g1 = matmul(g2, w2, transpose_b=true)\n"
      "dw1 = matmul(x, g1, transpose_a=true)\n"
      "w1_new, b1_new = sgd_update(w1, dw1, b1, lr=0.1, momentum=0.9)\n"
      "w2_new, b2_new = sgd_update(w2, dw2, b2, lr=0.1, momentum=0.9)\n"
      "w3_new, b3_new = sgd_update(w3, dw3, b3, lr=0.1, momentum=0.9)\n"
      "output(y)\n";
  return text;
}

void AddUpdates(Graph* graph) {
  for (const char* v : {"w1", "w2", "w3", "b1", "b2", "b3"}) AddUpdate(graph, v, std::string(v) + "_new");
}

PlanProto LowerBuckets(int64_t bucket_bytes, bool zero = false, int micro_batches = 1) {
  LowerOptions options;
  options.boxing = BoxingStyle::kCollective;
  options.bucket_bytes = bucket_bytes;
  const PlanProto plan = LowerTextOrDie(ThreeLayerText(zero, micro_batches), options, AddUpdates);
  const absl::Status verified = VerifyPlan(plan);
  EXPECT_TRUE(verified.ok()) << verified;
  return plan;
}

// The collective tasks of `rank` in global_order.
std::vector<const TaskProto*> Calls(const PlanProto& plan, int rank) {
  std::vector<const TaskProto*> tasks = TasksOfType(plan, TaskProto::COLLECTIVE, rank);
  std::stable_sort(tasks.begin(), tasks.end(), [](const TaskProto* a, const TaskProto* b) {
    return a->collective().global_order() < b->collective().global_order();
  });
  return tasks;
}

// "5x3 6x5" from the parts' logical dims.
std::string PartShapes(const TaskProto& task) {
  std::string out;
  for (const CollectiveParams& part : task.collective().parts()) {
    out += (out.empty() ? "" : " ") + std::to_string(part.logical_dims(0)) + "x" + std::to_string(part.logical_dims(1));
  }
  return out;
}

// The register id and slot the sgd_update of `weight` reads its gradient from (input 1).
std::pair<int64_t, int32_t> GradientRead(const PlanProto& plan, const std::string& update, int rank) {
  const TaskProto& task = FindTask(plan, update + "@r" + std::to_string(rank));
  return {task.inputs(1).register_id(), task.inputs(1).slot()};
}

TEST(BucketLowerTest, WithoutBucketsEachGradientIsItsOwnCall) {
  const PlanProto plan = LowerBuckets(0);
  const std::vector<const TaskProto*> calls = Calls(plan, 0);
  ASSERT_EQ(calls.size(), 3u);
  for (const TaskProto* t : calls) {
    EXPECT_EQ(t->collective().parts_size(), 0) << t->name();
    EXPECT_EQ(t->collective().kind(), CollectiveParams::ALL_REDUCE);
  }
}

TEST(BucketLowerTest, TinyBucketsFollowTheOrderBackwardProducesTheGradients) {
  const PlanProto plan = LowerBuckets(1);  // every gradient fills a bucket by itself
  for (int rank : {0, 1}) {
    const std::vector<const TaskProto*> calls = Calls(plan, rank);
    ASSERT_EQ(calls.size(), 3u);
    EXPECT_EQ(PartShapes(*calls[0]), "5x3");
    EXPECT_EQ(PartShapes(*calls[1]), "6x5");
    EXPECT_EQ(PartShapes(*calls[2]), "4x6");
    EXPECT_EQ(calls[0]->inputs(0).register_id(), FindRegisterByName(plan, "dw3@r" + std::to_string(rank)).id());
  }
}

TEST(BucketLowerTest, BucketsCloseAtTheThresholdAndOptimizersReadTheirSlots) {
  const PlanProto plan = LowerBuckets(150);  // dw3 60 B + dw2 120 B >= 150 | dw1 96 B
  for (int rank : {0, 1}) {
    const std::vector<const TaskProto*> calls = Calls(plan, rank);
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_EQ(PartShapes(*calls[0]), "5x3 6x5");
    EXPECT_EQ(PartShapes(*calls[1]), "4x6");
    const TaskProto& first = *calls[0];
    ASSERT_EQ(first.inputs_size(), 2);
    ASSERT_EQ(first.outputs_size(), 2);
    EXPECT_EQ(first.outputs(0).register_id(), first.outputs(1).register_id());  // one bucket register
    EXPECT_EQ(first.outputs(1).slot(), 1);
    const RegisterProto* bucket = FindLocalRegister(plan, rank, first.outputs(0).register_id());
    ASSERT_NE(bucket, nullptr);
    ASSERT_EQ(bucket->slots_size(), 2);
    EXPECT_EQ(bucket->memory().slot_offsets(0), 0);
    EXPECT_EQ(bucket->memory().slot_offsets(1), 64);  // 60 B rounded up to the alignment
    EXPECT_EQ(bucket->memory().buffer_bytes(), 64 + 128);
    const auto bucket_slot = [&](int slot) { return std::make_pair(first.outputs(0).register_id(), slot); };
    EXPECT_EQ(GradientRead(plan, "w3_new", rank), bucket_slot(0));
    EXPECT_EQ(GradientRead(plan, "w2_new", rank), bucket_slot(1));
    EXPECT_EQ(GradientRead(plan, "w1_new", rank), std::make_pair(calls[1]->outputs(0).register_id(), 0));
  }
}

TEST(BucketLowerTest, ZeroReduceScattersThroughAStagingSlot) {
  const PlanProto plan = LowerBuckets(int64_t{1} << 20, /*zero=*/true);
  std::vector<const TaskProto*> calls = Calls(plan, 1);  // the forward all-gathers the S(0) weights
  calls.erase(std::remove_if(calls.begin(), calls.end(),
                             [](const TaskProto* t) { return t->collective().kind() != CollectiveParams::REDUCE_SCATTER; }),
              calls.end());
  ASSERT_EQ(calls.size(), 1u);
  const TaskProto& call = *calls[0];
  EXPECT_EQ(call.collective().kind(), CollectiveParams::REDUCE_SCATTER);
  EXPECT_EQ(PartShapes(call), "5x3 6x5 4x6");
  ASSERT_EQ(call.outputs_size(), 4);  // three shards and the staging slot
  const RegisterProto* bucket = FindLocalRegister(plan, 1, call.outputs(0).register_id());
  ASSERT_NE(bucket, nullptr);
  ASSERT_EQ(bucket->slots_size(), 4);
  EXPECT_EQ(bucket->slots(0).dims(0), 2);  // rank 1's rows of dw3: 5 rows split 3 / 2
  EXPECT_EQ(bucket->slots(1).dims(0), 3);
  EXPECT_EQ(bucket->slots(2).dims(0), 2);
  ASSERT_EQ(bucket->slots(3).dims_size(), 1);
  EXPECT_EQ(bucket->slots(3).dims(0), 15 + 30 + 24);
  EXPECT_EQ(GradientRead(plan, "w1_new", 1), std::make_pair(call.outputs(0).register_id(), 2));
}

TEST(BucketLowerTest, MicroBatchesBucketTheAccumulatedGradients) {
  const PlanProto plan = LowerBuckets(int64_t{1} << 20, /*zero=*/false, /*micro_batches=*/2);
  const std::vector<const TaskProto*> calls = Calls(plan, 0);
  ASSERT_EQ(calls.size(), 1u);
  ASSERT_EQ(calls[0]->inputs_size(), 3);
  EXPECT_EQ(calls[0]->inputs(0).register_id(), FindRegisterByName(plan, "dw3.accumulated@r0").id());
  EXPECT_EQ(calls[0]->inputs(2).register_id(), FindRegisterByName(plan, "dw1.accumulated@r0").id());
}

TEST(BucketLowerTest, PointToPointBoxingHasNoBuckets) {
  LowerOptions options;  // kPointToPoint
  options.bucket_bytes = 1 << 20;
  const PlanProto plan = LowerTextOrDie(ThreeLayerText(false), options, AddUpdates);
  EXPECT_EQ(CountTasks(plan, TaskProto::COLLECTIVE), 0);
  EXPECT_TRUE(VerifyPlan(plan).ok());
}

}  // namespace
}  // namespace testing
}  // namespace compiler
}  // namespace oneflow_like
