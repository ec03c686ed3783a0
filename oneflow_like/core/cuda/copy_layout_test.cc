// WidenCopy against a reference: the widened copy, done element by element on the host, writes
// exactly the bytes the original one writes (random shapes, permutations, slices, alignments).
#include "oneflow_like/core/cuda/copy_layout.h"

#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace oneflow_like {
namespace cuda {
namespace {

// dst[...] = src[...] over the layout's index space, byte-wise (the host's StridedCopy).
void ReferenceCopy(const CopyLayout& c, char* dst, const char* src) {
  const int rank = static_cast<int>(c.shape.size());
  int64_t n = 1;
  for (int64_t d : c.shape) n *= d;
  std::vector<int64_t> index(rank, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d_off = 0, s_off = 0;
    for (int a = 0; a < rank; ++a) {
      d_off += index[a] * c.dst_strides[a];
      s_off += index[a] * c.src_strides[a];
    }
    std::memcpy(dst + d_off * c.elem_size, src + s_off * c.elem_size, c.elem_size);
    for (int a = rank - 1; a >= 0; --a) {
      if (++index[a] < c.shape[a]) break;
      index[a] = 0;
    }
  }
}

std::vector<int64_t> RowMajor(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int a = static_cast<int>(dims.size()) - 2; a >= 0; --a) s[a] = s[a + 1] * dims[a + 1];
  return s;
}

// A transpose of x (dims, row-major) by perm into y (row-major), as copy_kernels' Transpose.
CopyLayout TransposeLayout(const std::vector<int64_t>& x_dims, const std::vector<int64_t>& perm, int64_t elem) {
  const std::vector<int64_t> xs = RowMajor(x_dims);
  CopyLayout c;
  c.elem_size = elem;
  for (int64_t p : perm) {
    c.shape.push_back(x_dims[p]);
    c.src_strides.push_back(xs[p]);
  }
  c.dst_strides = RowMajor(c.shape);
  return c;
}

// Runs the layout both ways from buffers offset by `dst_off` / `src_off` bytes; the outputs
// must be equal byte for byte. Returns the widened layout.
CopyLayout ExpectSameBytes(const CopyLayout& c, int64_t dst_off, int64_t src_off, std::mt19937* rng) {
  int64_t src_span = 1, dst_span = 1;
  for (size_t a = 0; a < c.shape.size(); ++a) {
    src_span += (c.shape[a] - 1) * c.src_strides[a];
    dst_span += (c.shape[a] - 1) * c.dst_strides[a];
  }
  alignas(16) static char src[1 << 20], want[1 << 20], got[1 << 20];
  const size_t src_bytes = static_cast<size_t>(src_span * c.elem_size + src_off);
  const size_t dst_bytes = static_cast<size_t>(dst_span * c.elem_size + dst_off);
  EXPECT_LE(src_bytes, sizeof(src));
  EXPECT_LE(dst_bytes, sizeof(want));
  for (size_t i = 0; i < src_bytes; ++i) src[i] = static_cast<char>((*rng)());
  std::memset(want, 0x5a, dst_bytes);
  std::memset(got, 0x5a, dst_bytes);
  ReferenceCopy(c, want + dst_off, src + src_off);
  const CopyLayout wide =
      WidenCopy(c, reinterpret_cast<uintptr_t>(got + dst_off), reinterpret_cast<uintptr_t>(src + src_off));
  ReferenceCopy(wide, got + dst_off, src + src_off);
  EXPECT_EQ(std::memcmp(want, got, dst_bytes), 0);
  return wide;
}

TEST(WidenCopyTest, AttentionHeadTransposeMovesSixteenByteWords) {
  std::mt19937 rng(1);
  // [B, T, H, D] -> [B, H, T, D], float32, D = 64 (as the GPT's q.heads).
  const CopyLayout wide = ExpectSameBytes(TransposeLayout({2, 8, 3, 64}, {0, 2, 1, 3}, 4), 0, 0, &rng);
  EXPECT_EQ(wide.elem_size, 16);
  EXPECT_EQ(wide.shape.back(), 16);
  // Misaligned bases stay narrower (8 bytes here), odd D stays as it was.
  EXPECT_EQ(ExpectSameBytes(TransposeLayout({2, 8, 3, 64}, {0, 2, 1, 3}, 4), 8, 8, &rng).elem_size, 8);
  EXPECT_EQ(ExpectSameBytes(TransposeLayout({2, 8, 3, 63}, {0, 2, 1, 3}, 4), 0, 0, &rng).elem_size, 4);
  // The innermost axis moves: no widening.
  EXPECT_EQ(ExpectSameBytes(TransposeLayout({4, 6, 8}, {0, 2, 1}, 4), 0, 0, &rng).elem_size, 4);
}

TEST(WidenCopyTest, RandomTransposesAndSlicesCopyTheSameBytes) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    std::vector<int64_t> dims(rank);
    for (int64_t& d : dims) d = 1 + static_cast<int64_t>(rng() % 3 == 0 ? 1 : rng() % 9);
    if (rng() % 2) dims.back() = 4 * (1 + static_cast<int64_t>(rng() % 5));  // often widenable
    std::vector<int64_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    if (rng() % 2) std::shuffle(perm.begin(), perm.end() - 1, rng);  // keep the last axis half the time
    else std::shuffle(perm.begin(), perm.end(), rng);
    const int64_t elem = int64_t{1} << (rng() % 4);  // 1, 2, 4, 8 bytes
    CopyLayout c = TransposeLayout(dims, perm, elem);
    if (rng() % 3 == 0) {  // a slice: the source's outer strides grow (a wider parent tensor)
      for (size_t a = 0; a + 1 < c.src_strides.size(); ++a) c.src_strides[a] *= 2;
    }
    const int64_t dst_off = static_cast<int64_t>(rng() % 3) * elem, src_off = static_cast<int64_t>(rng() % 3) * elem;
    const CopyLayout wide = ExpectSameBytes(c, dst_off, src_off, &rng);
    EXPECT_GE(wide.elem_size, elem);
    EXPECT_LE(wide.elem_size, 16);
    if (HasFailure()) {
      ADD_FAILURE() << "trial " << trial;
      return;
    }
  }
}

}  // namespace
}  // namespace cuda
}  // namespace oneflow_like
