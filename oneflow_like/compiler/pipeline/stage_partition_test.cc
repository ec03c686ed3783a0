#include "oneflow_like/compiler/pipeline/stage_partition.h"

#include <algorithm>
#include <functional>
#include <random>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/test_util.h"

namespace oneflow_like {
namespace compiler {
namespace {

using testing::ExpectError;

StagePartitionProblem SameCosts(const std::vector<double>& costs, int num_stages) {
  return StagePartitionProblem{std::vector<std::vector<double>>(num_stages, costs), {}};
}

// Every cut of n items into S non-empty runs that respects `allowed`: (bottleneck, sum of
// squares) of the best by bottleneck, then by sum of squares.
struct BruteForce {
  double bottleneck = -1;  // -1: no feasible cut
  double squares = 0;
};

BruteForce Enumerate(const StagePartitionProblem& p) {
  const int num_stages = static_cast<int>(p.cost.size());
  const int n = static_cast<int>(p.cost[0].size());
  BruteForce best;
  std::vector<int> stage_of(n);
  std::function<void(int, int)> place = [&](int item, int stage) {
    if (item == n) {
      if (stage != num_stages - 1) return;
      std::vector<double> sums(num_stages, 0);
      for (int i = 0; i < n; ++i) {
        if (!p.allowed.empty() && !p.allowed[i].empty() && !p.allowed[i][stage_of[i]]) return;
        sums[stage_of[i]] += p.cost[stage_of[i]][i];
      }
      const double b = *std::max_element(sums.begin(), sums.end());
      double sq = 0;
      for (double s : sums) sq += s * s;
      if (best.bottleneck < 0 || b < best.bottleneck - 1e-12 ||
          (b <= best.bottleneck + 1e-12 && sq < best.squares - 1e-9)) {
        best = BruteForce{b, sq};
      }
      return;
    }
    // Item `item` continues stage `stage` (if it already has an item) or opens the next one.
    if (item > 0) {
      stage_of[item] = stage;
      place(item + 1, stage);
    }
    const int next = item == 0 ? 0 : stage + 1;
    if (next < num_stages) {
      stage_of[item] = next;
      place(item + 1, next);
    }
  };
  place(0, 0);
  return best;
}

void ExpectValidCut(const StagePartitionProblem& p, const StagePartition& cut) {
  const int num_stages = static_cast<int>(p.cost.size());
  const size_t n = p.cost[0].size();
  ASSERT_EQ(cut.stage_of.size(), n);
  ASSERT_EQ(cut.stage_seconds.size(), static_cast<size_t>(num_stages));
  EXPECT_EQ(cut.stage_of.front(), 0);
  EXPECT_EQ(cut.stage_of.back(), num_stages - 1);
  std::vector<double> sums(num_stages, 0);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) {
      EXPECT_TRUE(cut.stage_of[i] == cut.stage_of[i - 1] || cut.stage_of[i] == cut.stage_of[i - 1] + 1)
          << "item " << i;  // contiguous, non-decreasing, no stage skipped
    }
    sums[cut.stage_of[i]] += p.cost[cut.stage_of[i]][i];
  }
  for (int s = 0; s < num_stages; ++s) EXPECT_NEAR(cut.stage_seconds[s], sums[s], 1e-9);
  EXPECT_NEAR(cut.bottleneck_seconds, *std::max_element(sums.begin(), sums.end()), 1e-9);
}

TEST(StagePartitionTest, WorkedExamples) {
  absl::StatusOr<StagePartition> two = PartitionStages(SameCosts({2, 1, 8, 1, 1}, 2));
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->stage_of, (std::vector<int>{0, 0, 1, 1, 1}));
  EXPECT_EQ(two->bottleneck_seconds, 10);
  absl::StatusOr<StagePartition> three = PartitionStages(SameCosts({2, 1, 8, 1, 1}, 3));
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(three->stage_of, (std::vector<int>{0, 0, 1, 2, 2}));
  EXPECT_EQ(three->stage_seconds, (std::vector<double>{3, 8, 2}));
  absl::StatusOr<StagePartition> five = PartitionStages(SameCosts({2, 1, 8, 1, 1}, 5));
  ASSERT_TRUE(five.ok());
  EXPECT_EQ(five->stage_of, (std::vector<int>{0, 1, 2, 3, 4}));
  // The most even of the cuts that reach the bottleneck.
  absl::StatusOr<StagePartition> even = PartitionStages(SameCosts({6, 1, 2, 3}, 3));
  ASSERT_TRUE(even.ok());
  EXPECT_EQ(even->stage_of, (std::vector<int>{0, 1, 1, 2}));
  EXPECT_EQ(even->bottleneck_seconds, 6);
}

