#include "oneflow_like/core/data_type.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oneflow_like {
namespace {

using ::testing::HasSubstr;

const DataType kAllTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kInt64,
                              DataType::kBool,    DataType::kBFloat16, DataType::kFloat16};

uint32_t Bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return x;
}
float FromBits(uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// Independent decoding of IEEE binary16 (by formula, not bit shuffling).
double HalfValue(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  if (exp == 31) v = mant == 0 ? std::numeric_limits<double>::infinity() : std::nan("");
  return sign ? -v : v;
}

TEST(DataTypeTest, SizesAndNames) {
  EXPECT_EQ(SizeOf(DataType::kFloat32), 4);
  EXPECT_EQ(SizeOf(DataType::kFloat64), 8);
  EXPECT_EQ(SizeOf(DataType::kInt32), 4);
  EXPECT_EQ(SizeOf(DataType::kInt64), 8);
  EXPECT_EQ(SizeOf(DataType::kBool), 1);
  EXPECT_EQ(SizeOf(DataType::kBFloat16), 2);
  EXPECT_EQ(SizeOf(DataType::kFloat16), 2);
  EXPECT_EQ(SizeOf(DataType::kInvalid), 0);
  EXPECT_EQ(SizeOf(DataTypeOf<BFloat16>::value), static_cast<int64_t>(sizeof(BFloat16)));
  EXPECT_EQ(SizeOf(DataTypeOf<double>::value), static_cast<int64_t>(sizeof(double)));
  EXPECT_EQ(DataTypeName(DataType::kFloat32), "float32");
  EXPECT_EQ(DataTypeName(DataType::kBFloat16), "bfloat16");
  EXPECT_EQ(DataTypeName(DataType::kFloat16), "float16");
  EXPECT_EQ(DataTypeName(DataType::kBool), "bool");
  for (DataType d : kAllTypes) {
    auto parsed = ParseDataType(DataTypeName(d));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, d);
  }
}

TEST(DataTypeTest, Categories) {
  EXPECT_TRUE(IsFloatingPoint(DataType::kFloat32));
  EXPECT_TRUE(IsFloatingPoint(DataType::kFloat64));
  EXPECT_TRUE(IsFloatingPoint(DataType::kBFloat16));
  EXPECT_TRUE(IsFloatingPoint(DataType::kFloat16));
  EXPECT_FALSE(IsFloatingPoint(DataType::kInt32));
  EXPECT_FALSE(IsFloatingPoint(DataType::kBool));
  EXPECT_TRUE(IsInteger(DataType::kInt32));
  EXPECT_TRUE(IsInteger(DataType::kInt64));
  EXPECT_FALSE(IsInteger(DataType::kBool));
  EXPECT_FALSE(IsInteger(DataType::kFloat16));
}

TEST(DataTypeTest, ParseErrorsQuoteTheName) {
  for (const char* bad : {"float", "Float32", "", "int8", "fp16"}) {
    auto r = ParseDataType(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(std::string("'") + bad + "'"));
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("float32"));
  }
}

TEST(Float16Test, KnownValues) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.5f), 0xc100);
  EXPECT_EQ(FloatToHalf(0.1f), 0x2e66);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);  // max normal
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);  // below the midpoint to 65536
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // midpoint rounds to even = overflow to inf
  EXPECT_EQ(FloatToHalf(1e6f), 0x7c00);
  EXPECT_EQ(FloatToHalf(-1e6f), 0xfc00);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);  // min normal
  EXPECT_EQ(FloatToHalf(1e-7f), 0x0002);                  // subnormal: 1e-7 / 2^-24 = 1.68 -> 2
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // min subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even (zero)
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -26)), 0x0001);  // 0.75 ulp -> 1
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
  // Round to nearest even in the normal range: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(FloatToHalf(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3c01);

  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xc100), -2.5f);
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_TRUE(std::isinf(HalfToFloat(0xfc00)) && HalfToFloat(0xfc00) < 0);
  EXPECT_TRUE(std::signbit(HalfToFloat(0x8000)));
}

TEST(Float16Test, EveryBitPatternDecodesAndRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const double expected = HalfValue(static_cast<uint16_t>(h));
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), expected) << std::hex << h;
    ASSERT_EQ(FloatToHalf(f), h) << std::hex << h;
  }
}

TEST(Float16Test, MidpointsRoundToEvenAndNeighboursToNearest) {
  // Positive finite halves a < b adjacent: the midpoint goes to the even one, points just off
  // the midpoint to the nearer one.
  for (uint32_t a = 0; a < 0x7bff; ++a) {
    const float fa = HalfToFloat(static_cast<uint16_t>(a)), fb = HalfToFloat(static_cast<uint16_t>(a + 1));
    const float mid = (fa + fb) / 2;  // exact in float32
    ASSERT_EQ(FloatToHalf(mid), (a % 2 == 0) ? a : a + 1) << std::hex << a;
    ASSERT_EQ(FloatToHalf(std::nextafter(mid, 0.0f)), a) << std::hex << a;
    ASSERT_EQ(FloatToHalf(std::nextafter(mid, std::numeric_limits<float>::infinity())), a + 1) << std::hex << a;
    ASSERT_EQ(FloatToHalf(-mid), 0x8000 | ((a % 2 == 0) ? a : a + 1)) << std::hex << a;
  }
}

TEST(BFloat16Test, KnownValues) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(-2.5f), 0xc020);
  EXPECT_EQ(FloatToBFloat16(0.1f), 0x3dcd);
  EXPECT_EQ(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie -> even
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf
  // float32 subnormals keep their upper half, rounded to nearest even.
  EXPECT_EQ(FloatToBFloat16(FromBits(0x00012345u)), 0x0001);
  EXPECT_EQ(FloatToBFloat16(FromBits(0x00018000u)), 0x0002);  // tie, 1 is odd -> up
  EXPECT_EQ(FloatToBFloat16(FromBits(0x00028000u)), 0x0002);  // tie, 2 is even -> stays
  // NaN stays NaN, also for payloads that truncation would turn into inf.
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(FromBits(0x7f800001u)))));
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(FromBits(0xffff0000u | 0x7fffu)))));
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(BFloat16ToFloat(0xc020), -2.5f);
}

TEST(BFloat16Test, EveryBitPatternRoundTripsAndMidpointsRoundToEven) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const float f = BFloat16ToFloat(static_cast<uint16_t>(b));
    ASSERT_EQ(Bits(f), b << 16);
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToBFloat16(f), b) << std::hex << b;
  }
  for (uint32_t a = 0; a < 0x7f7f; ++a) {
    const float fa = BFloat16ToFloat(static_cast<uint16_t>(a)), fb = BFloat16ToFloat(static_cast<uint16_t>(a + 1));
    const float mid = FromBits((Bits(fa) + Bits(fb)) / 2);  // the float halfway between them
    ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(fa) + fb) / 2);
    ASSERT_EQ(FloatToBFloat16(mid), (a % 2 == 0) ? a : a + 1) << std::hex << a;
    ASSERT_EQ(FloatToBFloat16(std::nextafter(mid, 0.0f)), a) << std::hex << a;
    ASSERT_EQ(FloatToBFloat16(std::nextafter(mid, std::numeric_limits<float>::infinity())), a + 1) << std::hex << a;
  }
}

}  // namespace
}  // namespace oneflow_like
