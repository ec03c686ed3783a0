// Internal to the CUDA op kernels (op_kernels*.cc): argument checks and dtype dispatch with the
// error messages of op_kernels.h, and the per-family functions that AddCudaKernels calls.
// Not a public header: use op_kernels.h.
#ifndef ONEFLOW_LIKE_CORE_CUDA_OP_KERNELS_UTIL_H_
#define ONEFLOW_LIKE_CORE_CUDA_OP_KERNELS_UTIL_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "oneflow_like/core/cuda/op_kernels.h"
#include "oneflow_like/core/cuda/random_kernels.h"

namespace oneflow_like {
namespace cuda {
namespace op_kernels_internal {

// InvalidArgument "<op_type> '<instance>' (cuda): <message>".
template <typename... Args>
absl::Status OpError(const std::string& op, const CudaKernelContext& ctx, const Args&... args) {
  return absl::InvalidArgumentError(absl::StrCat(op, " '", ctx.op_name, "' (cuda): ", args...));
}

// A failed status of a kernel function (launch failure, cuBLAS error, shape check), its code
// kept and its message prefixed with the op type and instance. OK stays OK.
absl::Status Annotate(const std::string& op, const CudaKernelContext& ctx, const absl::Status& status);

// The inputs / outputs counts (variadic: at least one), non-null tensors, and shard vectors that
// are empty or one per tensor.
absl::Status CheckArity(const std::string& op, const CudaKernelContext& ctx, int num_inputs, int num_outputs,
                        bool variadic_inputs = false, bool variadic_outputs = false);

// InvalidArgument unless `t` has `want`'s desc; `what` names the tensor ("output dx").
absl::Status CheckDesc(const std::string& op, const CudaKernelContext& ctx, const std::string& what, const Tensor& t,
                       const TensorDesc& want);

// The shard position of tensor i (whole when no shard info was given).
ShardPosition PositionOf(const std::vector<ShardInfo>& shards, int i, const Shape& physical);
// Per-axis offset of tensor i in its logical tensor (zeros when no shard info was given).
std::vector<int64_t> OffsetOf(const std::vector<ShardInfo>& shards, int i, const Shape& physical);

// fn(T{}) for T = float / double by `dtype`; InvalidArgument naming the op and `what` otherwise.
template <typename Fn>
absl::Status DispatchFloat(const std::string& op, const CudaKernelContext& ctx, const std::string& what,
                           DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kFloat32: return fn(float{});
    case DataType::kFloat64: return fn(double{});
    default:
      return OpError(op, ctx, what, " has unsupported dtype ", DataTypeName(dtype), " (expected float32 or float64)");
  }
}

// fn(I{}) for I = int32_t / int64_t by `dtype`; InvalidArgument naming the op and `what` otherwise.
template <typename Fn>
absl::Status DispatchIndex(const std::string& op, const CudaKernelContext& ctx, const std::string& what,
                           DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kInt32: return fn(int32_t{});
    case DataType::kInt64: return fn(int64_t{});
    default:
      return OpError(op, ctx, what, " has unsupported dtype ", DataTypeName(dtype), " (expected int32 or int64)");
  }
}

// The families (one .cc each); AddCudaKernels calls them in turn.
absl::Status AddMathKernels(CudaKernelTable* table);       // matmul, element-wise, activations, reductions
absl::Status AddNnKernels(CudaKernelTable* table);         // softmax, layer norm, embedding, cross-entropy
absl::Status AddDataKernels(CudaKernelTable* table);       // shape ops, broadcast_to, cast, fill, random
absl::Status AddOptimizerKernels(CudaKernelTable* table);  // sgd, adam, step_increment

}  // namespace op_kernels_internal
}  // namespace cuda
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_CUDA_OP_KERNELS_UTIL_H_
