#include "oneflow_like/compiler/sbp/sbp_candidates.h"

#include <algorithm>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/test_util.h"

namespace oneflow_like {
namespace compiler {
namespace {

using testing::ExpectError;

class SbpCandidatesTest : public ::testing::Test {
 protected:
  Graph Parse(const std::string& text) { return testing::ParseAndInfer(text, *registry_); }
  static std::vector<std::string> Texts(const NodeCandidates& c, bool eligible) {
    std::vector<std::string> out;
    for (size_t a = 0; a < c.all.size(); ++a) {
      if (c.all[a].rejected_reason.empty() == eligible) out.push_back(c.all[a].signature.ToString());
    }
    return out;
  }
  std::unique_ptr<OpRegistry> registry_ = testing::BuiltinRegistry();
  CostConfig config_;
};

TEST_F(SbpCandidatesTest, MatmulOnFourRanksHasSixSignatures) {
  Graph g = Parse("x = input(shape=[4096,64]) placement=cpu:[0,1,2,3]\nw = variable(shape=[64,64])\ny = matmul(x, w)\n");
  absl::StatusOr<NodeCandidates> c = OpCandidates(g, g.FindOp("y"), config_);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->all.size(), 6u);
  EXPECT_EQ(c->eligible.size(), 6u);
  // The data-parallel candidate, priced by hand: each rank multiplies [1024,64] by [64,64].
  const SbpCandidate& dp = c->all[0];
  EXPECT_EQ(dp.signature.inputs[0], NdSbp({Sbp::Split(0)}));
  EXPECT_EQ(dp.signature.inputs[1], NdSbp({Sbp::Broadcast()}));
  const double flops = 2.0 * 1024 * 64 * 64;
  const double bytes = 4.0 * (1024 * 64 + 64 * 64 + 1024 * 64);
  EXPECT_NEAR(dp.compute_seconds, config_.task_overhead_seconds + std::max(flops / 20e9, bytes / 10e9), 1e-15);
  // B x B -> B replicates the whole product on every rank.
  const SbpCandidate& replicated = c->all.back();
  EXPECT_EQ(replicated.signature.outputs[0], NdSbp({Sbp::Broadcast()}));
  EXPECT_NEAR(replicated.compute_seconds,
              config_.task_overhead_seconds + std::max(4 * flops / 20e9, 4.0 * (2 * 4096 * 64 + 64 * 64) / 10e9),
              1e-15);
}

TEST_F(SbpCandidatesTest, PinsAndShapesRejectWithReasons) {
  Graph g = Parse(
      "x = input(shape=[2,64]) placement=cpu:[0,1,2,3]\n"
      "w = variable(shape=[64,64])\n"
      "y = matmul(x, w) in_sbp=[_, [S(1)]]\n");
  absl::StatusOr<NodeCandidates> c = OpCandidates(g, g.FindOp("y"), config_);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(Texts(*c, true), std::vector<std::string>{"(B), (S(1)) -> (S(1))"});
  // S(0) of x cannot split 2 rows over 4 ranks; the rest conflict with the pin.
  EXPECT_NE(c->all[0].rejected_reason.find("cannot lay out shape [2,64]"), std::string::npos) << c->all[0].rejected_reason;
  EXPECT_NE(c->all[2].rejected_reason.find("in_sbp of input 1 ('w')"), std::string::npos) << c->all[2].rejected_reason;
}

TEST_F(SbpCandidatesTest, NoEligibleCandidateNamesOpPinsAndHint) {
  Graph g = Parse(
      "x = input(shape=[64,64]) placement=cpu:[0,1,2,3]\n"
      "w = variable(shape=[64,64])\n"
      "y = matmul(x, w) in_sbp=[[S(0)], _] out_sbp=[[S(1)]]\n");
  ExpectError(OpCandidates(g, g.FindOp("y"), config_).status(), absl::StatusCode::kInvalidArgument,
              {"matmul 'y': no SBP signature", "x float32[64,64] in_sbp=[S(0)]", "y float32[64,64] out_sbp=[S(1)]",
               "hint: drop the in_sbp of input 0 ('x'), or the out_sbp of output 0 ('y')"});
}

TEST_F(SbpCandidatesTest, SourcesOfferBroadcastAndValidSplits) {
  Graph g = Parse("x = input(shape=[8,3]) placement=cpu:[[0,1],[2,3]]\ny = relu(x)\n"
                  "z = input(shape=[8,3]) placement=cpu:[0,1,2,3] sbp=[S(0)]\nu = relu(z)\n");
  NodeCandidates x = SourceCandidates(g, g.FindTensor("x"));
  EXPECT_EQ(x.all.size(), 9u);  // {B, S(0), S(1)} on each of 2 mesh axes
  // (S(1), S(1)) would cut 3 columns into 4 parts.
  EXPECT_EQ(Texts(x, false), std::vector<std::string>{" -> (S(1), S(1))"});
  NodeCandidates z = SourceCandidates(g, g.FindTensor("z"));
  EXPECT_EQ(Texts(z, true), std::vector<std::string>{" -> (S(0))"});
  EXPECT_NE(z.all[0].rejected_reason.find("tensor 'z' is pinned to [S(0)]"), std::string::npos);
}

TEST_F(SbpCandidatesTest, TwoDimensionalMeshCombinesOneDimensionalSignatures) {
  Graph g = Parse("x = input(shape=[64,64]) placement=cpu:[[0,1],[2,3]]\nw = variable(shape=[64,64])\ny = matmul(x, w)\n");
  absl::StatusOr<NodeCandidates> c = OpCandidates(g, g.FindOp("y"), config_);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->eligible.size(), 36u);
  // (S(0), S(1)) x (B, B)... the row-split on mesh axis 0 and the column split on axis 1
  // divide the work by 4, like the 1-D data-parallel candidate on 4 ranks.
  auto it = std::find_if(c->all.begin(), c->all.end(), [](const SbpCandidate& s) {
    return s.signature.outputs[0] == NdSbp({Sbp::Split(0), Sbp::Split(1)});
  });
  ASSERT_NE(it, c->all.end());
  const double flops = 2.0 * 32 * 64 * 32;
  const double bytes = 4.0 * (32 * 64 + 64 * 32 + 32 * 32);
  EXPECT_NEAR(it->compute_seconds, config_.task_overhead_seconds + std::max(flops / 20e9, bytes / 10e9), 1e-15);
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
