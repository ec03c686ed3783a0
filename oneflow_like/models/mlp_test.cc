// The W1 MLP job: structure, torch's init law, the data generator, and one training step of a
// tiny MLP through the graph evaluator against a hand computation in double.
#include "oneflow_like/models/mlp.h"

#include <cmath>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/autograd/graph_eval.h"
#include "oneflow_like/compiler/autograd/training_test_util.h"
#include "oneflow_like/compiler/infer_pass.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/core/random.h"
#include "oneflow_like/models/reference_eval.h"

namespace oneflow_like {
namespace models {
namespace {

TEST(MlpTest, W1JobHasTheBenchmarkShapes) {
  std::unique_ptr<OpRegistry> registry = compiler::testing::BuiltinRegistry();
  absl::StatusOr<compiler::Graph> g = BuildMlpJob(*registry, MlpConfig{}, ParallelLayout{});
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(compiler::InferPass().Run(&*g).ok());
  EXPECT_EQ(MlpParameterCount(MlpConfig{}), 4 * (1024 * 1024 + 1024));
  EXPECT_EQ(MlpParameterNames(MlpConfig{}).size(), 8u);
  absl::StatusOr<compiler::GraphValues> initial = InitialVariableValues(*g);
  ASSERT_TRUE(initial.ok()) << initial.status();
  const Tensor& w = initial->at("fc2.weight");
  ASSERT_EQ(w.shape(), (Shape{1024, 1024}));
  // torch's nn.Linear law: uniform in +-1/sqrt(in), from portable stream 4 (fc2.weight).
  float low = 1, high = -1;
  for (float v : w.ToVector<float>()) low = std::min(low, v), high = std::max(high, v);
  EXPECT_GE(low, -1 / 32.0f);
  EXPECT_LE(high, 1 / 32.0f);
  EXPECT_LT(low, -0.03f);
  EXPECT_GT(high, 0.03f);
  EXPECT_EQ(w.data<float>()[7], PortableUniformValue(0, 4, 7, 1 / std::sqrt(3.0 * 1024)));
}

TEST(MlpTest, BadConfigNamesTheField) {
  std::unique_ptr<OpRegistry> registry = compiler::testing::BuiltinRegistry();
  absl::StatusOr<compiler::Graph> g = BuildMlpJob(*registry, MlpConfig{.width = 8, .depth = 2, .batch = 0}, {});
  ASSERT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("batch"), std::string::npos);
  g = BuildMlpJob(*registry, MlpConfig{.width = 8, .depth = 2, .batch = 2}, ParallelLayout{.pp = 3});
  EXPECT_NE(g.status().message().find("layout.pp"), std::string::npos) << g.status();
}

TEST(MlpTest, SyntheticBatchIsDeterministicUniformAndVariesWithIndexAndSeed) {
  const MlpConfig c{.width = 64, .depth = 1, .batch = 32};
  MlpBatch a = SyntheticMlpBatch(3, 32, c, 7), b = SyntheticMlpBatch(3, 32, c, 7);
  EXPECT_EQ(a.inputs.ToVector<float>(), b.inputs.ToVector<float>());
  EXPECT_NE(a.inputs.ToVector<float>(), a.targets.ToVector<float>());
  EXPECT_NE(a.inputs.ToVector<float>(), SyntheticMlpBatch(4, 32, c, 7).inputs.ToVector<float>());
  EXPECT_NE(a.inputs.ToVector<float>(), SyntheticMlpBatch(3, 32, c, 8).inputs.ToVector<float>());
  // The documented formula, element 5 of "x".
  const uint64_t base = SplitMix64(7 * 4 + 0) + (uint64_t{3} << 32);
  EXPECT_EQ(a.inputs.data<float>()[5], static_cast<float>(2.0 * (SplitMix64(base + 5) >> 40) / 16777216.0 - 1.0));
  double sum = 0, sum_sq = 0;
  for (float v : a.inputs.ToVector<float>()) sum += v, sum_sq += v * v;
  EXPECT_NEAR(sum / 2048, 0.0, 0.05);
  EXPECT_NEAR(sum_sq / 2048, 1.0 / 3, 0.03);  // variance of U(-1, 1)
}

// width 3, depth 2, batch 2: loss and the SGD update of the last bias, by hand in double.
TEST(MlpTest, OneTrainingStepMatchesAHandComputation) {
  std::unique_ptr<OpRegistry> registry = compiler::testing::BuiltinRegistry();
  const MlpConfig c{.width = 3, .depth = 2, .batch = 2};
  absl::StatusOr<compiler::Graph> g = BuildMlpJob(*registry, c, ParallelLayout{});
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(compiler::testing::RunTrainingPasses(&*g, /*with_optimizer=*/true).ok());
  absl::StatusOr<compiler::GraphValues> feeds = InitialVariableValues(*g);
  ASSERT_TRUE(feeds.ok()) << feeds.status();
  MlpBatch data = SyntheticMlpBatch(0, 2, c);
  (*feeds)["x"] = data.inputs;
  (*feeds)["target"] = data.targets;
  absl::StatusOr<compiler::GraphValues> values = compiler::EvaluateGraph(*g, *feeds);
  ASSERT_TRUE(values.ok()) << values.status();
  auto at = [&](const std::string& name, int i) { return static_cast<double>(feeds->at(name).data<float>()[i]); };
  double loss = 0, dbias[3] = {0, 0, 0};
  for (int r = 0; r < 2; ++r) {
    double h[3];
    for (int o = 0; o < 3; ++o) {
      h[o] = at("fc0.bias", o);
      for (int k = 0; k < 3; ++k) h[o] += at("x", r * 3 + k) * at("fc0.weight", o * 3 + k);
      h[o] = std::max(h[o], 0.0);
    }
    for (int o = 0; o < 3; ++o) {
      double y = at("fc1.bias", o);
      for (int k = 0; k < 3; ++k) y += h[k] * at("fc1.weight", o * 3 + k);
      const double d = y - at("target", r * 3 + o);
      loss += d * d / 6;
      dbias[o] += 2 * d / 6;
    }
  }
  EXPECT_NEAR(values->at("loss").data<float>()[0], loss, 1e-6);
  compiler::GraphValues next = compiler::ApplyVariableUpdates(*g, *values);
  for (int o = 0; o < 3; ++o) {
    EXPECT_NEAR(next.at("fc1.bias").data<float>()[o], at("fc1.bias", o) - 0.01 * dbias[o], 1e-6) << o;
  }
}

}  // namespace
}  // namespace models
}  // namespace oneflow_like
