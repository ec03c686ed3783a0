// Row primitives for the last-axis kernels (softmax, log_softmax, layer_norm, cross-entropy).
// Private to //oneflow_like/core/ops:builtin_ops; header-only, no state, thread-safe.
//
// Why the odd loop shape: GCC 12 at -O2 only vectorizes a loop when the vector code replaces
// the scalar loop entirely ("very cheap" cost model), so a loop with an unknown trip count
// stays scalar. The loops below run fixed kLanes-wide inner blocks (which GCC does vectorize
// at -O2, given __restrict pointers) plus a scalar tail; reductions keep kLanes independent
// partial sums (no reassociation is needed, and they are more accurate than one running sum).
// kLanes = 16 fills one AVX-512 register of floats (2x faster exp kernels than 8 there; the
// same speed with SSE2).
// Lambdas lose __restrict on their captures, so each row operation is a named function.
// The float Exp below only vectorizes with -fno-trapping-math (set on :builtin_ops): with
// trapping math GCC will not if-convert its clamps. Measured on the 2-core EPYC dev VM (-O2),
// float softmax over [4096, 1024]: ~5 GB/s with SSE2 only, ~16 GB/s with the AVX-512 clone
// (memcpy of the same bytes: ~45 GB/s, in cache); exp-free row kernels reach 60-100%.
//
// Exp(float) is a polynomial exp (Cephes expf: range reduction by ln 2, degree-6 minimax,
// max relative error ~1e-7 = 1-2 ulp) written without branches: std::exp is a libm call per
// element, 5-10x slower. Inputs below -87.3 give exactly 0, NaN propagates, inputs above 88
// saturate at ~exp(88) (callers only pass x - max <= 0). Exp(double) is std::exp: float64 is
// for gradient checks, where accuracy matters more than speed. ExpHiLo(hi, lo): exp(hi + lo)
// for hi <= 0 with a correction term lo carried into the reduced argument.
#ifndef ONEFLOW_LIKE_CORE_OPS_ROW_MATH_H_
#define ONEFLOW_LIKE_CORE_OPS_ROW_MATH_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

// OL_ROW_KERNEL marks a kernel's row loop (a function that only does arithmetic on buffers):
// GCC compiles it three times, for AVX-512 (x86-64-v4), AVX2 (x86-64-v3) and baseline x86-64,
// and the loader picks the best one for the CPU (function multiversioning); `flatten` inlines
// the helpers below into each clone. Float results are bitwise identical across clones (fixed
// lane order, no FMA contraction: see copts in BUILD; the few explicit std::fma calls are
// exactly rounded in every clone).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define OL_ROW_KERNEL __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), flatten))
#else
#define OL_ROW_KERNEL
#endif

namespace oneflow_like {
namespace ops {
namespace row_math {

constexpr int kLanes = 16;

inline float Exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;    // ln 2 split in two so that n * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.f;      // 1.5 * 2^23: adding it rounds to an integer
  // Clamp and select with constant arms only: GCC (with the default -ftrapping-math) will not
  // if-convert a select whose arm does arithmetic, which would stop vectorization.
  const float xc = x < -87.3f ? -87.3f : (x > 88.0f ? 88.0f : x);
  const float keep = x < -87.3f ? 0.0f : 1.0f;
  const float t = xc * kLog2e + kRound;  // low mantissa bits of t hold round(xc / ln 2)
  const float n = t - kRound;             // round(xc / ln 2), in [-126, 127]
  const float r = xc - n * kLn2Hi - n * kLn2Lo;  // |r| <= ln(2) / 2
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // 2^n built from t's bits in unsigned arithmetic (no float->int conversion: defined for NaN).
  uint32_t t_bits;
  std::memcpy(&t_bits, &t, sizeof(t_bits));
  constexpr uint32_t kRoundBits = 0x4B400000u;  // bits of kRound
  const uint32_t scale_bits = (t_bits - kRoundBits + 127u) << 23;
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof(scale));
  return p * scale * keep;
}
inline double Exp(double x) { return std::exp(x); }

// exp(hi + lo) for a small correction lo (|lo| <= 2^-10 |hi| or so), e.g. the rounding
// error of hi = -a^2 / 2: the reduced argument is (hi - n ln 2) + lo, so lo is not lost to
// hi's rounding. Same range reduction and coefficients as Exp, but for kernels bound by the
// latency and count of their operations (gelu): the polynomial by Estrin's scheme, and
// explicit fused multiply-adds (std::fma, exactly rounded everywhere, so the clones still agree
// bit for bit: one instruction in the AVX2 and AVX-512 clones, a libm call in the baseline
// x86-64 clone, which only CPUs without FMA (before ~2013) run). Results can differ from
// Exp(hi + lo) in the last bit. hi < -87.3 gives exactly 0 (lo then ignored, even inf/NaN);
// NaN hi propagates. REQUIRES: hi <= 0 (no upper clamp).
inline float ExpHiLo(float hi, float lo) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.f;
  const float xc = hi < -87.3f ? -87.3f : hi;
  const float keep = hi < -87.3f ? 0.0f : 1.0f;
  const float lc = hi < -87.3f ? 0.0f : lo;
  const float t = std::fma(xc, kLog2e, kRound);
  const float n = t - kRound;
  const float r = std::fma(-n, kLn2Hi, xc) + std::fma(-n, kLn2Lo, lc);
  const float r2 = r * r;
  const float r4 = r2 * r2;
  const float p01 = std::fma(1.6666665459e-1f, r, 5.0000001201e-1f);
  const float p23 = std::fma(8.3334519073e-3f, r, 4.1665795894e-2f);
  const float p45 = std::fma(1.9875691500e-4f, r, 1.3981999507e-3f);
  const float p = std::fma(r4, p45, std::fma(r2, p23, p01));
  const float e = std::fma(p, r2, r) + 1.0f;
  uint32_t t_bits;
  std::memcpy(&t_bits, &t, sizeof(t_bits));
  constexpr uint32_t kRoundBits = 0x4B400000u;
  const uint32_t scale_bits = (t_bits - kRoundBits + 127u) << 23;
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof(scale));
  return e * scale * keep;
}

