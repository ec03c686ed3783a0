// Counter-based random numbers (Philox-4x32-10, Salmon et al., SC'11): the value at logical
// element i of a tensor depends only on (seed, i), so any shard of any parallel layout can
// generate exactly its part, and the logical tensor is the same whatever the layout.
//
//   PhiloxUniform(seed, i)  in [0, 1)   (24 random mantissa bits)
//   PhiloxNormal(seed, i)   standard normal (Box-Muller on the counter's two uniforms)
//
// A second, "portable" generator reproduces tools/bench/peers/peerlib.py's portable_uniform
// bit-exactly (so a model's initial weights equal PyTorch's element for element):
//   SplitMix64(x)                        Steele et al.'s 64-bit finalizer (wrapping arithmetic)
//   PortableUniform(seed, stream, i)     (SplitMix64(seed<<48 | stream<<32 | i) >> 40) / 2^24
//   PortableUniformValue(seed, stream, i, std)
//                                        float(std * sqrt(3) * (2u - 1)), computed in double
// e.g. SplitMix64(0) = 0xe220a8397b1dcdaf, PortableUniform(0, 0, 0) = 0.8833107948303223.
// The key is OR-ed exactly as peerlib.py does (shifts wrap; a stream >= 2^16 or an index >=
// 2^32 overlaps the higher fields, as there).
//
// The Fill* functions fill a shard: `shard` has the physical shape, `info` says where it sits
// in the logical tensor (logical shape + per-axis offset), and element (logical index L) gets
// the value for counter L.
#ifndef ONEFLOW_LIKE_CORE_RANDOM_H_
#define ONEFLOW_LIKE_CORE_RANDOM_H_

#include <array>
#include <cstdint>
#include <vector>

#include "oneflow_like/core/shape.h"
#include "oneflow_like/core/tensor.h"

namespace oneflow_like {

// The raw generator: 4 x 32 random bits for a 128-bit counter and a 64-bit key.
std::array<uint32_t, 4> Philox4x32(uint64_t counter_lo, uint64_t counter_hi, uint64_t key);

double PhiloxUniform(uint64_t seed, uint64_t index);
double PhiloxNormal(uint64_t seed, uint64_t index);

uint64_t SplitMix64(uint64_t x);
double PortableUniform(uint64_t seed, uint64_t stream, uint64_t index);
float PortableUniformValue(uint64_t seed, uint64_t stream, uint64_t index, double stddev);

// Calls fn(physical_index, logical_index) for every element of a shard, in physical order.
template <typename Fn>
void ForEachLogicalIndex(const Shape& physical, const Shape& logical, const std::vector<int64_t>& offset,
                         Fn&& fn);

// Uniform in [low, high) / normal(mean, std) into a floating tensor (float32/float64/bf16/fp16).
void FillUniform(Tensor* shard, const Shape& logical_shape, const std::vector<int64_t>& offset,
                 uint64_t seed, double low, double high);
void FillNormal(Tensor* shard, const Shape& logical_shape, const std::vector<int64_t>& offset,
                uint64_t seed, double mean, double stddev);
// PortableUniformValue(seed, stream, logical index, stddev) into a floating tensor: the float32
// value is stored (exact for float32 and float64, rounded again for bf16/fp16).
void FillPortableUniform(Tensor* shard, const Shape& logical_shape, const std::vector<int64_t>& offset,
                         uint64_t seed, uint64_t stream, double stddev);

// ---- implementation of the template ----
template <typename Fn>
void ForEachLogicalIndex(const Shape& physical, const Shape& logical, const std::vector<int64_t>& offset,
                         Fn&& fn) {
  const int n = physical.num_axes();
  const int64_t count = physical.elem_count();
  if (count == 0) return;
  std::vector<int64_t> idx(n, 0);
  std::vector<int64_t> lstride = logical.Strides();
  int64_t base = 0;
  for (int a = 0; a < n; ++a) base += offset[a] * lstride[a];
  int64_t logical_index = base;
  for (int64_t p = 0; p < count; ++p) {
    fn(p, logical_index);
    int a = n - 1;
    for (; a >= 0; --a) {
      ++idx[a];
      logical_index += lstride[a];
      if (idx[a] < physical.dim(a)) break;
      logical_index -= idx[a] * lstride[a];
      idx[a] = 0;
    }
  }
}

}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_RANDOM_H_
