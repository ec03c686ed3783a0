#include "oneflow_like/models/gpt.h"

#include <string>
#include <vector>

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
  // tools/bench/peers/torch_gpt.py: "gpt-tiny has 4,240,896 parameters".
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
  // Pure data parallel (tp = 1): parameters are replicated, as DDP.
  ASSERT_TRUE(dp.tensor(dp.FindTensor("h0.qkv.weight")).pinned_nd_sbp.has_value());
  EXPECT_EQ(dp.tensor(dp.FindTensor("h0.qkv.weight")).pinned_nd_sbp->ToString(), NdSbp({Sbp::Broadcast()}).ToString());
  Graph one = BuildAndInfer(c, ParallelLayout{});
  EXPECT_FALSE(one.tensor(one.FindTensor("h0.qkv.weight")).pinned_nd_sbp.has_value());
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

// torch_gpt.py's named_parameters() for GptDims(vocab=64, seq_len=16, n_layer=2, n_embd=32,
// n_head=2), with shapes, produced by
//   cd tools/bench/peers && /usr/bin/python3 -c "from torch_gpt import Gpt, GptDims
//   m=Gpt(GptDims(vocab=64, seq_len=16, n_layer=2, n_embd=32, n_head=2))
//   print(', '.join('{\"%s\", {%s}}'%(n, ', '.join(map(str,p.shape))) for n,p in m.named_parameters()))"
struct TorchParameter {
  const char* name;
  std::vector<int64_t> shape;
};
const std::vector<TorchParameter> kTorchParameters = {
    {"wte.weight", {64, 32}}, {"wpe.weight", {16, 32}}, {"blocks.0.ln1.weight", {32}}, {"blocks.0.ln1.bias", {32}},
    {"blocks.0.qkv.weight", {96, 32}}, {"blocks.0.qkv.bias", {96}}, {"blocks.0.proj.weight", {32, 32}},
    {"blocks.0.proj.bias", {32}}, {"blocks.0.ln2.weight", {32}}, {"blocks.0.ln2.bias", {32}},
    {"blocks.0.fc.weight", {128, 32}}, {"blocks.0.fc.bias", {128}}, {"blocks.0.fc2.weight", {32, 128}},
    {"blocks.0.fc2.bias", {32}}, {"blocks.1.ln1.weight", {32}}, {"blocks.1.ln1.bias", {32}},
    {"blocks.1.qkv.weight", {96, 32}}, {"blocks.1.qkv.bias", {96}}, {"blocks.1.proj.weight", {32, 32}},
    {"blocks.1.proj.bias", {32}}, {"blocks.1.ln2.weight", {32}}, {"blocks.1.ln2.bias", {32}},
    {"blocks.1.fc.weight", {128, 32}}, {"blocks.1.fc.bias", {128}}, {"blocks.1.fc2.weight", {32, 128}},
    {"blocks.1.fc2.bias", {32}}, {"ln_f.weight", {32}}, {"ln_f.bias", {32}}, {"lm_head.weight", {64, 32}}};

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

TEST_F(GptTest, ParametersFollowTorchNamedParametersWithPortableInit) {
  const GptConfig c{.vocab = 64, .seq_len = 16, .n_layer = 2, .n_embd = 32, .n_head = 2, .batch = 2};
  const std::vector<GptParameterName> names = GptParameterNames(c);
  ASSERT_EQ(names.size(), kTorchParameters.size());
  TrainOptions train;
  train.seed = 3;
  absl::StatusOr<Graph> built = BuildGptJob(*registry_, c, ParallelLayout{}, train);
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_TRUE(compiler::InferPass().Run(&*built).ok());
  const Graph& g = *built;
  int variables = 0;
  for (const TensorNode& t : g.tensors()) variables += t.is_variable ? 1 : 0;
  EXPECT_EQ(variables, static_cast<int>(names.size())) << "every variable is a torch parameter";
  for (size_t pi = 0; pi < names.size(); ++pi) {
    const std::string torch_name = kTorchParameters[pi].name;
    EXPECT_EQ(names[pi].torch_name, torch_name) << pi;
    const compiler::TensorId id = g.FindTensor(names[pi].job_name);
    ASSERT_TRUE(id.valid()) << names[pi].job_name;
    const TensorNode& t = g.tensor(id);
    EXPECT_TRUE(t.is_variable && !t.frozen) << t.name;
    EXPECT_EQ(t.desc->shape, Shape(kTorchParameters[pi].shape)) << t.name;
    // torch_gpt.py init_weights: "ln" in name -> 1 / 0; biases 0; else portable(pi).
    const InitializerProto& init = t.initializer;
    if (torch_name.find("ln") != std::string::npos) {
      EXPECT_EQ(init.kind(), EndsWith(torch_name, "weight") ? InitializerProto::ONES : InitializerProto::ZEROS)
          << t.name;
    } else if (EndsWith(torch_name, "bias")) {
      EXPECT_EQ(init.kind(), InitializerProto::ZEROS) << t.name;
    } else {
      EXPECT_EQ(init.kind(), InitializerProto::PORTABLE_UNIFORM) << t.name;
      EXPECT_EQ(init.stream(), pi) << t.name;
      EXPECT_EQ(init.stddev(), 0.02) << t.name;
      EXPECT_EQ(init.portable_seed(), 3u) << t.name;
    }
  }
  EXPECT_EQ(g.config().seed(), 3u);
  EXPECT_EQ(g.op(g.FindOp("h1.gelu")).attrs.String("approximate"), "none");
}

TEST_F(GptTest, NormalInitAndTanhGeluOnRequest) {
  GptConfig c{.vocab = 64, .seq_len = 16, .n_layer = 1, .n_embd = 32, .n_head = 2, .batch = 2};
  c.init = GptInit::kNormal;
  c.gelu_approximate = "tanh";
  Graph g = BuildAndInfer(c, ParallelLayout{});
  EXPECT_EQ(g.tensor(g.FindTensor("h0.fc.weight")).initializer.kind(), InitializerProto::NORMAL);
  EXPECT_EQ(g.op(g.FindOp("h0.gelu")).attrs.String("approximate"), "tanh");
  c.gelu_approximate = "erf";
  absl::StatusOr<Graph> bad = BuildGptJob(*registry_, c, ParallelLayout{});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("gelu_approximate"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace models
}  // namespace oneflow_like
