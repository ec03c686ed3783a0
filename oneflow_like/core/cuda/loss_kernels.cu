// Cross-entropy kernels (loss_kernels.h): one block per row, then (forward) one block adding
// the per-row losses in double.
#include "oneflow_like/core/cuda/loss_kernels.h"

#include <limits>

#include "oneflow_like/core/cuda/cuda_status.h"
#include "oneflow_like/core/cuda/kernel_util.cuh"

namespace oneflow_like {
namespace cuda {
namespace {

using internal::RowBlocks;

using internal::Exp;
using internal::Log;

// m = max of the row, s = sum exp(x - m); every thread of the block gets both.
template <typename T>
__device__ void RowMaxAndSum(const T* x, int64_t classes, T* m_out, T* s_out) {
  T m = -std::numeric_limits<T>::infinity();
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) m = internal::MaxOp()(x[c], m);
  m = internal::BlockMax(m);
  T s = 0;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) s += Exp(x[c] - m);
  *s_out = internal::BlockSum(s);
  *m_out = m;
}

template <typename T, typename I>
__global__ void RowLossKernel(const T* logits, const I* labels, int64_t rows, int64_t classes, T* row_loss) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* x = logits + r * classes;
    T m, s;
    RowMaxAndSum(x, classes, &m, &s);
    if (threadIdx.x == 0) {
      const I label = labels[r];
      row_loss[r] = (label >= 0 && label < classes) ? (m - x[label]) + Log(s) : std::numeric_limits<T>::quiet_NaN();
    }
  }
}

template <typename T>
__global__ void SumLossKernel(const T* row_loss, int64_t rows, int64_t logical_count, T* loss) {
  double total = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) total += static_cast<double>(row_loss[r]);
  total = internal::BlockSum(total);
  if (threadIdx.x == 0) loss[0] = static_cast<T>(logical_count > 0 ? total / static_cast<double>(logical_count) : 0.0);
}

template <typename T, typename I>
__global__ void GradKernel(const T* logits, const I* labels, const T* dloss, int64_t rows, int64_t classes,
                           int64_t logical_count, T* dlogits) {
  const T scale = logical_count > 0 ? dloss[0] / static_cast<T>(logical_count) : T(0);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* x = logits + r * classes;
    T* dx = dlogits + r * classes;
    T m, s;
    RowMaxAndSum(x, classes, &m, &s);
    const I label = labels[r];
    const bool valid = label >= 0 && label < classes;
    const T factor = valid ? scale / s : std::numeric_limits<T>::quiet_NaN();
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      const T v = Exp(x[c] - m) * factor;
      dx[c] = c == label ? v - scale : v;
    }
  }
}

}  // namespace

int64_t CrossEntropyWorkspaceBytes(int64_t rows) { return rows * static_cast<int64_t>(sizeof(double)); }

template <typename T, typename I>
absl::Status SparseSoftmaxCrossEntropy(const T* logits, const I* labels, int64_t rows, int64_t classes,
                                       int64_t logical_count, T* loss, void* workspace, cudaStream_t stream) {
  T* row_loss = static_cast<T*>(workspace);
  if (rows > 0 && classes > 0) {
    ClearLastError();
    RowLossKernel<T, I><<<RowBlocks(rows), internal::RowThreads(classes), 0, stream>>>(logits, labels, rows, classes,
                                                                                       row_loss);
    if (absl::Status s = CudaLaunchStatus("sparse_softmax_cross_entropy rows"); !s.ok()) return s;
  }
  ClearLastError();
  SumLossKernel<T><<<1, 1024, 0, stream>>>(row_loss, classes > 0 ? rows : 0, logical_count, loss);
  return CudaLaunchStatus("sparse_softmax_cross_entropy sum");
}

template <typename T, typename I>
absl::Status SparseSoftmaxCrossEntropyGrad(const T* logits, const I* labels, const T* dloss, int64_t rows,
                                           int64_t classes, int64_t logical_count, T* dlogits, cudaStream_t stream) {
  if (rows == 0 || classes == 0) return absl::OkStatus();
  ClearLastError();
  GradKernel<T, I><<<RowBlocks(rows), internal::RowThreads(classes), 0, stream>>>(logits, labels, dloss, rows, classes,
                                                                                  logical_count, dlogits);
  return CudaLaunchStatus("sparse_softmax_cross_entropy_grad");
}

template absl::Status SparseSoftmaxCrossEntropy<float, int32_t>(const float*, const int32_t*, int64_t, int64_t,
                                                                int64_t, float*, void*, cudaStream_t);
template absl::Status SparseSoftmaxCrossEntropy<float, int64_t>(const float*, const int64_t*, int64_t, int64_t,
                                                                int64_t, float*, void*, cudaStream_t);
template absl::Status SparseSoftmaxCrossEntropy<double, int32_t>(const double*, const int32_t*, int64_t, int64_t,
                                                                 int64_t, double*, void*, cudaStream_t);
template absl::Status SparseSoftmaxCrossEntropy<double, int64_t>(const double*, const int64_t*, int64_t, int64_t,
                                                                 int64_t, double*, void*, cudaStream_t);
template absl::Status SparseSoftmaxCrossEntropyGrad<float, int32_t>(const float*, const int32_t*, const float*,
                                                                    int64_t, int64_t, int64_t, float*, cudaStream_t);
template absl::Status SparseSoftmaxCrossEntropyGrad<float, int64_t>(const float*, const int64_t*, const float*,
                                                                    int64_t, int64_t, int64_t, float*, cudaStream_t);
template absl::Status SparseSoftmaxCrossEntropyGrad<double, int32_t>(const double*, const int32_t*, const double*,
                                                                     int64_t, int64_t, int64_t, double*,
                                                                     cudaStream_t);
template absl::Status SparseSoftmaxCrossEntropyGrad<double, int64_t>(const double*, const int64_t*, const double*,
                                                                     int64_t, int64_t, int64_t, double*,
                                                                     cudaStream_t);

}  // namespace cuda
}  // namespace oneflow_like
