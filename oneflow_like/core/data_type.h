// Element types. float32 is the training type, float64 serves numerical gradient checks,
// int32/int64 carry indices and labels, bool carries masks. bfloat16 and float16 are storage
// types: kernels compute in float32 and convert with the functions below (round to nearest even).
#ifndef ONEFLOW_LIKE_CORE_DATA_TYPE_H_
#define ONEFLOW_LIKE_CORE_DATA_TYPE_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {

enum class DataType : int32_t {
  kInvalid = 0,
  kFloat32 = 1,
  kFloat64 = 2,
  kInt32 = 3,
  kInt64 = 4,
  kBool = 5,
  kBFloat16 = 6,
  kFloat16 = 7,
};

// Size of one element in bytes (0 for kInvalid).
int64_t SizeOf(DataType dtype);
// "float32", "float64", "int32", "int64", "bool", "bfloat16", "float16".
std::string DataTypeName(DataType dtype);
absl::StatusOr<DataType> ParseDataType(absl::string_view name);
bool IsFloatingPoint(DataType dtype);  // float32/64, bfloat16, float16
bool IsInteger(DataType dtype);        // int32/int64

// Storage conversions. bfloat16 keeps the upper 16 bits of a float32 (rounded to nearest even,
// NaN preserved); float16 is IEEE 754 binary16 with subnormals, overflow to inf.
uint16_t FloatToBFloat16(float f);
float BFloat16ToFloat(uint16_t b);
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);

struct BFloat16 { uint16_t bits; };
struct Float16 { uint16_t bits; };

// Compile-time mapping from C++ types to DataType.
template <typename T> struct DataTypeOf;
template <> struct DataTypeOf<float> { static constexpr DataType value = DataType::kFloat32; };
template <> struct DataTypeOf<double> { static constexpr DataType value = DataType::kFloat64; };
template <> struct DataTypeOf<int32_t> { static constexpr DataType value = DataType::kInt32; };
template <> struct DataTypeOf<int64_t> { static constexpr DataType value = DataType::kInt64; };
template <> struct DataTypeOf<bool> { static constexpr DataType value = DataType::kBool; };
template <> struct DataTypeOf<BFloat16> { static constexpr DataType value = DataType::kBFloat16; };
template <> struct DataTypeOf<Float16> { static constexpr DataType value = DataType::kFloat16; };

}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_DATA_TYPE_H_
