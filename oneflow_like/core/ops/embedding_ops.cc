// PLACEHOLDER: replaced by the embedding op family implementation.
#include "oneflow_like/core/ops/builtin_ops.h"

namespace oneflow_like {

absl::Status RegisterEmbeddingOps(OpRegistry* registry) { return absl::OkStatus(); }

}  // namespace oneflow_like
