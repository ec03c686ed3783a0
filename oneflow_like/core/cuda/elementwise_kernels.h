// CUDA kernels of the element-wise family (core/ops/elementwise_ops.cc), same semantics:
//
//   BroadcastBinary  y = a op b, op in {add, sub, mul, div}, numpy broadcasting: shapes aligned
//                    at the last axis, each dim equal or 1 (or missing); y has BroadcastDims(a, b).
//                    Example: mul(a[5,1,7], b[3,1]) -> y[5,3,7].
//   ScalarApply      y = x + value (kAdd) or x * value (kMul), value converted to T first.
//   BiasAdd          y = x + b along `axis` of x (negative counts from the end); b has x's dim there.
//
// All pointers are device pointers; kernels are enqueued on `stream` and the call returns at
// once. Errors: InvalidArgument for shapes that do not broadcast (naming both shapes and the
// axis, as the CPU op) or for more than 8 axes left after merging; Internal (naming the kernel)
// for a launch failure. y may be the same buffer as an input of y's shape (in place), never a
// partial overlap. T is float or double; BroadcastBinary also int32_t and int64_t (the device
// backend's integer sums).
#ifndef ONEFLOW_LIKE_CORE_CUDA_ELEMENTWISE_KERNELS_H_
#define ONEFLOW_LIKE_CORE_CUDA_ELEMENTWISE_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace oneflow_like {
namespace cuda {

enum class BinaryOp { kAdd, kSub, kMul, kDiv };
enum class ScalarOp { kAdd, kMul };

// The numpy broadcast of two shapes, or InvalidArgument naming both and the first bad axis.
absl::StatusOr<std::vector<int64_t>> BroadcastDims(const std::vector<int64_t>& a_dims,
                                                   const std::vector<int64_t>& b_dims);

template <typename T>
absl::Status BroadcastBinary(BinaryOp op, const T* a, const std::vector<int64_t>& a_dims, const T* b,
                             const std::vector<int64_t>& b_dims, T* y, cudaStream_t stream);

template <typename T>
absl::Status ScalarApply(ScalarOp op, const T* x, double value, T* y, int64_t n, cudaStream_t stream);

template <typename T>
absl::Status BiasAdd(const T* x, const std::vector<int64_t>& x_dims, int axis, const T* bias, T* y,
                     cudaStream_t stream);

}  // namespace cuda
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_CUDA_ELEMENTWISE_KERNELS_H_
