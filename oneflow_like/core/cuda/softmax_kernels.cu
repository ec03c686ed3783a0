// Softmax kernels (softmax_kernels.h): one block per row (grid-stride over rows), block
// reductions in a fixed order (kernel_util.cuh).
#include "oneflow_like/core/cuda/softmax_kernels.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/core/cuda/cuda_status.h"
#include "oneflow_like/core/cuda/kernel_util.cuh"

namespace oneflow_like {
namespace cuda {
namespace {

using internal::RowBlocks;

struct Rows {
  int64_t count = 0;
  int64_t cols = 0;
  bool causal = false;
  int64_t q_dim = 1;
  int64_t q_offset = 0;

  __device__ int64_t Valid(int64_t r) const {
    if (!causal) return cols;
    const int64_t v = q_offset + r % q_dim + 1;
    return v < cols ? v : cols;
  }
};

using internal::Exp;
using internal::Log;

template <typename T>
__global__ void SoftmaxKernel(const T* x, Rows rows, bool log_softmax, T* y) {
  const T masked = log_softmax ? -std::numeric_limits<T>::infinity() : T(0);
  for (int64_t r = blockIdx.x; r < rows.count; r += gridDim.x) {
    const T* xr = x + r * rows.cols;
    T* yr = y + r * rows.cols;
    const int64_t n = rows.Valid(r);
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = internal::MaxOp()(xr[j], m);
    m = internal::BlockMax(m);
    T s = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += Exp(xr[j] - m);
    s = internal::BlockSum(s);
    if (log_softmax) {
      const T log_s = Log(s);
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) yr[j] = (xr[j] - m) - log_s;
    } else {
      const T inv_s = T(1) / s;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) yr[j] = Exp(xr[j] - m) * inv_s;
    }
    for (int64_t j = n + threadIdx.x; j < rows.cols; j += blockDim.x) yr[j] = masked;
  }
}

template <typename T>
__global__ void SoftmaxGradKernel(const T* y, const T* dy, Rows rows, bool log_softmax, T* dx) {
  for (int64_t r = blockIdx.x; r < rows.count; r += gridDim.x) {
    const int64_t off = r * rows.cols;
    const int64_t n = rows.Valid(r);
    T d = 0;
    if (log_softmax) {
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) d += dy[off + j];
    } else {
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) d += y[off + j] * dy[off + j];
    }
    d = internal::BlockSum(d);
    if (log_softmax) {
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) dx[off + j] = dy[off + j] - Exp(y[off + j]) * d;
    } else {
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) dx[off + j] = y[off + j] * (dy[off + j] - d);
    }
    for (int64_t j = n + threadIdx.x; j < rows.cols; j += blockDim.x) dx[off + j] = T(0);
  }
}

absl::Status MakeRows(const std::vector<int64_t>& dims, const SoftmaxOptions& options, Rows* rows) {
  const int rank = static_cast<int>(dims.size());
  if (rank < 1 || (options.causal && rank < 2)) {
    return absl::InvalidArgumentError(absl::StrCat("cuda softmax: x [", absl::StrJoin(dims, ","), "] needs rank >= ",
                                                   options.causal ? 2 : 1, options.causal ? " with causal" : ""));
  }
  rows->cols = dims[rank - 1];
  rows->count = 1;
  for (int a = 0; a + 1 < rank; ++a) rows->count *= dims[a];
  rows->causal = options.causal;
  if (options.causal) {
    rows->q_dim = dims[rank - 2] > 1 ? dims[rank - 2] : 1;
    rows->q_offset = options.q_offset;
  }
  return absl::OkStatus();
}

}  // namespace

template <typename T>
absl::Status Softmax(const T* x, const std::vector<int64_t>& dims, const SoftmaxOptions& options, T* y,
                     cudaStream_t stream) {
  Rows rows;
  if (absl::Status s = MakeRows(dims, options, &rows); !s.ok()) return s;
  if (rows.count == 0 || rows.cols == 0) return absl::OkStatus();
  ClearLastError();
  SoftmaxKernel<T><<<RowBlocks(rows.count), internal::RowThreads(rows.cols), 0, stream>>>(x, rows, options.log, y);
  return CudaLaunchStatus(options.log ? "log_softmax" : "softmax");
}

template <typename T>
absl::Status SoftmaxGrad(const T* y, const T* dy, const std::vector<int64_t>& dims, const SoftmaxOptions& options,
                         T* dx, cudaStream_t stream) {
  Rows rows;
  if (absl::Status s = MakeRows(dims, options, &rows); !s.ok()) return s;
  if (rows.count == 0 || rows.cols == 0) return absl::OkStatus();
  ClearLastError();
  SoftmaxGradKernel<T><<<RowBlocks(rows.count), internal::RowThreads(rows.cols), 0, stream>>>(y, dy, rows,
                                                                                            options.log, dx);
  return CudaLaunchStatus(options.log ? "log_softmax_grad" : "softmax_grad");
}

template absl::Status Softmax<float>(const float*, const std::vector<int64_t>&, const SoftmaxOptions&, float*,
                                     cudaStream_t);
template absl::Status Softmax<double>(const double*, const std::vector<int64_t>&, const SoftmaxOptions&, double*,
                                      cudaStream_t);
template absl::Status SoftmaxGrad<float>(const float*, const float*, const std::vector<int64_t>&,
                                         const SoftmaxOptions&, float*, cudaStream_t);
template absl::Status SoftmaxGrad<double>(const double*, const double*, const std::vector<int64_t>&,
                                          const SoftmaxOptions&, double*, cudaStream_t);

}  // namespace cuda
}  // namespace oneflow_like
