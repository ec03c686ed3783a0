// Data-movement kernels (copy_kernels.h). The host drops size-1 axes and merges axes that are
// contiguous in both buffers (as ops::CopyStrided), then one thread copies one element, typed
// by the element width -- or one word of up to 16 bytes where the innermost axis is contiguous
// in both (copy_layout.h's WidenCopy).
#include "oneflow_like/core/cuda/copy_kernels.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/core/cuda/copy_layout.h"
#include "oneflow_like/core/cuda/cuda_status.h"
#include "oneflow_like/core/cuda/kernel_util.cuh"

namespace oneflow_like {
namespace cuda {
namespace {

using internal::GridFor;
using internal::MakePairNest;
using internal::PairNest;
using internal::kThreads;

// Operand 0 of the nest is dst, operand 1 is src.
template <typename W>
__global__ void CopyKernel(W* dst, const W* src, PairNest nest, int64_t n) {
  OL_GRID_STRIDE_LOOP(i, n) {
    int64_t d_off, s_off;
    nest.Offsets(i, &d_off, &s_off);
    dst[d_off] = src[s_off];
  }
}

std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size());
  int64_t s = 1;
  for (int a = static_cast<int>(dims.size()) - 1; a >= 0; --a) {
    strides[a] = s;
    s *= dims[a];
  }
  return strides;
}

int64_t Count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string Dims(const std::vector<int64_t>& d) { return absl::StrCat("[", absl::StrJoin(d, ","), "]"); }

template <typename W>
void Launch(void* dst, const void* src, const PairNest& nest, int64_t n, cudaStream_t stream) {
  ClearLastError();
  CopyKernel<W><<<GridFor(n), kThreads, 0, stream>>>(static_cast<W*>(dst), static_cast<const W*>(src), nest, n);
}

// Byte offset of the element at `index` in a row-major tensor of `dims`.
int64_t ByteOffset(const std::vector<int64_t>& dims, const std::vector<int64_t>& index, int64_t elem_size) {
  const std::vector<int64_t> strides = RowMajorStrides(dims);
  int64_t off = 0;
  for (size_t a = 0; a < dims.size(); ++a) off += index[a] * strides[a];
  return off * elem_size;
}

}  // namespace

absl::Status CopyBytes(void* dst, const void* src, int64_t bytes, cudaStream_t stream) {
  if (bytes < 0) return absl::InvalidArgumentError(absl::StrCat("cuda CopyBytes: negative size ", bytes));
  if (bytes == 0 || dst == src) return absl::OkStatus();
  return CudaStatus(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream),
                    absl::StrCat("cudaMemcpyAsync(", bytes, " bytes device to device)"));
}

absl::Status StridedCopy(const std::vector<int64_t>& shape, int64_t elem_size, void* dst,
                         const std::vector<int64_t>& dst_strides, const void* src,
                         const std::vector<int64_t>& src_strides, cudaStream_t stream) {
  if (dst_strides.size() != shape.size() || src_strides.size() != shape.size()) {
    return absl::InvalidArgumentError(absl::StrCat("cuda StridedCopy: shape ", Dims(shape), " with dst strides ",
                                                   Dims(dst_strides), " and src strides ", Dims(src_strides)));
  }
  if (Count(shape) == 0) return absl::OkStatus();
  // The same bytes in words of up to 16 bytes where the innermost axis is contiguous in both
  // (copy_layout.h): one index walk per word instead of per element.
  const CopyLayout layout = WidenCopy(CopyLayout{shape, elem_size, dst_strides, src_strides},
                                      reinterpret_cast<uintptr_t>(dst), reinterpret_cast<uintptr_t>(src));
  const int64_t n = Count(layout.shape);
  absl::StatusOr<PairNest> merged =
      MakePairNest(layout.shape, layout.dst_strides, layout.src_strides, "cuda StridedCopy");
  if (!merged.ok()) return merged.status();
  const PairNest& nest = *merged;
  switch (layout.elem_size) {
    case 1: Launch<uint8_t>(dst, src, nest, n, stream); break;
    case 2: Launch<uint16_t>(dst, src, nest, n, stream); break;
    case 4: Launch<uint32_t>(dst, src, nest, n, stream); break;
    case 8: Launch<uint64_t>(dst, src, nest, n, stream); break;
    case 16: Launch<uint4>(dst, src, nest, n, stream); break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("cuda StridedCopy: element size ", elem_size,
                                                     " is not 1, 2, 4 or 8 bytes"));
  }
  return CudaLaunchStatus("strided_copy");
}

