#include "oneflow_like/core/ops/builtin_ops.h"

namespace oneflow_like {

absl::Status RegisterBuiltinOps(OpRegistry* registry) {
  for (auto* fn : {RegisterMatmulOps, RegisterElementwiseOps, RegisterActivationOps, RegisterSoftmaxOps,
                   RegisterNormOps, RegisterEmbeddingOps, RegisterLossOps, RegisterShapeOps,
                   RegisterReduceOps, RegisterMiscOps, RegisterOptimizerOps}) {
    RETURN_IF_ERROR(fn(registry));
  }
  return absl::OkStatus();
}

}  // namespace oneflow_like
