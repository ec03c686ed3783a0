// Reference "shard simulator" for tests: turns a logical (global) tensor into the physical
// shards that the devices of a placement would hold under an NdSbp, and assembles shards back.
// It is deliberately simple and slow; it is the independent reference that kernels, boxing
// and the runtime are checked against.
//
// Shard order is the parallel id (row-major over the hierarchy). Recursion over mesh axes:
// under (s0, s1) on [h0, h1], device (i, j) holds part j (by s1) of part i (by s0) of the
// logical tensor. For a partial-sum axis, "part i" is a tensor of the full shape and the parts
// sum to the whole: for floating types each part but the last is a pseudo-random fraction
// (0.5 to 1.5, from `seed`) of what remains, rounded to the dtype, and the last part is the
// remainder, so every subtraction is exact and assembling (summing from the last part to the
// first) reproduces the tensor bit for bit; integer/bool put the whole on part 0, zeros elsewhere.
#ifndef ONEFLOW_LIKE_CORE_SHARD_SIMULATOR_H_
#define ONEFLOW_LIKE_CORE_SHARD_SIMULATOR_H_

#include <cstdint>
#include <vector>

#include "oneflow_like/core/sbp.h"
#include "oneflow_like/core/tensor.h"

namespace oneflow_like {

// One tensor per device (parallel id order). InvalidArgument if ValidateNdSbp fails
// (with allow_empty_shards = true: empty shards are produced when a dim has fewer elements
// than parts).
absl::StatusOr<std::vector<Tensor>> ShardTensor(const Tensor& logical, const NdSbp& nd_sbp,
                                                const std::vector<int64_t>& hierarchy, uint64_t seed = 0);

// Inverse of ShardTensor: concatenates splits, sums partials, and checks that broadcast copies
// agree to within `broadcast_tolerance` (absolute; InvalidArgument naming the first differing
// devices and element otherwise). Shard shapes must match PhysicalShape.
absl::StatusOr<Tensor> AssembleTensor(const std::vector<Tensor>& shards, const Shape& logical_shape,
                                      const NdSbp& nd_sbp, const std::vector<int64_t>& hierarchy,
                                      double broadcast_tolerance = 0.0);

// Copies the sub-block [offset, offset + out.shape) of `src` into `out` (same dtype), and the
// reverse. Row-major, any rank. Used by the simulator and by slicing kernels' references.
void CopyBlockOut(const Tensor& src, const std::vector<int64_t>& offset, Tensor* out);
void CopyBlockIn(const Tensor& block, const std::vector<int64_t>& offset, Tensor* dst);

}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_SHARD_SIMULATOR_H_
