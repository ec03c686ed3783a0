// Planning for a world larger than the machine: 512 ranks.
#include <chrono>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "oneflow_like/compiler/boxing/boxing_test_util.h"

namespace oneflow_like {
namespace compiler {
namespace {

using testing_util::MakeRequest;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

constexpr char k512[] = "cpu:0-511";

TEST(BoxingScaleTest, AllGatherOn512RanksIsBuiltQuickly) {
  const BoxingRequest r = MakeRequest("[1024,8]", k512, "S(0)", k512, "B");
  auto start = std::chrono::steady_clock::now();
  const BoxingEstimate estimate = EstimateBoxing(r).value();
  const double estimate_seconds = SecondsSince(start);
  start = std::chrono::steady_clock::now();
  const BoxingPlan plan = PointToPointExpander().Expand(r).value();
  const double expand_seconds = SecondsSince(start);
  std::cout << "512-rank all-gather: estimate " << estimate_seconds << " s, expand " << expand_seconds << " s, "
            << plan.steps.size() << " steps, " << plan.schedule_detail << ", " << estimate.cost.ToString() << "\n";
  // Time is printed, not asserted (benchmarks check speed; a loaded CI machine varies 2-5x).
  // Point-to-point all-gather: every rank receives the 511 other shards (direct or ring alike).
  EXPECT_EQ(plan.CountSteps(StepKind::kTransfer), 512 * 511);
  EXPECT_EQ(plan.CountSteps(StepKind::kTransfer, Rank(300)), 511);
  EXPECT_EQ(estimate.cost.num_transfers, 512 * 511);
}

TEST(BoxingScaleTest, AllReduceOn512RanksChoosesTheRingAndOneCollective) {
  const BoxingRequest r = MakeRequest("[4096,256]", k512, "P", k512, "B");
  auto start = std::chrono::steady_clock::now();
  const BoxingEstimate estimate = EstimateBoxing(r).value();
  std::cout << "512-rank all-reduce estimate: " << SecondsSince(start) << " s, " << estimate.cost.ToString() << "\n";
  EXPECT_EQ(estimate.schedule, BoxingSchedule::kRing);
  EXPECT_EQ(estimate.cost.max_bytes_received, 2 * 511 * (4096 / 512) * 256 * 4);
  const BoxingPlan collective = CollectiveExpander().Expand(r).value();
  ASSERT_EQ(collective.steps.size(), 1u);
  EXPECT_EQ(collective.steps[0].group.size(), 512u);
}

TEST(BoxingScaleTest, TwoDimensionalMeshOf512) {
  // dp 64 x tp 8: the tensor-parallel partial sums are reduced inside groups of 8.
  std::string ranks;
  for (int row = 0; row < 64; ++row) {
    absl::StrAppend(&ranks, row ? "," : "", "[");
    for (int col = 0; col < 8; ++col) absl::StrAppend(&ranks, col ? "," : "", row * 8 + col);
    absl::StrAppend(&ranks, "]");
  }
  const std::string mesh = absl::StrCat("cpu:[", ranks, "]");
  const BoxingRequest r = MakeRequest("[4096,1024]", mesh, "(S(0),P)", mesh, "(S(0),B)");
  const BoxingPlan plan = PointToPointExpander().Expand(r).value();
  for (const BoxingStep& s : plan.steps) {
    if (s.kind == StepKind::kTransfer) {
      ASSERT_EQ(s.peer.value() / 8, s.rank.value() / 8);
    }
  }
  EXPECT_EQ(plan.CountSteps(StepKind::kTransfer, Rank(9)), plan.schedule == BoxingSchedule::kRing ? 14 : 7);
  EXPECT_EQ(CollectiveExpander().Expand(r).value().steps.size(), 64u);
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
