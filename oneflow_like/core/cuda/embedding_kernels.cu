// Embedding kernels (embedding_kernels.h): one thread per element of y / dy.
#include "oneflow_like/core/cuda/embedding_kernels.h"

#include "oneflow_like/core/cuda/cuda_status.h"
#include "oneflow_like/core/cuda/kernel_util.cuh"

namespace oneflow_like {
namespace cuda {
namespace {

using internal::GridFor;
using internal::kThreads;

template <typename T, typename I>
__global__ void LookupKernel(const T* table, int64_t table_rows, int64_t dim, int64_t row_begin, const I* ids,
                             int64_t total, T* y) {
  OL_GRID_STRIDE_LOOP(i, total) {
    const int64_t v = static_cast<int64_t>(ids[i / dim]) - row_begin;
    y[i] = (v >= 0 && v < table_rows) ? table[v * dim + i % dim] : T(0);
  }
}

template <typename T>
__global__ void ZeroKernel(T* x, int64_t n) {
  OL_GRID_STRIDE_LOOP(i, n) { x[i] = T(0); }
}

template <typename T, typename I>
__global__ void ScatterAddKernel(const T* dy, const I* ids, int64_t total, int64_t dim, int64_t row_begin,
                                 int64_t table_rows, T* dtable) {
  OL_GRID_STRIDE_LOOP(i, total) {
    const int64_t v = static_cast<int64_t>(ids[i / dim]) - row_begin;
    if (v >= 0 && v < table_rows) atomicAdd(dtable + v * dim + i % dim, dy[i]);
  }
}

}  // namespace

template <typename T, typename I>
absl::Status Embedding(const T* table, int64_t table_rows, int64_t dim, int64_t row_begin, const I* ids, int64_t n,
                       T* y, cudaStream_t stream) {
  const int64_t total = n * dim;
  if (total == 0) return absl::OkStatus();
  ClearLastError();
  LookupKernel<T, I><<<GridFor(total), kThreads, 0, stream>>>(table, table_rows, dim, row_begin, ids, total, y);
  return CudaLaunchStatus("embedding");
}

template <typename T, typename I>
absl::Status EmbeddingGrad(const T* dy, const I* ids, int64_t n, int64_t dim, int64_t row_begin, int64_t table_rows,
                           T* dtable, cudaStream_t stream) {
  const int64_t table_count = table_rows * dim, total = n * dim;
  if (table_count == 0) return absl::OkStatus();
  ClearLastError();
  ZeroKernel<T><<<GridFor(table_count), kThreads, 0, stream>>>(dtable, table_count);
  if (absl::Status s = CudaLaunchStatus("embedding_grad zero"); !s.ok()) return s;
  if (total == 0) return absl::OkStatus();
  ClearLastError();
  ScatterAddKernel<T, I><<<GridFor(total), kThreads, 0, stream>>>(dy, ids, total, dim, row_begin, table_rows, dtable);
  return CudaLaunchStatus("embedding_grad scatter");
}

template absl::Status Embedding<float, int32_t>(const float*, int64_t, int64_t, int64_t, const int32_t*, int64_t,
                                                float*, cudaStream_t);
template absl::Status Embedding<float, int64_t>(const float*, int64_t, int64_t, int64_t, const int64_t*, int64_t,
                                                float*, cudaStream_t);
template absl::Status Embedding<double, int32_t>(const double*, int64_t, int64_t, int64_t, const int32_t*, int64_t,
                                                 double*, cudaStream_t);
template absl::Status Embedding<double, int64_t>(const double*, int64_t, int64_t, int64_t, const int64_t*, int64_t,
                                                 double*, cudaStream_t);
template absl::Status EmbeddingGrad<float, int32_t>(const float*, const int32_t*, int64_t, int64_t, int64_t, int64_t,
                                                    float*, cudaStream_t);
template absl::Status EmbeddingGrad<float, int64_t>(const float*, const int64_t*, int64_t, int64_t, int64_t, int64_t,
                                                    float*, cudaStream_t);
template absl::Status EmbeddingGrad<double, int32_t>(const double*, const int32_t*, int64_t, int64_t, int64_t,
                                                     int64_t, double*, cudaStream_t);
template absl::Status EmbeddingGrad<double, int64_t>(const double*, const int64_t*, int64_t, int64_t, int64_t,
                                                     int64_t, double*, cudaStream_t);

}  // namespace cuda
}  // namespace oneflow_like
