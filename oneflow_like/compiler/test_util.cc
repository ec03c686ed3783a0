#include "oneflow_like/compiler/test_util.h"

#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oneflow_like/compiler/infer_pass.h"
#include "oneflow_like/compiler/text_format.h"
#include "oneflow_like/core/ops/builtin_ops.h"

namespace oneflow_like {
namespace compiler {
namespace testing {

std::unique_ptr<OpRegistry> BuiltinRegistry() {
  auto registry = std::make_unique<OpRegistry>();
  absl::Status s = RegisterBuiltinOps(registry.get());
  CHECK(s.ok()) << s;
  return registry;
}

const char kMlpText[] = R"(# A 2-layer MLP, data parallel over 4 ranks.
config(name="mlp", seed=1)
x = input(shape=[64,128]) placement=cpu:[0,1,2,3] sbp=[S(0)]
label = input(shape=[64], dtype=int64) placement=cpu:[0,1,2,3] sbp=[S(0)]
w1 = variable(shape=[128,256], init=normal(0.02))
b1 = variable(shape=[256], init=zeros)
w2 = variable(shape=[256,10], init=uniform(-0.1, 0.1))
h = matmul(x, w1)
hb = bias_add(h, b1)
a = relu(hb)
logits = matmul(a, w2)
loss = sparse_softmax_cross_entropy(logits, label)
output(loss, logits)
train(loss, optimizer=adamw(lr=0.001, weight_decay=0.01))
)";

const char kGptBlockText[] = R"(# A tiny GPT block on a 2x2 mesh: data parallel over rows, tensor parallel over columns.
config(name="gpt_block", micro_batches=2, seed=7)
x = input(shape=[8,16,32]) placement=cpu:[[0,1],[2,3]] sbp=[S(0), B]
labels = input(shape=[8,16], dtype=int64) placement=cpu:[[0,1],[2,3]] sbp=[S(0), B]
ln1_g = variable(shape=[32], init=ones)
ln1_b = variable(shape=[32], init=zeros)
w_qkv = variable(shape=[32,96], init=normal(0.02)) sbp=[B, S(1)]
w_o = variable(shape=[32,32], init=normal(0.02)) sbp=[B, S(0)]
ln2_g = variable(shape=[32], init=ones)
ln2_b = variable(shape=[32], init=zeros)
w_fc = variable(shape=[32,128], init=normal(0.02)) sbp=[B, S(1)]
w_proj = variable(shape=[128,32], init=normal(0.02, 0.0, seed=11)) sbp=[B, S(0)]
w_head = variable(shape=[32,50], init=uniform(-0.1, 0.1), frozen=true)
h1, h1_mean, h1_inv_std = layer_norm(x, ln1_g, ln1_b)
qkv = matmul(h1, w_qkv)
q, k, v = split(qkv, axis=2, sizes=[32,32,32])
scores = matmul(q, k, transpose_b=true, alpha=0.17677669529663687)
probs = softmax(scores, causal=true) recompute=true
attn_ctx = matmul(probs, v)
attn = matmul(attn_ctx, w_o) out_sbp=[[P, P]]
r1 = add(x, attn)
h2, h2_mean, h2_inv_std = layer_norm(r1, ln2_g, ln2_b, epsilon=1e-6) stage=1
fc = matmul(h2, w_fc) stage=1 in_sbp=[[S(0), B], [B, S(1)]]
act = gelu(fc) stage=1
proj = matmul(act, w_proj) stage=1 name=mlp.proj
r2 = add(r1, proj) stage=1
logits = matmul(r2, w_head) stage=1
loss = sparse_softmax_cross_entropy(logits, labels) stage=1
output(loss)
train(loss, optimizer=adamw(lr=0.0003, weight_decay=0.1, beta2=0.95))
)";

Graph ParseOrDie(const std::string& text, const OpRegistry& registry) {
  absl::StatusOr<Graph> g = ParseGraph(text, registry);
  CHECK(g.ok()) << g.status();
  return *std::move(g);
}

Graph ParseAndInfer(const std::string& text, const OpRegistry& registry) {
  Graph g = ParseOrDie(text, registry);
  absl::StatusOr<bool> changed = InferPass().Run(&g);
  CHECK(changed.ok()) << changed.status();
  return g;
}

void ExpectError(const absl::Status& status, absl::StatusCode code, const std::vector<std::string>& parts) {
  ASSERT_FALSE(status.ok()) << "expected an error containing " << ::testing::PrintToString(parts);
  EXPECT_EQ(status.code(), code) << status;
  for (const std::string& p : parts) EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr(p));
}

}  // namespace testing
}  // namespace compiler
}  // namespace oneflow_like
