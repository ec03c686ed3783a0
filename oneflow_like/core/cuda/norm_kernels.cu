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

// dgamma / dbeta: blocks of 1024 threads, `tile` columns (blockDim.x) by 1024 / tile row lanes;
// lane t sums rows t, t + lanes, ... (two rows in flight), then the lanes' partial sums are added
// in lane order (deterministic for a given shape). 32-wide tiles, narrowed to 16 or 8 when d is
// small (a [4096, 768] gradient gets 96 blocks, not 24 of 256 threads: 8% of the H200's copy
// bandwidth before).
constexpr int kParamBlock = 1024;

static_assert(kParamBlock / 8 * (8 + 1) <= kParamBlock + 128, "the shared arrays: tiles of 8+");

template <typename T>
__global__ void __launch_bounds__(kParamBlock)
    LayerNormGradParamKernel(const T* dy, const T* x, const T* mean, const T* inv_std, int64_t rows,
                                         int64_t d, T* dgamma, T* dbeta) {
  __shared__ T part_g[kParamBlock + 128];  // lanes x (tile + 1)
  __shared__ T part_b[kParamBlock + 128];
  const int tile = blockDim.x, lanes = blockDim.y;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * tile + threadIdx.x;
  T sg0 = 0, sb0 = 0, sg1 = 0, sb1 = 0;
  if (col < d) {
    int64_t r = threadIdx.y;
    for (; r + lanes < rows; r += 2 * lanes) {
      const int64_t r1 = r + lanes;
      const T g0 = dy[r * d + col], g1 = dy[r1 * d + col];
      const T h0 = (x[r * d + col] - mean[r]) * inv_std[r], h1 = (x[r1 * d + col] - mean[r1]) * inv_std[r1];
      sg0 += g0 * h0;
      sb0 += g0;
      sg1 += g1 * h1;
      sb1 += g1;
    }
    if (r < rows) {
      const T g = dy[r * d + col];
      sg0 += g * ((x[r * d + col] - mean[r]) * inv_std[r]);
      sb0 += g;
    }
  }
  const int slot = threadIdx.y * (tile + 1) + threadIdx.x;
  part_g[slot] = sg0 + sg1;
  part_b[slot] = sb0 + sb1;
  __syncthreads();
  if (threadIdx.y == 0 && col < d) {
    T tg = 0, tb = 0;
    for (int t = 0; t < lanes; ++t) {
      tg += part_g[t * (tile + 1) + threadIdx.x];
      tb += part_b[t * (tile + 1) + threadIdx.x];
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
  int tile = 32;  // narrower tiles when 32-wide ones would give fewer than ~one block per SM
  while (tile > 8 && (d + tile - 1) / tile < 128) tile /= 2;
  const unsigned tiles = static_cast<unsigned>((d + tile - 1) / tile);
  ClearLastError();
  LayerNormGradParamKernel<T><<<tiles, dim3(tile, kParamBlock / tile), 0, stream>>>(dy, x, mean, inv_std, rows, d,
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
