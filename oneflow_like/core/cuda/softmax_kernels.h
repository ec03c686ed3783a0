// CUDA kernels of the softmax family (core/ops/softmax_ops.cc), over the last axis, same
// semantics:
//
//   Softmax(log=false)      y_j = exp(x_j - m) / s,  m = max_k x_k,  s = sum_k exp(x_k - m)
//   Softmax(log=true)       y_j = (x_j - m) - log(s)
//   SoftmaxGrad(log=false)  dx = y * (dy - sum_k y_k dy_k)
//   SoftmaxGrad(log=true)   dx = dy - exp(y) * sum_k dy_k
//
// causal (x[..., q, k]): row i of a [q, k] matrix keeps keys [0, min(k, q_offset + i + 1));
// masked outputs are 0 (softmax) or -inf (log_softmax), masked gradients 0. q_offset is this
// shard's offset along the query axis (the CPU kernel's ShardInfo offset), 0 for a whole tensor.
//
// Device pointers; enqueued on `stream`; one block per row. Errors: InvalidArgument for a bad
// shape (rank 0, or rank < 2 with causal); Internal naming the kernel on a launch failure.
// T: float, double.
#ifndef ONEFLOW_LIKE_CORE_CUDA_SOFTMAX_KERNELS_H_
#define ONEFLOW_LIKE_CORE_CUDA_SOFTMAX_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace oneflow_like {
namespace cuda {

struct SoftmaxOptions {
  bool log = false;       // log_softmax / log_softmax_grad
  bool causal = false;    // mask keys after the query (x rank >= 2)
  int64_t q_offset = 0;   // logical index of this shard's first query row
};

template <typename T>
absl::Status Softmax(const T* x, const std::vector<int64_t>& dims, const SoftmaxOptions& options, T* y,
                     cudaStream_t stream);

// y is the forward output (softmax or log_softmax), dy its gradient.
template <typename T>
absl::Status SoftmaxGrad(const T* y, const T* dy, const std::vector<int64_t>& dims, const SoftmaxOptions& options,
                         T* dx, cudaStream_t stream);

}  // namespace cuda
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_CUDA_SOFTMAX_KERNELS_H_
