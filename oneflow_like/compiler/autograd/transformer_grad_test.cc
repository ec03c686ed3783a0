// AutogradPass on transformer blocks: a tiny float64 block (layer_norm, fused qkv matmul,
// split, causal softmax, gelu, residual adds, cross-entropy) against central differences, with
// recompute on the softmax and the gelu; and the structure of the shared float32 GPT block on a
// 2x2 mesh with two pipeline stages.
#include "gtest/gtest.h"
#include "oneflow_like/compiler/autograd/autograd_pass.h"
#include "oneflow_like/compiler/autograd/training_test_util.h"
#include "oneflow_like/compiler/test_util.h"

namespace oneflow_like {
namespace compiler {
namespace {

using testing::BuiltinRegistry;
using testing::CompileTraining;
using testing::ExpectGradientsMatchNumerical;
using testing::RandomFeeds;
using testing::TrainingGraphs;

constexpr char kBlock64[] = R"(
config(name="block64", seed=3)
x = input(shape=[2,4,8], dtype=float64) placement=cpu:[0,1] sbp=[S(0)]
labels = input(shape=[2,4], dtype=int64) placement=cpu:[0,1] sbp=[S(0)]
ln1_g = variable(shape=[8], dtype=float64, init=ones)
ln1_b = variable(shape=[8], dtype=float64)
w_qkv = variable(shape=[8,24], dtype=float64)
w_o = variable(shape=[8,8], dtype=float64)
ln2_g = variable(shape=[8], dtype=float64, init=ones)
ln2_b = variable(shape=[8], dtype=float64)
w_fc = variable(shape=[8,16], dtype=float64)
w_proj = variable(shape=[16,8], dtype=float64)
w_head = variable(shape=[8,5], dtype=float64)
h1, h1_mean, h1_inv_std = layer_norm(x, ln1_g, ln1_b)
qkv = matmul(h1, w_qkv)
q, k, v = split(qkv, axis=2, sizes=[8,8,8])
scores = matmul(q, k, transpose_b=true, alpha=0.35355339059327373)
probs = softmax(scores, causal=true) recompute=true
attn_ctx = matmul(probs, v)
attn = matmul(attn_ctx, w_o)
r1 = add(x, attn)
h2, h2_mean, h2_inv_std = layer_norm(r1, ln2_g, ln2_b, epsilon=1e-6)
fc = matmul(h2, w_fc)
act = gelu(fc) recompute=true
proj = matmul(act, w_proj)
r2 = add(r1, proj)
logits = matmul(r2, w_head)
loss = sparse_softmax_cross_entropy(logits, labels)
output(loss)
train(loss, optimizer=adamw(lr=0.001))
)";

TEST(TransformerGradTest, BlockGradientsMatchCentralDifferences) {
  auto registry = BuiltinRegistry();
  const TrainingGraphs g = CompileTraining(kBlock64, *registry, /*with_optimizer=*/false);
  testing::NumericalGradOptions options;
  options.max_elements_per_variable = 24;
  options.rtol = 1e-5;  // layer_norm and softmax chains lose a few more digits than the MLP
  options.atol = 1e-7;
  const int compared = ExpectGradientsMatchNumerical(g, RandomFeeds(g.forward, 11, 5), options);
  EXPECT_GE(compared, 9 * 8);  // every variable, at least 8 elements each
  const Graph& t = g.training;
  // Recompute: the backward reads the clones of probs and act, never the originals.
  for (const char* name : {"probs", "act"}) {
    ASSERT_TRUE(t.FindTensor(std::string(name) + "/recompute").valid()) << name;
    for (const TensorUse& use : t.tensor(t.FindTensor(name)).consumers) {
      EXPECT_LT(use.op.value(), g.forward.num_ops()) << name << " read by " << t.op(use.op).name;
    }
  }
  // x is an input; r1 receives gradients from the residual and from layer_norm 2.
  EXPECT_FALSE(GradientOf(t, t.FindTensor("x")).valid());
  EXPECT_EQ(t.op(t.tensor(t.FindTensor("r1/grad")).producer).type, "add");
}

TEST(TransformerGradTest, GptBlockBackwardKeepsStagesAndPlacements) {
  auto registry = BuiltinRegistry();
  const TrainingGraphs g = CompileTraining(testing::kGptBlockText, *registry, /*with_optimizer=*/false);
  const Graph& t = g.training;
  // micro_batches=2: every piece contributes half.
  EXPECT_DOUBLE_EQ(t.op(t.FindOp("loss/grad")).attrs.Float("value"), 0.5);
  EXPECT_FALSE(GradientOf(t, t.FindTensor("w_head")).valid());  // frozen
  for (const char* name : {"ln1_g", "ln1_b", "w_qkv", "w_o", "ln2_g", "ln2_b", "w_fc", "w_proj"}) {
    EXPECT_TRUE(GradientOf(t, t.FindTensor(name)).valid()) << name;
  }
  // Backward ops take their forward op's stage and placement.
  for (OpId id : t.op_order()) {
    if (id.value() < g.forward.num_ops()) continue;
    const OpNode& op = t.op(id);
    const size_t slash = op.name.find('/');
    ASSERT_NE(slash, std::string::npos) << op.name;
    const OpId forward = t.FindOp(op.name.substr(0, slash));
    if (!forward.valid()) continue;  // sums and seeds are named after tensors
    EXPECT_EQ(op.stage, t.op(forward).stage) << op.name;
    EXPECT_EQ(op.placement, t.op(forward).placement) << op.name;
  }
  EXPECT_EQ(t.op(t.FindOp("mlp.proj/grad0")).stage, 1);
  EXPECT_TRUE(t.FindOp("probs/recompute").valid());
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
