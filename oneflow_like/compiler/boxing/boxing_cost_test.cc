// BoxingCost and the schedule choice it drives.
#include "oneflow_like/compiler/boxing/boxing_cost.h"

#include "gtest/gtest.h"
#include "oneflow_like/compiler/boxing/boxing_test_util.h"

namespace oneflow_like {
namespace compiler {
namespace {

using testing_util::MakeRequest;

constexpr char kFour[] = "cpu:[0,1,2,3]";

BoxingCostSummary CostOfPlan(const BoxingRequest& r, const BoxingOptions& options = {}) {
  return BoxingCost(PointToPointExpander(options).Expand(r).value(), options.cost);
}

TEST(BoxingCostTest, DirectAllReduceMatchesHandComputedAlphaBeta) {
  CostConfig c;
  BoxingOptions options;
  options.cost = c;
  options.policy = SchedulePolicy::kDirect;
  BoxingCostSummary cost = CostOfPlan(MakeRequest("[7,5]", kFour, "P", kFour, "B"), options);
  const double bytes = 7 * 5 * 4;
  // Each rank receives (and sends) 3 partial tensors, then adds 4 inputs into one output.
  const double comm = 3 * (c.same_node.alpha_seconds + bytes * c.same_node.beta_seconds_per_byte);
  const double add = c.task_overhead_seconds + 5 * bytes / c.memory_bytes_per_second;
  EXPECT_NEAR(cost.seconds, comm + add, 1e-12);
  EXPECT_EQ(cost.bytes_by_link[static_cast<int>(LinkClass::kSameNode)], 12 * 140);
  EXPECT_EQ(cost.bytes_by_link[static_cast<int>(LinkClass::kCrossNode)], 0);
  EXPECT_EQ(cost.max_bytes_received, 3 * 140);
  EXPECT_EQ(cost.num_transfers, 12);
  EXPECT_EQ(cost.num_local_steps, 4);
}

TEST(BoxingCostTest, GrowsWithBytesAndWithLinkClass) {
  const BoxingCostSummary small = CostOfPlan(MakeRequest("[8,4]", kFour, "S(0)", kFour, "B"));
  const BoxingCostSummary large = CostOfPlan(MakeRequest("[8000,4]", kFour, "S(0)", kFour, "B"));
  EXPECT_GT(large.seconds, small.seconds);
  EXPECT_EQ(large.total_bytes, 1000 * small.total_bytes);

  const BoxingRequest pair = MakeRequest("[4096,16]", "cpu:[0,1]", "S(0)", "cpu:[0,1]", "B");
  BoxingOptions one_node, two_nodes;
  two_nodes.cost.ranks_per_node = 1;
  const BoxingCostSummary near = CostOfPlan(pair, one_node);
  const BoxingCostSummary far = CostOfPlan(pair, two_nodes);
  EXPECT_GT(far.seconds, near.seconds);
  EXPECT_EQ(near.bytes_by_link[static_cast<int>(LinkClass::kSameNode)], near.total_bytes);
  EXPECT_EQ(far.bytes_by_link[static_cast<int>(LinkClass::kCrossNode)], far.total_bytes);
  EXPECT_EQ(near.total_bytes, far.total_bytes);

}

TEST(BoxingCostTest, HostToDeviceCopiesArePricedOnTheHostDeviceLink) {
  // Each rank copies its 2048 x 16 floats to its device: no bytes between ranks.
  const BoxingRequest h2d = MakeRequest("[4096,16]", "cpu:[0,1]", "S(0)", "cuda:[0,1]", "S(0)");
  const BoxingCostSummary local = CostOfPlan(h2d);
  EXPECT_EQ(local.total_bytes, 0);
  EXPECT_EQ(local.num_transfers, 0);
  EXPECT_EQ(local.num_copies, 2);
  EXPECT_EQ(local.num_local_steps, 2);
  EXPECT_EQ(local.bytes_copied, 4096 * 16 * 4);
  const CostConfig defaults;
  EXPECT_DOUBLE_EQ(local.seconds, CopySeconds(2048 * 16 * 4, defaults));
  EXPECT_NE(local.ToString().find("2 copies"), std::string::npos) << local.ToString();
  // A slower host <-> device link (PCIe at 10 GB/s, 10 us) prices the same plan higher.
  BoxingOptions pcie;
  pcie.cost.host_device = LinkParams{10e-6, 1.0 / 10e9};
  EXPECT_DOUBLE_EQ(CostOfPlan(h2d, pcie).seconds, 10e-6 + 2048 * 16 * 4 / 10e9);
  // BoxingCost of the materialized plan agrees with the estimate.
  EXPECT_DOUBLE_EQ(EstimateBoxing(h2d, pcie)->cost.seconds, CostOfPlan(h2d, pcie).seconds);
}

TEST(BoxingCostTest, NoCommunicationCostsOnlyLocalWork) {
  EXPECT_EQ(CostOfPlan(MakeRequest("[7,5]", kFour, "B", kFour, "S(0)")).total_bytes, 0);
  const BoxingCostSummary identity = CostOfPlan(MakeRequest("[7,5]", kFour, "S(0)", kFour, "S(0)"));
  EXPECT_EQ(identity.seconds, 0);
  EXPECT_FALSE(identity.critical_rank.valid());
}

TEST(BoxingCostTest, RingForLargeAllReduceDirectForTiny) {
  absl::StatusOr<BoxingEstimate> tiny = EstimateBoxing(MakeRequest("[7,5]", kFour, "P", kFour, "B"));
  absl::StatusOr<BoxingEstimate> large = EstimateBoxing(MakeRequest("[1024,1024]", kFour, "P", kFour, "B"));
  ASSERT_TRUE(tiny.ok() && large.ok());
  EXPECT_EQ(tiny->schedule, BoxingSchedule::kDirect);
  EXPECT_EQ(large->schedule, BoxingSchedule::kRing);
  BoxingOptions direct;
  direct.policy = SchedulePolicy::kDirect;
  const BoxingEstimate forced = EstimateBoxing(MakeRequest("[1024,1024]", kFour, "P", kFour, "B"), direct).value();
  EXPECT_LT(large->cost.seconds, forced.cost.seconds);
  // Per rank the ring receives 2 (n - 1) / n of the tensor, direct (n - 1) tensors.
  EXPECT_EQ(large->cost.max_bytes_received, 2 * 3 * (1024 * 1024 * 4 / 4));
  EXPECT_EQ(forced.cost.max_bytes_received, 3 * 1024 * 1024 * 4);
}

TEST(BoxingCostTest, SharedNicFavoursTheRingAcrossNodes) {
  // 16 ranks on 2 nodes: a direct all-gather pushes every shard through the NIC 8 times.
  BoxingOptions options;
  const BoxingRequest r = MakeRequest("[4096,256]", "cpu:0-15", "S(0)", "cpu:0-15", "B");
  options.policy = SchedulePolicy::kDirect;
  const BoxingEstimate direct = EstimateBoxing(r, options).value();
  options.policy = SchedulePolicy::kRing;
  const BoxingEstimate ring = EstimateBoxing(r, options).value();
  EXPECT_GT(direct.cost.max_nic_seconds, 3 * ring.cost.max_nic_seconds);
  EXPECT_EQ(EstimateBoxing(r).value().schedule, BoxingSchedule::kRing);
}

TEST(BoxingCostTest, EstimateEqualsCostOfTheBuiltPlan) {
  const BoxingRequest requests[] = {
      MakeRequest("[7,5]", kFour, "P", kFour, "B"),
      MakeRequest("[1024,64]", kFour, "P", kFour, "S(1)"),
      MakeRequest("[7,5]", "cpu:[[0,1],[2,3]]", "(P,P)", "cpu:[[0,1],[2,3]]", "(B,B)"),
      MakeRequest("[7,5]", "cpu:[0,1]", "S(0)", "cpu:[8,9,10]", "S(1)"),
      MakeRequest("[5,3,4]", "cpu:[0,1,2]", "B", "cpu:[0,1,2]", "P"),
  };
  for (const BoxingRequest& r : requests) {
    const BoxingEstimate e = EstimateBoxing(r).value();
    const BoxingPlan plan = PointToPointExpander().Expand(r).value();
    const BoxingCostSummary c = BoxingCost(plan, CostConfig());
    EXPECT_EQ(e.schedule, plan.schedule) << r.ToString();
    EXPECT_EQ(e.schedule_detail, plan.schedule_detail);
    EXPECT_DOUBLE_EQ(e.cost.seconds, c.seconds) << r.ToString();
    EXPECT_EQ(e.cost.bytes_by_link, c.bytes_by_link);
    EXPECT_EQ(e.cost.num_transfers, c.num_transfers);
    EXPECT_EQ(e.cost.num_local_steps, c.num_local_steps);
  }
}

TEST(BoxingCostTest, CollectivePlansAreCostedAsRings) {
  const BoxingPlan plan = CollectiveExpander().Expand(MakeRequest("[1024,64]", kFour, "P", kFour, "B")).value();
  const BoxingCostSummary c = BoxingCost(plan, CostConfig());
  EXPECT_EQ(c.num_transfers, 4 * 6);
  EXPECT_EQ(c.max_bytes_received, 6 * 1024 * 64);  // 6 messages of a quarter of 256 KB
}

TEST(BoxingCostTest, CacheReturnsTheSameEstimate) {
  BoxingCostCache cache;
  BoxingRequest r = MakeRequest("[64,64]", kFour, "S(0)", kFour, "B");
  const BoxingEstimate a = cache.Estimate(r).value();
  r.name = "another edge, same transition";
  const BoxingEstimate b = cache.Estimate(r).value();
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(a.cost.seconds, b.cost.seconds);
  EXPECT_FALSE(cache.Estimate(MakeRequest("[3,5]", kFour, "S(0)", kFour, "B")).ok());
  EXPECT_EQ(cache.size(), 1u);
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
