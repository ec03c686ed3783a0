// OptimizerPass: two SGD-momentum steps and two AdamW / Adam steps of a softmax regression
// against hand-written references (gradient and update computed in the test), the step
// counter, frozen variables, ZeRO-1 pins, and the verifier after every pass.
#include "oneflow_like/compiler/autograd/optimizer_pass.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/autograd/autograd_pass.h"
#include "oneflow_like/compiler/autograd/graph_eval.h"
#include "oneflow_like/compiler/autograd/training_test_util.h"
#include "oneflow_like/compiler/test_util.h"

namespace oneflow_like {
namespace compiler {
namespace {

using testing::BuiltinRegistry;
using testing::CompileTraining;
using testing::ParseOrDie;
using testing::RandomFeeds;
using testing::RunTrainingPasses;

// loss = mean_i CE(x_i w, label_i) with x[3,4], w[4,2].
std::string Regression(const std::string& optimizer) {
  return R"(
x = input(shape=[3,4], dtype=float64) placement=cpu:[0]
label = input(shape=[3], dtype=int64)
w = variable(shape=[4,2], dtype=float64)
logits = matmul(x, w)
loss = sparse_softmax_cross_entropy(logits, label)
train(loss, optimizer=)" + optimizer + ")\n";
}

std::vector<double> Values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.elem_count(); ++i) v.push_back(t.GetAsDouble(i));
  return v;
}

// d loss / d w by hand: (softmax(x w) - onehot(label)) / 3, then x^T times it.
std::vector<double> HandGradient(const GraphValues& feeds, const std::vector<double>& w) {
  const std::vector<double> x = Values(feeds.at("x")), label = Values(feeds.at("label"));
  std::vector<double> grad(8, 0.0);
  for (int i = 0; i < 3; ++i) {
    double z[2];
    for (int c = 0; c < 2; ++c) z[c] = x[i * 4 + 0] * w[c] + x[i * 4 + 1] * w[2 + c] + x[i * 4 + 2] * w[4 + c] + x[i * 4 + 3] * w[6 + c];
    const double m = std::max(z[0], z[1]);
    const double e0 = std::exp(z[0] - m), e1 = std::exp(z[1] - m);
    const double p[2] = {e0 / (e0 + e1), e1 / (e0 + e1)};
    for (int c = 0; c < 2; ++c) {
      const double d = (p[c] - (static_cast<int>(label[i]) == c ? 1.0 : 0.0)) / 3.0;
      for (int k = 0; k < 4; ++k) grad[k * 2 + c] += x[i * 4 + k] * d;
    }
  }
  return grad;
}

void ExpectNear(const Tensor& actual, const std::vector<double>& expected, const std::string& what) {
  ASSERT_EQ(actual.elem_count(), static_cast<int64_t>(expected.size())) << what;
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(actual.GetAsDouble(i), expected[i], 1e-12) << what << "[" << i << "]";
}

// Runs `steps` steps, feeding each step's updates back; calls check(step, values, w_before).
template <typename Check>
void Train(const Graph& g, int steps, Check check) {
  GraphValues feeds = RandomFeeds(g, 1, 2);
  for (const TensorNode& t : g.tensors()) {
    if (t.is_variable && t.frozen) feeds.erase(t.name);  // optimizer state: its zero initializer
  }
  for (int step = 1; step <= steps; ++step) {
    absl::StatusOr<GraphValues> values = EvaluateGraph(g, feeds);
    ASSERT_TRUE(values.ok()) << values.status();
    check(step, *values, Values(feeds.at("w")), feeds);
    for (auto& [name, value] : ApplyVariableUpdates(g, *values)) feeds[name] = value;
  }
}