absl::Status Transpose(const void* x, const std::vector<int64_t>& x_dims, const std::vector<int64_t>& perm,
                       int64_t elem_size, void* y, cudaStream_t stream) {
  const size_t rank = x_dims.size();
  std::vector<bool> seen(rank, false);
  bool valid = perm.size() == rank;
  for (size_t j = 0; valid && j < rank; ++j) {
    const int64_t p = perm[j];
    valid = p >= 0 && p < static_cast<int64_t>(rank) && !seen[p];
    if (valid) seen[p] = true;
  }
  if (!valid) {
    return absl::InvalidArgumentError(absl::StrCat("cuda Transpose: perm ", Dims(perm),
                                                   " is not a permutation of the axes of x ", Dims(x_dims)));
  }
  const std::vector<int64_t> x_strides = RowMajorStrides(x_dims);
  std::vector<int64_t> y_dims(rank), src_strides(rank);
  for (size_t j = 0; j < rank; ++j) {
    y_dims[j] = x_dims[perm[j]];
    src_strides[j] = x_strides[perm[j]];
  }
  return StridedCopy(y_dims, elem_size, y, RowMajorStrides(y_dims), x, src_strides, stream);
}

absl::Status BroadcastTo(const void* x, const std::vector<int64_t>& x_dims, const std::vector<int64_t>& y_dims,
                         int64_t elem_size, void* y, cudaStream_t stream) {
  const int r = static_cast<int>(y_dims.size()), offset = r - static_cast<int>(x_dims.size());
  if (offset < 0) {
    return absl::InvalidArgumentError(absl::StrCat("cuda BroadcastTo: x ", Dims(x_dims), " has more axes than ",
                                                   Dims(y_dims)));
  }
  std::vector<int64_t> src_strides(r, 0);
  int64_t s = 1;
  for (int i = r - 1; i >= offset; --i) {
    const int64_t d = x_dims[i - offset];
    if (d != y_dims[i] && d != 1) {
      return absl::InvalidArgumentError(absl::StrCat("cuda BroadcastTo: x ", Dims(x_dims), " cannot broadcast to ",
                                                     Dims(y_dims), " at axis ", i));
    }
    src_strides[i] = d == 1 ? 0 : s;
    s *= d;
  }
  return StridedCopy(y_dims, elem_size, y, RowMajorStrides(y_dims), x, src_strides, stream);
}

absl::Status Slice(const void* x, const std::vector<int64_t>& x_dims, const std::vector<int64_t>& begin,
                   const std::vector<int64_t>& y_dims, int64_t elem_size, void* y, cudaStream_t stream) {
  if (begin.size() != x_dims.size() || y_dims.size() != x_dims.size()) {
    return absl::InvalidArgumentError(absl::StrCat("cuda Slice: begin ", Dims(begin), " and y ", Dims(y_dims),
                                                   " need one entry per axis of x ", Dims(x_dims)));
  }
  for (size_t a = 0; a < x_dims.size(); ++a) {
    if (begin[a] < 0 || y_dims[a] < 0 || begin[a] + y_dims[a] > x_dims[a]) {
      return absl::InvalidArgumentError(absl::StrCat("cuda Slice: y ", Dims(y_dims), " at ", Dims(begin),
                                                      " does not fit in x ", Dims(x_dims)));
    }
  }
  if (Count(y_dims) == 0) return absl::OkStatus();
  const char* src = static_cast<const char*>(x) + ByteOffset(x_dims, begin, elem_size);
  return StridedCopy(y_dims, elem_size, y, RowMajorStrides(y_dims), src, RowMajorStrides(x_dims), stream);
}

