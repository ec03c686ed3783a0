// SBP selection on training graphs: forward, hand-written backward (what the autograd pass
// emits: matmuls with transpose flags, relu_grad, reduce_sum, add) and SGD updates.
#include "gtest/gtest.h"
#include "oneflow_like/compiler/sbp/sbp_test_util.h"

namespace oneflow_like {
namespace compiler {
namespace {

using testing::DecisionOf;
using testing::Layout;
using testing::Signature;

// A residual 2-layer MLP, its backward from an incoming gradient `dr`, and SGD with momentum.
std::string TrainingMlp(const std::string& batch, const std::string& width, const std::string& config = "") {
  const std::string x = "[" + batch + "," + width + "]", w = "[" + width + "," + width + "]";
  return config +
         "x = input(shape=" + x + ") placement=cpu:[0,1,2,3]\n"
         "dr = input(shape=" + x + ")\n"
         "w1 = variable(shape=" + w + ")\nw2 = variable(shape=" + w + ")\n"
         "m1 = variable(shape=" + w + ")\nm2 = variable(shape=" + w + ")\n"
         "h = matmul(x, w1)\n"
         "a = relu(h)\n"
         "y = matmul(a, w2)\n"
         "r = add(y, x)\n"
         "output(r)\n"
         "da = matmul(dr, w2, transpose_b=true)\n"
         "dw2 = matmul(a, dr, transpose_a=true)\n"
         "dh = relu_grad(da, a)\n"
         "dw1 = matmul(x, dh, transpose_a=true)\n"
         "dx1 = matmul(dh, w1, transpose_b=true)\n"
         "dx = add(dx1, dr)\n"
         "db = reduce_sum(dh, axes=[0])\n"
         "output(dx, db)\n"
         "w1_new, m1_new = sgd_update(w1, dw1, m1, lr=0.1, momentum=0.9)\n"
         "w2_new, m2_new = sgd_update(w2, dw2, m2, lr=0.1, momentum=0.9)\n";
}

Graph ParseTraining(const std::string& text, const OpRegistry& registry) {
  Graph g = testing::ParseAndInfer(text, registry);
  for (const char* name : {"w1", "m1", "w2", "m2"}) {
    const absl::Status s = g.AddVariableUpdate(g.FindTensor(name), g.FindTensor(std::string(name) + "_new"));
    EXPECT_TRUE(s.ok()) << s;
  }
  return g;
}

class SbpBackwardTest : public ::testing::Test {
 protected:
  Graph Run(const std::string& text, SbpPass* pass) {
    Graph g = ParseTraining(text, *registry_);
    absl::StatusOr<bool> changed = pass->Run(&g);
    EXPECT_TRUE(changed.ok()) << changed.status();
    const absl::Status verified = VerifyGraph(g);
    EXPECT_TRUE(verified.ok()) << verified;
    for (const auto* list : {&pass->decisions(), &pass->source_decisions()}) {
      for (const OpSbpDecisionProto& d : *list) testing::ExpectConsistent(d);
    }
    return g;
  }
  std::unique_ptr<OpRegistry> registry_ = testing::BuiltinRegistry();
};

TEST_F(SbpBackwardTest, BatchDominatedTrainingIsDataParallel) {
  SbpPass pass;
  Graph g = Run(TrainingMlp("4096", "64"), &pass);
  // Activations and their gradients split by rows, weights replicated, weight gradients
  // partial sums of the per-rank products.
  for (const char* t : {"x", "dr", "h", "a", "y", "r", "da", "dh", "dx1", "dx"}) EXPECT_EQ(Layout(g, t), "[S(0)]") << t;
  for (const char* t : {"w1", "w2"}) EXPECT_EQ(Layout(g, t), "[B]") << t;
  EXPECT_EQ(Signature(g, "dw1"), "[S(0)], [S(0)] -> [P]");
  EXPECT_EQ(Signature(g, "dw2"), "[S(0)], [S(0)] -> [P]");
  EXPECT_EQ(Signature(g, "db"), "[S(0)] -> [P]");
  // The gradient is reduced before the update: all-reduce into a replicated update, or
  // reduce-scatter into a sharded one whose new value is gathered back into the variable.
  const OpSbpDecisionProto& update = DecisionOf(pass, "w1_new");
  const SbpCandidateProto& won = update.candidates(update.chosen());
  ASSERT_GE(won.input_comm_size(), 3);
  const std::string grad_boxing = won.input_comm(1).boxing();
  EXPECT_TRUE(grad_boxing == "all_reduce" || grad_boxing == "reduce_scatter") << grad_boxing;
  // The update edge is listed on both sides with the same seconds.
  double op_side = -1, variable_side = -1;
  for (const auto& c : won.input_comm()) {
    if (c.input() == -1) op_side = c.seconds();  // output 0 (param_out) -> w1
  }
  const OpSbpDecisionProto& w1 = DecisionOf(pass, "w1");
  for (const auto& c : w1.candidates(w1.chosen()).input_comm()) {
    if (c.input() == -1) variable_side = c.seconds();
  }
  EXPECT_GE(op_side, 0);
  EXPECT_DOUBLE_EQ(op_side, variable_side);
  EXPECT_EQ(grad_boxing == "all_reduce", op_side == 0.0);
}

TEST_F(SbpBackwardTest, TotalIsTheSumOfTheRecordedParts) {
  SbpPass pass;
  Run(TrainingMlp("4096", "64", "config(micro_batches=2)\n"), &pass);
  // Every edge appears once as an op input (input >= 0) or as a variable's update (input -1
  // in the variable's record); compute once per op.
  double sum = 0;
  for (const OpSbpDecisionProto& d : pass.decisions()) {
    const SbpCandidateProto& c = d.candidates(d.chosen());
    sum += c.compute_seconds();
    for (const auto& in : c.input_comm()) sum += in.input() >= 0 ? in.seconds() : 0.0;
  }
  for (const OpSbpDecisionProto& d : pass.source_decisions()) sum += d.candidates(d.chosen()).comm_seconds();
  EXPECT_NEAR(sum, pass.stats().total_seconds, 1e-9 * sum);
  EXPECT_GT(pass.stats().num_edges, pass.stats().forest_edges);  // the graph is not a tree
}

TEST_F(SbpBackwardTest, WeightDominatedTrainingKeepsWeightsSharded) {
  SbpPass pass;
  Graph g = Run(TrainingMlp("8", "2048"), &pass);
  // Replicating the 16 MB weights would all-reduce 16 MB gradients every step; sharded
  // weights keep their gradients and updates sharded too.
  // Megatron in training: column-parallel w1, row-parallel w2, partial y.
  EXPECT_EQ(Layout(g, "w1"), "[S(1)]");
  EXPECT_EQ(Layout(g, "w2"), "[S(0)]");
  EXPECT_EQ(Signature(g, "y"), "[S(1)], [S(0)] -> [P]");
  EXPECT_EQ(Signature(g, "dh"), "[S(1)], [S(1)] -> [S(1)]");
  for (const char* u : {"w1_new", "w2_new"}) {
    const OpSbpDecisionProto& d = DecisionOf(pass, u);
    const SbpCandidateProto& won = d.candidates(d.chosen());
    EXPECT_EQ(won.input_comm(1).boxing(), "identity") << u;  // the gradient is already in place
  }
  for (const char* w : {"w1", "w2"}) EXPECT_EQ(Layout(g, w), Layout(g, std::string(w) + "_new")) << w;
}

TEST_F(SbpBackwardTest, DeterministicAcrossRuns) {
  SbpPass first, second;
  Graph a = Run(TrainingMlp("4096", "64"), &first);
  Graph b = Run(TrainingMlp("4096", "64"), &second);
  ASSERT_EQ(first.decisions().size(), second.decisions().size());
  for (size_t i = 0; i < first.decisions().size(); ++i) {
    EXPECT_EQ(first.decisions()[i].SerializeAsString(), second.decisions()[i].SerializeAsString());
  }
  for (const TensorNode& t : a.tensors()) EXPECT_EQ(Layout(a, t.name), Layout(b, t.name)) << t.name;
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
