// AutogradPass: gradients against central differences (float64), naming, fan-out sums, zero
// gradients, frozen variables, loss scaling, recompute clones, errors. Every pipeline runs the
// graph verifier after each pass (training_test_util.h).
#include "oneflow_like/compiler/autograd/autograd_pass.h"

#include "glog/logging.h"
#include "gtest/gtest.h"
#include "oneflow_like/compiler/autograd/training_test_util.h"
#include "oneflow_like/compiler/infer_pass.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/compiler/text_format.h"

namespace oneflow_like {
namespace compiler {
namespace {

using testing::BuiltinRegistry;
using testing::CompileTraining;
using testing::ExpectError;
using testing::ExpectGradientsMatchNumerical;
using testing::ParseAndInfer;
using testing::ParseOrDie;
using testing::RandomFeeds;
using testing::RunTrainingPasses;
using testing::TrainingGraphs;

// kMlpText's model in float64 with small shapes.
constexpr char kMlp64[] = R"(
config(name="mlp64", seed=1)
x = input(shape=[4,6], dtype=float64) placement=cpu:[0,1] sbp=[S(0)]
label = input(shape=[4], dtype=int64) placement=cpu:[0,1] sbp=[S(0)]
w1 = variable(shape=[6,5], dtype=float64, init=normal(0.02))
b1 = variable(shape=[5], dtype=float64)
w2 = variable(shape=[5,3], dtype=float64, init=uniform(-0.1, 0.1))
h = matmul(x, w1)
hb = bias_add(h, b1)
a = relu(hb)
logits = matmul(a, w2)
loss = sparse_softmax_cross_entropy(logits, label)
output(loss, logits)
train(loss, optimizer=adamw(lr=0.001, weight_decay=0.01))
)";

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

const OpNode& ProducerOf(const Graph& g, const std::string& tensor) {
  const TensorId t = g.FindTensor(tensor);
  CHECK(t.valid()) << "no tensor '" << tensor << "'";
  CHECK(g.tensor(t).producer.valid()) << tensor;
  return g.op(g.tensor(t).producer);
}

TEST(AutogradPassTest, MlpGradientsMatchCentralDifferences) {
  auto registry = BuiltinRegistry();
  const TrainingGraphs g = CompileTraining(kMlp64, *registry, /*with_optimizer=*/false);
  EXPECT_EQ(ExpectGradientsMatchNumerical(g, RandomFeeds(g.forward, 1, 3), {}), 30 + 5 + 15);
  for (const char* source : {"x", "label"}) {
    EXPECT_FALSE(GradientOf(g.training, g.training.FindTensor(source)).valid()) << source;
  }
}

TEST(AutogradPassTest, SharedMlpGetsGradientsWithForwardPlacements) {
  auto registry = BuiltinRegistry();
  const TrainingGraphs g = CompileTraining(testing::kMlpText, *registry, /*with_optimizer=*/false);
  const Graph& t = g.training;
  for (const char* name : {"w1", "b1", "w2"}) {
    const TensorId grad = GradientOf(t, t.FindTensor(name));
    ASSERT_TRUE(grad.valid()) << name;
    EXPECT_EQ(t.tensor(grad).desc, t.tensor(t.FindTensor(name)).desc) << name;
    EXPECT_EQ(t.tensor(grad).placement->ToString(), "cpu:[0,1,2,3]") << name;
  }
  const OpNode& seed = ProducerOf(t, "loss/grad");
  EXPECT_EQ(seed.type, "fill");
  EXPECT_DOUBLE_EQ(seed.attrs.Float("value"), 1.0);
  EXPECT_EQ(ProducerOf(t, "b1/grad").type, "reduce_sum");  // bias_add's rule
  // Forward ops keep their place: the backward program starts after the last forward op.
  EXPECT_EQ(t.op_order()[g.forward.num_ops()], t.FindOp("loss/grad"));
}

TEST(AutogradPassTest, NamesFollowTheHeaderExample) {
  auto registry = BuiltinRegistry();
  const TrainingGraphs g = CompileTraining(R"(
x = input(shape=[3,4]) placement=cpu:[0]
label = input(shape=[3], dtype=int64)
w = variable(shape=[4,2])
y = matmul(x, w)
loss = sparse_softmax_cross_entropy(y, label)
train(loss, optimizer=sgd(lr=0.1))
)", *registry, false);
  const Graph& t = g.training;
  ASSERT_EQ(t.num_ops(), 5);
  EXPECT_EQ(ProducerOf(t, "loss/grad").name, "loss/grad");
  EXPECT_EQ(ProducerOf(t, "y/grad").name, "loss/grad0");
  EXPECT_EQ(ProducerOf(t, "y/grad").type, "sparse_softmax_cross_entropy_grad");
  const OpNode& dw = ProducerOf(t, "w/grad");
  EXPECT_EQ(dw.name, "y/grad0");
  EXPECT_EQ(dw.type, "matmul");
  EXPECT_EQ(t.tensor(dw.inputs[0]).name, "x");
  EXPECT_EQ(t.tensor(dw.inputs[1]).name, "y/grad");
  EXPECT_EQ(GradientOf(t, t.FindTensor("w")), t.FindTensor("w/grad"));
}

TEST(AutogradPassTest, FanOutContributionsAreSummed) {
  auto registry = BuiltinRegistry();
  const TrainingGraphs g = CompileTraining(R"(
x = input(shape=[3,4], dtype=float64) placement=cpu:[0]
label = input(shape=[3], dtype=int64)
w = variable(shape=[4,4], dtype=float64)
v = variable(shape=[4,2], dtype=float64)
h = matmul(x, w)
h2 = matmul(h, w)
s = add(h, h2)
t = mul(s, s)
logits = matmul(t, v)
loss = sparse_softmax_cross_entropy(logits, label)
train(loss, optimizer=sgd(lr=0.1))
)", *registry, false);
  const Graph& t = g.training;
  // w feeds two matmuls, h feeds h2 and s, s feeds both inputs of one mul.
  for (const char* grad : {"w/grad", "h/grad", "s/grad"}) {
    const OpNode& sum = ProducerOf(t, grad);
    EXPECT_EQ(sum.type, "add") << grad;
    EXPECT_EQ(sum.name, grad);
  }
  EXPECT_NE(ProducerOf(t, "v/grad").type, "add");  // a single contribution is not summed
  EXPECT_EQ(ExpectGradientsMatchNumerical(g, RandomFeeds(g.forward, 2, 2), {}), 16 + 8);
}

TEST(AutogradPassTest, PassedThroughGradientsAreCopiedToTheVariableName) {
  auto registry = BuiltinRegistry();
  const TrainingGraphs g = CompileTraining(R"(
x = input(shape=[3,2], dtype=float64) placement=cpu:[0]
label = input(shape=[3], dtype=int64)
w = variable(shape=[3,2], dtype=float64)
y = add(x, w)
loss = sparse_softmax_cross_entropy(y, label)
train(loss, optimizer=sgd(lr=0.1))
)", *registry, false);
  // add's rule hands d(y) itself to w: the pass names a copy "w/grad".
  const OpNode& copy = ProducerOf(g.training, "w/grad");
  EXPECT_EQ(copy.type, "identity");
  EXPECT_EQ(g.training.tensor(copy.inputs[0]).name, "y/grad");
  EXPECT_EQ(ExpectGradientsMatchNumerical(g, RandomFeeds(g.forward, 7, 2), {}), 6);
}

TEST(AutogradPassTest, OutputsWithoutGradientReadZeros) {
  auto registry = BuiltinRegistry();
  const TrainingGraphs g = CompileTraining(R"(
x = input(shape=[3,5], dtype=float64) placement=cpu:[0]
label = input(shape=[3], dtype=int64)
gamma = variable(shape=[5], dtype=float64, init=ones)
beta = variable(shape=[5], dtype=float64)
w = variable(shape=[5,5], dtype=float64)
n, n_mean, n_inv_std = layer_norm(x, gamma, beta)
h = matmul(n, w)
a, b = split(h, axis=1, sizes=[2,3])
loss = sparse_softmax_cross_entropy(a, label)
train(loss, optimizer=sgd(lr=0.1))
)", *registry, false);
  const Graph& t = g.training;
  // split's rule concatenates the gradients of a and b; b reaches no loss, so it reads zeros.
  const OpNode& zeros = ProducerOf(t, "b/zero_grad");
  EXPECT_EQ(zeros.type, "fill");
  EXPECT_EQ(zeros.attrs.Ints("shape"), (std::vector<int64_t>{3, 3}));
  // Zeros are made only on request: layer_norm's rule never reads d(mean), d(inv_std).
  EXPECT_FALSE(t.FindTensor("n_mean/zero_grad").valid());
  EXPECT_FALSE(t.FindTensor("n_inv_std/zero_grad").valid());
  EXPECT_EQ(ExpectGradientsMatchNumerical(g, RandomFeeds(g.forward, 3, 2), {}), 5 + 5 + 25);
}

TEST(AutogradPassTest, FrozenVariablesGetNoGradient) {
  auto registry = BuiltinRegistry();
  const TrainingGraphs g = CompileTraining(
      Replace(kMlp64, "w1 = variable(shape=[6,5], dtype=float64, init=normal(0.02))",
              "w1 = variable(shape=[6,5], dtype=float64, init=normal(0.02), frozen=true)"),
      *registry, false);
  const Graph& t = g.training;
  EXPECT_FALSE(GradientOf(t, t.FindTensor("w1")).valid());
  EXPECT_FALSE(t.FindTensor("w1/grad").valid());
  // h = matmul(x, w1) depends on nothing trainable: its op is skipped.
  EXPECT_FALSE(t.FindOp("h/grad0").valid());
  EXPECT_FALSE(t.FindTensor("h/grad").valid());
  EXPECT_EQ(ExpectGradientsMatchNumerical(g, RandomFeeds(g.forward, 4, 3), {}), 5 + 15);
}

struct ScalingCase {
  int micro_batches, accumulation_steps;
  double seed;
};

TEST(AutogradPassTest, LossSeedIsOneOverPiecesPerStep) {
  auto registry = BuiltinRegistry();
  for (const ScalingCase& c : {ScalingCase{0, 0, 1.0}, ScalingCase{2, 0, 0.5}, ScalingCase{4, 0, 0.25},
                               ScalingCase{4, 1, 0.25}, ScalingCase{2, 2, 0.25}, ScalingCase{0, 3, 1.0 / 3}}) {
    SCOPED_TRACE(::testing::Message() << "micro_batches=" << c.micro_batches
                                      << " gradient_accumulation_steps=" << c.accumulation_steps);
    TrainingGraphs g{ParseAndInfer(kMlp64, *registry), ParseOrDie(kMlp64, *registry)};
    for (Graph* graph : {&g.forward, &g.training}) {
      graph->mutable_config()->set_micro_batches(c.micro_batches);
      graph->mutable_config()->set_gradient_accumulation_steps(c.accumulation_steps);
    }
    ASSERT_TRUE(RunTrainingPasses(&g.training, false).ok());
    EXPECT_DOUBLE_EQ(ProducerOf(g.training, "loss/grad").attrs.Float("value"), c.seed);
    // Every gradient carries the factor (the check multiplies the numerical one by it).
    EXPECT_EQ(ExpectGradientsMatchNumerical(g, RandomFeeds(g.forward, 5, 3), {}), 50);
  }
}

TEST(AutogradPassTest, RecomputedOpsAreClonedForTheBackward) {
  auto registry = BuiltinRegistry();
  std::string text = Replace(kMlp64, "hb = bias_add(h, b1)", "hb = bias_add(h, b1) recompute=true");
  text = Replace(text, "a = relu(hb)", "a = relu(hb) recompute=true");
  const TrainingGraphs g = CompileTraining(text, *registry, false);
  const Graph& t = g.training;
  const OpNode& relu_clone = ProducerOf(t, "a/recompute");
  EXPECT_EQ(relu_clone.name, "a/recompute");
  EXPECT_EQ(relu_clone.type, "relu");
  EXPECT_FALSE(relu_clone.recompute);
  // The clone of a recompute op reads the clones of its recompute producers.
  ASSERT_EQ(relu_clone.inputs.size(), 1u);
  EXPECT_EQ(t.tensor(relu_clone.inputs[0]).name, "hb/recompute");
  EXPECT_EQ(ProducerOf(t, "hb/recompute").type, "bias_add");
  // The originals are read by forward ops only: relu_grad and dw2 read the clone.
  const int64_t num_forward = g.forward.num_ops();
  for (const char* original : {"a", "hb"}) {
    for (const TensorUse& use : t.tensor(t.FindTensor(original)).consumers) {
      EXPECT_LT(use.op.value(), num_forward) << original << " read by " << t.op(use.op).name;
    }
  }
  bool relu_grad_reads_clone = false;
  for (const TensorUse& use : t.tensor(t.FindTensor("a/recompute")).consumers) {
    relu_grad_reads_clone = relu_grad_reads_clone || t.op(use.op).type == "relu_grad";
  }
  EXPECT_TRUE(relu_grad_reads_clone);
  EXPECT_EQ(ExpectGradientsMatchNumerical(g, RandomFeeds(g.forward, 6, 3), {}), 50);
}

TEST(AutogradPassTest, SecondRunAndInferenceJobsChangeNothing) {
  auto registry = BuiltinRegistry();
  TrainingGraphs g = CompileTraining(kMlp64, *registry, false);
  const std::string before = PrintGraph(g.training);
  absl::StatusOr<bool> again = AutogradPass().Run(&g.training);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(*again);
  EXPECT_EQ(PrintGraph(g.training), before);
  // Same input, same output.
  EXPECT_EQ(PrintGraph(CompileTraining(kMlp64, *registry, false).training), before);

  Graph inference = ParseAndInfer("x = input(shape=[2]) placement=cpu:[0]\ny = relu(x)\n", *registry);
  absl::StatusOr<bool> changed = AutogradPass().Run(&inference);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(*changed);
  EXPECT_EQ(inference.num_ops(), 1);
}

TEST(AutogradPassTest, BadLossesAreInvalidArguments) {
  auto registry = BuiltinRegistry();
  auto run_with_loss = [&](const std::string& loss) {
    Graph g = ParseAndInfer(kMlp64, *registry);
    g.mutable_config()->set_loss(loss);
    return AutogradPass().Run(&g).status();
  };
  ExpectError(run_with_loss(""), absl::StatusCode::kInvalidArgument, {"no loss tensor", "mlp64", "train(loss"});
  ExpectError(run_with_loss("logits"), absl::StatusCode::kInvalidArgument,
              {"loss 'logits'", "floating-point scalar", "float64[4,3]"});
  ExpectError(run_with_loss("label"), absl::StatusCode::kInvalidArgument, {"loss 'label'", "int64[4]"});
  ExpectError(run_with_loss("nope"), absl::StatusCode::kInvalidArgument, {"loss 'nope'", "not a tensor"});

  Graph all_frozen = ParseOrDie(R"(
x = input(shape=[3,4]) placement=cpu:[0]
label = input(shape=[3], dtype=int64)
w = variable(shape=[4,2], frozen=true)
y = matmul(x, w)
loss = sparse_softmax_cross_entropy(y, label)
train(loss, optimizer=sgd(lr=0.1))
)", *registry);
  ExpectError(RunTrainingPasses(&all_frozen, false), absl::StatusCode::kInvalidArgument,
              {"loss 'loss'", "does not depend on any trainable variable"});

  Graph clash = ParseOrDie(Replace(kMlp64, "output(loss, logits)", "w1/grad = relu(logits)\noutput(loss, logits)"),
                           *registry);
  ExpectError(RunTrainingPasses(&clash, false), absl::StatusCode::kInvalidArgument, {"'w1/grad'", "variable 'w1'"});
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
