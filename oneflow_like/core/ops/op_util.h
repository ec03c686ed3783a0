// Small helpers shared by the op families in this folder: dtype dispatch, error messages that
// name the op instance, shape utilities, a one-op gradient helper and a strided byte copy (also
// split over the rank's intra-op threads).
// Header-only; no registration happens here.
#ifndef ONEFLOW_LIKE_CORE_OPS_OP_UTIL_H_
#define ONEFLOW_LIKE_CORE_OPS_OP_UTIL_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "oneflow_like/core/op_def.h"

namespace oneflow_like {
namespace ops {

// InvalidArgument "<op_type> '<instance>': <message>".
template <typename... Args>
absl::Status OpError(const std::string& op_type, const std::string& op_name, const Args&... args) {
  return absl::InvalidArgumentError(absl::StrCat(op_type, " '", op_name, "': ", args...));
}

// Calls fn(T{}) with T = float or double according to dtype; InvalidArgument otherwise.
template <typename Fn>
absl::Status DispatchFloat(DataType dtype, const std::string& what, Fn&& fn) {
  switch (dtype) {
    case DataType::kFloat32: return fn(float{});
    case DataType::kFloat64: return fn(double{});
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": unsupported dtype ", DataTypeName(dtype), " (expected float32 or float64)"));
  }
}

// Calls fn(I{}) with I = int32_t or int64_t according to dtype; InvalidArgument otherwise.
template <typename Fn>
absl::Status DispatchIndex(DataType dtype, const std::string& what, Fn&& fn) {
  switch (dtype) {
    case DataType::kInt32: return fn(int32_t{});
    case DataType::kInt64: return fn(int64_t{});
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": unsupported index dtype ", DataTypeName(dtype), " (expected int32 or int64)"));
  }
}

// Split signatures S(a) for every axis a of `rank` in [0, rank - exclude_last).
inline std::vector<int> SplitAxes(int rank, int exclude_last = 0) {
  std::vector<int> axes;
  for (int a = 0; a + exclude_last < rank; ++a) axes.push_back(a);
  return axes;
}

// Bytes of all descs.
inline double TotalBytes(const std::vector<TensorDesc>& descs) {
  double b = 0;
  for (const auto& d : descs) b += static_cast<double>(d.byte_size());
  return b;
}

// Gradient rule of a one-input op whose input gradient is `op_type(dy) {attrs}`, dy being the
// gradient of output 0 (e.g. reshape: reshape dy back). Does nothing if input 0 needs no gradient.
inline absl::Status SetInputGradFromOp(GradContext* g, const std::string& op_type, const AttrMap& attrs = {}) {
  if (!g->needs_input_grad(0)) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::string dx, g->EmitOne(op_type, {g->output_grad(0)}, attrs));
  g->SetInputGrad(0, dx);
  return absl::OkStatus();
}

