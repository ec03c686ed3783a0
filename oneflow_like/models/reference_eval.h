// Test-only: trains a GPT job on one device with whole tensors through the graph evaluator
// (compiler/autograd/graph_eval.h), with initial values from the variables' initializers
// (core/initializer.h) and SyntheticBatch data, to compare losses with torch_gpt.py without
// the runtime.
//
//   Graph g = *BuildGptJob(registry, config, ParallelLayout{});
//   RETURN_IF_ERROR(compiler::testing::RunTrainingPasses(&g, /*with_optimizer=*/true));
//   ASSIGN_OR_RETURN(std::vector<double> losses, EvaluateGptLosses(g, config, 5));
//   // losses[s] = the loss of step s (fed SyntheticBatch(s, config.batch, config, seed))
//
// Errors: InvalidArgument for a variable whose initializer needs a compiler-derived seed
// (Philox UNIFORM/NORMAL: use GptInit::kPortable), or any evaluation error.
#ifndef ONEFLOW_LIKE_MODELS_REFERENCE_EVAL_H_
#define ONEFLOW_LIKE_MODELS_REFERENCE_EVAL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "oneflow_like/compiler/autograd/graph_eval.h"
#include "oneflow_like/compiler/graph.h"
#include "oneflow_like/models/gpt.h"

namespace oneflow_like {
namespace models {

// Every variable's initial value (whole tensor), from its initializer.
absl::StatusOr<compiler::GraphValues> InitialVariableValues(const compiler::Graph& graph);

// Runs `steps` steps of an inferred graph (a training graph: its variable updates carry the
// variables to the next step; a forward graph: the variables stay) and returns each loss.
// REQUIRES: the graph's inputs are "idx" and "targets" of [config.batch, config.seq_len].
absl::StatusOr<std::vector<double>> EvaluateGptLosses(const compiler::Graph& graph, const GptConfig& config,
                                                      int64_t steps, uint64_t data_seed = 0);

}  // namespace models
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_MODELS_REFERENCE_EVAL_H_
