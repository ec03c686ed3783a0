// A test-only reference evaluator: runs a Graph's ops in program order on one device with
// whole (logical) tensors through core/eager.h RunOp, ignoring placements and SBPs. It runs
// one piece, and every op once (optimizer ops included), so a training graph evaluated once
// computes the loss, the gradients of one piece and the optimizer's new values.
//
//   Graph g = ParseAndInfer("x = input(shape=[2]) ...\n y = relu(x)\n", registry);
//   ASSIGN_OR_RETURN(GraphValues v, EvaluateGraph(g, {{"x", x_tensor}}));
//   v.at("y")                                        // relu(x)
//   ApplyVariableUpdates(g, v)                       // {variable name -> new value}
//
// Sources: every input must be fed; a variable takes its feed if given, else its initializer
// when that is deterministic (zeros, ones, constant); random initializers must be fed. Feeds
// must match the source's desc. Errors: InvalidArgument naming the tensor or op.
// Only reads the graph: thread-safe for concurrent calls on a graph nobody mutates.
#ifndef ONEFLOW_LIKE_COMPILER_AUTOGRAD_GRAPH_EVAL_H_
#define ONEFLOW_LIKE_COMPILER_AUTOGRAD_GRAPH_EVAL_H_

#include <map>
#include <string>

#include "oneflow_like/compiler/graph.h"
#include "oneflow_like/core/tensor.h"

namespace oneflow_like {
namespace compiler {

// Tensor name -> value, for every tensor of the graph.
using GraphValues = std::map<std::string, Tensor>;

// REQUIRES: an inferred graph (every tensor has a desc).
absl::StatusOr<GraphValues> EvaluateGraph(const Graph& graph, const GraphValues& feeds);

// The variables' values for the next step: for every Graph::variable_updates() entry,
// variable name -> values[new_value name]. REQUIRES: `values` from EvaluateGraph(graph).
GraphValues ApplyVariableUpdates(const Graph& graph, const GraphValues& values);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_AUTOGRAD_GRAPH_EVAL_H_
