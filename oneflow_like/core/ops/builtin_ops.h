// The explicit registration entry point for every built-in op:
//   OpRegistry registry;
//   CHECK_OK(RegisterBuiltinOps(&registry));
// Each op family registers its ops in its own Register*Ops function (one file per family).
#ifndef ONEFLOW_LIKE_CORE_OPS_BUILTIN_OPS_H_
#define ONEFLOW_LIKE_CORE_OPS_BUILTIN_OPS_H_

#include "oneflow_like/core/op_registry.h"

namespace oneflow_like {

absl::Status RegisterBuiltinOps(OpRegistry* registry);

// Families (each in <family>_ops.cc).
absl::Status RegisterMatmulOps(OpRegistry* registry);      // matmul
absl::Status RegisterElementwiseOps(OpRegistry* registry); // add sub mul div scalar_add scalar_mul bias_add
absl::Status RegisterActivationOps(OpRegistry* registry);  // relu relu_grad gelu gelu_grad
absl::Status RegisterSoftmaxOps(OpRegistry* registry);     // softmax log_softmax (+ _grad)
absl::Status RegisterNormOps(OpRegistry* registry);        // layer_norm layer_norm_grad
absl::Status RegisterEmbeddingOps(OpRegistry* registry);   // embedding embedding_grad
absl::Status RegisterLossOps(OpRegistry* registry);        // sparse_softmax_cross_entropy (+ _grad)
absl::Status RegisterShapeOps(OpRegistry* registry);       // reshape transpose slice slice_grad concat split identity
absl::Status RegisterReduceOps(OpRegistry* registry);      // reduce_sum reduce_mean broadcast_to
absl::Status RegisterMiscOps(OpRegistry* registry);        // cast fill random_uniform random_normal dropout dropout_grad
absl::Status RegisterOptimizerOps(OpRegistry* registry);   // sgd_update adam_update step_increment

}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_OPS_BUILTIN_OPS_H_
