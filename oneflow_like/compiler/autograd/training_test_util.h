// Test helpers for the autograd and optimizer pass tests (test-only):
//   - CompileTraining: parse + InferPass + AutogradPass (+ OptimizerPass + InferPass) in a
//     PassPipeline with verify_after_each_pass, returning the forward graph too;
//   - RandomFeeds: deterministic values for every source (floats uniform in [-1, 1), ints in
//     [0, int_high));
//   - ExpectGradientsMatchNumerical: every trainable variable's GradientOf value (evaluated by
//     graph_eval.h) against central differences of the forward graph's loss, times the seed
//     1 / pieces_per_step.
//
//   TrainingGraphs g = CompileTraining(kText, *registry, /*with_optimizer=*/false);
//   GraphValues feeds = RandomFeeds(g.forward, /*seed=*/1, /*int_high=*/3);
//   ExpectGradientsMatchNumerical(g, feeds, {});
#ifndef ONEFLOW_LIKE_COMPILER_AUTOGRAD_TRAINING_TEST_UTIL_H_
#define ONEFLOW_LIKE_COMPILER_AUTOGRAD_TRAINING_TEST_UTIL_H_

#include <optional>
#include <string>

#include "oneflow_like/compiler/autograd/graph_eval.h"
#include "oneflow_like/compiler/graph.h"

namespace oneflow_like {
namespace compiler {
namespace testing {

struct TrainingGraphs {
  Graph forward;   // after InferPass
  Graph training;  // after the whole pipeline
};

// CHECK-fails (with the status) if parsing or a pass fails; use RunTrainingPasses for errors.
TrainingGraphs CompileTraining(const std::string& text, const OpRegistry& registry, bool with_optimizer);
// The same pipeline on a parsed graph; returns the pipeline's status.
absl::Status RunTrainingPasses(Graph* graph, bool with_optimizer);

GraphValues RandomFeeds(const Graph& graph, uint64_t seed, int64_t int_high);

struct NumericalGradOptions {
  double eps = 1e-6;
  double rtol = 1e-6;
  double atol = 1e-8;
  int max_elements_per_variable = 16;  // checks evenly spaced elements beyond this
};

// Returns the number of gradient elements compared (so tests can assert coverage).
int ExpectGradientsMatchNumerical(const TrainingGraphs& graphs, const GraphValues& feeds,
                                  const NumericalGradOptions& options);

}  // namespace testing
}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_AUTOGRAD_TRAINING_TEST_UTIL_H_
