// Reduce kernels (reduce_kernels.h). The host merges x's axes (size-1 axes dropped, runs of
// kept / reduced axes merged, as the CPU kernel) and splits them into a kept index space (the
// output elements) and a reduced index space, each with x strides. Inner axis reduced: one
// block per output element, threads over the reduced space (contiguous reads), a block tree
// sum. Inner axis kept (e.g. a bias gradient x[R, C] -> y[C]): blocks of `tile` adjacent output
// columns by up to 1024 / tile row lanes (no more lanes than rows reduced; reads coalesced along
// the columns); lane t sums rows t, t + lanes, ... (four loads in flight), then the lanes'
// partial sums are added in lane order in shared memory, so the result is deterministic for a
// given shape. The tile is 32
// columns, narrowed to 16 or 8 when too few blocks would keep the GPU busy. (One thread per
// column looping over every row, as before, left a [4096, 768] bias gradient on 3 SMs, one load
// in flight each: 1.7 ms on an H200, against ~15 us now.)
#include "oneflow_like/core/cuda/reduce_kernels.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/core/cuda/cuda_status.h"
#include "oneflow_like/core/cuda/kernel_util.cuh"

namespace oneflow_like {
namespace cuda {
namespace {

using internal::GridFor;
using internal::kMaxDims;
using internal::kThreads;

// An index space: dims (row-major) and the x stride of each.
struct Space {
  int rank = 0;
  int64_t dims[kMaxDims];
  int64_t strides[kMaxDims];
  int64_t count = 1;
};

__device__ __forceinline__ int64_t Offset(const Space& s, int64_t i) {
  int64_t off = 0;
  for (int d = s.rank - 1; d >= 0; --d) {
    off += (i % s.dims[d]) * s.strides[d];
    i /= s.dims[d];
  }
  return off;
}

template <typename T>
__global__ void RowsKernel(const T* x, Space kept, Space red, T scale, T* y) {
  for (int64_t o = blockIdx.x; o < kept.count; o += gridDim.x) {
    const T* base = x + Offset(kept, o);
    T acc = 0;
    for (int64_t r = threadIdx.x; r < red.count; r += blockDim.x) acc += base[Offset(red, r)];
    acc = internal::BlockSum(acc);
    if (threadIdx.x == 0) y[o] = acc * scale;
  }
}

constexpr int kColumnBlock = 1024;  // threads per block of ColumnsKernel

// Offset of reduced element r: one strided axis (the usual case) without the div / mod walk.
__device__ __forceinline__ int64_t ReducedOffset(const Space& red, int64_t r) {
  return red.rank == 1 ? r * red.strides[0] : Offset(red, r);
}

// blockDim (tile, kColumnBlock / tile); gridDim.x tiles of the kept space's inner (stride 1)
// axis, gridDim.y (grid-stride) its outer kept index.
static_assert(kColumnBlock / 8 * (8 + 1) <= kColumnBlock + 128, "ColumnsKernel's shared array: tiles of 8+");

template <typename T>
__global__ void __launch_bounds__(kColumnBlock)
    ColumnsKernel(const T* x, Space kept, Space red, int64_t inner, T scale, T* y) {
  __shared__ T part[kColumnBlock + 128];  // lanes x (tile + 1): padded against bank conflicts
  const int tile = blockDim.x, lanes = blockDim.y;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * tile + threadIdx.x;
  const int64_t outer_count = kept.count / inner;
  for (int64_t outer = blockIdx.y; outer < outer_count; outer += gridDim.y) {
    T a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    if (col < inner) {
      const T* base = x + Offset(kept, outer * inner) + col;
      int64_t r = threadIdx.y;
      for (; r + 3 * lanes < red.count; r += 4 * lanes) {
        a0 += base[ReducedOffset(red, r)];
        a1 += base[ReducedOffset(red, r + lanes)];
        a2 += base[ReducedOffset(red, r + 2 * lanes)];
        a3 += base[ReducedOffset(red, r + 3 * lanes)];
      }
      for (; r < red.count; r += lanes) a0 += base[ReducedOffset(red, r)];
    }
    part[threadIdx.y * (tile + 1) + threadIdx.x] = (a0 + a1) + (a2 + a3);
    __syncthreads();
    if (threadIdx.y == 0 && col < inner) {
      T acc = 0;
      for (int t = 0; t < lanes; ++t) acc += part[t * (tile + 1) + threadIdx.x];
      y[outer * inner + col] = acc * scale;
    }
    __syncthreads();
  }
}

template <typename T>
__global__ void FillKernel(T* y, int64_t n) {
  OL_GRID_STRIDE_LOOP(i, n) { y[i] = T(0); }
}

absl::Status AddAxis(Space* s, int64_t dim, int64_t stride) {
  if (s->rank == kMaxDims) {
    return absl::InvalidArgumentError(absl::StrCat("cuda reduce: more than ", kMaxDims, " axis runs after merging"));
  }
  s->dims[s->rank] = dim;
  s->strides[s->rank] = stride;
  ++s->rank;
  s->count *= dim;
  return absl::OkStatus();
}

template <typename T>
absl::Status Reduce(const T* x, const std::vector<int64_t>& x_dims, const std::vector<bool>& reduced, T scale, T* y,
                    cudaStream_t stream) {
  if (reduced.size() != x_dims.size()) {
    return absl::InvalidArgumentError(absl::StrCat("cuda reduce: ", reduced.size(), " reduced flags for x [",
                                                   absl::StrJoin(x_dims, ","), "]"));
  }
  int64_t x_count = 1, y_count = 1;
  for (size_t a = 0; a < x_dims.size(); ++a) {
    x_count *= x_dims[a];
    if (!reduced[a]) y_count *= x_dims[a];
  }
  if (y_count == 0) return absl::OkStatus();
  if (x_count == 0) {
    ClearLastError();
    FillKernel<T><<<GridFor(y_count), kThreads, 0, stream>>>(y, y_count);
    return CudaLaunchStatus("reduce (empty x)");
  }
  // Merge runs (outer to inner), then split into the two spaces.
  std::vector<int64_t> dims;
  std::vector<bool> red;
  for (size_t a = 0; a < x_dims.size(); ++a) {
    if (x_dims[a] == 1) continue;
    if (!dims.empty() && red.back() == reduced[a]) {
      dims.back() *= x_dims[a];
    } else {
      dims.push_back(x_dims[a]);
      red.push_back(reduced[a]);
    }
  }
  Space kept_space, red_space;
  std::vector<int64_t> strides(dims.size());
  int64_t s = 1;
  for (int a = static_cast<int>(dims.size()) - 1; a >= 0; --a) {
    strides[a] = s;
    s *= dims[a];
  }
  for (size_t a = 0; a < dims.size(); ++a) {
    absl::Status status = AddAxis(red[a] ? &red_space : &kept_space, dims[a], strides[a]);
    if (!status.ok()) return status;
  }
  const bool inner_reduced = !dims.empty() && red.back();
  if (inner_reduced) {
    const int threads = red_space.count >= kThreads ? kThreads : internal::RowThreads(red_space.count);
    ClearLastError();
    RowsKernel<T><<<internal::RowBlocks(kept_space.count), threads, 0, stream>>>(x, kept_space, red_space, scale, y);
    return CudaLaunchStatus("reduce rows");
  }
  // The inner axis is kept, so kept_space's last axis has stride 1 and y is row-major over it.
  const int64_t inner = kept_space.rank > 0 ? kept_space.dims[kept_space.rank - 1] : 1;  // rank 0: x is one element
  const int64_t outer = kept_space.count / inner;
  int tile = 32;  // narrower tiles when 32-wide ones would give fewer than ~2 blocks per SM
  while (tile > 8 && ((inner + tile - 1) / tile) * outer < 256) tile /= 2;
  const int64_t tiles = (inner + tile - 1) / tile;
  int lanes = kColumnBlock / tile;  // fewer when fewer rows are reduced (no idle lanes)
  while (lanes > 1 && lanes / 2 >= red_space.count) lanes /= 2;
  if (tiles > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("cuda reduce: ", inner, " kept columns is too many"));
  }
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(outer < 65535 ? outer : 65535));
  ClearLastError();
  ColumnsKernel<T><<<grid, dim3(tile, lanes), 0, stream>>>(x, kept_space, red_space, inner, scale, y);
  return CudaLaunchStatus("reduce columns");
}

}  // namespace

