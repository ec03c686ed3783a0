// Turns an inferred Graph into an SbpProblem (sbp_solver.h) and remembers how every node,
// candidate and edge maps back to the graph, so the pass can write the choice and explain it.
//
// Nodes: every source tensor (inputs and variables, in tensor id order), then every op in
// program order: a topological order. Candidates: the eligible ones of sbp_candidates.h.
// Edges:
//   - op input i reading tensor t: from t's producer (its output layout, or the source's
//     layout) to the op's candidate input layout i;
//   - a variable update {variable, new_value}: from the op producing new_value (its output
//     layout) to the variable's layout; boxing here runs after every step (lowering inserts it
//     when the layouts differ).
// Costs are seconds per STEP: a node or edge runs `rate` times per step, where inputs and
// forward/backward ops run pieces_per_step times (micro_batches x accumulation steps),
// variables and optimizer ops once, and an edge at the lower rate of its two ends (a
// variable is boxed before it is repeated; a gradient is accumulated before it is boxed).
//   unary   = compute seconds of the candidate x rate (sources: 0);
//   edge    = the boxing price (sbp_pricing.h) from the producer's placement + layout to the
//             consumer's, x rate; equal placement and layout cost 0; a boxing the planner
//             refuses costs infinity and keeps its error for the report.
// Example: x[64,128] input (4 pieces per step) -> matmul with w[128,256] variable: the x -> matmul
// edge has rate 4, the w -> matmul edge rate 1, the matmul's compute counts 4 times.
//
// Boxing prices come from a BoxingPriceBook (sbp_pricing.h), which prices each distinct
// transition once however many edges and candidates share it. Not thread-safe.
#ifndef ONEFLOW_LIKE_COMPILER_SBP_SBP_PROBLEM_H_
#define ONEFLOW_LIKE_COMPILER_SBP_SBP_PROBLEM_H_

#include <vector>

#include "oneflow_like/compiler/graph.h"
#include "oneflow_like/compiler/sbp/sbp_candidates.h"
#include "oneflow_like/compiler/sbp/sbp_pricing.h"
#include "oneflow_like/compiler/sbp/sbp_solver.h"

namespace oneflow_like {
namespace compiler {

// Where a problem edge comes from.
struct SbpEdgeOrigin {
  TensorId tensor;            // what moves (for a variable update: the new value)
  OpId consumer;              // the reading op; invalid for a variable update
  int input_index = -1;       // consumer's input index; -1 for a variable update
  TensorId variable;          // variable updates only
  double rate = 1;            // transfers per step
  int num_columns = 0;
  std::vector<int> quotes;    // row-major like SbpEdge::seconds: BoxingPriceBook quote ids
  std::vector<int> row_sbp;   // per row: BoxingPriceBook NdSbp id (producer layout)
};

struct SbpGraphProblem {
  SbpProblem problem;
  std::vector<TensorId> node_source;        // per node: the source it decides, or invalid
  std::vector<OpId> node_op;                // per node: the op it decides, or invalid
  std::vector<double> node_rate;            // per node: firings per step
  std::vector<NodeCandidates> candidates;   // per node (solver candidate c = all[eligible[c]])
  std::vector<SbpEdgeOrigin> origins;       // per problem edge
  std::vector<std::vector<int>> node_edges; // per node: its edges, in edge order
  std::vector<int> node_of_tensor;          // by tensor id: the source's node, or -1
  std::vector<int> node_of_op;              // by op id
  int64_t pieces_per_step = 1;
};

// REQUIRES: the graph is inferred. Errors: InvalidArgument from OpCandidates (an op without an
// eligible candidate).
absl::StatusOr<SbpGraphProblem> BuildSbpProblem(const Graph& graph, BoxingPriceBook* prices);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_SBP_SBP_PROBLEM_H_
