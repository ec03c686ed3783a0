// The reference evaluator against hand computations, and its errors.
#include "oneflow_like/compiler/autograd/graph_eval.h"

#include "gtest/gtest.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/core/testing/op_test_util.h"

namespace oneflow_like {
namespace compiler {
namespace {

using oneflow_like::testing::ExpectTensorNear;
using oneflow_like::testing::TensorFromDoubles;
using testing::BuiltinRegistry;
using testing::ExpectError;
using testing::ParseAndInfer;

constexpr char kText[] = R"(
x = input(shape=[2,3], dtype=float64) placement=cpu:[0]
w = variable(shape=[3,2], dtype=float64, init=normal(1.0))
b = variable(shape=[2], dtype=float64, init=constant(0.5))
h = matmul(x, w)
y = bias_add(h, b)
z = relu(y)
)";

TEST(GraphEvalTest, RunsEveryOpInProgramOrder) {
  auto registry = BuiltinRegistry();
  Graph g = ParseAndInfer(kText, *registry);
  const Tensor x = TensorFromDoubles(DataType::kFloat64, {2, 3}, {1, 2, 3, -1, 0, 2});
  const Tensor w = TensorFromDoubles(DataType::kFloat64, {3, 2}, {1, -1, 0, 2, 1, -3});
  absl::StatusOr<GraphValues> v = EvaluateGraph(g, {{"x", x}, {"w", w}});
  ASSERT_TRUE(v.ok()) << v.status();
  // h = x w = [[4, -6], [1, -5]]; y = h + 0.5 (b from its constant initializer); z = relu(y).
  ExpectTensorNear(v->at("h"), TensorFromDoubles(DataType::kFloat64, {2, 2}, {4, -6, 1, -5}), 0, 1e-12);
  ExpectTensorNear(v->at("b"), TensorFromDoubles(DataType::kFloat64, {2}, {0.5, 0.5}), 0, 0);
  ExpectTensorNear(v->at("z"), TensorFromDoubles(DataType::kFloat64, {2, 2}, {4.5, 0, 1.5, 0}), 0, 1e-12);
  EXPECT_EQ(v->size(), 6u);  // every tensor of the graph
  EXPECT_TRUE(ApplyVariableUpdates(g, *v).empty());  // no optimizer: no updates
}

TEST(GraphEvalTest, BadFeedsAreNamed) {
  auto registry = BuiltinRegistry();
  Graph g = ParseAndInfer(kText, *registry);
  const Tensor x = TensorFromDoubles(DataType::kFloat64, {2, 3}, {1, 2, 3, -1, 0, 2});
  const Tensor w = TensorFromDoubles(DataType::kFloat64, {3, 2}, {1, -1, 0, 2, 1, -3});
  ExpectError(EvaluateGraph(g, {{"w", w}}).status(), absl::StatusCode::kInvalidArgument, {"input 'x'", "not fed"});
  ExpectError(EvaluateGraph(g, {{"x", x}}).status(), absl::StatusCode::kInvalidArgument, {"'w'", "random initializer"});
  ExpectError(EvaluateGraph(g, {{"x", w}, {"w", w}}).status(), absl::StatusCode::kInvalidArgument,
              {"'x'", "float64[3,2]", "float64[2,3]"});
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
