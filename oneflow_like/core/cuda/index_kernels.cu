// Index validation (index_kernels.h): the smallest bad position by atomicMin.
#include "oneflow_like/core/cuda/index_kernels.h"

#include "oneflow_like/core/cuda/cuda_status.h"
#include "oneflow_like/core/cuda/kernel_util.cuh"

namespace oneflow_like {
namespace cuda {
namespace {

__global__ void InitKernel(unsigned long long* result, int64_t n) { *result = static_cast<unsigned long long>(n); }

template <typename I>
__global__ void ScanKernel(const I* ids, int64_t n, int64_t limit, unsigned long long* result) {
  OL_GRID_STRIDE_LOOP(i, n) {
    const int64_t v = static_cast<int64_t>(ids[i]);
    if (v < 0 || v >= limit) atomicMin(result, static_cast<unsigned long long>(i));
  }
}

}  // namespace

template <typename I>
absl::StatusOr<int64_t> FindIndexOutOfRange(const I* ids, int64_t n, int64_t limit, int64_t* scratch,
                                            cudaStream_t stream) {
  if (n == 0) return int64_t{-1};
  auto* result = reinterpret_cast<unsigned long long*>(scratch);
  ClearLastError();
  InitKernel<<<1, 1, 0, stream>>>(result, n);
  if (absl::Status s = CudaLaunchStatus("index check init"); !s.ok()) return s;
  ClearLastError();
  ScanKernel<I><<<internal::GridFor(n), internal::kThreads, 0, stream>>>(ids, n, limit, result);
  if (absl::Status s = CudaLaunchStatus("index check"); !s.ok()) return s;
  int64_t host = 0;
  if (absl::Status s = CudaStatus(cudaMemcpyAsync(&host, scratch, sizeof(host), cudaMemcpyDeviceToHost, stream),
                                  "cudaMemcpyAsync(index check result)");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CudaStatus(cudaStreamSynchronize(stream), "cudaStreamSynchronize(index check)"); !s.ok()) {
    return s;
  }
  return host == n ? int64_t{-1} : host;
}

template absl::StatusOr<int64_t> FindIndexOutOfRange<int32_t>(const int32_t*, int64_t, int64_t, int64_t*,
                                                              cudaStream_t);
template absl::StatusOr<int64_t> FindIndexOutOfRange<int64_t>(const int64_t*, int64_t, int64_t, int64_t*,
                                                              cudaStream_t);

}  // namespace cuda
}  // namespace oneflow_like
