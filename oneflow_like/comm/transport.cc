#include "oneflow_like/comm/transport.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "oneflow_like/comm/crc32c.h"
#include "oneflow_like/core/fixed_codec.h"

namespace oneflow_like {
namespace comm {
namespace {

constexpr uint32_t kMagic = 0x4f4c4652;  // "OLFR"
constexpr uint32_t kVersion = 2;         // 2: header and payload checksums
// magic, version, from, to (4 bytes each), sequence, payload length (8 bytes each), then the
// payload and header checksums (4 bytes each).
constexpr size_t kChecksummedHeaderBytes = 4 * 4 + 8 * 2 + 4;
static_assert(kChecksummedHeaderBytes + 4 == kFrameHeaderBytes, "frame header layout");

}  // namespace

void EncodeFrameHeader(const FrameHeader& header, char* out) {
  std::string bytes;
  bytes.reserve(kFrameHeaderBytes);
  AppendFixed<uint32_t>(&bytes, kMagic);
  AppendFixed<uint32_t>(&bytes, kVersion);
  AppendFixed<int32_t>(&bytes, header.from.value());
  AppendFixed<int32_t>(&bytes, header.to.value());
  AppendFixed<uint64_t>(&bytes, header.sequence);
  AppendFixed<uint64_t>(&bytes, header.payload_bytes);
  AppendFixed<uint32_t>(&bytes, header.payload_checksum);
  AppendFixed<uint32_t>(&bytes, Crc32c(bytes.data(), bytes.size()));
  std::memcpy(out, bytes.data(), kFrameHeaderBytes);
}

absl::StatusOr<FrameHeader> DecodeFrameHeader(absl::string_view bytes) {
  if (bytes.size() < kFrameHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("transport frame of ", bytes.size(),
                                                   " bytes is shorter than its ", kFrameHeaderBytes, "-byte header"));
  }
  size_t pos = 0;
  const uint32_t magic = ReadFixed<uint32_t>(bytes, &pos);
  const uint32_t version = ReadFixed<uint32_t>(bytes, &pos);
  if (magic != kMagic || version != kVersion) {
    return absl::InvalidArgumentError(absl::StrCat("not a transport frame (magic ", magic, ", version ", version,
                                                   "); expected magic ", kMagic, " version ", kVersion));
  }
  FrameHeader header;
  header.from = Rank(ReadFixed<int32_t>(bytes, &pos));
  header.to = Rank(ReadFixed<int32_t>(bytes, &pos));
  header.sequence = ReadFixed<uint64_t>(bytes, &pos);
  header.payload_bytes = ReadFixed<uint64_t>(bytes, &pos);
  header.payload_checksum = ReadFixed<uint32_t>(bytes, &pos);
  const uint32_t header_checksum = ReadFixed<uint32_t>(bytes, &pos);
  if (header_checksum != Crc32c(bytes.data(), kChecksummedHeaderBytes)) {
    return absl::DataLossError(absl::StrCat("transport frame header checksum mismatch (frame ", header.sequence,
                                            " of edge ", header.from.value(), " -> ", header.to.value(),
                                            " as read): corrupt or desynchronized bytes"));
  }
  return header;
}

std::string EncodeFrame(const Frame& frame) {
  FrameHeader header{frame.from, frame.to, frame.sequence, frame.payload.size(),
                     Crc32c(frame.payload.data(), frame.payload.size())};
  std::string out(kFrameHeaderBytes, '\0');
  EncodeFrameHeader(header, &out[0]);
  out.append(frame.payload);
  return out;
}

absl::StatusOr<Frame> DecodeFrame(absl::string_view bytes) {
  ASSIGN_OR_RETURN(FrameHeader header, DecodeFrameHeader(bytes));
  if (header.payload_bytes != bytes.size() - kFrameHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("transport frame declares ", header.payload_bytes,
                                                   " payload bytes but carries ", bytes.size() - kFrameHeaderBytes));
  }
  const absl::string_view payload = bytes.substr(kFrameHeaderBytes);
  if (Crc32c(payload.data(), payload.size()) != header.payload_checksum) {
    return absl::DataLossError(absl::StrCat("transport frame ", header.sequence, " of edge ", header.from.value(),
                                            " -> ", header.to.value(), ": payload checksum mismatch"));
  }
  return Frame{header.from, header.to, header.sequence, std::string(payload)};
}

}  // namespace comm
}  // namespace oneflow_like
