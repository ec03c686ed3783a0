// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of transport frames.
// Uses the SSE4.2 crc32 instruction with three interleaved streams when the CPU has it
// (~20 GB/s), a byte table otherwise; both give identical results.
//
//   uint32_t crc = Crc32c("123456789", 9);          // 0xE3069283 (the standard check value)
//   uint32_t a = Crc32c("1234", 4);
//   uint32_t b = Crc32cExtend(a, "56789", 5);       // b == crc: checksums can be built in pieces
//   char copy[9];
//   uint32_t c = CopyWithCrc32c(copy, "123456789", 9, 0);  // copies and checksums in one pass
//
// Pure functions over caller memory; thread-safe. The lookup tables are immutable constants
// computed on first use.
#ifndef ONEFLOW_LIKE_COMM_CRC32C_H_
#define ONEFLOW_LIKE_COMM_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace oneflow_like {
namespace comm {

// The CRC-32C of data[0, size) appended to bytes whose CRC-32C was `crc` (0 for none).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size);
inline uint32_t Crc32c(const void* data, size_t size) { return Crc32cExtend(0, data, size); }

// Copies src[0, size) to dst (non-overlapping) and returns Crc32cExtend(crc, src, size); the
// checksum reads the freshly written cache lines, so the source is read from memory once.
uint32_t CopyWithCrc32c(void* dst, const void* src, size_t size, uint32_t crc);

// For tests: the portable byte-table implementation, whatever the CPU.
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t size);

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_CRC32C_H_
