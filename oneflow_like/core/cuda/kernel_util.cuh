// Device-side helpers shared by the .cu files of this folder (private to them): launch sizes,
// warp and block reductions with a fixed order (so results are deterministic for a given
// block size), and a fixed-rank index helper for broadcasting loops.
#ifndef ONEFLOW_LIKE_CORE_CUDA_KERNEL_UTIL_CUH_
#define ONEFLOW_LIKE_CORE_CUDA_KERNEL_UTIL_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

namespace oneflow_like {
namespace cuda {
namespace internal {

constexpr int kThreads = 256;       // threads per block of element-wise kernels
constexpr int64_t kMaxBlocks = 1 << 16;  // grid-stride loops cover the rest

// Blocks for a grid-stride loop over n elements (at least 1).
inline unsigned GridFor(int64_t n, int threads = kThreads) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks < 1) blocks = 1;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  return static_cast<unsigned>(blocks);
}

// Blocks for a kernel with one block per row (grid-stride over rows beyond kMaxBlocks).
inline unsigned RowBlocks(int64_t rows) { return static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks); }

// Most axes a kernel's index space keeps after merging (broadcasts, reductions).
constexpr int kMaxDims = 8;

// Threads per block for a row kernel over `cols` columns: a multiple of 32 in [32, 1024].
inline int RowThreads(int64_t cols) {
  int threads = 32;
  while (threads < 1024 && threads < cols) threads *= 2;
  return threads;
}

#define OL_GRID_STRIDE_LOOP(i, n)                                                                   \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);            \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

__device__ __forceinline__ float Exp(float x) { return expf(x); }
__device__ __forceinline__ double Exp(double x) { return exp(x); }
__device__ __forceinline__ float Log(float x) { return logf(x); }
__device__ __forceinline__ double Log(double x) { return log(x); }

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  // NaN wins, as in the CPU exp pass (a NaN row stays NaN).
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return (a != a || a > b) ? a : b;
  }
};

template <typename T, typename Op>
__device__ T WarpReduce(T v, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Reduces v over the block (blockDim.x a multiple of 32); every thread gets the result.
// Safe to call repeatedly in a row (it synchronizes before reusing its shared memory).
template <typename T, typename Op>
__device__ T BlockReduce(T v, Op op, T identity) {
  __shared__ T partial[32];
  __shared__ T result;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = WarpReduce(v, op);
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = static_cast<int>(blockDim.x >> 5);
    T w = lane < warps ? partial[lane] : identity;
    w = WarpReduce(w, op);
    if (lane == 0) result = w;
  }
  __syncthreads();
  return result;
}

template <typename T>
__device__ T BlockSum(T v) {
  return BlockReduce(v, SumOp(), T(0));
}
template <typename T>
__device__ T BlockMax(T v) {
  return BlockReduce(v, MaxOp(), -std::numeric_limits<T>::infinity());
}

}  // namespace internal
}  // namespace cuda
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_CUDA_KERNEL_UTIL_CUH_
