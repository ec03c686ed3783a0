// Model jobs: the standard workloads as logical graphs, with a parallel layout applied.
//
// BuildGptJob writes the decoder-only GPT of tools/bench/peers/torch_gpt.py ("gpt-tiny" at the
// default config) with the C++ GraphBuilder:
//   x = embedding(wte, idx) + wpe                       wte[V,C], wpe[T,C] (T = seq_len)
//   per block (pre-LayerNorm, residual):
//     qkv = layer_norm(x) @ Wqkv^T + bqkv                Wqkv[3C,C] (torch Linear layout: out, in)
//     q, k, v = split(qkv) -> [B,H,T,hd] (reshape + transpose)
//     y = softmax_causal(q @ k^T / sqrt(hd)) @ v -> [B,T,C] @ Wo^T + bo
//     x = x + y;  x = x + fc2(gelu(fc(layer_norm(x))))  fc[4C,C], fc2[C,4C]
//   loss = sparse_softmax_cross_entropy(layer_norm_f(x) @ Wlm^T, targets)   Wlm[V,C], no bias
// Weights keep torch's (out, in) layout (matmul with transpose_b=true) so a portable
// initialization can be compared element by element.
//
// Exact reproduction of torch_gpt.py (the defaults): GptInit::kPortable gives parameter number
// pi of torch's named_parameters() order (GptParameterNames) the PORTABLE_UNIFORM initializer
// (std 0.02, stream pi, portable_seed = TrainOptions::seed, which is also the job seed) for
// Linear/Embedding weights, LayerNorm 1 / 0 and biases 0, exactly as init_weights(init=
// "portable", seed); gelu_approximate "none" is torch's exact erf GELU. Fed with
// synthetic_data.h's SyntheticBatch, the job computes torch_gpt.py's losses to float rounding.
//
// The parallel layout {dp, tp, pp}: world = dp * tp * pp ranks; pipeline stage s runs on ranks
// [s*dp*tp, (s+1)*dp*tp) arranged as a [dp, tp] mesh (1-D when dp or tp is 1); blocks are
// spread evenly over the stages (the embedding joins stage 0, the head and loss the last).
// Tensor parallelism pins Megatron-style layouts on the tp mesh axis: Wqkv, bqkv, fc, fc_b
// column-parallel (split on the output dim), Wo and fc2 row-parallel (split on the input dim);
// inputs are split on the batch over the dp axis. Without tensor parallelism (tp = 1, dp > 1)
// every parameter is pinned B: pure data parallel, as DDP. Everything else is left to SBP
// selection.
//
// Example: BuildGptJob(registry, GptConfig{}, ParallelLayout{2, 2, 2}) is an 8-rank job, stage 0
// on cpu:[[0,1],[2,3]], stage 1 on cpu:[[4,5],[6,7]], 4,240,896 parameters.
#ifndef ONEFLOW_LIKE_MODELS_GPT_H_
#define ONEFLOW_LIKE_MODELS_GPT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_like/compiler/graph.h"
#include "oneflow_like/core/proto/job.pb.h"
#include "oneflow_like/models/layout.h"

namespace oneflow_like {
namespace models {

enum class GptInit {
  kPortable,  // torch_gpt.py init="portable": bit-exact, comparable across runtimes
  kNormal,    // weights N(0, 0.02) from the Philox initializer (same law, other numbers)
};

struct GptConfig {
  int64_t vocab = 2048;
  int64_t seq_len = 128;
  int64_t n_layer = 4;
  int64_t n_embd = 256;
  int64_t n_head = 4;
  int64_t batch = 8;  // sequences per piece (micro-batch)
  GptInit init = GptInit::kPortable;
  std::string gelu_approximate = "none";  // gelu's attr: "none" (erf, as torch) or "tanh"
};

struct TrainOptions {
  OptimizerProto optimizer;  // unset kind/lr: AdamW(lr=3e-4, weight_decay=0.01), as the benchmark
  int32_t micro_batches = 0;  // job config (see job.proto)
  int32_t gradient_accumulation_steps = 0;
  int32_t zero_stage = 0;
  uint64_t seed = 0;  // JobConfigProto.seed, and the portable init's seed (torch_gpt.py `seed`)
  bool recompute = false;  // gpt: recompute every block's activations in backward (less memory)
};

// The GPT job. InvalidArgument for a bad config (n_embd not divisible by n_head, a zero or
// negative size, n_layer < pp) or layout naming the field.
absl::StatusOr<compiler::Graph> BuildGptJob(const OpRegistry& registry, const GptConfig& config,
                                            const ParallelLayout& layout, const TrainOptions& train = {});

// Number of trainable parameters of the GPT (for checks against torch_gpt.py's count).
int64_t GptParameterCount(const GptConfig& config);

// The parameters in torch_gpt.py's named_parameters() order (index = portable stream number):
// torch's name and the job's variable name, e.g. {"wte.weight", "wte"},
// {"blocks.0.ln1.weight", "h0.ln1.weight"}, ..., {"lm_head.weight", "lm_head.weight"}.
struct GptParameterName {
  std::string torch_name;
  std::string job_name;
};
std::vector<GptParameterName> GptParameterNames(const GptConfig& config);

}  // namespace models
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_MODELS_GPT_H_