template <typename T>
absl::Status ReduceSum(const T* x, const std::vector<int64_t>& x_dims, const std::vector<bool>& reduced, T* y,
                       cudaStream_t stream) {
  return Reduce<T>(x, x_dims, reduced, T(1), y, stream);
}

template <typename T>
absl::Status ReduceMean(const T* x, const std::vector<int64_t>& x_dims, const std::vector<bool>& reduced,
                        int64_t logical_count, T* y, cudaStream_t stream) {
  const T scale = T(1) / static_cast<T>(logical_count > 1 ? logical_count : 1);
  return Reduce<T>(x, x_dims, reduced, scale, y, stream);
}

template absl::Status ReduceSum<float>(const float*, const std::vector<int64_t>&, const std::vector<bool>&, float*,
                                       cudaStream_t);
template absl::Status ReduceSum<double>(const double*, const std::vector<int64_t>&, const std::vector<bool>&,
                                        double*, cudaStream_t);
template absl::Status ReduceSum<int32_t>(const int32_t*, const std::vector<int64_t>&, const std::vector<bool>&,
                                         int32_t*, cudaStream_t);
template absl::Status ReduceSum<int64_t>(const int64_t*, const std::vector<int64_t>&, const std::vector<bool>&,
                                         int64_t*, cudaStream_t);
template absl::Status ReduceMean<float>(const float*, const std::vector<int64_t>&, const std::vector<bool>&, int64_t,
                                        float*, cudaStream_t);
template absl::Status ReduceMean<double>(const double*, const std::vector<int64_t>&, const std::vector<bool>&,
                                         int64_t, double*, cudaStream_t);

}  // namespace cuda
}  // namespace oneflow_like
