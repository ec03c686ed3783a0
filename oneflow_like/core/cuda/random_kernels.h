// CUDA kernels of the random ops (core/ops/misc_ops.cc, core/random.h), same numbers as the CPU:
// the value at LOGICAL element L depends only on (seed, L) through Philox-4x32-10, so a shard on
// any device produces exactly its part of the logical tensor.
//
//   RandomUniform  y = low + (high - low) * PhiloxUniform(seed, L)     (bit-exact with the CPU)
//   RandomNormal   y = mean + std * PhiloxNormal(seed, L)  (Box-Muller in double; the device's
//                  log / cos / sqrt may differ from glibc's in the last bit of a double)
//   Dropout        y = PhiloxUniform(seed, L) >= p ? x * T(1 / (1 - p)) : 0  (bit-exact); the
//                  gradient is the same call on dy.
//
// `shard` says where the tensor sits: its physical dims, and the logical dims and per-axis
// offset (empty: the tensor is whole). Floating dtypes (float32, float64, bfloat16, float16;
// dropout: float32, float64). Device pointers; enqueued on `stream`. Errors: InvalidArgument
// for a non-floating dtype, a shard that does not fit or more than 8 axes; Internal naming the
// kernel on a launch failure.
#ifndef ONEFLOW_LIKE_CORE_CUDA_RANDOM_KERNELS_H_
#define ONEFLOW_LIKE_CORE_CUDA_RANDOM_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "oneflow_like/core/data_type.h"

namespace oneflow_like {
namespace cuda {

struct ShardPosition {
  std::vector<int64_t> physical_dims;
  std::vector<int64_t> logical_dims;  // empty: = physical_dims
  std::vector<int64_t> offset;        // empty: zeros
};

absl::Status RandomUniform(DataType dtype, const ShardPosition& shard, uint64_t seed, double low, double high,
                           void* y, cudaStream_t stream);

absl::Status RandomNormal(DataType dtype, const ShardPosition& shard, uint64_t seed, double mean, double stddev,
                          void* y, cudaStream_t stream);

template <typename T>
absl::Status Dropout(const T* x, const ShardPosition& shard, double p, uint64_t seed, T* y, cudaStream_t stream);

}  // namespace cuda
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_CUDA_RANDOM_KERNELS_H_
