// CUDA kernels of the reduce family (core/ops/reduce_ops.cc), same semantics:
//
//   ReduceSum   y = sum of x over the axes where reduced[a] is true (all when `reduced` is all
//               true); y holds the kept axes in order (keepdims only changes y's shape, not its
//               layout). x[2,5,3], reduced {0,1,0} -> y[2,3].
//   ReduceMean  ReduceSum times 1 / max(logical_count, 1), where logical_count is the reduced
//               size of the LOGICAL tensor (the CPU kernel's rule: under x:S(reduced axis) every
//               shard divides by the whole size, so the partial results sum to the mean).
//
// Device pointers; enqueued on `stream`. An empty x gives zeros. Each output element is summed
// by one thread (inner axis kept: columns) or one block in a fixed tree order (inner axis
// reduced: rows), so results are deterministic, and within float rounding of the CPU's.
// Errors: InvalidArgument if `reduced` does not match x's rank or more than 8 kept / reduced
// axis runs remain after merging; Internal naming the kernel on a launch failure.
// ReduceSum: T = float, double, int32_t, int64_t; ReduceMean: float, double.
#ifndef ONEFLOW_LIKE_CORE_CUDA_REDUCE_KERNELS_H_
#define ONEFLOW_LIKE_CORE_CUDA_REDUCE_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace oneflow_like {
namespace cuda {

template <typename T>
absl::Status ReduceSum(const T* x, const std::vector<int64_t>& x_dims, const std::vector<bool>& reduced, T* y,
                       cudaStream_t stream);

template <typename T>
absl::Status ReduceMean(const T* x, const std::vector<int64_t>& x_dims, const std::vector<bool>& reduced,
                        int64_t logical_count, T* y, cudaStream_t stream);

}  // namespace cuda
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_CUDA_REDUCE_KERNELS_H_
