// CUDA kernels of the misc family (core/ops/misc_ops.cc), same semantics, bit for bit:
//
//   Cast  y = x converted to `to`: integer/bool to integer/bool exactly; anything involving a
//         floating type through double; float -> int truncates toward zero and saturates (NaN ->
//         0); x -> bool is x != 0; bfloat16 / float16 round to nearest even (the bit-level
//         conversions of core/data_type.cc, ported to the device).
//   Fill  y = value everywhere, value converted like Cast from float64.
//
// All seven dtypes (float32, float64, int32, int64, bool, bfloat16, float16). n elements;
// device pointers; enqueued on `stream`. Errors: InvalidArgument for kInvalid; Internal naming
// the kernel on a launch failure. random_uniform / random_normal / dropout are not here yet
// (they need the CPU's Philox stream on the device to give the same numbers).
#ifndef ONEFLOW_LIKE_CORE_CUDA_MISC_KERNELS_H_
#define ONEFLOW_LIKE_CORE_CUDA_MISC_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "oneflow_like/core/data_type.h"

namespace oneflow_like {
namespace cuda {

absl::Status Cast(DataType from, const void* x, DataType to, void* y, int64_t n, cudaStream_t stream);

absl::Status Fill(DataType dtype, double value, void* y, int64_t n, cudaStream_t stream);

}  // namespace cuda
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_CUDA_MISC_KERNELS_H_
