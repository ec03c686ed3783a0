#include "oneflow_like/compiler/sbp/sbp_solver.h"

#include <cmath>
#include <iostream>
#include <random>

#include "gtest/gtest.h"

namespace oneflow_like {
namespace compiler {
namespace {

// An edge whose rows/columns are the candidates themselves, with the given matrix.
SbpEdge DenseEdge(int producer, int consumer, const std::vector<std::vector<double>>& matrix) {
  SbpEdge edge;
  edge.producer = producer;
  edge.consumer = consumer;
  for (size_t r = 0; r < matrix.size(); ++r) edge.producer_row.push_back(static_cast<int>(r));
  edge.num_columns = static_cast<int>(matrix[0].size());
  for (int c = 0; c < edge.num_columns; ++c) edge.consumer_column.push_back(c);
  for (const auto& row : matrix) edge.seconds.insert(edge.seconds.end(), row.begin(), row.end());
  return edge;
}

// Random layouts per candidate (several candidates share a layout) and random costs.
SbpEdge RandomEdge(int producer, int consumer, int producer_candidates, int consumer_candidates, std::mt19937* rng) {
  std::uniform_real_distribution<double> cost(0.0, 10.0);
  SbpEdge edge;
  edge.producer = producer;
  edge.consumer = consumer;
  const int rows = 1 + static_cast<int>((*rng)() % producer_candidates);
  edge.num_columns = 1 + static_cast<int>((*rng)() % consumer_candidates);
  for (int c = 0; c < producer_candidates; ++c) edge.producer_row.push_back(c < rows ? c : static_cast<int>((*rng)() % rows));
  for (int c = 0; c < consumer_candidates; ++c) {
    edge.consumer_column.push_back(c < edge.num_columns ? c : static_cast<int>((*rng)() % edge.num_columns));
  }
  for (int i = 0; i < rows * edge.num_columns; ++i) edge.seconds.push_back(std::floor(cost(*rng)));
  return edge;
}

SbpProblem RandomNodes(int n, std::mt19937* rng) {
  SbpProblem p;
  std::uniform_real_distribution<double> cost(0.0, 10.0);
  for (int v = 0; v < n; ++v) {
    std::vector<double> unary(2 + (*rng)() % 3);
    for (double& u : unary) u = std::floor(cost(*rng));
    p.unary.push_back(unary);
  }
  return p;
}

// Brute force over every assignment: the true optimum.
double BruteForce(const SbpProblem& p) {
  std::vector<int> choice(p.unary.size(), 0);
  double best = kInfiniteSeconds;
  while (true) {
    best = std::min(best, TotalSeconds(p, choice));
    size_t v = 0;
    while (v < choice.size() && ++choice[v] == static_cast<int>(p.unary[v].size())) choice[v++] = 0;
    if (v == choice.size()) return best;
  }
}

// No single node can lower the objective by switching (what coordinate descent guarantees).
bool LocallyOptimal(const SbpProblem& p, std::vector<int> choice) {
  const double total = TotalSeconds(p, choice);
  for (size_t v = 0; v < choice.size(); ++v) {
    const int kept = choice[v];
    for (int c = 0; c < static_cast<int>(p.unary[v].size()); ++c) {
      choice[v] = c;
      if (TotalSeconds(p, choice) < total - 1e-9) return false;
    }
    choice[v] = kept;
  }
  return true;
}

TEST(SbpSolverTest, HeaderExampleDpBeatsGreedy) {
  SbpProblem p;
  p.unary = {{0.0}, {1.0, 3.0}, {5.0, 1.0}};  // x, f, g
  p.edges.push_back(DenseEdge(0, 1, {{0.0, 0.0}}));
  p.edges.push_back(DenseEdge(1, 2, {{0.0, 10.0}, {10.0, 0.0}}));
  ASSERT_EQ(CheckProblem(p), "");
  SbpSolution greedy = SolveSbp(p, {SbpAlgorithm::kGreedy, 0, 0});
  EXPECT_EQ(greedy.choice, (std::vector<int>{0, 0, 0}));
  EXPECT_DOUBLE_EQ(greedy.total_seconds, 6.0);
  SbpSolution dp = SolveSbp(p);
  EXPECT_EQ(dp.choice, (std::vector<int>{0, 1, 1}));
  EXPECT_DOUBLE_EQ(dp.total_seconds, 4.0);
  EXPECT_EQ(dp.forest_edges, 2);
  EXPECT_EQ(dp.local_search_switches, 0);
}

TEST(SbpSolverTest, ExactOnRandomChainsAndTrees) {
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 2 + trial % 6;
    SbpProblem p = RandomNodes(n, &rng);
    const bool chain = trial % 2 == 0;
    for (int v = 1; v < n; ++v) {
      const int u = chain ? v - 1 : static_cast<int>(rng() % v);
      // Random orientation: trees whose edges point either way (like variable updates).
      const bool forward = chain || rng() % 3 != 0;
      const int producer = forward ? u : v, consumer = forward ? v : u;
      p.edges.push_back(RandomEdge(producer, consumer, static_cast<int>(p.unary[producer].size()),
                                   static_cast<int>(p.unary[consumer].size()), &rng));
    }
    ASSERT_EQ(CheckProblem(p), "");
    SbpSolution s = SolveSbp(p, {SbpAlgorithm::kTreeDpLocalSearch, 0, 0});  // the DP alone
    EXPECT_NEAR(s.total_seconds, BruteForce(p), 1e-9) << "trial " << trial;
    EXPECT_EQ(s.forest_edges, n - 1);
  }
}

TEST(SbpSolverTest, ParallelEdgesAreSolvedExactly) {
  // split -> matmul(q, k): two edges between one pair, plus a chain around them.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 100; ++trial) {
    SbpProblem p = RandomNodes(4, &rng);
    for (auto [u, v] : std::vector<std::pair<int, int>>{{0, 1}, {1, 2}, {1, 2}, {2, 3}}) {
      p.edges.push_back(RandomEdge(u, v, static_cast<int>(p.unary[u].size()), static_cast<int>(p.unary[v].size()), &rng));
    }
    SbpSolution s = SolveSbp(p, {SbpAlgorithm::kTreeDpLocalSearch, 0, 0});
    EXPECT_NEAR(s.total_seconds, BruteForce(p), 1e-9) << "trial " << trial;
    EXPECT_EQ(s.forest_edges, 4);
  }
}

TEST(SbpSolverTest, GeneralGraphsAreLocallyOptimalAndBeatGreedyOverall) {
  std::mt19937 rng(99);
  double dp_sum = 0, greedy_sum = 0, optimum_sum = 0, descent_sum = 0;
  int optimal = 0, descent_optimal = 0;
  const int trials = 200;
  for (int trial = 0; trial < trials; ++trial) {
    const int n = 4 + trial % 4;
    SbpProblem p = RandomNodes(n, &rng);
    for (int v = 1; v < n; ++v) {
      const int u = static_cast<int>(rng() % v);
      p.edges.push_back(RandomEdge(u, v, static_cast<int>(p.unary[u].size()), static_cast<int>(p.unary[v].size()), &rng));
    }
    for (int extra = 0; extra < 3; ++extra) {  // re-converging and backward edges
      const int a = static_cast<int>(rng() % n), b = static_cast<int>(rng() % n);
      if (a == b) continue;
      p.edges.push_back(RandomEdge(a, b, static_cast<int>(p.unary[a].size()), static_cast<int>(p.unary[b].size()), &rng));
    }
    ASSERT_EQ(CheckProblem(p), "");
    SbpSolution s = SolveSbp(p);
    const double optimum = BruteForce(p);
    const double descent_only = SolveSbp(p, {SbpAlgorithm::kTreeDpLocalSearch, 16, 0}).total_seconds;
    EXPECT_LE(s.total_seconds, descent_only);
    descent_sum += descent_only;
    descent_optimal += descent_only <= optimum + 1e-9;
    EXPECT_GE(s.total_seconds, optimum - 1e-9);
    EXPECT_TRUE(LocallyOptimal(p, s.choice)) << "trial " << trial;
    EXPECT_DOUBLE_EQ(s.total_seconds, TotalSeconds(p, s.choice));
    dp_sum += s.total_seconds;
    greedy_sum += SolveSbp(p, {SbpAlgorithm::kGreedy, 0, 0}).total_seconds;
    optimum_sum += optimum;
    optimal += s.total_seconds <= optimum + 1e-9;
  }
  EXPECT_LT(dp_sum, greedy_sum);
  EXPECT_GE(optimal, descent_optimal);
  EXPECT_GE(optimal, trials * 9 / 10) << "dp " << dp_sum << " greedy " << greedy_sum << " optimum " << optimum_sum;
  std::cout << "optimal: " << optimal << " of " << trials << " (without forest rounds " << descent_optimal
            << "); sums: solver " << dp_sum << ", without forest rounds " << descent_sum << ", greedy " << greedy_sum
            << ", optimum " << optimum_sum << "\n";
}

TEST(SbpSolverTest, AvoidsInfeasiblePairsAndIsDeterministic) {
  SbpProblem p;
  p.unary = {{0.0, 0.0}, {0.0, 5.0}, {0.0, 0.0}};
  p.edges.push_back(DenseEdge(0, 1, {{0.0, 1.0}, {1.0, 0.0}}));
  p.edges.push_back(DenseEdge(1, 2, {{kInfiniteSeconds, 1.0}, {0.0, 0.0}}));
  p.edges.push_back(DenseEdge(0, 2, {{0.0, 0.0}, {0.0, 0.0}}));
  SbpSolution a = SolveSbp(p), b = SolveSbp(p);
  EXPECT_EQ(a.choice, b.choice);
  EXPECT_DOUBLE_EQ(a.total_seconds, 1.0);  // node 1 stays 0 and node 2 takes 1
  EXPECT_EQ(a.choice[1], 0);
  EXPECT_EQ(a.choice[2], 1);
  // Ties go to the first candidate.
  SbpProblem tie;
  tie.unary = {{1.0, 1.0, 1.0}};
  EXPECT_EQ(SolveSbp(tie).choice, std::vector<int>{0});
}

TEST(SbpSolverTest, CheckProblemNamesDefects) {
  SbpProblem p;
  p.unary = {{0.0}, {0.0, 1.0}};
  p.edges.push_back(DenseEdge(0, 1, {{0.0, 0.0}}));
  EXPECT_EQ(CheckProblem(p), "");
  p.edges[0].consumer_column.pop_back();
  EXPECT_NE(CheckProblem(p).find("maps a different number of candidates"), std::string::npos);
  p.edges[0] = DenseEdge(0, 0, {{0.0}});
  EXPECT_NE(CheckProblem(p).find("bad node indices"), std::string::npos);
  p.edges.clear();
  p.unary.push_back({});
  EXPECT_EQ(CheckProblem(p), "node 2 has no candidate");
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
