#include "oneflow_like/models/synthetic_data.h"

#include "oneflow_like/core/random.h"

namespace oneflow_like {
namespace models {

TokenBatch SyntheticBatch(int64_t step, int64_t batch, const GptConfig& config, uint64_t seed) {
  const int64_t length = config.seq_len;
  const uint64_t vocab = static_cast<uint64_t>(config.vocab);
  TokenBatch out{Tensor(DataType::kInt64, Shape{batch, length}), Tensor(DataType::kInt64, Shape{batch, length})};
  int64_t* inputs = out.inputs.data<int64_t>();
  int64_t* targets = out.targets.data<int64_t>();
  const uint64_t base = (seed << 40) + (static_cast<uint64_t>(step) << 20) + 0xABCDEull;
  for (int64_t b = 0; b < batch; ++b) {
    const uint64_t r = SplitMix64(base + static_cast<uint64_t>(b));
    const uint64_t start = r % vocab;
    const uint64_t stride = 1 + ((r >> 32) % 8);
    for (int64_t t = 0; t < length; ++t) {
      // (s + k t) mod vocab, with s, k < vocab + 8 and t <= seq_len: no overflow.
      inputs[b * length + t] = static_cast<int64_t>((start + stride * static_cast<uint64_t>(t)) % vocab);
      targets[b * length + t] = static_cast<int64_t>((start + stride * static_cast<uint64_t>(t + 1)) % vocab);
    }
  }
  return out;
}

}  // namespace models
}  // namespace oneflow_like
