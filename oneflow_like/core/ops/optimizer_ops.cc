// PLACEHOLDER: replaced by the optimizer op family implementation.
#include "oneflow_like/core/ops/builtin_ops.h"

namespace oneflow_like {

absl::Status RegisterOptimizerOps(OpRegistry* registry) { return absl::OkStatus(); }

}  // namespace oneflow_like