TEST(OptimizerPassTest, SgdMomentumMatchesHandComputedSteps) {
  auto registry = BuiltinRegistry();
  const Graph g = CompileTraining(Regression("sgd(lr=0.1, momentum=0.9, weight_decay=0.01)"), *registry, true).training;
  const TensorId buf = g.FindTensor("w/momentum");
  ASSERT_TRUE(buf.valid());
  EXPECT_TRUE(g.tensor(buf).is_variable && g.tensor(buf).frozen);
  EXPECT_EQ(g.tensor(buf).initializer.kind(), InitializerProto::ZEROS);
  EXPECT_EQ(g.tensor(buf).placement, g.tensor(g.FindTensor("w")).placement);
  ASSERT_EQ(g.variable_updates().size(), 2u);  // w and its momentum buffer
  std::vector<double> momentum(8, 0.0);
  Train(g, 2, [&](int step, const GraphValues& v, const std::vector<double>& w, const GraphValues& feeds) {
    SCOPED_TRACE(step);
    const std::vector<double> grad = HandGradient(feeds, w);
    ExpectNear(v.at("w/grad"), grad, "w/grad");
    std::vector<double> w_new(8);
    for (int i = 0; i < 8; ++i) {  // torch.optim.SGD: buf = m * buf + (g + wd * w); w -= lr * buf
      momentum[i] = 0.9 * momentum[i] + grad[i] + 0.01 * w[i];
      w_new[i] = w[i] - 0.1 * momentum[i];
    }
    ExpectNear(v.at("w/new"), w_new, "w/new");
    ExpectNear(v.at("w/momentum/new"), momentum, "w/momentum/new");
  });
}

TEST(OptimizerPassTest, SgdWithoutMomentumKeepsNoBuffer) {
  auto registry = BuiltinRegistry();
  const Graph g = CompileTraining(Regression("sgd(lr=0.1, weight_decay=0.01)"), *registry, true).training;
  EXPECT_FALSE(g.FindTensor("w/momentum").valid());
  ASSERT_EQ(g.variable_updates().size(), 1u);  // w only
  const OpId update = g.FindOp("w/sgd_update");
  ASSERT_TRUE(update.valid());
  EXPECT_EQ(g.op(update).type, "sgd_plain_update");
  Train(g, 2, [&](int step, const GraphValues& v, const std::vector<double>& w, const GraphValues& feeds) {
    SCOPED_TRACE(step);
    const std::vector<double> grad = HandGradient(feeds, w);
    std::vector<double> w_new(8);
    for (int i = 0; i < 8; ++i) w_new[i] = w[i] - 0.1 * (grad[i] + 0.01 * w[i]);
    ExpectNear(v.at("w/new"), w_new, "w/new");
  });
}

struct AdamCase {
  std::string optimizer;
  bool decoupled;
};

TEST(OptimizerPassTest, AdamAndAdamWMatchHandComputedSteps) {
  auto registry = BuiltinRegistry();
  const double lr = 0.01, wd = 0.1, b1 = 0.8, b2 = 0.9, eps = 1e-8;
  for (const AdamCase& c : {AdamCase{"adamw(lr=0.01, weight_decay=0.1, beta1=0.8, beta2=0.9)", true},
                            AdamCase{"adam(lr=0.01, weight_decay=0.1, beta1=0.8, beta2=0.9)", false}}) {
    SCOPED_TRACE(c.optimizer);
    const Graph g = CompileTraining(Regression(c.optimizer), *registry, true).training;
    const OpNode& update = g.op(g.FindOp("w/adam_update"));
    EXPECT_EQ(update.attrs.Bool("decoupled_weight_decay"), c.decoupled);
    EXPECT_EQ(g.tensor(update.inputs[4]).name, "optimizer/step/next");
    ASSERT_EQ(g.variable_updates().size(), 4u);  // w, m, v, the step counter
    std::vector<double> m(8, 0.0), v(8, 0.0);
    Train(g, 2, [&](int step, const GraphValues& values, const std::vector<double>& w, const GraphValues& feeds) {
      SCOPED_TRACE(step);
      EXPECT_EQ(values.at("optimizer/step").GetAsDouble(0), step - 1);  // counts finished steps
      EXPECT_EQ(values.at("optimizer/step/next").GetAsDouble(0), step);
      const std::vector<double> grad = HandGradient(feeds, w);
      std::vector<double> w_new(8);
      for (int i = 0; i < 8; ++i) {  // torch.optim.Adam / AdamW
        double p = w[i], gi = grad[i];
        if (c.decoupled) {
          p *= 1 - lr * wd;
        } else {
          gi += wd * w[i];
        }
        m[i] = b1 * m[i] + (1 - b1) * gi;
        v[i] = b2 * v[i] + (1 - b2) * gi * gi;
        const double mhat = m[i] / (1 - std::pow(b1, step)), vhat = v[i] / (1 - std::pow(b2, step));
        w_new[i] = p - lr * mhat / (std::sqrt(vhat) + eps);
      }
      ExpectNear(values.at("w/new"), w_new, "w/new");
      ExpectNear(values.at("w/adam_m/new"), m, "m");
      ExpectNear(values.at("w/adam_v/new"), v, "v");
    });
  }
}

