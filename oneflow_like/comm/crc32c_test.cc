#include "oneflow_like/comm/crc32c.h"

#include <cstdint>
#include <random>
#include <string>

#include "gtest/gtest.h"

namespace oneflow_like {
namespace comm {
namespace {

// Bit-at-a-time reference straight from the definition (reflected, init and final xor ~0).
uint32_t ReferenceCrc32c(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : bytes) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
  }
  return ~crc;
}

TEST(Crc32cTest, MatchesPublishedCheckValues) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
  const std::string zeros(32, '\0');
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);  // RFC 3720 B.4
  const std::string ones(32, '\xff');
  EXPECT_EQ(Crc32c(ones.data(), ones.size()), 0x62A8AB43u);
}

TEST(Crc32cTest, FastPathsAgreeWithReferenceAtAllSizesAndOffsets) {
  std::mt19937 random(7);
  std::string data(3 * 4096 * 3 + 123, '\0');
  for (char& c : data) c = static_cast<char>(random());
  const size_t sizes[] = {0, 1, 7, 8, 9, 4095, 3 * 4096 - 1, 3 * 4096, 3 * 4096 + 5, 2 * 3 * 4096 + 17, data.size() - 3};
  for (size_t size : sizes) {
    for (size_t offset : {size_t{0}, size_t{1}, size_t{3}}) {
      const std::string piece = data.substr(offset, size);
      const uint32_t expected = ReferenceCrc32c(piece);
      EXPECT_EQ(Crc32c(piece.data(), piece.size()), expected) << size << " at " << offset;
      EXPECT_EQ(Crc32cExtendPortable(0, piece.data(), piece.size()), expected) << size;
      // Built in two pieces.
      const size_t cut = size / 3;
      EXPECT_EQ(Crc32cExtend(Crc32c(piece.data(), cut), piece.data() + cut, size - cut), expected) << size;
      std::string copy(size, '\0');
      EXPECT_EQ(CopyWithCrc32c(&copy[0], piece.data(), size, 0), expected) << size;
      EXPECT_EQ(copy, piece);
    }
  }
}

TEST(Crc32cTest, DetectsASingleFlippedBit) {
  std::string data(100000, 'a');
  const uint32_t clean = Crc32c(data.data(), data.size());
  data[54321] ^= 0x10;
  EXPECT_NE(Crc32c(data.data(), data.size()), clean);
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like
