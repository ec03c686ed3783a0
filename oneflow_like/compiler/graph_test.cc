#include "oneflow_like/compiler/graph.h"

#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "oneflow_like/compiler/infer_pass.h"
#include "oneflow_like/compiler/proto_convert.h"
#include "oneflow_like/compiler/verifier.h"
#include "oneflow_like/compiler/test_util.h"

namespace oneflow_like {
namespace compiler {
namespace {

using testing::ExpectError;
using ::google::protobuf::util::MessageDifferencer;

JobProto ParseJob(const std::string& text) {
  JobProto job;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &job)) << text;
  return job;
}

// x[4,3] and w[3,2] on cpu:[0,1]; y = matmul(x, w) named "fc"; z = relu(y).
const char kSmallJob[] = R"pb(
  name: "small"
  tensors {
    name: "x" desc { dtype: DT_FLOAT32 dims: 4 dims: 3 } is_input: true
    placement { device_type: "cpu" ranks: 0 ranks: 1 hierarchy: 2 }
    nd_sbp { sbp { kind: SPLIT axis: 0 } }
  }
  tensors {
    name: "w" desc { dtype: DT_FLOAT32 dims: 3 dims: 2 } is_variable: true
    initializer { kind: NORMAL stddev: 0.02 }
  }
  tensors { name: "z" is_output: true }
  ops { name: "fc" type: "matmul" inputs: "x" inputs: "w" outputs: "y" }
  ops { name: "act" type: "relu" inputs: "y" outputs: "z" stage: 1 }
)pb";

class GraphTest : public ::testing::Test {
 protected:
  std::unique_ptr<OpRegistry> registry_ = testing::BuiltinRegistry();
};

TEST_F(GraphTest, FromJobProtoBuildsLinkedNodes) {
  absl::StatusOr<Graph> g = Graph::FromJobProto(ParseJob(kSmallJob), *registry_);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->num_tensors(), 4);  // x, w, z (listed) and y (created by its op)
  ASSERT_EQ(g->num_ops(), 2);
  const TensorNode& x = g->tensor(g->FindTensor("x"));
  const TensorNode& y = g->tensor(g->FindTensor("y"));
  const TensorNode& z = g->tensor(g->FindTensor("z"));
  const OpNode& fc = g->op(g->FindOp("fc"));
  EXPECT_TRUE(x.is_input);
  EXPECT_EQ(x.desc->shape, Shape({4, 3}));
  EXPECT_EQ(x.placement->ToString(), "cpu:[0,1]");
  EXPECT_EQ(*x.pinned_nd_sbp, NdSbp({Sbp::Split(0)}));
  EXPECT_EQ(fc.type, "matmul");
  EXPECT_EQ(fc.def, registry_->Find("matmul"));
  EXPECT_EQ(fc.attrs.Bool("transpose_b"), false);  // defaults filled in
  EXPECT_EQ(fc.attrs.Float("alpha"), 1.0);
  ASSERT_EQ(fc.outputs.size(), 1u);
  EXPECT_EQ(fc.outputs[0], y.id);
  EXPECT_EQ(y.producer, fc.id);
  EXPECT_EQ(y.producer_output, 0);
  EXPECT_FALSE(y.desc.has_value());  // not inferred yet
  ASSERT_EQ(x.consumers.size(), 1u);
  EXPECT_EQ(x.consumers[0], (TensorUse{fc.id, 0}));
  EXPECT_TRUE(z.is_output);
  EXPECT_EQ(z.producer, g->FindOp("act"));
  EXPECT_EQ(g->op(g->FindOp("act")).stage, 1);
  EXPECT_EQ(g->op_order(), (std::vector<OpId>{OpId(0), OpId(1)}));
  EXPECT_EQ(g->Describe(fc.id), "matmul 'fc'");
  EXPECT_EQ(g->Describe(x.id), "tensor 'x'");
}

TEST_F(GraphTest, VariableUpdatesAreCheckedAndVerified) {
  absl::StatusOr<Graph> g = Graph::FromJobProto(ParseJob(kSmallJob), *registry_);
  ASSERT_TRUE(g.ok()) << g.status();
  const TensorId x = g->FindTensor("x"), w = g->FindTensor("w"), y = g->FindTensor("y"), z = g->FindTensor("z");
  ExpectError(g->AddVariableUpdate(x, y), absl::StatusCode::kInvalidArgument, {"tensor 'x'", "not a variable"});
  ExpectError(g->AddVariableUpdate(w, x), absl::StatusCode::kInvalidArgument, {"must be an op output"});
  ExpectError(g->AddVariableUpdate(w, TensorId(99)), absl::StatusCode::kInvalidArgument, {"unknown tensor"});
  ASSERT_TRUE(g->AddVariableUpdate(w, z).ok());
  ExpectError(g->AddVariableUpdate(w, y), absl::StatusCode::kInvalidArgument, {"already has an update"});
  ASSERT_EQ(g->variable_updates().size(), 1u);
  EXPECT_EQ(g->variable_updates()[0].variable, w);
  EXPECT_EQ(g->variable_updates()[0].new_value, z);
  EXPECT_TRUE(VerifyGraph(*g, VerifierOptions{.require_inferred = false}).ok());
  // Once inferred, z float32[4,2] cannot replace w float32[3,2].
  absl::StatusOr<bool> inferred = InferPass().Run(&*g);
  ASSERT_TRUE(inferred.ok()) << inferred.status();
  ExpectError(VerifyGraph(*g), absl::StatusCode::kInternal, {"variable update of tensor 'w'", "descs differ"});
}

