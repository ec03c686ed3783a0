// Device-side helpers shared by the .cu files of this folder (private to them): launch sizes,
// warp and block reductions with a fixed order (so results are deterministic for a given
// block size), and a fixed-rank index helper for broadcasting loops.
#ifndef ONEFLOW_LIKE_CORE_CUDA_KERNEL_UTIL_CUH_
#define ONEFLOW_LIKE_CORE_CUDA_KERNEL_UTIL_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

// A loop nest over `dims` (row-major) reading or writing two strided operands: element i of the
// nest sits at offset0 in operand 0 and offset1 in operand 1 (strides in elements; 0
// broadcasts). Passed to kernels by value.
struct PairNest {
  int rank = 0;
  int64_t dims[kMaxDims];
  int64_t strides0[kMaxDims];
  int64_t strides1[kMaxDims];

  __device__ void Offsets(int64_t i, int64_t* offset0, int64_t* offset1) const {
    int64_t o0 = 0, o1 = 0;
    for (int a = rank - 1; a >= 0; --a) {
      const int64_t idx = i % dims[a];
      i /= dims[a];
      o0 += idx * strides0[a];
      o1 += idx * strides1[a];
    }
    *offset0 = o0;
    *offset1 = o1;
  }
  // True when both operands are contiguous and aligned with the nest (one flat loop).
  bool Flat() const { return rank == 1 && strides0[0] == 1 && strides1[0] == 1; }
};

// The nest of `shape` with size-1 axes dropped and adjacent axes merged where both operands
// are contiguous across them (as ops::CopyStrided and the CPU broadcast loops do); a single
// element is a rank-1 nest of one. InvalidArgument, naming `what`, if more than kMaxDims axes
// remain.
inline absl::StatusOr<PairNest> MakePairNest(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides0,
                                             const std::vector<int64_t>& strides1, const char* what) {
  std::vector<int64_t> dims, s0, s1;
  for (size_t a = 0; a < shape.size(); ++a) {
    if (shape[a] == 1) continue;
    if (!dims.empty() && s0.back() == strides0[a] * shape[a] && s1.back() == strides1[a] * shape[a]) {
      dims.back() *= shape[a];
      s0.back() = strides0[a];
      s1.back() = strides1[a];
    } else {
      dims.push_back(shape[a]);
      s0.push_back(strides0[a]);
      s1.push_back(strides1[a]);
    }
  }
  if (dims.empty()) {
    dims = {1};
    s0 = {0};
    s1 = {0};
  }
  if (dims.size() > static_cast<size_t>(kMaxDims)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": shape [", absl::StrJoin(shape, ","), "] leaves ",
                                                   dims.size(), " axes after merging; at most ", kMaxDims,
                                                   " are supported"));
  }
  PairNest nest;
  nest.rank = static_cast<int>(dims.size());
  for (int a = 0; a < nest.rank; ++a) {
    nest.dims[a] = dims[a];
    nest.strides0[a] = s0[a];
    nest.strides1[a] = s1[a];
  }
  return nest;
}

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
