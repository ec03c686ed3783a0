#include "oneflow_like/models/text_data.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "oneflow_like/core/random.h"

namespace oneflow_like {
namespace models {

absl::StatusOr<TextCorpus> TextCorpus::Load(const std::string& path, int64_t min_bytes) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::InvalidArgumentError(absl::StrCat("text data '", path, "': cannot open the file"));
  std::ostringstream contents;
  contents << file.rdbuf();
  std::string text = contents.str();
  if (static_cast<int64_t>(text.size()) < min_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("text data '", path, "' has ", text.size(),
                                                   " bytes; a window of seq_len + 1 = ", min_bytes, " must fit"));
  }
  return TextCorpus(std::move(text));
}

TokenBatch TextCorpus::Batch(int64_t step, int64_t batch, int64_t seq_len, uint64_t seed) const {
  TokenBatch out{Tensor(DataType::kInt64, Shape{batch, seq_len}), Tensor(DataType::kInt64, Shape{batch, seq_len})};
  int64_t* inputs = out.inputs.data<int64_t>();
  int64_t* targets = out.targets.data<int64_t>();
  const uint64_t starts = static_cast<uint64_t>(size() - seq_len);  // windows [start, start + seq_len]
  const uint64_t base = SplitMix64(seed ^ 0x7e47c0de5eedull) + (static_cast<uint64_t>(step) << 24);
  for (int64_t b = 0; b < batch; ++b) {
    const uint64_t start = SplitMix64(base + static_cast<uint64_t>(b)) % starts;
    for (int64_t t = 0; t < seq_len; ++t) {
      inputs[b * seq_len + t] = static_cast<unsigned char>(text_[start + t]);
      targets[b * seq_len + t] = static_cast<unsigned char>(text_[start + t + 1]);
    }
  }
  return out;
}

}  // namespace models
}  // namespace oneflow_like
