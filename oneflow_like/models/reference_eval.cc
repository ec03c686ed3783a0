#include "oneflow_like/models/reference_eval.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "oneflow_like/core/initializer.h"
#include "oneflow_like/core/status.h"
#include "oneflow_like/models/synthetic_data.h"

namespace oneflow_like {
namespace models {

absl::StatusOr<compiler::GraphValues> InitialVariableValues(const compiler::Graph& graph) {
  compiler::GraphValues values;
  for (const compiler::TensorNode& t : graph.tensors()) {
    if (!t.is_variable) continue;
    if (!IsDeterministicInGraph(t.initializer)) {
      return absl::InvalidArgumentError(absl::StrCat("variable '", t.name, "' has a Philox initializer whose seed ",
                                                     "the compiler derives; use the portable init"));
    }
    Tensor value(*t.desc);
    const std::vector<int64_t> origin(t.desc->shape.num_axes(), 0);
    absl::Status status = InitializeShard(t.initializer, t.desc->shape, origin, &value);
    if (!status.ok()) return absl::InvalidArgumentError(absl::StrCat("variable '", t.name, "': ", status.message()));
    values[t.name] = std::move(value);
  }
  return values;
}

absl::StatusOr<std::vector<double>> EvaluateGptLosses(const compiler::Graph& graph, const GptConfig& config,
                                                      int64_t steps, uint64_t data_seed) {
  ASSIGN_OR_RETURN(compiler::GraphValues variables, InitialVariableValues(graph));
  std::vector<double> losses;
  for (int64_t step = 0; step < steps; ++step) {
    compiler::GraphValues feeds = variables;
    TokenBatch batch = SyntheticBatch(step, config.batch, config, data_seed);
    feeds["idx"] = std::move(batch.inputs);
    feeds["targets"] = std::move(batch.targets);
    ASSIGN_OR_RETURN(compiler::GraphValues values, compiler::EvaluateGraph(graph, feeds));
    losses.push_back(values.at(graph.config().loss()).GetAsDouble(0));
    for (auto& [name, value] : compiler::ApplyVariableUpdates(graph, values)) variables[name] = std::move(value);
  }
  return losses;
}

}  // namespace models
}  // namespace oneflow_like