TEST(OptimizerPassTest, FrozenVariablesGetNoUpdateAndNoState) {
  auto registry = BuiltinRegistry();
  const Graph g = CompileTraining(testing::kGptBlockText, *registry, true).training;
  std::vector<std::string> updated;
  for (const VariableUpdate& u : g.variable_updates()) updated.push_back(g.tensor(u.variable).name);
  // 8 trainable parameters x (param, m, v) + one step counter (one placement).
  EXPECT_EQ(updated.size(), 8u * 3 + 1);
  for (const std::string& name : updated) EXPECT_NE(name, "w_head");
  EXPECT_FALSE(g.FindTensor("w_head/adam_m").valid());
  EXPECT_FALSE(g.FindOp("w_head/adam_update").valid());
  EXPECT_FALSE(g.FindTensor("optimizer/step_1").valid());
  // Optimizer ops take the stage of the gradient's producer.
  EXPECT_EQ(g.op(g.FindOp("w_proj/adam_update")).stage, 1);
  EXPECT_EQ(g.op(g.FindOp("w_qkv/adam_update")).stage, 0);
}

TEST(OptimizerPassTest, EachParameterPlacementHasItsOwnStepCounter) {
  auto registry = BuiltinRegistry();
  const Graph g = CompileTraining(R"(
x = input(shape=[4,6]) placement=cpu:[0,1] sbp=[S(0)]
label = input(shape=[4], dtype=int64) placement=cpu:[2,3] sbp=[S(0)]
w1 = variable(shape=[6,5])
w2 = variable(shape=[5,3]) placement=cpu:[2,3]
w3 = variable(shape=[6,5])
h = matmul(x, w1)
h3 = matmul(x, w3)
s = add(h, h3)
logits = matmul(s, w2) placement=cpu:[2,3] stage=1
loss = sparse_softmax_cross_entropy(logits, label) stage=1
train(loss, optimizer=adam(lr=0.1))
)", *registry, true).training;
  auto step_of = [&](const std::string& p) { return g.tensor(g.op(g.FindOp(p + "/adam_update")).inputs[4]).name; };
  EXPECT_EQ(step_of("w1"), "optimizer/step/next");
  EXPECT_EQ(step_of("w3"), "optimizer/step/next");
  EXPECT_EQ(step_of("w2"), "optimizer/step_1/next");
  EXPECT_EQ(g.tensor(g.FindTensor("optimizer/step_1")).placement->ToString(), "cpu:[2,3]");
  EXPECT_EQ(g.op(g.FindOp("optimizer/step_1/increment")).stage, 1);
  EXPECT_EQ(g.variable_updates().size(), 3u * 3 + 2);
}

TEST(OptimizerPassTest, ZeroOnePinsStateToDataParallelSplits) {
  auto registry = BuiltinRegistry();
  Graph g = ParseOrDie(testing::kMlpText, *registry);
  g.mutable_config()->set_zero_stage(1);
  ASSERT_TRUE(RunTrainingPasses(&g, true).ok());
  const NdSbp s0 = NdSbp({Sbp::Split(0)});
  for (const char* name : {"w1", "b1", "w2"}) {
    SCOPED_TRACE(name);
    const std::string p(name);
    EXPECT_FALSE(g.tensor(g.FindTensor(p)).pinned_nd_sbp.has_value());  // the parameter itself stays
    for (const char* state : {"/adam_m", "/adam_v"}) EXPECT_EQ(g.tensor(g.FindTensor(p + state)).pinned_nd_sbp, s0);
    const OpNode& op = g.op(g.FindOp(p + "/adam_update"));
    for (int i = 0; i < 4; ++i) EXPECT_EQ(op.pinned_input_nd_sbp.at(i), s0) << i;
    EXPECT_EQ(op.pinned_input_nd_sbp.count(4), 0u);  // the step counter stays free (B)
    for (int k = 0; k < 3; ++k) EXPECT_EQ(op.pinned_output_nd_sbp.at(k), s0) << k;
  }
  // Without ZeRO nothing is pinned.
  const Graph plain = CompileTraining(testing::kMlpText, *registry, true).training;
  EXPECT_TRUE(plain.op(plain.FindOp("w1/adam_update")).pinned_input_nd_sbp.empty());
  EXPECT_FALSE(plain.tensor(plain.FindTensor("w1/adam_m")).pinned_nd_sbp.has_value());
}

