#include "oneflow_like/compiler/graph_builder.h"

#include "gtest/gtest.h"
#include "oneflow_like/compiler/test_util.h"

namespace oneflow_like {
namespace compiler {
namespace {

using testing::ExpectError;

class GraphBuilderTest : public ::testing::Test {
 protected:
  std::unique_ptr<OpRegistry> registry_ = testing::BuiltinRegistry();
  Placement four_{DeviceType::kCpu, {Rank(0), Rank(1), Rank(2), Rank(3)}};
};

TEST_F(GraphBuilderTest, BuildsATrainableMlp) {
  GraphBuilder b(registry_.get(), "mlp");
  TensorRef x = b.Input("x", {64, 128}, DataType::kFloat32, four_, NdSbp{Sbp::Split(0)});
  TensorRef label = b.Input("label", {64}, DataType::kInt64);
  TensorRef w1 = b.Variable("w1", {128, 256}, NormalInit(0.02));
  TensorRef w2 = b.Variable("w2", {256, 10}, UniformInit(-0.1, 0.1));
  TensorRef h = b.Op("matmul", {x, w1});
  TensorRef a = b.Op("relu", {h}, {}, [] {
    OpOptions o;
    o.stage = 1;
    o.recompute = true;
    return o;
  }());
  TensorRef logits = b.Op("matmul", {a, w2}, {{"transpose_b", false}});
  TensorRef loss = b.Op("sparse_softmax_cross_entropy", {logits, label});
  b.Output(loss);
  b.Train(loss, AdamWOptimizer(1e-3, 0.01));
  absl::StatusOr<Graph> g = std::move(b).Build();
  ASSERT_TRUE(g.ok()) << g.status();

  EXPECT_EQ(g->name(), "mlp");
  EXPECT_EQ(g->num_ops(), 4);
  // Default names: "<type>", "<type>_1", ...; one output named like its op.
  EXPECT_EQ(g->tensor(h.id).name, "matmul");
  EXPECT_EQ(g->tensor(logits.id).name, "matmul_1");
  EXPECT_EQ(g->op(g->FindOp("matmul_1")).outputs[0], logits.id);
  const OpNode& relu = g->op(g->tensor(a.id).producer);
  EXPECT_EQ(relu.stage, 1);
  EXPECT_TRUE(relu.recompute);
  EXPECT_EQ(g->tensor(w1.id).initializer.kind(), InitializerProto::NORMAL);
  EXPECT_DOUBLE_EQ(g->tensor(w1.id).initializer.stddev(), 0.02);
  EXPECT_DOUBLE_EQ(g->tensor(w2.id).initializer.high(), 0.1);
  EXPECT_TRUE(g->tensor(loss.id).is_output);
  EXPECT_EQ(g->config().loss(), g->tensor(loss.id).name);
  EXPECT_EQ(g->config().optimizer().kind(), OptimizerProto::ADAMW);
  EXPECT_DOUBLE_EQ(g->config().optimizer().learning_rate(), 1e-3);
  EXPECT_DOUBLE_EQ(g->config().optimizer().weight_decay(), 0.01);
  EXPECT_FALSE(g->config().optimizer().has_beta1());
  EXPECT_EQ(g->tensor(label.id).desc->dtype, DataType::kInt64);
  EXPECT_FALSE(g->tensor(label.id).placement.has_value());
}

TEST_F(GraphBuilderTest, NamesMultipleOutputsAfterTheOpDef) {
  GraphBuilder b(registry_.get());
  TensorRef x = b.Input("x", {4, 8});
  TensorRef g = b.Variable("g", {8}, OnesInit());
  TensorRef beta = b.Variable("beta", {8}, ZerosInit());
  OpOptions ln;
  ln.name = "ln";
  std::vector<TensorRef> outs = b.MultiOp("layer_norm", {x, g, beta}, {}, ln);
  OpOptions split;
  split.output_names = {"left", "right"};
  std::vector<TensorRef> halves = b.MultiOp("split", {x}, {{"axis", int64_t{1}}, {"sizes", std::vector<int64_t>{3, 5}}},
                                            split);
  ASSERT_TRUE(b.status().ok()) << b.status();
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(b.graph().tensor(outs[0].id).name, "ln.y");
  EXPECT_EQ(b.graph().tensor(outs[1].id).name, "ln.mean");
  EXPECT_EQ(b.graph().tensor(outs[2].id).name, "ln.inv_std");
  ASSERT_EQ(halves.size(), 2u);
  EXPECT_EQ(b.graph().tensor(halves[1].id).name, "right");
  EXPECT_TRUE(b.graph().FindOp("left").valid());  // named after its first output
}

TEST_F(GraphBuilderTest, ErrorsAreStickyAndNameTheOp) {
  GraphBuilder b(registry_.get());
  TensorRef x = b.Input("x", {4, 8});
  TensorRef y = b.Op("relu", {x}, {{"alpha", 0.5}});
  EXPECT_FALSE(y.valid());
  ExpectError(b.status(), absl::StatusCode::kInvalidArgument, {"relu 'relu'", "unknown attribute 'alpha'"});
  // Later calls do nothing and keep the first error.
  EXPECT_FALSE(b.Op("relu", {x}).valid());
  EXPECT_FALSE(b.Input("z", {1}).valid());
  ExpectError(std::move(b).Build().status(), absl::StatusCode::kInvalidArgument, {"unknown attribute 'alpha'"});
}

TEST_F(GraphBuilderTest, RejectsBadHandlesFreezingInputsAndUnknownOps) {
  {
    GraphBuilder b(registry_.get());
    b.Op("relu", {TensorRef{}});
    ExpectError(b.status(), absl::StatusCode::kInvalidArgument, {"relu input 0", "invalid tensor handle"});
  }
  {
    GraphBuilder b(registry_.get());
    b.Freeze(b.Input("x", {2}));
    ExpectError(b.status(), absl::StatusCode::kInvalidArgument, {"Freeze", "tensor 'x' is not a variable"});
  }
  {
    GraphBuilder b(registry_.get());
    b.Op("rellu", {b.Input("x", {2})});
    ExpectError(b.status(), absl::StatusCode::kNotFound, {"unknown op 'rellu'"});
  }
  {
    GraphBuilder b(registry_.get());
    TensorRef w = b.Variable("w", {2}, ConstantInit(3.0));
    b.Freeze(w);
    b.Train(w, SgdOptimizer(0.0));
    EXPECT_TRUE(b.graph().tensor(w.id).frozen);
    ExpectError(std::move(b).Build().status(), absl::StatusCode::kInvalidArgument, {"learning rate must be > 0"});
  }
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
