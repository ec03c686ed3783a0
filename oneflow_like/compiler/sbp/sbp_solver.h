// The combinatorial core of SBP selection, independent of graphs and SBPs: pick one candidate
// per node so that the sum of node costs plus edge costs is minimal.
//
//   minimize  sum_v unary[v][c_v]  +  sum_(edges e = u -> w) cost_e(c_u, c_w)
//
// Nodes are numbered 0..n-1 in the order the caller wants them processed (the SBP pass uses
// sources first, then ops in program order, i.e. a topological order). An edge connects a
// producer candidate's layout (a row) to a consumer candidate's layout (a column): many
// candidates share a layout (matmul has 6 signatures but its input 0 takes only 4 distinct
// layouts), so an edge stores a rows x columns matrix plus a candidate -> row/column map.
// Edges may go "backwards" in the node order (a variable update: optimizer op -> variable) and
// two nodes may share several edges (matmul(q, k) with q, k both outputs of one split).
// Infinite costs mark impossible pairs.
//
// Algorithm (SbpAlgorithm::kTreeDpLocalSearch, the default):
//   1. Spanning forest: edge groups (all edges between one pair of nodes, summed) are taken
//      in order of first appearance and kept when they join two components (union-find).
//   2. Exact min-sum dynamic program on that forest: each tree is rooted at its highest node
//      index; messages go from the leaves to the root
//        M_v(c) = unary_v(c) + sum_children ch  min_c' [ M_ch(c') + cost(c', c) ],
//      the root takes argmin M_root and every child its recorded argmin given its parent's
//      choice (Viterbi back-pointers). On a chain this is exactly Viterbi; on any forest
//      (chains, in-trees, fan-out without re-convergence) it is the exact optimum.
//   3. Coordinate descent over ALL edges (the non-forest edges were ignored in step 2): in
//      node order, each node re-chooses the candidate minimizing its unary cost plus the
//      cost of every incident edge given its neighbours' current choices, switching only on
//      a strict improvement; rounds repeat until none switches or max_local_search_rounds.
//      Every switch lowers the objective, so the result is never worse than step 2's, and
//      on forests step 3 changes nothing.
//   4. Re-conditioned forest rounds (at most max_forest_rounds): fold every off-forest edge
//      into the node costs of both its endpoints at the other endpoint's current choice,
//      re-solve the forest exactly (step 2) and descend again (step 3); keep the result only
//      if the true objective drops, else stop. This moves whole chains at once (e.g. a weight,
//      its forward and backward matmuls) where single-node switches are stuck.
//   Complexity: step 2 costs O(sum over single edges of (|C_u| + |C_w| + R_e * K_e)) with
//   R_e, K_e the distinct layouts on the edge's two sides (groups of k > 1 parallel edges:
//   O(k |C_u| |C_w|)); each round of step 3 costs O(sum over edges of |C_u| + |C_w|); step 4
//   repeats both a bounded number of times.
//   Both are linear in (edges x candidates); memory O(edges x layouts).
//   SbpAlgorithm::kGreedy (a baseline for tests and comparisons): nodes in order, each picks
//   the cheapest candidate given the already decided neighbours; a node without earlier
//   neighbours (a source) is decided together with its first later neighbour, taking the
//   candidate best for that neighbour's choice.
//
// Determinism: ties are broken by candidate index (the first of equal minima wins) and all
// iteration orders are fixed, so equal problems give equal solutions.
//
// Worked example (a chain x -> f -> g with two layouts A/B each; unary f: A 1, B 3;
// g: A 5, B 1; edge f->g costs 0 if equal else 10): greedy takes f=A (1 < 3) and then g=A
// (5 < 1 + 10) for 6 in total; the DP finds f=B, g=B for 4.
//
// Thread-compatible: pure functions of their arguments.
#ifndef ONEFLOW_LIKE_COMPILER_SBP_SBP_SOLVER_H_
#define ONEFLOW_LIKE_COMPILER_SBP_SBP_SOLVER_H_

#include <limits>
#include <string>
#include <vector>

namespace oneflow_like {
namespace compiler {

constexpr double kInfiniteSeconds = std::numeric_limits<double>::infinity();

struct SbpEdge {
  int producer = -1;                  // node index
  int consumer = -1;                  // node index, != producer
  std::vector<int> producer_row;      // per producer candidate: its row in `seconds`
  std::vector<int> consumer_column;   // per consumer candidate: its column in `seconds`
  int num_columns = 0;
  std::vector<double> seconds;        // row-major rows x num_columns; kInfiniteSeconds = impossible

  double Cost(int producer_candidate, int consumer_candidate) const {
    return seconds[static_cast<size_t>(producer_row[producer_candidate]) * num_columns +
                   consumer_column[consumer_candidate]];
  }
};

struct SbpProblem {
  // unary[v][c]: the cost of node v taking candidate c. REQUIRES: every node has >= 1.
  std::vector<std::vector<double>> unary;
  std::vector<SbpEdge> edges;
};

enum class SbpAlgorithm : int {
  kTreeDpLocalSearch = 0,  // spanning-forest DP, then coordinate descent (see above)
  kGreedy = 1,             // per-node greedy baseline
};

struct SbpSolverOptions {
  SbpAlgorithm algorithm = SbpAlgorithm::kTreeDpLocalSearch;
  // Bound on coordinate-descent rounds per descent (0 disables step 3).
  int max_local_search_rounds = 16;
  // Bound on re-conditioned forest rounds (0 disables step 4).
  int max_forest_rounds = 4;
};

struct SbpSolution {
  std::vector<int> choice;       // per node: the chosen candidate
  double total_seconds = 0;      // the objective at `choice`
  int forest_edges = 0;          // edges solved exactly by the DP (parallel edges count each)
  int local_search_rounds = 0;   // rounds run (the last one found no improvement unless bounded)
  int local_search_switches = 0; // candidate changes made by coordinate descent
  int forest_rounds = 0;         // re-conditioned forest rounds that improved the objective
};

// REQUIRES: the problem is well formed (CheckProblem is OK-equivalent: indices in range, map
// sizes match candidate counts, seconds sized rows x columns).
SbpSolution SolveSbp(const SbpProblem& problem, const SbpSolverOptions& options = {});

// The objective of `choice` (one candidate per node).
double TotalSeconds(const SbpProblem& problem, const std::vector<int>& choice);

// Empty if well formed, else a description of the first defect (for Internal errors).
std::string CheckProblem(const SbpProblem& problem);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_SBP_SBP_SOLVER_H_
