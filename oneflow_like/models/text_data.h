// A character-level (byte-level) text corpus for the GPT job: every byte of a file is a token
// (vocab 256), and the batch of step s is a deterministic function of (seed, s), so a resumed
// run sees exactly the batches an uninterrupted one would (the "data position" is the step).
//
//   ASSIGN_OR_RETURN(TextCorpus corpus, TextCorpus::Load("/usr/share/common-licenses/GPL-3", 33));
//   TokenBatch b = corpus.Batch(/*step=*/0, /*batch=*/16, /*seq_len=*/32, /*seed=*/0);
//   // b.inputs[i] = 32 consecutive bytes of the file at a random offset; b.targets[i] = the
//   // same window shifted by one byte.
//
// Errors: Load gives InvalidArgument naming the path for a missing/unreadable file, or one
// shorter than min_bytes (a window plus its next byte must fit). Thread-safe after Load.
#ifndef ONEFLOW_LIKE_MODELS_TEXT_DATA_H_
#define ONEFLOW_LIKE_MODELS_TEXT_DATA_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "oneflow_like/models/synthetic_data.h"

namespace oneflow_like {
namespace models {

class TextCorpus {
 public:
  static constexpr int64_t kVocab = 256;  // byte-level tokens

  // `min_bytes`: the least file size accepted (use seq_len + 1).
  static absl::StatusOr<TextCorpus> Load(const std::string& path, int64_t min_bytes);
  static TextCorpus FromString(std::string text) { return TextCorpus(std::move(text)); }

  int64_t size() const { return static_cast<int64_t>(text_.size()); }
  // `batch` windows of `seq_len` tokens (int64 [batch, seq_len]) and their next-token targets.
  // Window b of step s starts at SplitMix64(mix(seed, s, b)) mod (size - seq_len).
  // REQUIRES: size() >= seq_len + 1.
  TokenBatch Batch(int64_t step, int64_t batch, int64_t seq_len, uint64_t seed) const;

 private:
  explicit TextCorpus(std::string text) : text_(std::move(text)) {}
  std::string text_;
};

}  // namespace models
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_MODELS_TEXT_DATA_H_
