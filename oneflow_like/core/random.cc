#include "oneflow_like/core/random.h"

#include <cmath>

#include "glog/logging.h"

namespace oneflow_like {
namespace {

constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;  // sqrt(3) - 1
constexpr int kPhiloxRounds = 10;
constexpr double k2Pow24Inv = 1.0 / 16777216.0;

inline void MulHiLo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  *lo = static_cast<uint32_t>(p);
}

// 24 random bits of `word` as a double in [0, 1).
inline double ToUnit(uint32_t word) { return static_cast<double>(word >> 8) * k2Pow24Inv; }

template <typename ValueFn>
void Fill(Tensor* shard, const Shape& logical_shape, const std::vector<int64_t>& offset, ValueFn&& value) {
  CHECK(IsFloatingPoint(shard->dtype())) << "random fill needs a floating tensor, got "
                                         << DataTypeName(shard->dtype());
  CHECK_EQ(static_cast<int>(offset.size()), logical_shape.num_axes());
  CHECK_EQ(shard->shape().num_axes(), logical_shape.num_axes());
  ForEachLogicalIndex(shard->shape(), logical_shape, offset, [&](int64_t physical, int64_t logical) {
    shard->SetFromDouble(physical, value(static_cast<uint64_t>(logical)));
  });
}

}  // namespace

std::array<uint32_t, 4> Philox4x32(uint64_t counter_lo, uint64_t counter_hi, uint64_t key) {
  std::array<uint32_t, 4> c = {static_cast<uint32_t>(counter_lo), static_cast<uint32_t>(counter_lo >> 32),
                               static_cast<uint32_t>(counter_hi), static_cast<uint32_t>(counter_hi >> 32)};
  uint32_t k0 = static_cast<uint32_t>(key);
  uint32_t k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < kPhiloxRounds; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    MulHiLo(kPhiloxM0, c[0], &hi0, &lo0);
    MulHiLo(kPhiloxM1, c[2], &hi1, &lo1);
    c = {hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0};
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
  return c;
}

double PhiloxUniform(uint64_t seed, uint64_t index) { return ToUnit(Philox4x32(index, 0, seed)[0]); }

double PhiloxNormal(uint64_t seed, uint64_t index) {
  const std::array<uint32_t, 4> r = Philox4x32(index, 0, seed);
  const double u1 = 1.0 - ToUnit(r[0]);  // in (0, 1]: log(u1) is finite
  const double u2 = ToUnit(r[1]);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

void FillUniform(Tensor* shard, const Shape& logical_shape, const std::vector<int64_t>& offset, uint64_t seed,
                 double low, double high) {
  Fill(shard, logical_shape, offset, [&](uint64_t i) { return low + (high - low) * PhiloxUniform(seed, i); });
}

void FillNormal(Tensor* shard, const Shape& logical_shape, const std::vector<int64_t>& offset, uint64_t seed,
                double mean, double stddev) {
  Fill(shard, logical_shape, offset, [&](uint64_t i) { return mean + stddev * PhiloxNormal(seed, i); });
}

uint64_t SplitMix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double PortableUniform(uint64_t seed, uint64_t stream, uint64_t index) {
  const uint64_t key = (seed << 48) | (stream << 32) | index;
  return static_cast<double>(SplitMix64(key) >> 40) * k2Pow24Inv;
}

float PortableUniformValue(uint64_t seed, uint64_t stream, uint64_t index, double stddev) {
  // Same association as numpy's `0.02 * math.sqrt(3.0) * (2.0 * u - 1.0)`.
  const double scale = stddev * std::sqrt(3.0);
  return static_cast<float>(scale * (2.0 * PortableUniform(seed, stream, index) - 1.0));
}

void FillPortableUniform(Tensor* shard, const Shape& logical_shape, const std::vector<int64_t>& offset,
                         uint64_t seed, uint64_t stream, double stddev) {
  Fill(shard, logical_shape, offset,
       [&](uint64_t i) { return static_cast<double>(PortableUniformValue(seed, stream, i, stddev)); });
}

}  // namespace oneflow_like
