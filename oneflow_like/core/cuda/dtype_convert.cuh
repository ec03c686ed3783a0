// Element conversions between the project's dtypes on the device, exactly as the CPU does them
// (private to the .cu files of this folder): core/data_type.cc's bfloat16 / float16 rounding
// (round to nearest even, NaN kept, float16 subnormals and overflow to inf) and
// core/ops/misc_ops.cc's Convert (integer/bool exactly, anything floating through double,
// float -> int truncating and saturating with NaN -> 0, x -> bool as x != 0). FromDouble<T> is
// also Tensor::SetFromDouble for the floating types. DispatchDtype maps a DataType to its C++
// type on the host.
#ifndef ONEFLOW_LIKE_CORE_CUDA_DTYPE_CONVERT_CUH_
#define ONEFLOW_LIKE_CORE_CUDA_DTYPE_CONVERT_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <type_traits>

#include "oneflow_like/core/data_type.h"

namespace oneflow_like {
namespace cuda {
namespace internal {

__device__ inline uint16_t FloatToBFloat16(float f) {
  const uint32_t x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  const uint32_t rounding_bias = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding_bias) >> 16);
}

__device__ inline float BFloat16ToFloat(uint16_t b) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }

__device__ inline uint16_t FloatToHalf(float f) {
  const uint32_t x = __float_as_uint(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // subnormal or zero in half
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // rounds to zero
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;
    uint32_t result = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
  }
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded >> 13) - ((127 - 15) << 10)));
}

__device__ inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      x = sign | ((127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return __uint_as_float(x);
}

// ---- misc_ops.cc's element conversion ----

template <typename T>
__device__ inline double ToDouble(T v) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    return BFloat16ToFloat(v.bits);
  } else if constexpr (std::is_same_v<T, Float16>) {
    return HalfToFloat(v.bits);
  } else {
    return static_cast<double>(v);
  }
}

template <typename T>
__device__ inline T FromDouble(double v) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    return BFloat16{FloatToBFloat16(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<T, Float16>) {
    return Float16{FloatToHalf(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else if constexpr (std::is_integral_v<T>) {
    if (isnan(v)) return 0;
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    if (v <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
    return static_cast<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

template <typename Src, typename Dst>
__device__ inline Dst Convert(Src v) {
  if constexpr (std::is_integral_v<Src> && std::is_same_v<Dst, bool>) {
    return v != 0;
  } else if constexpr (std::is_integral_v<Src> && std::is_integral_v<Dst>) {
    return static_cast<Dst>(v);
  } else {
    return FromDouble<Dst>(ToDouble(v));
  }
}

// Calls fn(T{}) for the C++ type of `dtype`; false for kInvalid.
template <typename Fn>
bool DispatchDtype(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kFloat32: fn(float{}); return true;
    case DataType::kFloat64: fn(double{}); return true;
    case DataType::kInt32: fn(int32_t{}); return true;
    case DataType::kInt64: fn(int64_t{}); return true;
    case DataType::kBool: fn(bool{}); return true;
    case DataType::kBFloat16: fn(BFloat16{}); return true;
    case DataType::kFloat16: fn(Float16{}); return true;
    case DataType::kInvalid: break;
  }
  return false;
}

}  // namespace internal
}  // namespace cuda
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_CUDA_DTYPE_CONVERT_CUH_