absl::Status SliceGrad(const void* dy, const std::vector<int64_t>& dy_dims, const std::vector<int64_t>& begin,
                       const std::vector<int64_t>& dx_dims, int64_t elem_size, void* dx, cudaStream_t stream) {
  if (begin.size() != dx_dims.size() || dy_dims.size() != dx_dims.size()) {
    return absl::InvalidArgumentError(absl::StrCat("cuda SliceGrad: begin ", Dims(begin), " and dy ", Dims(dy_dims),
                                                   " need one entry per axis of dx ", Dims(dx_dims)));
  }
  for (size_t a = 0; a < dx_dims.size(); ++a) {
    if (begin[a] < 0 || begin[a] + dy_dims[a] > dx_dims[a]) {
      return absl::InvalidArgumentError(absl::StrCat("cuda SliceGrad: dy ", Dims(dy_dims), " at ", Dims(begin),
                                                      " does not fit in dx ", Dims(dx_dims)));
    }
  }
  const int64_t bytes = Count(dx_dims) * elem_size;
  if (bytes == 0) return absl::OkStatus();
  if (absl::Status s = CudaStatus(cudaMemsetAsync(dx, 0, static_cast<size_t>(bytes), stream),
                                  "cudaMemsetAsync(slice_grad dx)");
      !s.ok()) {
    return s;
  }
  if (Count(dy_dims) == 0) return absl::OkStatus();
  char* dst = static_cast<char*>(dx) + ByteOffset(dx_dims, begin, elem_size);
  return StridedCopy(dy_dims, elem_size, dst, RowMajorStrides(dx_dims), dy, RowMajorStrides(dy_dims), stream);
}

absl::Status Concat(const std::vector<const void*>& inputs, const std::vector<std::vector<int64_t>>& input_dims,
                    int axis, int64_t elem_size, void* y, cudaStream_t stream) {
  if (inputs.empty() || inputs.size() != input_dims.size()) {
    return absl::InvalidArgumentError("cuda Concat: needs one dims vector per input, and at least one input");
  }
  const int rank = static_cast<int>(input_dims[0].size());
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(absl::StrCat("cuda Concat: axis ", axis, " out of range for rank ", rank));
  }
  if (axis < 0) axis += rank;
  std::vector<int64_t> y_dims = input_dims[0];
  y_dims[axis] = 0;
  for (const std::vector<int64_t>& d : input_dims) {
    for (int a = 0; a < rank; ++a) {
      if (static_cast<int>(d.size()) != rank || (a != axis && d[a] != input_dims[0][a])) {
        return absl::InvalidArgumentError(absl::StrCat("cuda Concat: input ", Dims(d), " does not match ",
                                                       Dims(input_dims[0]), " outside axis ", axis));
      }
    }
    y_dims[axis] += d[axis];
  }
  const std::vector<int64_t> y_strides = RowMajorStrides(y_dims);
  std::vector<int64_t> at(rank, 0);
  for (size_t i = 0; i < inputs.size(); ++i) {
    char* dst = static_cast<char*>(y) + ByteOffset(y_dims, at, elem_size);
    if (absl::Status s = StridedCopy(input_dims[i], elem_size, dst, y_strides, inputs[i],
                                     RowMajorStrides(input_dims[i]), stream);
        !s.ok()) {
      return s;
    }
    at[axis] += input_dims[i][axis];
  }
  return absl::OkStatus();
}

absl::Status Split(const void* x, const std::vector<int64_t>& x_dims, int axis, const std::vector<void*>& outputs,
                   const std::vector<int64_t>& sizes, int64_t elem_size, cudaStream_t stream) {
  const int rank = static_cast<int>(x_dims.size());
  if (axis < -rank || axis >= rank || outputs.size() != sizes.size()) {
    return absl::InvalidArgumentError(absl::StrCat("cuda Split: axis ", axis, " of x ", Dims(x_dims), " with ",
                                                   outputs.size(), " outputs and sizes ", Dims(sizes)));
  }
  if (axis < 0) axis += rank;
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  if (total != x_dims[axis]) {
    return absl::InvalidArgumentError(absl::StrCat("cuda Split: sizes ", Dims(sizes), " do not add up to dim ",
                                                   x_dims[axis], " of x ", Dims(x_dims), " at axis ", axis));
  }
  const std::vector<int64_t> x_strides = RowMajorStrides(x_dims);
  std::vector<int64_t> at(rank, 0);
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::vector<int64_t> part = x_dims;
    part[axis] = sizes[i];
    const char* src = static_cast<const char*>(x) + ByteOffset(x_dims, at, elem_size);
    if (absl::Status s = StridedCopy(part, elem_size, outputs[i], RowMajorStrides(part), src, x_strides, stream);
        !s.ok()) {
      return s;
    }
    at[axis] += sizes[i];
  }
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace oneflow_like
