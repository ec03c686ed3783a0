#include "oneflow_like/core/fixed_codec.h"

#include <limits>

#include "gtest/gtest.h"

namespace oneflow_like {
namespace {

TEST(FixedCodecTest, LittleEndianBytesAndRoundTrip) {
  std::string out;
  AppendFixed<int64_t>(&out, -2);
  AppendFixed<uint32_t>(&out, 0x4f4c4652u);
  AppendFixed<uint8_t>(&out, 7);
  AppendFixed<int32_t>(&out, std::numeric_limits<int32_t>::min());
  ASSERT_EQ(out.size(), 8u + 4u + 1u + 4u);
  EXPECT_EQ(out.substr(0, 8), std::string("\xfe\xff\xff\xff\xff\xff\xff\xff", 8));
  EXPECT_EQ(out.substr(8, 4), "RFLO");  // least significant byte first
  size_t pos = 0;
  EXPECT_EQ(ReadFixed<int64_t>(out, &pos), -2);
  EXPECT_EQ(ReadFixed<uint32_t>(out, &pos), 0x4f4c4652u);
  EXPECT_EQ(ReadFixed<uint8_t>(out, &pos), 7);
  EXPECT_EQ(ReadFixed<int32_t>(out, &pos), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(pos, out.size());
}

TEST(FixedCodecTest, ExtremesRoundTrip) {
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{0x0123456789abcdef}, ~uint64_t{0}}) {
    std::string out;
    AppendFixed<uint64_t>(&out, v);
    size_t pos = 0;
    EXPECT_EQ(ReadFixed<uint64_t>(out, &pos), v);
  }
}

}  // namespace
}  // namespace oneflow_like
