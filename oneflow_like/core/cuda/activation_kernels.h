// CUDA kernels of the activation family (core/ops/activation_ops.cc), same semantics:
//
//   Relu      y = max(x, 0) (NaN propagates)
//   ReluGrad  dx = y > 0 ? dy : 0              (takes the forward *output* y)
//   Gelu      kTanh: y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed for
//                    float32 as x / (1 + e^(-2u)) like the CPU kernel;
//             kExact: y = x Phi(x) = 0.5 x erfc(-x / sqrt 2)
//   GeluGrad  dx = dy * d gelu / dx             (takes the forward *input* x; same approximation)
//
// Device pointers of n elements each; enqueued on `stream`. An output may be the same buffer as
// an input (in place). Errors: Internal naming the kernel on a launch failure. T: float, double.
#ifndef ONEFLOW_LIKE_CORE_CUDA_ACTIVATION_KERNELS_H_
#define ONEFLOW_LIKE_CORE_CUDA_ACTIVATION_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace oneflow_like {
namespace cuda {

enum class GeluApproximation { kTanh, kExact };  // the CPU op's approximate="tanh" / "none"

template <typename T>
absl::Status Relu(const T* x, T* y, int64_t n, cudaStream_t stream);
template <typename T>
absl::Status ReluGrad(const T* dy, const T* y, T* dx, int64_t n, cudaStream_t stream);
template <typename T>
absl::Status Gelu(GeluApproximation approximation, const T* x, T* y, int64_t n, cudaStream_t stream);
template <typename T>
absl::Status GeluGrad(GeluApproximation approximation, const T* dy, const T* x, T* dx, int64_t n,
                      cudaStream_t stream);

}  // namespace cuda
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_CUDA_ACTIVATION_KERNELS_H_
