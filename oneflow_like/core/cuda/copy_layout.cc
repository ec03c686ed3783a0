#include "oneflow_like/core/cuda/copy_layout.h"

namespace oneflow_like {
namespace cuda {

CopyLayout WidenCopy(CopyLayout layout, uintptr_t dst, uintptr_t src) {
  const int rank = static_cast<int>(layout.shape.size());
  int inner = rank - 1;  // the innermost axis that is not size 1
  while (inner >= 0 && layout.shape[inner] == 1) --inner;
  if (inner < 0 || layout.elem_size <= 0) return layout;
  if (layout.dst_strides[inner] != 1 || layout.src_strides[inner] != 1) return layout;
  for (int64_t f = 16 / layout.elem_size; f >= 2; f /= 2) {
    const int64_t word = layout.elem_size * f;
    if (16 % word != 0 || layout.shape[inner] % f != 0) continue;
    if (dst % static_cast<uintptr_t>(word) != 0 || src % static_cast<uintptr_t>(word) != 0) continue;
    bool ok = true;
    for (int a = 0; ok && a < rank; ++a) {
      if (a == inner || layout.shape[a] == 1) continue;
      ok = layout.dst_strides[a] % f == 0 && layout.src_strides[a] % f == 0;
    }
    if (!ok) continue;
    for (int a = 0; a < rank; ++a) {
      if (a == inner) {
        layout.shape[a] /= f;
      } else if (layout.shape[a] != 1) {
        layout.dst_strides[a] /= f;
        layout.src_strides[a] /= f;
      }
    }
    layout.elem_size = word;
    return layout;
  }
  return layout;
}

}  // namespace cuda
}  // namespace oneflow_like
