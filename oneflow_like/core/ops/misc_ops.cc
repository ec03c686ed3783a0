// PLACEHOLDER: replaced by the misc op family implementation.
#include "oneflow_like/core/ops/builtin_ops.h"

namespace oneflow_like {

absl::Status RegisterMiscOps(OpRegistry* registry) { return absl::OkStatus(); }

}  // namespace oneflow_like
