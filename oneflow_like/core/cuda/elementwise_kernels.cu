// Element-wise kernels (elementwise_kernels.h). Broadcasting: the operand strides are computed
// against the output shape (stride 0 on broadcast axes), size-1 axes are dropped and adjacent
// axes contiguous for both operands merged (as the CPU kernel's loop nest), so same-shape
// inputs become one flat loop; each thread then maps its output index to both operands.
#include "oneflow_like/core/cuda/elementwise_kernels.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/core/cuda/cuda_status.h"
#include "oneflow_like/core/cuda/kernel_util.cuh"

namespace oneflow_like {
namespace cuda {
namespace {

using internal::GridFor;
using internal::MakePairNest;
using internal::PairNest;
using internal::kThreads;

std::vector<int64_t> StridesAgainst(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  const int r = static_cast<int>(out.size()), offset = r - static_cast<int>(in.size());
  std::vector<int64_t> strides(r, 0);
  int64_t s = 1;
  for (int i = r - 1; i >= offset; --i) {
    const int64_t d = in[i - offset];
    strides[i] = (d == 1 && out[i] != 1) ? 0 : s;
    s *= d;
  }
  return strides;
}

template <BinaryOp kOp, typename T>
__device__ __forceinline__ T Apply(T a, T b) {
  if constexpr (kOp == BinaryOp::kAdd) return a + b;
  if constexpr (kOp == BinaryOp::kSub) return a - b;
  if constexpr (kOp == BinaryOp::kMul) return a * b;
  return a / b;
}

template <BinaryOp kOp, typename T>
__global__ void SameShapeKernel(const T* a, const T* b, T* y, int64_t n) {
  OL_GRID_STRIDE_LOOP(i, n) { y[i] = Apply<kOp>(a[i], b[i]); }
}

// Operand 0 of the nest is a, operand 1 is b; y is the nest's row-major order.
template <BinaryOp kOp, typename T>
__global__ void BroadcastKernel(const T* a, const T* b, T* y, int64_t n, PairNest nest) {
  OL_GRID_STRIDE_LOOP(i, n) {
    int64_t ao, bo;
    nest.Offsets(i, &ao, &bo);
    y[i] = Apply<kOp>(a[ao], b[bo]);
  }
}

template <BinaryOp kOp, typename T>
void Launch(const T* a, const T* b, T* y, int64_t n, const PairNest& nest, cudaStream_t stream) {
  if (nest.Flat()) {
    ClearLastError();
    SameShapeKernel<kOp, T><<<GridFor(n), kThreads, 0, stream>>>(a, b, y, n);
  } else {
    ClearLastError();
    BroadcastKernel<kOp, T><<<GridFor(n), kThreads, 0, stream>>>(a, b, y, n, nest);
  }
}

template <typename T>
__global__ void ScalarKernel(ScalarOp op, const T* x, T v, T* y, int64_t n) {
  if (op == ScalarOp::kAdd) {
    OL_GRID_STRIDE_LOOP(i, n) { y[i] = x[i] + v; }
  } else {
    OL_GRID_STRIDE_LOOP(i, n) { y[i] = x[i] * v; }
  }
}

// y[o, c, i] = x[o, c, i] + b[c] over x viewed as [outer, channels, inner].
template <typename T>
__global__ void BiasAddKernel(const T* x, const T* bias, T* y, int64_t n, int64_t channels, int64_t inner) {
  OL_GRID_STRIDE_LOOP(i, n) { y[i] = x[i] + bias[(i / inner) % channels]; }
}

int64_t Count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> BroadcastDims(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const int r = static_cast<int>(std::max(a.size(), b.size()));
  std::vector<int64_t> dims(r);
  for (int i = 0; i < r; ++i) {
    const int ia = i - (r - static_cast<int>(a.size())), ib = i - (r - static_cast<int>(b.size()));
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      return absl::InvalidArgumentError(absl::StrCat("shapes are not broadcastable: a [", absl::StrJoin(a, ","),
                                                     "] and b [", absl::StrJoin(b, ","), "] differ at axis ", i - r,
                                                     " (", da, " vs ", db, "); dims must be equal or 1"));
    }
    dims[i] = da == 1 ? db : da;
  }
  return dims;
}

template <typename T>
absl::Status BroadcastBinary(BinaryOp op, const T* a, const std::vector<int64_t>& a_dims, const T* b,
                             const std::vector<int64_t>& b_dims, T* y, cudaStream_t stream) {
  absl::StatusOr<std::vector<int64_t>> out = BroadcastDims(a_dims, b_dims);
  if (!out.ok()) return out.status();
  const int64_t n = Count(*out);
  if (n == 0) return absl::OkStatus();
  absl::StatusOr<PairNest> nest =
      MakePairNest(*out, StridesAgainst(a_dims, *out), StridesAgainst(b_dims, *out), "cuda BroadcastBinary");
  if (!nest.ok()) return nest.status();
  switch (op) {
    case BinaryOp::kAdd: Launch<BinaryOp::kAdd>(a, b, y, n, *nest, stream); break;
    case BinaryOp::kSub: Launch<BinaryOp::kSub>(a, b, y, n, *nest, stream); break;
    case BinaryOp::kMul: Launch<BinaryOp::kMul>(a, b, y, n, *nest, stream); break;
    case BinaryOp::kDiv: Launch<BinaryOp::kDiv>(a, b, y, n, *nest, stream); break;
  }
  return CudaLaunchStatus("broadcast_binary");
}

template <typename T>
absl::Status ScalarApply(ScalarOp op, const T* x, double value, T* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  ClearLastError();
  ScalarKernel<T><<<GridFor(n), kThreads, 0, stream>>>(op, x, static_cast<T>(value), y, n);
  return CudaLaunchStatus("scalar_apply");
}

template <typename T>
absl::Status BiasAdd(const T* x, const std::vector<int64_t>& x_dims, int axis, const T* bias, T* y,
                     cudaStream_t stream) {
  const int rank = static_cast<int>(x_dims.size());
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda BiasAdd: axis ", axis, " out of range for x [", absl::StrJoin(x_dims, ","), "]"));
  }
  if (axis < 0) axis += rank;
  const int64_t n = Count(x_dims);
  if (n == 0) return absl::OkStatus();
  int64_t inner = 1;
  for (int a = axis + 1; a < rank; ++a) inner *= x_dims[a];
  ClearLastError();
  BiasAddKernel<T><<<GridFor(n), kThreads, 0, stream>>>(x, bias, y, n, x_dims[axis], inner);
  return CudaLaunchStatus("bias_add");
}

#define OL_INSTANTIATE(T)                                                                                     \
  template absl::Status BroadcastBinary<T>(BinaryOp, const T*, const std::vector<int64_t>&, const T*,        \
                                           const std::vector<int64_t>&, T*, cudaStream_t);                   \
  template absl::Status ScalarApply<T>(ScalarOp, const T*, double, T*, int64_t, cudaStream_t);               \
  template absl::Status BiasAdd<T>(const T*, const std::vector<int64_t>&, int, const T*, T*, cudaStream_t);
OL_INSTANTIATE(float)
OL_INSTANTIATE(double)
#undef OL_INSTANTIATE
// Integer sums (the device backend's BOXING_ADD and ACCUMULATE of int32 / int64 registers, as the
// CPU AddBody sums them); sub, mul and div compile too (integer division truncates; by zero is
// undefined on the device: no op sends one).
template absl::Status BroadcastBinary<int32_t>(BinaryOp, const int32_t*, const std::vector<int64_t>&, const int32_t*,
                                               const std::vector<int64_t>&, int32_t*, cudaStream_t);
template absl::Status BroadcastBinary<int64_t>(BinaryOp, const int64_t*, const std::vector<int64_t>&, const int64_t*,
                                               const std::vector<int64_t>&, int64_t*, cudaStream_t);

}  // namespace cuda
}  // namespace oneflow_like