TEST(OptimizerPassTest, ZeroOneLayoutRule) {
  auto registry = BuiltinRegistry();
  Graph g = ParseOrDie(testing::kGptBlockText, *registry);
  g.mutable_config()->set_zero_stage(1);
  ASSERT_TRUE(RunTrainingPasses(&g, true).ok());  // the verifier checks every pin against its shape
  auto state_pin = [&](const std::string& p) { return g.tensor(g.FindTensor(p + "/adam_m")).pinned_nd_sbp; };
  EXPECT_EQ(state_pin("w_qkv"), NdSbp({Sbp::Split(0), Sbp::Split(1)}));  // keeps its [B, S(1)] on axis 1
  // [B, S(0)]: axis 0 splits the columns, so the shard is a slice of the rank's rows.
  EXPECT_EQ(state_pin("w_o"), NdSbp({Sbp::Split(1), Sbp::Split(0)}));
  // Unpinned on a 2-axis mesh: no ZeRO pin, the SBP solver places the state.
  EXPECT_FALSE(state_pin("ln1_g").has_value());

  TensorNode t;
  t.placement = *Placement::Parse("cpu:[0,1,2,3]");
  t.desc = TensorDesc{DataType::kFloat32, Shape({2, 8})};
  EXPECT_FALSE(ZeroShardedLayout(t).has_value()) << "2 rows cannot feed 4 ranks";
  t.desc = TensorDesc{DataType::kFloat32, Shape({4, 8})};
  EXPECT_EQ(ZeroShardedLayout(t), NdSbp({Sbp::Split(0)}));
  t.desc = TensorDesc{DataType::kFloat32, Shape()};
  EXPECT_FALSE(ZeroShardedLayout(t).has_value()) << "a scalar";
  t.desc = TensorDesc{DataType::kFloat32, Shape({8, 8})};
  t.pinned_nd_sbp = NdSbp({Sbp::Split(1)});
  EXPECT_FALSE(ZeroShardedLayout(t).has_value()) << "axis 0 is tensor parallel for this parameter";
  t.placement = *Placement::Parse("cpu:[[0,1],[2,3]]");
  t.desc = TensorDesc{DataType::kFloat32, Shape({3, 8})};
  t.pinned_nd_sbp = NdSbp({Sbp::Broadcast(), Sbp::Split(0)});
  EXPECT_EQ(ZeroShardedLayout(t), NdSbp({Sbp::Split(1), Sbp::Split(0)})) << "a dimension axis 1 leaves whole";
  t.desc = TensorDesc{DataType::kFloat32, Shape({8, 1})};
  EXPECT_EQ(ZeroShardedLayout(t), NdSbp({Sbp::Split(0), Sbp::Split(0)})) << "1 column: the rows in 2 x 2 parts";
  t.desc = TensorDesc{DataType::kFloat32, Shape({3, 1})};
  EXPECT_FALSE(ZeroShardedLayout(t).has_value()) << "3 rows in 2 x 2 parts, 1 column in 2";
  t.desc = TensorDesc{DataType::kFloat32, Shape({8, 8})};
  t.pinned_nd_sbp.reset();
  EXPECT_FALSE(ZeroShardedLayout(t).has_value()) << "unpinned on a 2-axis mesh: the solver places its state";
  t.placement = *Placement::Parse("cpu:[0]");
  t.pinned_nd_sbp.reset();
  EXPECT_FALSE(ZeroShardedLayout(t).has_value()) << "one device: nothing to shard";
}

