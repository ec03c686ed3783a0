#include "oneflow_like/compiler/sbp/sbp_solver.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"

namespace oneflow_like {
namespace compiler {
namespace {

// One side of an edge as seen from a node.
struct Incidence {
  int edge;
  int other;          // the node at the other end
  bool is_producer;   // whether the node is the edge's producer
};

// The cost of `edge` when the node on side `is_producer` takes `mine` and the other `theirs`.
double SideCost(const SbpEdge& edge, bool is_producer, int mine, int theirs) {
  return is_producer ? edge.Cost(mine, theirs) : edge.Cost(theirs, mine);
}

// Index of the first minimum (ties keep the lowest index).
int FirstMin(const std::vector<double>& values) {
  int best = 0;
  for (int i = 1; i < static_cast<int>(values.size()); ++i) {
    if (values[i] < values[best]) best = i;
  }
  return best;
}

std::vector<std::vector<Incidence>> BuildIncidences(const SbpProblem& problem) {
  std::vector<std::vector<Incidence>> incidences(problem.unary.size());
  for (int e = 0; e < static_cast<int>(problem.edges.size()); ++e) {
    const SbpEdge& edge = problem.edges[e];
    incidences[edge.producer].push_back({e, edge.consumer, true});
    incidences[edge.consumer].push_back({e, edge.producer, false});
  }
  return incidences;
}

// Union-find root of x, with path halving.
int Find(std::vector<int>* parent, int x) {
  std::vector<int>& p = *parent;
  while (p[x] != x) x = p[x] = p[p[x]];
  return x;
}

// Step 1 of the header: the spanning forest of edge groups, rooted, in preorder.
struct Forest {
  std::vector<std::vector<int>> groups;  // parallel edges between one node pair
  std::vector<int> preorder, parent, parent_group;
  std::vector<int> off_forest_edges;     // edges of groups not in the forest
  int forest_edges = 0;
};

Forest BuildForest(const SbpProblem& problem) {
  const int n = static_cast<int>(problem.unary.size());
  Forest f;
  // Group parallel edges by node pair, in order of first appearance.
  std::map<std::pair<int, int>, int> group_of_pair;
  for (int e = 0; e < static_cast<int>(problem.edges.size()); ++e) {
    const SbpEdge& edge = problem.edges[e];
    const std::pair<int, int> key(std::min(edge.producer, edge.consumer), std::max(edge.producer, edge.consumer));
    auto [it, inserted] = group_of_pair.emplace(key, static_cast<int>(f.groups.size()));
    if (inserted) f.groups.emplace_back();
    f.groups[it->second].push_back(e);
  }
  // Spanning forest by union-find.
  std::vector<int> component(n);
  std::iota(component.begin(), component.end(), 0);
  std::vector<std::vector<std::pair<int, int>>> tree(n);  // node -> (neighbour, group)
  for (int g = 0; g < static_cast<int>(f.groups.size()); ++g) {
    const SbpEdge& first = problem.edges[f.groups[g][0]];
    const int a = Find(&component, first.producer), b = Find(&component, first.consumer);
    if (a == b) {
      f.off_forest_edges.insert(f.off_forest_edges.end(), f.groups[g].begin(), f.groups[g].end());
      continue;
    }
    component[a] = b;
    tree[first.producer].push_back({first.consumer, g});
    tree[first.consumer].push_back({first.producer, g});
    f.forest_edges += static_cast<int>(f.groups[g].size());
  }
  // Preorder of each tree from its highest node.
  f.parent.assign(n, -1);
  f.parent_group.assign(n, -1);
  std::vector<bool> visited(n, false);
  for (int root = n - 1; root >= 0; --root) {
    if (visited[root]) continue;
    std::vector<int> stack = {root};
    visited[root] = true;
    while (!stack.empty()) {
      const int v = stack.back();
      stack.pop_back();
      f.preorder.push_back(v);
      for (auto it = tree[v].rbegin(); it != tree[v].rend(); ++it) {
        if (visited[it->first]) continue;
        visited[it->first] = true;
        f.parent[it->first] = v;
        f.parent_group[it->first] = it->second;
        stack.push_back(it->first);
      }
    }
  }
  std::sort(f.off_forest_edges.begin(), f.off_forest_edges.end());
  return f;
}

// Step 2: the exact min-sum DP on the forest with node costs `unary` (off-forest edges ignored).
std::vector<int> SolveForest(const SbpProblem& problem, const Forest& f, std::vector<std::vector<double>> message) {
  const int n = static_cast<int>(problem.unary.size());
  const std::vector<std::vector<int>>& groups = f.groups;
  const std::vector<int>& preorder = f.preorder;
  const std::vector<int>& parent = f.parent;
  const std::vector<int>& parent_group = f.parent_group;
  // Messages, leaves first. back[v] maps a key of the parent's choice (its layout on the edge
  // for single edges, its candidate for parallel groups) to v's best candidate.
  std::vector<std::vector<int>> back(n);
  std::vector<const std::vector<int>*> back_key(n, nullptr);  // null: key = parent candidate
  for (auto it = preorder.rbegin(); it != preorder.rend(); ++it) {
    const int v = *it, p = parent[v];
    if (p < 0) continue;
    const std::vector<int>& edge_ids = groups[parent_group[v]];
    const std::vector<double>& mv = message[v];
    std::vector<double>& mp = message[p];
    if (edge_ids.size() == 1) {
      const SbpEdge& edge = problem.edges[edge_ids[0]];
      const bool child_produces = edge.producer == v;
      const int rows = edge.num_columns == 0 ? 0 : static_cast<int>(edge.seconds.size()) / edge.num_columns;
      const std::vector<int>& child_map = child_produces ? edge.producer_row : edge.consumer_column;
      const std::vector<int>& parent_map = child_produces ? edge.consumer_column : edge.producer_row;
      const int child_layouts = child_produces ? rows : edge.num_columns;
      const int parent_layouts = child_produces ? edge.num_columns : rows;
      std::vector<double> best_by_layout(child_layouts, kInfiniteSeconds);
      std::vector<int> arg_by_layout(child_layouts, -1);
      for (int c = 0; c < static_cast<int>(mv.size()); ++c) {
        const int l = child_map[c];
        if (arg_by_layout[l] < 0 || mv[c] < best_by_layout[l]) best_by_layout[l] = mv[c], arg_by_layout[l] = c;
      }
      std::vector<double> h(parent_layouts, kInfiniteSeconds);
      std::vector<int> h_arg(parent_layouts, -1);
      for (int q = 0; q < parent_layouts; ++q) {
        for (int l = 0; l < child_layouts; ++l) {
          if (arg_by_layout[l] < 0) continue;
          const double pair = child_produces ? edge.seconds[static_cast<size_t>(l) * edge.num_columns + q]
                                             : edge.seconds[static_cast<size_t>(q) * edge.num_columns + l];
          const double value = best_by_layout[l] + pair;
          if (value < h[q] || (value == h[q] && (h_arg[q] < 0 || arg_by_layout[l] < h_arg[q]))) {
            h[q] = value, h_arg[q] = arg_by_layout[l];
          }
        }
      }
      for (int c = 0; c < static_cast<int>(mp.size()); ++c) mp[c] += h[parent_map[c]];
      back[v] = std::move(h_arg);
      back_key[v] = &parent_map;
    } else {
      back[v].assign(mp.size(), -1);
      for (int c = 0; c < static_cast<int>(mp.size()); ++c) {
        double best = kInfiniteSeconds;
        for (int cv = 0; cv < static_cast<int>(mv.size()); ++cv) {
          double value = mv[cv];
          for (int e : edge_ids) {
            const SbpEdge& edge = problem.edges[e];
            value += edge.producer == v ? edge.Cost(cv, c) : edge.Cost(c, cv);
          }
          if (back[v][c] < 0 || value < best) best = value, back[v][c] = cv;
        }
        mp[c] += best;
      }
    }
  }
  // Choices, roots first.
  std::vector<int> choice(n, 0);
  for (int v : preorder) {
    const int p = parent[v];
    int pick = -1;
    if (p >= 0) pick = back[v][back_key[v] ? (*back_key[v])[choice[p]] : choice[p]];
    choice[v] = pick >= 0 ? pick : FirstMin(message[v]);
  }
  return choice;
}

// Step 3 of the header. Returns the number of switches; sets *rounds.
int LocalSearch(const SbpProblem& problem, const std::vector<std::vector<Incidence>>& incidences, int max_rounds,
                std::vector<int>* choice, int* rounds) {
  int switches = 0;
  *rounds = 0;
  std::vector<double> local;
  while (*rounds < max_rounds) {
    ++*rounds;
    bool switched = false;
    for (int v = 0; v < static_cast<int>(problem.unary.size()); ++v) {
      if (problem.unary[v].size() < 2) continue;
      local = problem.unary[v];
      for (const Incidence& inc : incidences[v]) {
        const SbpEdge& edge = problem.edges[inc.edge];
        const int theirs = (*choice)[inc.other];
        for (int c = 0; c < static_cast<int>(local.size()); ++c) local[c] += SideCost(edge, inc.is_producer, c, theirs);
      }
      const int best = FirstMin(local);
      const double current = local[(*choice)[v]];
      const bool better = std::isinf(current) ? !std::isinf(local[best])
                                              : local[best] < current - 1e-9 * std::fabs(current) - 1e-18;
      if (better) {
        (*choice)[v] = best;
        ++switches;
        switched = true;
      }
    }
    if (!switched) break;
  }
  return switches;
}

std::vector<int> Greedy(const SbpProblem& problem, const std::vector<std::vector<Incidence>>& incidences) {
  const int n = static_cast<int>(problem.unary.size());
  std::vector<int> choice(n, -1);
  for (int v = 0; v < n; ++v) {
    if (choice[v] >= 0) continue;
    bool has_earlier = false, has_later = false;
    for (const Incidence& inc : incidences[v]) (inc.other < v ? has_earlier : has_later) = true;
    if (!has_earlier && has_later) continue;  // deferred: decided by its first later neighbour
    // Undecided earlier neighbours (deferred sources), each once, in incidence order.
    std::vector<int> deferred;
    for (const Incidence& inc : incidences[v]) {
      if (inc.other < v && choice[inc.other] < 0 && std::find(deferred.begin(), deferred.end(), inc.other) == deferred.end()) {
        deferred.push_back(inc.other);
      }
    }
    // cost of deferred neighbour u at candidate cu given v at c (unary + edges between them).
    auto pair_cost = [&](int u, int cu, int c) {
      double value = problem.unary[u][cu];
      for (const Incidence& inc : incidences[v]) {
        if (inc.other == u) value += SideCost(problem.edges[inc.edge], inc.is_producer, c, cu);
      }
      return value;
    };
    auto best_of = [&](int u, int c) {
      std::vector<double> values(problem.unary[u].size());
      for (int cu = 0; cu < static_cast<int>(values.size()); ++cu) values[cu] = pair_cost(u, cu, c);
      return FirstMin(values);
    };
    std::vector<double> local = problem.unary[v];
    for (int c = 0; c < static_cast<int>(local.size()); ++c) {
      for (const Incidence& inc : incidences[v]) {
        if (choice[inc.other] >= 0) local[c] += SideCost(problem.edges[inc.edge], inc.is_producer, c, choice[inc.other]);
      }
      for (int u : deferred) local[c] += pair_cost(u, best_of(u, c), c);
    }
    choice[v] = FirstMin(local);
    for (int u : deferred) choice[u] = best_of(u, choice[v]);
  }
  return choice;
}

}  // namespace

double TotalSeconds(const SbpProblem& problem, const std::vector<int>& choice) {
  double total = 0;
  for (size_t v = 0; v < problem.unary.size(); ++v) total += problem.unary[v][choice[v]];
  for (const SbpEdge& edge : problem.edges) total += edge.Cost(choice[edge.producer], choice[edge.consumer]);
  return total;
}

std::string CheckProblem(const SbpProblem& problem) {
  const int n = static_cast<int>(problem.unary.size());
  for (int v = 0; v < n; ++v) {
    if (problem.unary[v].empty()) return absl::StrCat("node ", v, " has no candidate");
  }
  for (size_t e = 0; e < problem.edges.size(); ++e) {
    const SbpEdge& edge = problem.edges[e];
    const std::string name = absl::StrCat("edge ", e, " (", edge.producer, " -> ", edge.consumer, ")");
    if (edge.producer < 0 || edge.producer >= n || edge.consumer < 0 || edge.consumer >= n ||
        edge.producer == edge.consumer) {
      return name + " has bad node indices";
    }
    if (edge.producer_row.size() != problem.unary[edge.producer].size() ||
        edge.consumer_column.size() != problem.unary[edge.consumer].size()) {
      return name + " maps a different number of candidates than its nodes have";
    }
    if (edge.num_columns <= 0 || edge.seconds.size() % edge.num_columns != 0) return name + " has a ragged matrix";
    const int rows = static_cast<int>(edge.seconds.size()) / edge.num_columns;
    for (int r : edge.producer_row) {
      if (r < 0 || r >= rows) return absl::StrCat(name, " maps a candidate to row ", r, " of ", rows);
    }
    for (int c : edge.consumer_column) {
      if (c < 0 || c >= edge.num_columns) return absl::StrCat(name, " maps a candidate to column ", c);
    }
  }
  return "";
}

SbpSolution SolveSbp(const SbpProblem& problem, const SbpSolverOptions& options) {
  SbpSolution solution;
  const std::vector<std::vector<Incidence>> incidences = BuildIncidences(problem);
  if (options.algorithm == SbpAlgorithm::kGreedy) {
    solution.choice = Greedy(problem, incidences);
  } else {
    const Forest forest = BuildForest(problem);
    solution.forest_edges = forest.forest_edges;
    solution.choice = SolveForest(problem, forest, problem.unary);
    solution.local_search_switches = LocalSearch(problem, incidences, options.max_local_search_rounds,
                                                 &solution.choice, &solution.local_search_rounds);
    // Step 4: re-solve the forest with the off-forest edges folded into their endpoints' costs
    // at the current choice; keep the result only if the true objective improves.
    double best = TotalSeconds(problem, solution.choice);
    for (int round = 0; round < options.max_forest_rounds && !forest.off_forest_edges.empty(); ++round) {
      std::vector<std::vector<double>> unary = problem.unary;
      for (int e : forest.off_forest_edges) {
        const SbpEdge& edge = problem.edges[e];
        for (size_t c = 0; c < unary[edge.producer].size(); ++c) {
          unary[edge.producer][c] += edge.Cost(static_cast<int>(c), solution.choice[edge.consumer]);
        }
        for (size_t c = 0; c < unary[edge.consumer].size(); ++c) {
          unary[edge.consumer][c] += edge.Cost(solution.choice[edge.producer], static_cast<int>(c));
        }
      }
      std::vector<int> next = SolveForest(problem, forest, std::move(unary));
      int rounds = 0;
      const int switches = LocalSearch(problem, incidences, options.max_local_search_rounds, &next, &rounds);
      const double total = TotalSeconds(problem, next);
      if (!(total < best - 1e-9 * std::fabs(best) - 1e-18)) break;
      best = total;
      solution.choice = std::move(next);
      solution.local_search_rounds += rounds;
      solution.local_search_switches += switches;
      ++solution.forest_rounds;
    }
  }
  solution.total_seconds = TotalSeconds(problem, solution.choice);
  return solution;
}

}  // namespace compiler
}  // namespace oneflow_like