TEST(StagePartitionTest, MatchesBruteForceOnRandomProblems) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> cost(0.0, 10.0);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 9);
    const int num_stages = 1 + static_cast<int>(rng() % std::min(n, 4));
    StagePartitionProblem p;
    const bool per_stage = trial % 3 == 0;  // stage-dependent costs
    p.cost.assign(num_stages, std::vector<double>(n));
    for (int i = 0; i < n; ++i) {
      const double base = trial % 5 == 0 ? std::floor(cost(rng)) : cost(rng);  // integers: many ties
      for (int s = 0; s < num_stages; ++s) p.cost[s][i] = per_stage ? base / (1 + s % 2) : base;
    }
    if (trial % 4 == 1) {  // restrict a few items
      p.allowed.assign(n, {});
      for (int i = 0; i < n; ++i) {
        if (rng() % 3 != 0) continue;
        p.allowed[i].assign(num_stages, false);
        p.allowed[i][rng() % num_stages] = true;
      }
    }
    const BruteForce expected = Enumerate(p);
    absl::StatusOr<StagePartition> cut = PartitionStages(p);
    if (expected.bottleneck < 0) {
      EXPECT_EQ(cut.status().code(), absl::StatusCode::kInvalidArgument) << "trial " << trial;
      continue;
    }
    ASSERT_TRUE(cut.ok()) << "trial " << trial << ": " << cut.status();
    ExpectValidCut(p, *cut);
    EXPECT_NEAR(cut->bottleneck_seconds, expected.bottleneck, 1e-9) << "trial " << trial;
    double squares = 0;
    for (double s : cut->stage_seconds) squares += s * s;
    EXPECT_NEAR(squares, expected.squares, 1e-6) << "trial " << trial;
    for (int i = 0; i < n && !p.allowed.empty(); ++i) {
      if (!p.allowed[i].empty()) {
        EXPECT_TRUE(p.allowed[i][cut->stage_of[i]]) << "trial " << trial;
      }
    }
  }
}

TEST(StagePartitionTest, DeterministicAndFastOnLongChains) {
  std::vector<double> costs;
  for (int i = 0; i < 3000; ++i) costs.push_back(1 + (i * 37) % 11);
  absl::StatusOr<StagePartition> a = PartitionStages(SameCosts(costs, 8));
  absl::StatusOr<StagePartition> b = PartitionStages(SameCosts(costs, 8));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->stage_of, b->stage_of);
  double total = 0;
  for (double c : costs) total += c;
  EXPECT_LT(a->bottleneck_seconds, total / 8 + 11.5);  // within one item of the ideal
}

TEST(StagePartitionTest, Errors) {
  ExpectError(PartitionStages(SameCosts({1, 2}, 3)).status(), absl::StatusCode::kInvalidArgument,
              {"3 stages but only 2 items", "hint"});
  ExpectError(PartitionStages(StagePartitionProblem{}).status(), absl::StatusCode::kInvalidArgument, {"no stages"});
  ExpectError(PartitionStages(SameCosts({1, -2}, 1)).status(), absl::StatusCode::kInvalidArgument,
              {"item 1 costs -2"});
  StagePartitionProblem backwards = SameCosts({1, 1}, 2);
  backwards.allowed = {{false, true}, {true, false}};  // item 0 only in stage 1, item 1 only in 0
  ExpectError(PartitionStages(backwards).status(), absl::StatusCode::kInvalidArgument, {"no contiguous cut"});
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
