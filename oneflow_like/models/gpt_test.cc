#include "oneflow_like/models/gpt.h"

#include "gtest/gtest.h"
#include "oneflow_like/compiler/infer_pass.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/compiler/verifier.h"

namespace oneflow_like {
namespace models {
namespace {

using compiler::Graph;
using compiler::TensorNode;

class GptTest : public ::testing::Test {
 protected:
  Graph BuildAndInfer(const GptConfig& c, const ParallelLayout& l) {
    absl::StatusOr<Graph> g = BuildGptJob(*registry_, c, l);
    EXPECT_TRUE(g.ok()) << g.status();
    absl::StatusOr<bool> inferred = compiler::InferPass().Run(&*g);
    EXPECT_TRUE(inferred.ok()) << inferred.status();
    EXPECT_TRUE(compiler::VerifyGraph(*g).ok()) << compiler::VerifyGraph(*g);
    return *std::move(g);
  }
  std::unique_ptr<OpRegistry> registry_ = compiler::testing::BuiltinRegistry();
};

int64_t TrainableParameters(const Graph& g) {
  int64_t n = 0;
  for (const TensorNode& t : g.tensors()) {
    if (t.is_variable && !t.frozen) n += t.desc->shape.elem_count();
  }
  return n;
}

TEST_F(GptTest, DefaultConfigHasTorchGptParameterCount) {
  // ../shared/bench/torch_gpt.py: "Parameter count: 4,240,896".
  EXPECT_EQ(GptParameterCount(GptConfig{}), 4240896);
  Graph g = BuildAndInfer(GptConfig{}, ParallelLayout{});
  EXPECT_EQ(TrainableParameters(g), 4240896);
  const TensorNode& loss = g.tensor(g.FindTensor("loss"));
  EXPECT_EQ(loss.desc->shape.num_axes(), 0);
  EXPECT_TRUE(loss.is_output);
  EXPECT_EQ(g.config().loss(), "loss");
}

TEST_F(GptTest, LayoutPlacesStagesAndPinsMegatronSplits) {
  GptConfig c{.vocab = 64, .seq_len = 8, .n_layer = 4, .n_embd = 16, .n_head = 2, .batch = 4};
  Graph g = BuildAndInfer(c, ParallelLayout{.dp = 2, .tp = 2, .pp = 2});
  const TensorNode& qkv0 = g.tensor(g.FindTensor("h0.qkv.weight"));
  EXPECT_EQ(qkv0.placement->ToString(), "cpu:[[0,1],[2,3]]");
  EXPECT_EQ(qkv0.pinned_nd_sbp->ToString(), NdSbp({Sbp::Broadcast(), Sbp::Split(0)}).ToString());
  const TensorNode& fc2_3 = g.tensor(g.FindTensor("h3.fc2.weight"));
  EXPECT_EQ(fc2_3.placement->ToString(), "cpu:[[4,5],[6,7]]");
  EXPECT_EQ(fc2_3.pinned_nd_sbp->ToString(), NdSbp({Sbp::Broadcast(), Sbp::Split(1)}).ToString());
  EXPECT_EQ(g.op(g.FindOp("h1.fc")).stage, 0);
  EXPECT_EQ(g.op(g.FindOp("h2.fc")).stage, 1);
  EXPECT_EQ(g.op(g.FindOp("loss")).stage, 1);
  EXPECT_EQ(g.tensor(g.FindTensor("idx")).pinned_nd_sbp->ToString(),
            NdSbp({Sbp::Split(0), Sbp::Broadcast()}).ToString());
  // 1-D meshes when one degree is 1.
  Graph dp = BuildAndInfer(c, ParallelLayout{.dp = 4});
  EXPECT_EQ(dp.tensor(dp.FindTensor("idx")).placement->ToString(), "cpu:[0,1,2,3]");
  EXPECT_FALSE(dp.tensor(dp.FindTensor("h0.qkv.weight")).pinned_nd_sbp.has_value());
}

TEST_F(GptTest, BadConfigsNameTheField) {
  GptConfig c;
  c.n_head = 3;
  absl::StatusOr<Graph> g = BuildGptJob(*registry_, c, ParallelLayout{});
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("n_head"), std::string::npos) << g.status();
  g = BuildGptJob(*registry_, GptConfig{}, ParallelLayout{.pp = 5});
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("layout.pp"), std::string::npos) << g.status();
  g = BuildGptJob(*registry_, GptConfig{}, ParallelLayout{.dp = 0});
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("layout.dp"), std::string::npos) << g.status();
}

}  // namespace
}  // namespace models
}  // namespace oneflow_like