// Copies `shape` elements between strided buffers (strides in elements, row-major order over
// `shape`): dst[sum_a i_a * dst_strides[a]] = src[sum_a i_a * src_strides[a]]. A zero source
// stride broadcasts. elem_size is 1, 2, 4 or 8 bytes (any dtype moves as raw bytes). Adjacent
// axes that are contiguous in both buffers are merged so the inner loop is a memcpy when possible.
// Used by reshape/transpose/slice/concat/split/broadcast_to kernels.
namespace internal {
template <typename W>
void CopyStridedTyped(std::vector<int64_t> shape, W* dst, std::vector<int64_t> ds, const W* src,
                      std::vector<int64_t> ss) {
  for (int64_t d : shape) {
    if (d == 0) return;
  }
  // Drop size-1 axes and merge axes that are contiguous in both buffers.
  std::vector<int64_t> n_shape, n_ds, n_ss;
  for (size_t a = 0; a < shape.size(); ++a) {
    if (shape[a] == 1) continue;
    if (!n_shape.empty() && n_ds.back() == ds[a] * shape[a] && n_ss.back() == ss[a] * shape[a]) {
      n_shape.back() *= shape[a];
      n_ds.back() = ds[a];
      n_ss.back() = ss[a];
      continue;
    }
    n_shape.push_back(shape[a]);
    n_ds.push_back(ds[a]);
    n_ss.push_back(ss[a]);
  }
  if (n_shape.empty()) {
    *dst = *src;
    return;
  }
  const int n = static_cast<int>(n_shape.size());
  const int64_t inner = n_shape[n - 1], di = n_ds[n - 1], si = n_ss[n - 1];
  std::vector<int64_t> idx(n, 0);
  int64_t doff = 0, soff = 0;
  while (true) {
    W* d = dst + doff;
    const W* s = src + soff;
    if (di == 1 && si == 1) {
      std::memcpy(d, s, static_cast<size_t>(inner) * sizeof(W));
    } else {
      for (int64_t k = 0; k < inner; ++k) d[k * di] = s[k * si];
    }
    int a = n - 2;
    for (; a >= 0; --a) {
      ++idx[a];
      doff += n_ds[a];
      soff += n_ss[a];
      if (idx[a] < n_shape[a]) break;
      doff -= idx[a] * n_ds[a];
      soff -= idx[a] * n_ss[a];
      idx[a] = 0;
    }
    if (a < 0) break;
  }
}
}  // namespace internal

inline void CopyStrided(const std::vector<int64_t>& shape, int64_t elem_size, void* dst,
                        const std::vector<int64_t>& dst_strides, const void* src,
                        const std::vector<int64_t>& src_strides) {
  switch (elem_size) {
    case 1: return internal::CopyStridedTyped(shape, static_cast<uint8_t*>(dst), dst_strides,
                                              static_cast<const uint8_t*>(src), src_strides);
    case 2: return internal::CopyStridedTyped(shape, static_cast<uint16_t*>(dst), dst_strides,
                                              static_cast<const uint16_t*>(src), src_strides);
    case 4: return internal::CopyStridedTyped(shape, static_cast<uint32_t*>(dst), dst_strides,
                                              static_cast<const uint32_t*>(src), src_strides);
    case 8: return internal::CopyStridedTyped(shape, static_cast<uint64_t*>(dst), dst_strides,
                                              static_cast<const uint64_t*>(src), src_strides);
    default: LOG(FATAL) << "CopyStrided: unsupported element size " << elem_size;
  }
}

// CopyStrided over the rank's intra-op threads (null pool: inline): a large copy is split along
// its outermost axis of size > 1, every element copied once.
inline void CopyStridedParallel(IntraOpPool* pool, const std::vector<int64_t>& shape, int64_t elem_size, void* dst,
                                const std::vector<int64_t>& dst_strides, const void* src,
                                const std::vector<int64_t>& src_strides) {
  size_t a = 0;
  while (a < shape.size() && shape[a] == 1) ++a;
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  if (a == shape.size() || count == 0) return CopyStrided(shape, elem_size, dst, dst_strides, src, src_strides);
  ParallelFor(pool, shape[a], count / shape[a], [&](int64_t b, int64_t e) {
    std::vector<int64_t> part = shape;
    part[a] = e - b;
    CopyStrided(part, elem_size, static_cast<char*>(dst) + b * dst_strides[a] * elem_size, dst_strides,
                static_cast<const char*>(src) + b * src_strides[a] * elem_size, src_strides);
  });
}

// memcpy over the rank's intra-op threads, in chunks of whole cache lines.
inline void CopyBytesParallel(IntraOpPool* pool, void* dst, const void* src, int64_t bytes) {
  ParallelFor(pool, bytes, 1, [&](int64_t b, int64_t e) {
    std::memcpy(static_cast<char*>(dst) + b, static_cast<const char*>(src) + b, static_cast<size_t>(e - b));
  }, 64);
}

}  // namespace ops
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_OPS_OP_UTIL_H_
