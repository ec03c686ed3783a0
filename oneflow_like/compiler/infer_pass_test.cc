#include "oneflow_like/compiler/infer_pass.h"

#include "gtest/gtest.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/compiler/text_format.h"
#include "oneflow_like/compiler/verifier.h"

namespace oneflow_like {
namespace compiler {
namespace {

using testing::ExpectError;

class InferPassTest : public ::testing::Test {
 protected:
  absl::StatusOr<bool> Infer(Graph* g) { return InferPass().Run(g); }
  // Parses `text` and returns the infer pass's status.
  absl::Status InferError(const std::string& text) {
    Graph g = testing::ParseOrDie(text, *registry_);
    return Infer(&g).status();
  }
  TensorDesc Desc(const Graph& g, const std::string& tensor) { return *g.tensor(g.FindTensor(tensor)).desc; }

  std::unique_ptr<OpRegistry> registry_ = testing::BuiltinRegistry();
};

TEST_F(InferPassTest, FillsShapesAndPlacementsOfATrainableMlp) {
  Graph g = testing::ParseOrDie(testing::kMlpText, *registry_);
  absl::StatusOr<bool> changed = Infer(&g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  const TensorDesc f32_64x256{DataType::kFloat32, Shape({64, 256})};
  EXPECT_EQ(Desc(g, "h"), f32_64x256);
  EXPECT_EQ(Desc(g, "hb"), f32_64x256);
  EXPECT_EQ(Desc(g, "a"), f32_64x256);
  EXPECT_EQ(Desc(g, "logits"), (TensorDesc{DataType::kFloat32, Shape({64, 10})}));
  EXPECT_EQ(Desc(g, "loss"), (TensorDesc{DataType::kFloat32, Shape({})}));
  const Placement four(DeviceType::kCpu, {Rank(0), Rank(1), Rank(2), Rank(3)});
  for (const TensorNode& t : g.tensors()) EXPECT_EQ(*t.placement, four) << t.name;  // variables inherited it
  for (const OpNode& op : g.ops()) EXPECT_EQ(*op.placement, four) << op.name;
  EXPECT_TRUE(VerifyGraph(g).ok()) << VerifyGraph(g);
  // Idempotent.
  changed = Infer(&g);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
}

TEST_F(InferPassTest, InfersTheGptBlockOnA2dMesh) {
  Graph g = testing::ParseAndInfer(testing::kGptBlockText, *registry_);
  EXPECT_EQ(Desc(g, "qkv").shape, Shape({8, 16, 96}));
  EXPECT_EQ(Desc(g, "k").shape, Shape({8, 16, 32}));
  EXPECT_EQ(Desc(g, "scores").shape, Shape({8, 16, 16}));
  EXPECT_EQ(Desc(g, "h1_mean").shape, Shape({8, 16}));
  EXPECT_EQ(Desc(g, "act").shape, Shape({8, 16, 128}));
  EXPECT_EQ(Desc(g, "logits").shape, Shape({8, 16, 50}));
  EXPECT_EQ(Desc(g, "loss").shape, Shape({}));
  EXPECT_EQ(g.op(g.FindOp("mlp.proj")).placement->hierarchy(), (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(VerifyGraph(g).ok()) << VerifyGraph(g);
}

TEST_F(InferPassTest, InferErrorsNameTheTensorsAndSuggestAFix) {
  ExpectError(InferError("x = input(shape=[64,128]) placement=cpu:[0,1,2,3] sbp=[S(0)]\n"
                         "w = variable(shape=[256,128])\n"
                         "y = matmul(x, w)\n"),
              absl::StatusCode::kInvalidArgument,
              {"matmul 'y': inner dimensions differ: a float32[64,128]", "b float32[256,128] has k=256",
               "; inputs: x float32[64,128] sbp=[S(0)], w float32[256,128]",
               "(hint: did you mean transpose_b=true?)"});
  // No hint when no flip helps.
  absl::Status s = InferError("x = input(shape=[64,128]) placement=cpu:[0]\nw = variable(shape=[100,7])\n"
                              "y = matmul(x, w)\n");
  ExpectError(s, absl::StatusCode::kInvalidArgument, {"matmul 'y'", "inputs: x float32[64,128], w float32[100,7]"});
  EXPECT_EQ(std::string(s.message()).find("hint"), std::string::npos) << s;
  ExpectError(InferError("x = input(shape=[4,8]) placement=cpu:[0]\ny = reshape(x, shape=[5,-1])\n"),
              absl::StatusCode::kInvalidArgument, {"reshape 'y'", "inputs: x float32[4,8]"});
  ExpectError(InferError("x = input(shape=[4,8]) placement=cpu:[0]\n"
                         "a, b = split(x, axis=1, sizes=[2,2,4])\n"),
              absl::StatusCode::kInvalidArgument,
              {"split 'a': produces 3 outputs for these attributes, but 2 output names are given"});
}

TEST_F(InferPassTest, ChecksPinnedSbpsAgainstShapes) {
  ExpectError(InferError("x = input(shape=[3,128]) placement=cpu:[0,1,2,3] sbp=[S(0)]\n"),
              absl::StatusCode::kInvalidArgument,
              {"input 'x' (float32[3,128]) pinned to [S(0)]", "cannot lay out shape [3,128]",
               "axis 0 has 3 elements but is split into 4 parts", "hint: give one SBP per mesh axis"});
  ExpectError(InferError("x = input(shape=[8,8]) placement=cpu:[[0,1],[2,3]] sbp=[S(0)]\n"),
              absl::StatusCode::kInvalidArgument, {"has 1 SBP(s) but the placement hierarchy [2,2] has 2 axes"});
  // A variable's pin is checked once it inherits its consumer's placement.
  ExpectError(InferError("x = input(shape=[8,8]) placement=cpu:[0,1,2,3]\n"
                         "w = variable(shape=[2,8]) sbp=[S(0)]\n"
                         "y = add(x, w)\n"),
              absl::StatusCode::kInvalidArgument,
              {"variable 'w' (float32[2,8]) pinned to [S(0)]", "on placement cpu:[0,1,2,3]",
               "axis 0 has 2 elements but is split into 4 parts"});
  ExpectError(InferError("x = input(shape=[4]) placement=cpu:[0,1]\ny = relu(x) in_sbp=[[S(1)]]\n"),
              absl::StatusCode::kInvalidArgument,
              {"relu 'y': input 0 'x' (float32[4]) pinned to [S(1)]", "split axis 1 (mesh axis 0) is out of range"});
  ExpectError(InferError("x = input(shape=[4]) placement=cpu:[0,1]\ny = relu(x) out_sbp=[[B]] sbp=[S(0)]\n"),
              absl::StatusCode::kInvalidArgument,
              {"relu 'y': output 0 is pinned to [B] but tensor 'y' is pinned to [S(0)]"});
  ExpectError(InferError("x = input(shape=[4]) placement=cpu:[0,1]\ny = relu(x) sbp=[S(0), B]\n"),
              absl::StatusCode::kInvalidArgument, {"relu 'y': output 0 'y' (float32[4]) pinned to [S(0), B]"});
}

TEST_F(InferPassTest, PlacementRules) {
  // An op takes its first placed input's placement; an unplaced variable takes its first
  // consumer's; an explicit op placement wins (a cross-placement edge for boxing).
  Graph g = testing::ParseAndInfer("x = input(shape=[4,4]) placement=cpu:[0,1]\n"
                                   "w = variable(shape=[4,4])\n"
                                   "y = matmul(w, x)\n"
                                   "z = relu(y) placement=cpu:[2,3]\n",
                                   *registry_);
  const Placement p01(DeviceType::kCpu, {Rank(0), Rank(1)}), p23(DeviceType::kCpu, {Rank(2), Rank(3)});
  EXPECT_EQ(*g.op(g.FindOp("y")).placement, p01);
  EXPECT_EQ(*g.tensor(g.FindTensor("w")).placement, p01);
  EXPECT_EQ(*g.tensor(g.FindTensor("z")).placement, p23);
  EXPECT_EQ(*g.tensor(g.FindTensor("y")).placement, p01);

  ExpectError(InferError("x = input(shape=[4])\ny = relu(x)\n"), absl::StatusCode::kInvalidArgument,
              {"relu 'y': no placement: neither the op nor its inputs (x) have one",
               "hint: give input 'x' a placement"});
  ExpectError(InferError("f = fill(shape=[2])\n"), absl::StatusCode::kInvalidArgument,
              {"fill 'f': no placement", "hint: give the op a placement"});
  ExpectError(InferError("x = input(shape=[4]) placement=cpu:[0]\nz = input(shape=[2])\ny = relu(x)\n"),
              absl::StatusCode::kInvalidArgument, {"input 'z' has no placement and no consumer to take one from"});
}

TEST_F(InferPassTest, ChecksTheLossAndDeclaredOutputs) {
  std::string text = testing::kMlpText;
  text.replace(text.find("train(loss"), 10, "train(logits");
  ExpectError(InferError(text), absl::StatusCode::kInvalidArgument,
              {"loss 'logits' must be a floating-point scalar, got float32[64,10]", "reduce_mean(logits)"});

  Graph g = testing::ParseOrDie(testing::kMlpText, *registry_);
  JobProto job = g.ToJobProto();
  for (LogicalTensorProto& t : *job.mutable_tensors()) {
    if (t.name() == "logits") {  // a declared desc that disagrees with inference
      t.mutable_desc()->set_dtype(DT_FLOAT32);
      t.mutable_desc()->add_dims(10);
    }
    if (t.name() == "h") *t.mutable_placement() = Placement(DeviceType::kCpu, {Rank(7)}).ToProto();
  }
  Graph declared = *Graph::FromJobProto(job, *registry_);
  ExpectError(Infer(&declared).status(), absl::StatusCode::kInvalidArgument,
              {"tensor 'h' is placed on cpu:[7] but its producer matmul 'h' runs on cpu:[0,1,2,3]"});
  declared.mutable_tensor(declared.FindTensor("h"))->placement.reset();
  ExpectError(Infer(&declared).status(), absl::StatusCode::kInvalidArgument,
              {"tensor 'logits' is declared as float32[10] but matmul 'logits' infers float32[64,10]"});
}

TEST_F(InferPassTest, InferOpHandlesOpsAddedAfterInference) {
  Graph g = testing::ParseAndInfer(testing::kMlpText, *registry_);
  OpSpec spec;
  spec.name = "logits.grad";
  spec.type = "scalar_mul";
  spec.inputs = {g.FindTensor("logits")};
  spec.output_names = {"logits.grad"};
  spec.attrs.Set("value", 2.0);
  OpId id = *g.AddOp(spec);
  ExpectError(VerifyGraph(g), absl::StatusCode::kInternal, {"tensor 'logits.grad' has no desc"});
  absl::StatusOr<bool> changed = InferOp(&g, id);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(Desc(g, "logits.grad"), (TensorDesc{DataType::kFloat32, Shape({64, 10})}));
  EXPECT_TRUE(VerifyGraph(g).ok()) << VerifyGraph(g);

  Graph raw = testing::ParseOrDie(testing::kMlpText, *registry_);
  ExpectError(InferOp(&raw, raw.FindOp("a")).status(), absl::StatusCode::kInternal,
              {"relu 'a': input tensor 'hb' has no desc yet (infer bias_add 'hb' first)"});
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