// The helpers below take __restrict pointers: inputs and outputs must not overlap.

// max(x[0..n)); -inf when n == 0. A NaN may or may not be returned (the exp pass propagates it).
template <typename T>
inline T Max(const T* __restrict x, int64_t n) {
  T acc[kLanes];
  for (int k = 0; k < kLanes; ++k) acc[k] = -std::numeric_limits<T>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) acc[k] = x[i + k] > acc[k] ? x[i + k] : acc[k];
  }
  T m = acc[0];
  for (int k = 1; k < kLanes; ++k) m = acc[k] > m ? acc[k] : m;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// Adds the lane accumulators (fixed order: results do not depend on alignment or the clone).
template <typename T>
inline T ReduceLanes(const T (&acc)[kLanes]) {
  T s = 0;
  for (int k = 0; k < kLanes; ++k) s += acc[k];
  return s;
}

// As ReduceLanes, but pairwise (lanes k and k + 8, then k and k + 4, ...): 4 dependent steps
// instead of 15, for short rows, where ReduceLanes' serial chain costs more than the row's
// arithmetic. A fixed order too, and no less accurate; its results differ from ReduceLanes'.
template <typename T>
inline T ReduceLanesPairwise(const T (&acc)[kLanes]) {
  T a[kLanes / 2];
  for (int k = 0; k < 8; ++k) a[k] = acc[k] + acc[k + 8];
  for (int k = 0; k < 4; ++k) a[k] = a[k] + a[k + 4];
  for (int k = 0; k < 2; ++k) a[k] = a[k] + a[k + 2];
  return a[0] + a[1];
}

// The largest lane, pairwise as ReduceLanesPairwise (a NaN may or may not be returned).
template <typename T>
inline T MaxLanesPairwise(const T (&acc)[kLanes]) {
  T a[kLanes / 2];
  for (int k = 0; k < 8; ++k) a[k] = acc[k + 8] > acc[k] ? acc[k + 8] : acc[k];
  for (int k = 0; k < 4; ++k) a[k] = a[k + 4] > a[k] ? a[k + 4] : a[k];
  for (int k = 0; k < 2; ++k) a[k] = a[k + 2] > a[k] ? a[k + 2] : a[k];
  return a[1] > a[0] ? a[1] : a[0];
}

// sum of x[0..n).
template <typename T>
inline T Sum(const T* __restrict x, int64_t n) {
  T acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) acc[k] += x[i + k];
  }
  T s = ReduceLanes(acc);
  for (; i < n; ++i) s += x[i];
  return s;
}

// sum of a[i] * b[i].
template <typename T>
inline T Dot(const T* __restrict a, const T* __restrict b, int64_t n) {
  T acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) acc[k] += a[i + k] * b[i + k];
  }
  T s = ReduceLanes(acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// y[i] = exp(x[i] - shift); returns the sum of the y[i].
template <typename T>
inline T ExpShiftStore(const T* __restrict x, T shift, T* __restrict y, int64_t n) {
  T acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      const T e = Exp(x[i + k] - shift);
      y[i + k] = e;
      acc[k] += e;
    }
  }
  T s = ReduceLanes(acc);
  for (; i < n; ++i) {
    const T e = Exp(x[i] - shift);
    y[i] = e;
    s += e;
  }
  return s;
}

// sum of exp(x[i] - shift).
template <typename T>
inline T ExpShiftSum(const T* __restrict x, T shift, int64_t n) {
  T acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) acc[k] += Exp(x[i + k] - shift);
  }
  T s = ReduceLanes(acc);
  for (; i < n; ++i) s += Exp(x[i] - shift);
  return s;
}

// y[i] *= a.
template <typename T>
inline void Scale(T* __restrict y, T a, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) y[i + k] *= a;
  }
  for (; i < n; ++i) y[i] *= a;
}

}  // namespace row_math
}  // namespace ops
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_OPS_ROW_MATH_H_
