// Cast and fill (misc_kernels.h): one thread per element, Convert<Src, Dst> (dtype_convert.cuh).
#include "oneflow_like/core/cuda/misc_kernels.h"

#include "absl/strings/str_cat.h"
#include "oneflow_like/core/cuda/cuda_status.h"
#include "oneflow_like/core/cuda/dtype_convert.cuh"
#include "oneflow_like/core/cuda/kernel_util.cuh"

namespace oneflow_like {
namespace cuda {
namespace {

using internal::Convert;
using internal::DispatchDtype;
using internal::FromDouble;
using internal::GridFor;
using internal::kThreads;

template <typename Src, typename Dst>
__global__ void CastKernel(const Src* x, Dst* y, int64_t n) {
  OL_GRID_STRIDE_LOOP(i, n) { y[i] = Convert<Src, Dst>(x[i]); }
}

template <typename T>
__global__ void FillKernel(double value, T* y, int64_t n) {
  const T v = FromDouble<T>(value);
  OL_GRID_STRIDE_LOOP(i, n) { y[i] = v; }
}

}  // namespace

absl::Status Cast(DataType from, const void* x, DataType to, void* y, int64_t n, cudaStream_t stream) {
  bool ok = true;
  const bool known = DispatchDtype(from, [&](auto s) {
    using Src = decltype(s);
    ok = DispatchDtype(to, [&](auto d) {
      using Dst = decltype(d);
      if (n > 0) {
        ClearLastError();
        CastKernel<Src, Dst><<<GridFor(n), kThreads, 0, stream>>>(static_cast<const Src*>(x), static_cast<Dst*>(y), n);
      }
    });
  });
  if (!known || !ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda Cast: cannot cast ", DataTypeName(from), " to ", DataTypeName(to)));
  }
  if (n == 0) return absl::OkStatus();  // nothing launched: no launch status to read
  return CudaLaunchStatus("cast");
}

absl::Status Fill(DataType dtype, double value, void* y, int64_t n, cudaStream_t stream) {
  const bool known = DispatchDtype(dtype, [&](auto t) {
    using T = decltype(t);
    if (n > 0) {
      ClearLastError();
      FillKernel<T><<<GridFor(n), kThreads, 0, stream>>>(value, static_cast<T*>(y), n);
    }
  });
  if (!known) return absl::InvalidArgumentError(absl::StrCat("cuda Fill: invalid dtype ", DataTypeName(dtype)));
  if (n == 0) return absl::OkStatus();  // nothing launched
  return CudaLaunchStatus("fill");
}

}  // namespace cuda
}  // namespace oneflow_like
