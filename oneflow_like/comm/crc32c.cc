#include "oneflow_like/comm/crc32c.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace oneflow_like {
namespace comm {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78;  // reflected Castagnoli polynomial
// Each of the three hardware streams covers this many bytes per round; a round's three partial
// CRCs are joined by "shifting" a CRC over kStripeBytes zero bytes (a linear map, tabulated).
constexpr size_t kStripeBytes = 4096;

struct Tables {
  uint32_t byte[256];          // one-byte update of the raw (uninverted) CRC state
  uint32_t shift[4][256];      // shift[k][b]: the state b << 8k advanced over kStripeBytes zeros
  bool hardware = false;       // SSE4.2 crc32 available
};

uint32_t RawUpdatePortable(const uint32_t* byte_table, uint32_t state, const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) state = byte_table[(state ^ p[i]) & 0xff] ^ (state >> 8);
  return state;
}

Tables MakeTables() {
  Tables tables;
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c & 1) ? (c >> 1) ^ kPolynomial : c >> 1;
    tables.byte[i] = c;
  }
  // The image of each single-bit state under "advance over kStripeBytes zero bytes".
  uint32_t image[32];
  const unsigned char zeros[kStripeBytes] = {};
  for (int bit = 0; bit < 32; ++bit) image[bit] = RawUpdatePortable(tables.byte, uint32_t{1} << bit, zeros, kStripeBytes);
  for (int k = 0; k < 4; ++k) {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t v = 0;
      for (int bit = 0; bit < 8; ++bit) {
        if (b & (1u << bit)) v ^= image[8 * k + bit];
      }
      tables.shift[k][b] = v;
    }
  }
#if defined(__x86_64__)
  tables.hardware = __builtin_cpu_supports("sse4.2");
#endif
  return tables;
}

const Tables& GetTables() {
  static const Tables tables = MakeTables();  // immutable constants, built once
  return tables;
}

uint32_t Shift(const Tables& t, uint32_t state) {
  return t.shift[0][state & 0xff] ^ t.shift[1][(state >> 8) & 0xff] ^ t.shift[2][(state >> 16) & 0xff] ^
         t.shift[3][state >> 24];
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t RawUpdateHardware(const Tables& t, uint32_t state, const unsigned char* p,
                                                             size_t n) {
  // Three independent streams hide the instruction's 3-cycle latency.
  while (n >= 3 * kStripeBytes) {
    uint64_t a = state, b = 0, c = 0;
    const unsigned char* pa = p;
    const unsigned char* pb = p + kStripeBytes;
    const unsigned char* pc = p + 2 * kStripeBytes;
    for (size_t i = 0; i < kStripeBytes; i += 8) {
      uint64_t wa, wb, wc;
      std::memcpy(&wa, pa + i, 8);
      std::memcpy(&wb, pb + i, 8);
      std::memcpy(&wc, pc + i, 8);
      a = _mm_crc32_u64(a, wa);
      b = _mm_crc32_u64(b, wb);
      c = _mm_crc32_u64(c, wc);
    }
    state = Shift(t, Shift(t, static_cast<uint32_t>(a)) ^ static_cast<uint32_t>(b)) ^ static_cast<uint32_t>(c);
    p += 3 * kStripeBytes;
    n -= 3 * kStripeBytes;
  }
  uint64_t s = state;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    s = _mm_crc32_u64(s, w);
  }
  state = static_cast<uint32_t>(s);
  for (; n > 0; --n, ++p) state = _mm_crc32_u8(state, *p);
  return state;
}
#endif

}  // namespace

uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t size) {
  return ~RawUpdatePortable(GetTables().byte, ~crc, static_cast<const unsigned char*>(data), size);
}

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size) {
  const Tables& tables = GetTables();
#if defined(__x86_64__)
  if (tables.hardware) return ~RawUpdateHardware(tables, ~crc, static_cast<const unsigned char*>(data), size);
#endif
  return ~RawUpdatePortable(tables.byte, ~crc, static_cast<const unsigned char*>(data), size);
}

uint32_t CopyWithCrc32c(void* dst, const void* src, size_t size, uint32_t crc) {
  constexpr size_t kChunk = 48 * 1024;  // stays in L1/L2 between the copy and the checksum
  char* out = static_cast<char*>(dst);
  const char* in = static_cast<const char*>(src);
  for (size_t done = 0; done < size;) {
    const size_t n = std::min(kChunk, size - done);
    std::memcpy(out + done, in + done, n);
    crc = Crc32cExtend(crc, out + done, n);
    done += n;
  }
  return crc;
}

}  // namespace comm
}  // namespace oneflow_like
