// Reduce kernels (reduce_kernels.h). The host merges x's axes (size-1 axes dropped, runs of
// kept / reduced axes merged, as the CPU kernel) and splits them into a kept index space (the
// output elements) and a reduced index space, each with x strides. Inner axis reduced: one
// block per output element, threads over the reduced space (contiguous reads), a block tree
// sum. Inner axis kept: one thread per output element looping over the reduced space (adjacent
// threads read adjacent elements: coalesced), e.g. a bias gradient x[R, C] -> y[C].
#include "oneflow_like/core/cuda/reduce_kernels.h"

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

template <typename T>
__global__ void ColumnsKernel(const T* x, Space kept, Space red, T scale, T* y) {
  OL_GRID_STRIDE_LOOP(o, kept.count) {
    const T* base = x + Offset(kept, o);
    T acc = 0;
    for (int64_t r = 0; r < red.count; ++r) acc += base[Offset(red, r)];
    y[o] = acc * scale;
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
  ClearLastError();
  ColumnsKernel<T><<<GridFor(kept_space.count), kThreads, 0, stream>>>(x, kept_space, red_space, scale, y);
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
