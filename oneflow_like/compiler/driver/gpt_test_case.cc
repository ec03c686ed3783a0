#include "oneflow_like/compiler/driver/gpt_test_case.h"

#include <utility>

namespace oneflow_like {
namespace compiler {

CompileOptions GptTestOptions(const GptTestCase& c) {
  CompileOptions options;
  options.boxing = c.boxing;
  options.bucket_bytes = 2048;
  options.compute_streams = c.compute_streams;
  options.world_size = c.world_size;
  return options;
}

absl::StatusOr<GlobalDecisions> GptTestDecisions(const GptTestCase& c, const OpRegistry& registry) {
  models::GptConfig config{.vocab = 64, .seq_len = 8, .n_layer = c.n_layer, .n_embd = 16, .n_head = 2,
                           .batch = c.batch > 0 ? c.batch : 2 * c.layout.dp};
  models::TrainOptions train;
  train.micro_batches = c.micro_batches;
  train.zero_stage = c.zero_stage;
  train.recompute = c.recompute;
  absl::StatusOr<Graph> graph = models::BuildGptJob(registry, config, c.layout, train);
  if (!graph.ok()) return graph.status();
  return RunGlobalPasses(*std::move(graph), GptTestOptions(c));
}

}  // namespace compiler
}  // namespace oneflow_like
