// CUDA kernels of the norm family (core/ops/norm_ops.cc), over the last axis of x viewed as
// [rows, d], same semantics:
//
//   LayerNorm      mean = sum_j x_j / d,  var = sum_j (x_j - mean)^2 / d (rows centred on their
//                  first entry first, as the CPU kernel, for accuracy at a large mean),
//                  inv_std = 1 / sqrt(var + epsilon),  y = (x - mean) * inv_std * gamma + beta;
//                  writes y[rows, d], mean[rows], inv_std[rows].
//   LayerNormGrad  xhat = (x - mean) * inv_std, g = dy * gamma,
//                  dx = inv_std * (g - mean_j(g) - xhat * mean_j(g * xhat)),
//                  dgamma = sum over rows of dy * xhat, dbeta = sum over rows of dy.
//
// Device pointers; enqueued on `stream`. One block per row; dgamma / dbeta by column tiles,
// each column summed in a fixed order (deterministic). Errors: Internal naming the kernel on a
// launch failure. T: float, double.
#ifndef ONEFLOW_LIKE_CORE_CUDA_NORM_KERNELS_H_
#define ONEFLOW_LIKE_CORE_CUDA_NORM_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace oneflow_like {
namespace cuda {

template <typename T>
absl::Status LayerNorm(const T* x, const T* gamma, const T* beta, double epsilon, int64_t rows, int64_t d, T* y,
                       T* mean, T* inv_std, cudaStream_t stream);

template <typename T>
absl::Status LayerNormGrad(const T* dy, const T* x, const T* mean, const T* inv_std, const T* gamma, int64_t rows,
                           int64_t d, T* dx, T* dgamma, T* dbeta, cudaStream_t stream);

}  // namespace cuda
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_CUDA_NORM_KERNELS_H_
