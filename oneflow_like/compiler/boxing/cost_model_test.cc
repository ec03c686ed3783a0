#include "oneflow_like/compiler/boxing/cost_model.h"

#include "gtest/gtest.h"

namespace oneflow_like {
namespace compiler {
namespace {

TEST(CostModelTest, ClassifiesLinksByNode) {
  CostConfig c;  // 8 ranks per node
  EXPECT_EQ(Classify(Rank(3), Rank(3), c), LinkClass::kSameProcess);
  EXPECT_EQ(Classify(Rank(0), Rank(7), c), LinkClass::kSameNode);
  EXPECT_EQ(Classify(Rank(7), Rank(8), c), LinkClass::kCrossNode);
  c.ranks_per_node = 2;
  EXPECT_EQ(Classify(Rank(1), Rank(2), c), LinkClass::kCrossNode);
  c.rank_to_node = {0, 1, 0, 1};
  EXPECT_EQ(Classify(Rank(0), Rank(2), c), LinkClass::kSameNode);
  EXPECT_EQ(Classify(Rank(0), Rank(1), c), LinkClass::kCrossNode);
  EXPECT_EQ(Classify(Rank(4), Rank(5), c), LinkClass::kCrossNode);  // unlisted ranks are alone
  EXPECT_EQ(LinkClassName(LinkClass::kCrossNode), "cross_node");
}

TEST(CostModelTest, DefaultsAreOrderedAndTransferIsAlphaBeta) {
  CostConfig c;
  EXPECT_LT(c.same_process.alpha_seconds, c.same_node.alpha_seconds);
  EXPECT_LT(c.same_node.alpha_seconds, c.cross_node.alpha_seconds);
  EXPECT_LT(c.same_process.beta_seconds_per_byte, c.same_node.beta_seconds_per_byte);
  EXPECT_LT(c.same_node.beta_seconds_per_byte, c.cross_node.beta_seconds_per_byte);
  // 1 MB on one node: 30 us + 1e6 / 1.5e9 s.
  EXPECT_NEAR(TransferSeconds(1000000, LinkClass::kSameNode, c), 30e-6 + 1e6 / 1.5e9, 1e-12);
  EXPECT_NEAR(TransferSeconds(0, LinkClass::kCrossNode, c), 50e-6, 1e-15);
}

TEST(CostModelTest, ComputeIsARoofline) {
  CostConfig c;
  c.flops_per_second = 1e9;
  c.memory_bytes_per_second = 1e9;
  c.task_overhead_seconds = 1e-6;
  OpCost matmul{/*flops=*/2e9, /*bytes_moved=*/1e6};     // compute bound: 2 s
  OpCost relu{/*flops=*/1e6, /*bytes_moved=*/8e6};       // memory bound: 8 ms
  EXPECT_NEAR(ComputeSeconds(matmul, c), 2.0 + 1e-6, 1e-12);
  EXPECT_NEAR(ComputeSeconds(relu, c), 8e-3 + 1e-6, 1e-12);
  EXPECT_NEAR(ComputeSeconds(OpCost{}, c), 1e-6, 1e-15);
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