TEST_F(GraphTest, ToJobProtoIsCanonicalAndRoundTrips) {
  Graph g = *Graph::FromJobProto(ParseJob(kSmallJob), *registry_);
  JobProto out = g.ToJobProto();
  // Sources first, then op outputs in program order; attrs complete; initializer kept.
  ASSERT_EQ(out.tensors_size(), 4);
  EXPECT_EQ(out.tensors(0).name(), "x");
  EXPECT_EQ(out.tensors(1).name(), "w");
  EXPECT_EQ(out.tensors(2).name(), "y");
  EXPECT_EQ(out.tensors(3).name(), "z");
  EXPECT_EQ(out.tensors(1).initializer().kind(), InitializerProto::NORMAL);
  EXPECT_EQ(out.ops(0).attrs().size(), 3u);
  EXPECT_TRUE(out.ops(0).attrs().at("transpose_a").has_b());
  Graph again = *Graph::FromJobProto(out, *registry_);
  std::string diff;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differencer.Compare(out, again.ToJobProto())) << diff;
}

TEST_F(GraphTest, FromJobProtoRejectsBadJobs) {
  JobProto job = ParseJob(kSmallJob);
  JobProto bad = job;
  bad.mutable_ops(0)->set_type("matmull");
  ExpectError(Graph::FromJobProto(bad, *registry_).status(), absl::StatusCode::kNotFound,
              {"op 'fc'", "unknown op 'matmull'", "matmul"});

  bad = job;
  std::swap(*bad.mutable_ops(0), *bad.mutable_ops(1));
  ExpectError(Graph::FromJobProto(bad, *registry_).status(), absl::StatusCode::kInvalidArgument,
              {"relu 'act'", "input 'y' is used before it is produced", "program order"});

  bad = job;
  bad.mutable_ops(0)->set_inputs(1, "nope");
  ExpectError(Graph::FromJobProto(bad, *registry_).status(), absl::StatusCode::kInvalidArgument,
              {"matmul 'fc'", "unknown input tensor 'nope'"});

  bad = job;
  bad.mutable_tensors(1)->set_is_input(true);
  ExpectError(Graph::FromJobProto(bad, *registry_).status(), absl::StatusCode::kInvalidArgument,
              {"tensor 'w'", "both an input and a variable"});

  bad = job;
  bad.mutable_tensors(0)->mutable_initializer()->set_kind(InitializerProto::ONES);
  ExpectError(Graph::FromJobProto(bad, *registry_).status(), absl::StatusCode::kInvalidArgument,
              {"tensor 'x'", "initializer is only allowed on a variable"});

  bad = job;
  bad.add_tensors()->set_name("orphan");
  ExpectError(Graph::FromJobProto(bad, *registry_).status(), absl::StatusCode::kInvalidArgument,
              {"tensor 'orphan'", "no op produces it"});

  bad = job;
  bad.mutable_tensors(0)->clear_desc();
  ExpectError(Graph::FromJobProto(bad, *registry_).status(), absl::StatusCode::kInvalidArgument,
              {"tensor 'x'", "need a desc"});

  bad = job;
  bad.mutable_ops(1)->add_outputs("extra");
  ExpectError(Graph::FromJobProto(bad, *registry_).status(), absl::StatusCode::kInvalidArgument,
              {"relu 'act'", "has 1 output(s) (y)", "got 2 output name(s) (z, extra)"});

  bad = job;
  (*bad.mutable_ops(0)->mutable_attrs())["transpose_b"].set_i(1);
  ExpectError(Graph::FromJobProto(bad, *registry_).status(), absl::StatusCode::kInvalidArgument,
              {"matmul 'fc'", "attribute 'transpose_b' must be bool"});

  bad = job;
  bad.mutable_config()->set_loss("z");
  ExpectError(Graph::FromJobProto(bad, *registry_).status(), absl::StatusCode::kInvalidArgument,
              {"loss 'z'", "no optimizer"});

  bad = job;
  bad.mutable_tensors(0)->mutable_placement()->add_ranks(1);  // duplicate rank
  ExpectError(Graph::FromJobProto(bad, *registry_).status(), absl::StatusCode::kInvalidArgument,
              {"tensor 'x'", "bad placement"});
}

