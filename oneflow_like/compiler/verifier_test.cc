#include "oneflow_like/compiler/verifier.h"

#include "gtest/gtest.h"
#include "oneflow_like/compiler/test_util.h"

namespace oneflow_like {
namespace compiler {
namespace {

using testing::ExpectError;

// Every test starts from the inferred MLP of test_util.h (ops h, hb, a, logits, loss) and
// breaks one invariant by hand.
class VerifierTest : public ::testing::Test {
 protected:
  TensorNode* T(const std::string& name) { return g_.mutable_tensor(g_.FindTensor(name)); }
  OpNode* O(const std::string& name) { return g_.mutable_op(g_.FindOp(name)); }
  void ExpectBroken(const std::vector<std::string>& parts) {
    ExpectError(VerifyGraph(g_), absl::StatusCode::kInternal, parts);
  }

  std::unique_ptr<OpRegistry> registry_ = testing::BuiltinRegistry();
  Graph g_ = testing::ParseAndInfer(testing::kMlpText, *registry_);
};

TEST_F(VerifierTest, AcceptsWellFormedGraphs) {
  EXPECT_TRUE(VerifyGraph(g_).ok()) << VerifyGraph(g_);
  Graph gpt = testing::ParseAndInfer(testing::kGptBlockText, *registry_);
  EXPECT_TRUE(VerifyGraph(gpt).ok()) << VerifyGraph(gpt);
  // A parsed but not inferred graph is structurally fine, but not inferred.
  Graph raw = testing::ParseOrDie(testing::kMlpText, *registry_);
  EXPECT_TRUE(VerifyGraph(raw, VerifierOptions{false}).ok());
  ExpectError(VerifyGraph(raw), absl::StatusCode::kInternal,
              {"graph verifier: tensor 'w1' has no placement (run the infer pass)"});
}

TEST_F(VerifierTest, RejectsDanglingInput) {
  O("logits")->inputs[1] = TensorId(999);
  ExpectBroken({"matmul 'logits' input 1 refers to tensor #999, which does not exist (dangling input)"});
}

TEST_F(VerifierTest, RejectsAConsumerListMissingAUse) {
  T("x")->consumers.clear();
  ExpectBroken({"asymmetric link: matmul 'h' reads tensor 'x' as input 0 but the tensor lists that use 0 times"});
}

TEST_F(VerifierTest, RejectsAConsumerListWithAnExtraUse) {
  T("w1")->consumers.push_back(TensorUse{g_.FindOp("a"), 0});
  ExpectBroken({"asymmetric link: tensor 'w1' lists a use by relu 'a' input 0, but that input does not read it"});
}

TEST_F(VerifierTest, RejectsAsymmetricProducerLinks) {
  T("hb")->producer_output = 1;
  ExpectBroken({"asymmetric link: bias_add 'hb' lists tensor 'hb' as output 0 but the tensor says it is output 1 of "
                "bias_add 'hb'"});
}

TEST_F(VerifierTest, RejectsATensorWithoutProducer) {
  Graph g(registry_.get());
  ASSERT_TRUE(g.AddSource(SourceSpec{"x", TensorDesc{DataType::kFloat32, Shape({2})}}).ok());
  g.mutable_tensor(TensorId(0))->is_input = false;
  ExpectError(VerifyGraph(g, VerifierOptions{false}), absl::StatusCode::kInternal,
              {"tensor 'x' has no producer and is neither an input nor a variable (dangling tensor)"});
}

TEST_F(VerifierTest, RejectsASourceWithAProducer) {
  T("x")->producer = g_.FindOp("h");
  ExpectBroken({"tensor 'x' is an input but has producer matmul 'h'"});
}

TEST_F(VerifierTest, RejectsAWrongDesc) {
  T("logits")->desc = TensorDesc{DataType::kFloat32, Shape({64, 11})};
  ExpectBroken({"tensor 'logits' has desc float32[64,11] but matmul 'logits' infers float32[64,10] for output 0"});
}

TEST_F(VerifierTest, RejectsAnOpThatNoLongerInfers) {
  T("w2")->desc = TensorDesc{DataType::kFloat32, Shape({255, 10})};
  ExpectBroken({"matmul 'logits' no longer infers from its inputs", "inner dimensions differ"});
}

TEST_F(VerifierTest, RejectsUseBeforeProduction) {
  ASSERT_TRUE(g_.ReplaceInput(g_.FindOp("h"), 0, g_.FindTensor("a")).ok());
  ExpectBroken({"matmul 'h' reads tensor 'a' before its producer relu 'a' runs (the program order is not topological)"});
}

TEST_F(VerifierTest, RejectsDuplicateNamesAndBadIds) {
  T("a")->name = "hb";
  ExpectBroken({"tensor name 'hb'", "is not unique or not indexed"});
  T("a")->name = "a";
  O("a")->id = OpId(0);
  ExpectBroken({"op 'a' at index 2 has id 0"});
}

TEST_F(VerifierTest, RejectsAWrongOpDefOrArity) {
  O("h")->def = registry_->Find("relu");
  ExpectBroken({"matmul 'h' does not point to the registered OpDef of 'matmul'"});
  O("h")->def = registry_->Find("matmul");
  O("a")->inputs.push_back(g_.FindTensor("x"));
  ExpectBroken({"relu 'a' has 2 inputs but its OpDef expects 1"});
}

TEST_F(VerifierTest, RejectsMissingOrMismatchedPlacements) {
  O("a")->placement.reset();
  ExpectBroken({"relu 'a' has no placement"});
  O("a")->placement = Placement(DeviceType::kCpu, {Rank(0)});
  ExpectBroken({"tensor 'a' is on cpu:[0,1,2,3] but its producer relu 'a' is on cpu:[0]"});
}

TEST_F(VerifierTest, RejectsInvalidPins) {
  T("w2")->pinned_nd_sbp = NdSbp({Sbp::Split(0), Sbp::Broadcast()});
  ExpectBroken({"tensor 'w2' pinned to [S(0), B] is invalid", "hierarchy [4] has 1 axes"});
}

TEST_F(VerifierTest, ChecksChosenSignaturesAndSbps) {
  OpNode* h = O("h");
  h->nd_sbp_signature = NdSbpSignature{{NdSbp({Sbp::Split(0)}), NdSbp({Sbp::Broadcast()})}, {NdSbp({Sbp::Split(0)})}};
  EXPECT_TRUE(VerifyGraph(g_).ok()) << VerifyGraph(g_);
  h->nd_sbp_signature->inputs.pop_back();
  ExpectBroken({"matmul 'h' has a chosen signature with 1 inputs and 1 outputs for an op with 2 and 1"});
  h->nd_sbp_signature->inputs.push_back(NdSbp({Sbp::Broadcast(), Sbp::Broadcast()}));
  ExpectBroken({"matmul 'h' chose [B, B] for input 1 but its placement cpu:[0,1,2,3] has 1 hierarchy axes"});
  h->nd_sbp_signature->inputs[1] = NdSbp({Sbp::Broadcast()});
  h->pinned_input_nd_sbp[0] = NdSbp({Sbp::Broadcast()});
  ExpectBroken({"matmul 'h' chose [S(0)] for input 0 but it is pinned to [B]"});
  h->pinned_input_nd_sbp.clear();
  T("x")->nd_sbp = NdSbp({Sbp::Broadcast()});
  ExpectBroken({"tensor 'x' has chosen SBP [B] but is pinned to [S(0)]"});
  T("x")->nd_sbp = NdSbp({Sbp::Split(0), Sbp::Split(1)});
  ExpectBroken({"tensor 'x' has chosen SBP [S(0), S(1)] which does not fit its placement cpu:[0,1,2,3]"});
}

TEST_F(VerifierTest, ChecksTheJobConfig) {
  g_.mutable_config()->set_loss("nope");
  ExpectBroken({"config: loss 'nope' is not a tensor of the graph"});
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
