// CUDA kernels of the data-movement ops (core/ops/shape_ops.cc, broadcast_to of
// core/ops/reduce_ops.cc): one strided copy, as ops::CopyStrided on the CPU, and the shape ops
// written with it. Raw bytes of any dtype (elem_size 1, 2, 4 or 8), strides in elements.
//
//   CopyBytes    dst = src, `bytes` bytes (reshape, identity: cudaMemcpyAsync device to device;
//                nothing when dst == src).
//   StridedCopy  dst[sum_a i_a * dst_strides[a]] = src[sum_a i_a * src_strides[a]] for every
//                index i of `shape` (a zero source stride broadcasts).
//   Transpose    y = x with axes permuted: y.dims[j] = x.dims[perm[j]].
//   BroadcastTo  numpy broadcast of x to y_dims (x aligned at the last axis, dims equal or 1).
//   Slice        y = x[begin[0]:begin[0]+y_dims[0], ...] (begin: physical, non-negative).
//   SliceGrad    dx = zeros(dx_dims) with dy written at begin (physical).
//   Concat       y = the inputs joined along `axis` (inputs in order, equal dims elsewhere).
//   Split        the inverse of Concat: outputs[i] gets its part of x along `axis`.
//
// Device pointers; enqueued on `stream`. Errors: InvalidArgument for inconsistent shapes,
// element sizes or more than 8 axes left after merging contiguous ones; Internal naming the
// kernel on a launch failure. dst must not overlap src.
#ifndef ONEFLOW_LIKE_CORE_CUDA_COPY_KERNELS_H_
#define ONEFLOW_LIKE_CORE_CUDA_COPY_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace oneflow_like {
namespace cuda {

absl::Status CopyBytes(void* dst, const void* src, int64_t bytes, cudaStream_t stream);

absl::Status StridedCopy(const std::vector<int64_t>& shape, int64_t elem_size, void* dst,
                         const std::vector<int64_t>& dst_strides, const void* src,
                         const std::vector<int64_t>& src_strides, cudaStream_t stream);

absl::Status Transpose(const void* x, const std::vector<int64_t>& x_dims, const std::vector<int64_t>& perm,
                       int64_t elem_size, void* y, cudaStream_t stream);

absl::Status BroadcastTo(const void* x, const std::vector<int64_t>& x_dims, const std::vector<int64_t>& y_dims,
                         int64_t elem_size, void* y, cudaStream_t stream);

absl::Status Slice(const void* x, const std::vector<int64_t>& x_dims, const std::vector<int64_t>& begin,
                   const std::vector<int64_t>& y_dims, int64_t elem_size, void* y, cudaStream_t stream);

absl::Status SliceGrad(const void* dy, const std::vector<int64_t>& dy_dims, const std::vector<int64_t>& begin,
                       const std::vector<int64_t>& dx_dims, int64_t elem_size, void* dx, cudaStream_t stream);

absl::Status Concat(const std::vector<const void*>& inputs, const std::vector<std::vector<int64_t>>& input_dims,
                    int axis, int64_t elem_size, void* y, cudaStream_t stream);

absl::Status Split(const void* x, const std::vector<int64_t>& x_dims, int axis, const std::vector<void*>& outputs,
                   const std::vector<int64_t>& sizes, int64_t elem_size, cudaStream_t stream);

}  // namespace cuda
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_CUDA_COPY_KERNELS_H_
