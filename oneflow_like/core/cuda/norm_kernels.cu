// Layer-norm kernels (norm_kernels.h).
#include "oneflow_like/core/cuda/norm_kernels.h"

#include "oneflow_like/core/cuda/cuda_status.h"
#include "oneflow_like/core/cuda/kernel_util.cuh"

namespace oneflow_like {
namespace cuda {
namespace {

using internal::RowBlocks;

__device__ __forceinline__ float Rsqrt(float v) { return 1.0f / sqrtf(v); }
__device__ __forceinline__ double Rsqrt(double v) { return 1.0 / sqrt(v); }

template <typename T>
__global__ void LayerNormKernel(const T* x, const T* gamma, const T* beta, T epsilon, int64_t rows, int64_t d, T* y,
                                T* mean, T* inv_std) {
  const T inv_d = d > 0 ? T(1) / static_cast<T>(d) : T(0);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * d;
    T* yr = y + r * d;
    const T shift = d > 0 ? xr[0] : T(0);
    T c = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) c += xr[j] - shift;
    c = internal::BlockSum(c) * inv_d;
    T var = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      const T v = (xr[j] - shift) - c;
      var += v * v;
    }
    var = internal::BlockSum(var) * inv_d;
    const T is = Rsqrt(var + epsilon);
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) yr[j] = ((xr[j] - shift) - c) * is * gamma[j] + beta[j];
    if (threadIdx.x == 0) {
      mean[r] = shift + c;
      inv_std[r] = is;
    }
  }
}

template <typename T>
__global__ void LayerNormGradDxKernel(const T* dy, const T* x, const T* mean, const T* inv_std, const T* gamma,
                                      int64_t rows, int64_t d, T* dx) {
  const T inv_d = d > 0 ? T(1) / static_cast<T>(d) : T(0);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t off = r * d;
    const T mu = mean[r], is = inv_std[r];
    T sg = 0, sgx = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      const T g = dy[off + j] * gamma[j];
      sg += g;
      sgx += g * ((x[off + j] - mu) * is);
    }
    const T a = internal::BlockSum(sg) * inv_d;
    const T b = internal::BlockSum(sgx) * inv_d;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      const T xhat = (x[off + j] - mu) * is;
      dx[off + j] = is * (dy[off + j] * gamma[j] - a - xhat * b);
    }
  }
}

// dgamma / dbeta: blocks of kTileCols x kTileRows threads; thread (c, t) sums rows t, t + kTileRows,
// ... of column c, then the kTileRows partial sums are added in order.
constexpr int kTileCols = 32;
constexpr int kTileRows = 8;

template <typename T>
__global__ void LayerNormGradParamKernel(const T* dy, const T* x, const T* mean, const T* inv_std, int64_t rows,
                                         int64_t d, T* dgamma, T* dbeta) {
  __shared__ T part_g[kTileRows][kTileCols + 1];
  __shared__ T part_b[kTileRows][kTileCols + 1];
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTileCols + threadIdx.x;
  T sg = 0, sb = 0;
  if (col < d) {
    for (int64_t r = threadIdx.y; r < rows; r += kTileRows) {
      const T g = dy[r * d + col];
      sg += g * ((x[r * d + col] - mean[r]) * inv_std[r]);
      sb += g;
    }
  }
  part_g[threadIdx.y][threadIdx.x] = sg;
  part_b[threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  if (threadIdx.y == 0 && col < d) {
    T tg = 0, tb = 0;
    for (int t = 0; t < kTileRows; ++t) {
      tg += part_g[t][threadIdx.x];
      tb += part_b[t][threadIdx.x];
    }
    dgamma[col] = tg;
    dbeta[col] = tb;
  }
}

}  // namespace

template <typename T>
absl::Status LayerNorm(const T* x, const T* gamma, const T* beta, double epsilon, int64_t rows, int64_t d, T* y,
                       T* mean, T* inv_std, cudaStream_t stream) {
  if (rows == 0) return absl::OkStatus();
  ClearLastError();
  LayerNormKernel<T><<<RowBlocks(rows), internal::RowThreads(d), 0, stream>>>(x, gamma, beta, static_cast<T>(epsilon),
                                                                              rows, d, y, mean, inv_std);
  return CudaLaunchStatus("layer_norm");
}

template <typename T>
absl::Status LayerNormGrad(const T* dy, const T* x, const T* mean, const T* inv_std, const T* gamma, int64_t rows,
                           int64_t d, T* dx, T* dgamma, T* dbeta, cudaStream_t stream) {
  if (d == 0) return absl::OkStatus();
  if (rows > 0) {
    ClearLastError();
    LayerNormGradDxKernel<T><<<RowBlocks(rows), internal::RowThreads(d), 0, stream>>>(dy, x, mean, inv_std, gamma,
                                                                                      rows, d, dx);
    if (absl::Status s = CudaLaunchStatus("layer_norm_grad dx"); !s.ok()) return s;
  }
  const unsigned tiles = static_cast<unsigned>((d + kTileCols - 1) / kTileCols);
  ClearLastError();
  LayerNormGradParamKernel<T><<<tiles, dim3(kTileCols, kTileRows), 0, stream>>>(dy, x, mean, inv_std, rows, d,
                                                                               dgamma, dbeta);
  return CudaLaunchStatus("layer_norm_grad dgamma/dbeta");
}

template absl::Status LayerNorm<float>(const float*, const float*, const float*, double, int64_t, int64_t, float*,
                                       float*, float*, cudaStream_t);
template absl::Status LayerNorm<double>(const double*, const double*, const double*, double, int64_t, int64_t,
                                        double*, double*, double*, cudaStream_t);
template absl::Status LayerNormGrad<float>(const float*, const float*, const float*, const float*, const float*,
                                           int64_t, int64_t, float*, float*, float*, cudaStream_t);
template absl::Status LayerNormGrad<double>(const double*, const double*, const double*, const double*,
                                            const double*, int64_t, int64_t, double*, double*, double*, cudaStream_t);

}  // namespace cuda
}  // namespace oneflow_like
