// CopyLayout: a strided copy described on the host (shape, element size, each operand's strides
// in elements), and WidenCopy, which moves the same bytes in wider words when it can. Plain
// C++ (no CUDA): copy_kernels.cu launches what WidenCopy returns, and copy_layout_test checks
// the rewrite here against a byte-for-byte reference copy.
//
//   CopyLayout c{shape, 4, dst_strides, src_strides};
//   c = WidenCopy(c, reinterpret_cast<uintptr_t>(dst), reinterpret_cast<uintptr_t>(src));
//
// Why: the GPU copy kernel walks a div / mod index per element; attention's head transposes
// ([B, T, H, D] <-> [B, H, T, D], D = 64 floats contiguous in both) then ran at ~30% of the
// H200's copy bandwidth. Copying 16-byte words does the walk once per 4 floats.
#ifndef ONEFLOW_LIKE_CORE_CUDA_COPY_LAYOUT_H_
#define ONEFLOW_LIKE_CORE_CUDA_COPY_LAYOUT_H_

#include <cstdint>
#include <vector>

namespace oneflow_like {
namespace cuda {

struct CopyLayout {
  std::vector<int64_t> shape;
  int64_t elem_size = 1;  // bytes
  std::vector<int64_t> dst_strides, src_strides;  // in elements
};

// The same copy in words of elem_size * f bytes (f a power of two, words of at most 16 bytes),
// for the largest f where: the innermost axis of size > 1 has stride 1 in both operands and a
// multiple of f elements; every other axis of size > 1 has strides that are multiples of f in
// both; and both base addresses are aligned to the word. Otherwise `layout` unchanged.
// REQUIRES: shape and both strides have the same length.
CopyLayout WidenCopy(CopyLayout layout, uintptr_t dst, uintptr_t src);

}  // namespace cuda
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_CUDA_COPY_LAYOUT_H_