TEST_F(GraphTest, AddOpChecksArityNamesAndPins) {
  Graph g(registry_.get());
  TensorId x = *g.AddSource(SourceSpec{"x", TensorDesc{DataType::kFloat32, Shape({4, 3})}});
  OpSpec spec;
  spec.name = "y";
  spec.type = "matmul";
  spec.inputs = {x};
  spec.output_names = {"y"};
  ExpectError(g.AddOp(spec).status(), absl::StatusCode::kInvalidArgument,
              {"matmul 'y'", "expects 2 input(s) (a, b), got 1 (x)"});
  spec.inputs = {x, x};
  spec.output_names = {"x"};
  ExpectError(g.AddOp(spec).status(), absl::StatusCode::kInvalidArgument,
              {"matmul 'y'", "tensor name 'x' is already defined", "an input"});
  spec.output_names = {"y"};
  spec.pinned_input_nd_sbp[2] = NdSbp({Sbp::Broadcast()});
  ExpectError(g.AddOp(spec).status(), absl::StatusCode::kInvalidArgument,
              {"matmul 'y'", "SBP pinned for input 2", "2 input(s)"});
  spec.pinned_input_nd_sbp.clear();
  spec.inputs = {x, TensorId(17)};
  ExpectError(g.AddOp(spec).status(), absl::StatusCode::kInvalidArgument,
              {"matmul 'y'", "input 1 refers to tensor #17"});
  spec.inputs = {x, x};
  ASSERT_TRUE(g.AddOp(spec).ok());
  // The same tensor read twice gives two uses.
  EXPECT_EQ(g.tensor(x).consumers.size(), 2u);
  spec.output_names = {"y2"};
  ExpectError(g.AddOp(spec).status(), absl::StatusCode::kInvalidArgument, {"op name 'y' is already used"});
  ExpectError(g.AddSource(SourceSpec{"y", TensorDesc{DataType::kFloat32, Shape({1})}}).status(),
              absl::StatusCode::kInvalidArgument, {"input 'y'", "already defined", "output 0 of matmul 'y'"});
  EXPECT_EQ(g.UniqueTensorName("y"), "y_1");
  EXPECT_EQ(g.UniqueOpName("z"), "z");
}

TEST_F(GraphTest, ReplaceInputAndInsertBeforeKeepLinksAndOrder) {
  Graph g = *Graph::FromJobProto(ParseJob(kSmallJob), *registry_);
  const OpId act = g.FindOp("act");
  const TensorId y = g.FindTensor("y");
  OpSpec copy;
  copy.name = "y.copy";
  copy.type = "identity";
  copy.inputs = {y};
  copy.output_names = {"y.copy"};
  copy.insert_before = act;
  OpId id = *g.AddOp(copy);
  EXPECT_EQ(g.op_order(), (std::vector<OpId>{g.FindOp("fc"), id, act}));
  ASSERT_TRUE(g.ReplaceInput(act, 0, g.FindTensor("y.copy")).ok());
  EXPECT_EQ(g.op(act).inputs[0], g.FindTensor("y.copy"));
  ASSERT_EQ(g.tensor(y).consumers.size(), 1u);
  EXPECT_EQ(g.tensor(y).consumers[0].op, id);
  ASSERT_EQ(g.tensor(g.FindTensor("y.copy")).consumers.size(), 1u);
  EXPECT_EQ(g.tensor(g.FindTensor("y.copy")).consumers[0], (TensorUse{act, 0}));
  EXPECT_EQ(g.ReplaceInput(act, 3, y).code(), absl::StatusCode::kInternal);
}

TEST(ProtoConvertTest, AttrValuesAndDescsRoundTrip) {
  for (const AttrValue& v : {AttrValue(int64_t{-3}), AttrValue(0.25), AttrValue(true), AttrValue(std::string("gelu")),
                             AttrValue(std::vector<int64_t>{1, -1}), AttrValue(std::vector<double>{0.5, 2.0}),
                             AttrValue(DataType::kInt64)}) {
    absl::StatusOr<AttrValue> back = AttrValueFromProto(AttrValueToProto(v));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(*back == v) << AttrValueToString(v);
  }
  EXPECT_FALSE(AttrValueFromProto(AttrValueProto()).ok());
  TensorDesc d{DataType::kBFloat16, Shape({2, 0, 5})};
  EXPECT_EQ(*TensorDescFromProto(TensorDescToProto(d)), d);
  TensorDescProto bad;
  bad.add_dims(2);  // DT_INVALID
  EXPECT_FALSE(TensorDescFromProto(bad).ok());
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
