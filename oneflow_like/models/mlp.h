// The W1 "mlp" workload (tools/bench/peers/bench_mlp.py) as a logical training job, plus a
// deterministic synthetic data generator for it.
//
// BuildMlpJob writes `depth` Linear layers of torch's layout (weight [out, in], matmul with
// transpose_b=true, plus a bias) with ReLU between them (none after the last), and the MSE
// loss against a target input:
//   h0 = x;  h(i+1) = relu(h(i) @ W(i)^T + b(i))   (no relu on the last layer)
//   loss = reduce_mean((h(depth) - target)^2)      torch's nn.MSELoss (mean over all elements)
// trained by SGD (lr 0.01, no momentum) unless TrainOptions::optimizer says otherwise.
// Initialization has torch's nn.Linear law (uniform in +-1/sqrt(in) for weights and biases)
// drawn by the portable generator (PORTABLE_UNIFORM with std 1/sqrt(3 in), parameter stream =
// position in MlpParameterNames, seed = TrainOptions::seed), so any runtime can reproduce it.
//
// The parallel layout {dp, tp, pp} (as for the GPT, gpt.h): stage s on ranks
// [s*dp*tp, (s+1)*dp*tp) as a [dp, tp] mesh (1-D when a degree is 1); layers spread evenly
// over stages. Inputs are split on the batch over the dp axis. With tp > 1, layer pairs are
// Megatron-style: even layers column-parallel (W split on out, bias split), odd layers
// row-parallel (W split on in); the rest is left to SBP selection.
//
// Example: BuildMlpJob(registry, MlpConfig{}, ParallelLayout{}) is W1: x[256,1024] and
// target[256,1024] inputs, 4 x (fc{i}.weight [1024,1024], fc{i}.bias [1024]), output "loss".
#ifndef ONEFLOW_LIKE_MODELS_MLP_H_
#define ONEFLOW_LIKE_MODELS_MLP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_like/compiler/graph.h"
#include "oneflow_like/core/tensor.h"
#include "oneflow_like/models/gpt.h"

namespace oneflow_like {
namespace models {

struct MlpConfig {
  int64_t width = 1024;  // in = hidden = out features (W1: 1024)
  int64_t depth = 4;     // number of Linear layers (W1: 4)
  int64_t batch = 256;   // rows per piece (micro-batch)
};

// The MLP job; `train.optimizer` unset (learning_rate 0) = SGD(lr 0.01). InvalidArgument for a
// non-positive size or degree (naming the field), or depth < layout.pp.
absl::StatusOr<compiler::Graph> BuildMlpJob(const OpRegistry& registry, const MlpConfig& config,
                                            const ParallelLayout& layout, const TrainOptions& train = {});

// Job variable names in portable-stream order: fc0.weight, fc0.bias, fc1.weight, ...
std::vector<std::string> MlpParameterNames(const MlpConfig& config);
int64_t MlpParameterCount(const MlpConfig& config);

// Deterministic data: element i of "x" (stream 0) and "target" (stream 1) of batch number
// `index` is 2 * u - 1 for u = (SplitMix64(SplitMix64(seed * 4 + stream) + (index << 32) + i)
// >> 40) / 2^24, i.e. uniform in [-1, 1) with 24 bits. Both are float32 [rows, width].
struct MlpBatch {
  Tensor inputs;   // the job's "x"
  Tensor targets;  // the job's "target"
};
MlpBatch SyntheticMlpBatch(int64_t index, int64_t rows, const MlpConfig& config, uint64_t seed = 0);

}  // namespace models
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_MODELS_MLP_H_
