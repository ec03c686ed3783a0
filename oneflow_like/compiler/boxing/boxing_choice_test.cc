// The schedule choice (kAuto): the cheapest of direct, ring and staged, with direct costed last
// and given up on once dearer than the best other (BoxingCostAccumulator::set_give_up_above).
// The reference: every policy costed in full on its own, and the first of the cheapest taken.
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "oneflow_like/compiler/boxing/boxing.h"
#include "oneflow_like/compiler/boxing/boxing_cost.h"
#include "oneflow_like/compiler/boxing/boxing_test_util.h"

namespace oneflow_like {
namespace compiler {
namespace {

using testing_util::MakeRequest;

TEST(BoxingGiveUpTest, GivesUpOnlyOnceTheCostExceedsTheBound) {
  CostConfig config;
  const double one = TransferSeconds(1000, LinkClass::kSameNode, config);
  BoxingCostAccumulator acc(&config);
  acc.set_give_up_above(2.5 * one);
  acc.Transfer(Rank(0), Rank(1), 1000);
  acc.Transfer(Rank(2), Rank(1), 1000);  // rank 1 receives 2 messages: 2 x one
  EXPECT_FALSE(acc.gave_up());
  acc.Transfer(Rank(0), Rank(2), 1000);  // spread: nobody over 2 x one
  EXPECT_FALSE(acc.gave_up());
  acc.Transfer(Rank(3), Rank(1), 1000);  // rank 1: 3 x one > 2.5 x one
  EXPECT_TRUE(acc.gave_up());
  EXPECT_GT(acc.Finish().seconds, 2.5 * one);

  BoxingCostAccumulator never(&config);  // the default bound: infinity
  for (int i = 0; i < 100; ++i) never.Local(StepKind::kAdd, Rank(0), 1 << 20, 4);
  EXPECT_FALSE(never.gave_up());
}

// Full cost of `policy` alone, or nullopt where it does not apply.
std::optional<BoxingEstimate> Alone(const BoxingRequest& r, SchedulePolicy policy) {
  BoxingOptions options;
  options.policy = policy;
  absl::StatusOr<BoxingEstimate> e = EstimateBoxing(r, options);
  if (!e.ok()) return std::nullopt;
  return *e;
}

std::string Ranks(int n) {
  std::vector<std::string> r;
  for (int i = 0; i < n; ++i) r.push_back(absl::StrCat(i));
  return absl::StrCat("cpu:[", absl::StrJoin(r, ","), "]");
}

std::string Mesh(int rows, int cols) {
  std::vector<std::string> out;
  for (int i = 0; i < rows; ++i) {
    std::vector<std::string> row;
    for (int j = 0; j < cols; ++j) row.push_back(absl::StrCat(i * cols + j));
    out.push_back(absl::StrCat("[", absl::StrJoin(row, ","), "]"));
  }
  return absl::StrCat("cpu:[", absl::StrJoin(out, ","), "]");
}

TEST(BoxingChoiceTest, AutoIsTheFirstCheapestOfThePoliciesCostedInFull) {
  const std::string r64 = Ranks(64), r5 = Ranks(5), m88 = Mesh(8, 8), m43 = Mesh(4, 3);
  const std::vector<BoxingRequest> requests = {
      MakeRequest("[4096,64]", r64, "P", r64, "B"),        // ring far cheaper: direct given up
      MakeRequest("[64,8]", r64, "P", r64, "S(0)"),
      MakeRequest("[64]", r64, "S(0)", r64, "B"),
      MakeRequest("[3,2]", r5, "P", r5, "B"),              // tiny: direct may win
      MakeRequest("[7,5]", r5, "S(1)", r5, "S(0)"),        // direct only
      MakeRequest("[256,128]", m88, "P, P", m88, "S(0), S(0)"),
      MakeRequest("[256,128]", m88, "P, S(1)", m88, "B, S(1)"),
      MakeRequest("[13,11]", m43, "P, P", m43, "B, S(0)"),  // uneven
      MakeRequest("[12,6]", m43, "S(0), P", m43, "B, B"),
  };
  absl::flat_hash_set<BoxingSchedule> winners;
  for (const BoxingRequest& r : requests) {
    SCOPED_TRACE(r.ToString());
    const BoxingEstimate chosen = EstimateBoxing(r).value();
    // The reference: direct, ring, staged in this order, each in full; the first cheapest wins.
    std::optional<BoxingEstimate> best;
    for (SchedulePolicy p : {SchedulePolicy::kDirect, SchedulePolicy::kRing, SchedulePolicy::kStaged}) {
      std::optional<BoxingEstimate> e = Alone(r, p);
      if (e.has_value() && (!best.has_value() || e->cost.seconds < best->cost.seconds)) best = e;
    }
    ASSERT_TRUE(best.has_value());
    EXPECT_EQ(chosen.schedule_detail, best->schedule_detail);
    EXPECT_EQ(chosen.cost.seconds, best->cost.seconds);
    EXPECT_EQ(chosen.cost.num_transfers, best->cost.num_transfers);
    // The plan built is the one costed.
    const BoxingPlan plan = PointToPointExpander(BoxingOptions{}).Expand(r).value();
    EXPECT_EQ(plan.schedule_detail, chosen.schedule_detail);
    EXPECT_EQ(static_cast<int64_t>(plan.steps.size()), chosen.cost.num_transfers + chosen.cost.num_local_steps);
    EXPECT_EQ(BoxingCost(plan, BoxingOptions{}.cost).seconds, chosen.cost.seconds);
    winners.insert(chosen.schedule);
  }
  // Both outcomes are covered: direct given up on (ring or staged won) and direct kept.
  EXPECT_TRUE(winners.contains(BoxingSchedule::kDirect));
  EXPECT_TRUE(winners.contains(BoxingSchedule::kRing));
  EXPECT_TRUE(winners.contains(BoxingSchedule::kStaged));
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
