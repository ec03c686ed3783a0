// The portable synthetic data of tools/bench/peers/torch_gpt.py (synthetic_batch), bit-exact, so
// a GPT job fed by it sees exactly the tokens the PyTorch reference trains on.
//
// Sequence b of step `step`: r = SplitMix64((seed << 40) + (step << 20) + 0xABCDE + b) (wrapping
// uint64), start s = r mod vocab, stride k = 1 + ((r >> 32) mod 8); token t = (s + k t) mod
// vocab for t = 0..seq_len; inputs = tokens[:, :-1], targets = tokens[:, 1:]. Example (vocab
// 64, seq_len 16, step 0, seed 0): inputs[0] = 16, 24, 32, ..., 56, 0, 8 (s = 16, k = 8).
//
// Stateless and thread-safe.
#ifndef ONEFLOW_LIKE_MODELS_SYNTHETIC_DATA_H_
#define ONEFLOW_LIKE_MODELS_SYNTHETIC_DATA_H_

#include <cstdint>

#include "oneflow_like/core/tensor.h"
#include "oneflow_like/models/gpt.h"

namespace oneflow_like {
namespace models {

struct TokenBatch {
  Tensor inputs;   // int64 [batch, seq_len]: the job's "idx"
  Tensor targets;  // int64 [batch, seq_len]: the job's "targets"
};

// REQUIRES: batch >= 0, config.vocab > 0, config.seq_len >= 0.
TokenBatch SyntheticBatch(int64_t step, int64_t batch, const GptConfig& config, uint64_t seed = 0);

}  // namespace models
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_MODELS_SYNTHETIC_DATA_H_