TEST(OptimizerPassTest, ZeroTwoPinsTheParameterAndGathersForItsConsumers) {
  auto registry = BuiltinRegistry();
  Graph g = ParseOrDie(testing::kMlpText, *registry);
  g.mutable_config()->set_zero_stage(2);
  ASSERT_TRUE(RunTrainingPasses(&g, true).ok());
  const NdSbp s0({Sbp::Split(0)});
  const NdSbp b({Sbp::Broadcast()});
  for (const char* name : {"w1", "b1", "w2"}) {
    SCOPED_TRACE(name);
    const std::string p(name);
    const TensorNode& w = g.tensor(g.FindTensor(p));
    EXPECT_EQ(w.pinned_nd_sbp, s0);  // stored sharded
    EXPECT_EQ(g.tensor(g.FindTensor(p + "/adam_m")).pinned_nd_sbp, s0);
    int forward_or_backward = 0;
    for (const TensorUse& use : w.consumers) {
      const OpNode& op = g.op(use.op);
      const bool optimizer = op.name == p + "/adam_update";
      EXPECT_EQ(op.pinned_input_nd_sbp.at(use.input_index), optimizer ? s0 : b) << op.name;
      forward_or_backward += optimizer ? 0 : 1;
    }
    EXPECT_GE(forward_or_backward, 1);
  }
  EXPECT_EQ(ZeroGatheredLayout(NdSbp({Sbp::Split(0), Sbp::Split(1)})), NdSbp({Sbp::Broadcast(), Sbp::Split(1)}));
}

// A 2-axis mesh: ZeRO-2 is ZeRO-1 there (optimizer_pass.cc, ZeroGathersParameter): state
// sharded, the parameters and their readers left to the SBP solver.
TEST(OptimizerPassTest, ZeroTwoOnADataAndTensorParallelBlockIsZeroOne) {
  auto registry = BuiltinRegistry();
  Graph g = ParseOrDie(testing::kGptBlockText, *registry);
  g.mutable_config()->set_zero_stage(2);
  ASSERT_TRUE(RunTrainingPasses(&g, true).ok());  // the verifier checks every pin against its shape
  auto pin = [&](const std::string& p) { return g.tensor(g.FindTensor(p)).pinned_nd_sbp; };
  EXPECT_EQ(pin("w_qkv"), NdSbp({Sbp::Broadcast(), Sbp::Split(1)}));  // the user's pin, not Z
  EXPECT_EQ(pin("ln1_g"), std::nullopt);
  EXPECT_EQ(pin("w_qkv/adam_m"), NdSbp({Sbp::Split(0), Sbp::Split(1)}));  // ZeRO-1: state sharded
  EXPECT_EQ(pin("ln1_g/adam_m"), std::nullopt);  // unpinned on 2 axes: the solver places the state
  EXPECT_EQ(g.op(g.FindOp("qkv")).pinned_input_nd_sbp.count(1), 0u) << "no gathered-layout pin";
  const OpNode& fc = g.op(g.FindOp("fc"));  // the user's own pin stays
  EXPECT_EQ(fc.pinned_input_nd_sbp.at(1), NdSbp({Sbp::Broadcast(), Sbp::Split(1)}));
}

TEST(OptimizerPassTest, SecondRunAndInferenceJobsChangeNothing) {
  auto registry = BuiltinRegistry();
  Graph g = CompileTraining(testing::kMlpText, *registry, true).training;
  const size_t updates = g.variable_updates().size();
  const int64_t ops = g.num_ops();
  absl::StatusOr<bool> again = OptimizerPass().Run(&g);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(*again);
  EXPECT_EQ(g.variable_updates().size(), updates);
  EXPECT_EQ(g.num_ops(), ops);

  Graph inference = testing::ParseAndInfer("x = input(shape=[2]) placement=cpu:[0]\ny = relu(x)\n", *registry);
  absl::StatusOr<bool> changed = OptimizerPass().Run(&inference);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(*changed);
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
