#include "oneflow_like/comm/transport.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "oneflow_like/core/fixed_codec.h"

namespace oneflow_like {
namespace comm {
namespace {

constexpr uint32_t kMagic = 0x4f4c4652;  // "OLFR"
constexpr uint32_t kVersion = 1;
// magic, version, from, to (4 bytes each), sequence, payload length (8 bytes each).
constexpr size_t kHeaderBytes = 4 * 4 + 8 * 2;

}  // namespace

std::string EncodeFrame(const Frame& frame) {
  std::string out;
  out.reserve(kHeaderBytes + frame.payload.size());
  AppendFixed<uint32_t>(&out, kMagic);
  AppendFixed<uint32_t>(&out, kVersion);
  AppendFixed<int32_t>(&out, frame.from.value());
  AppendFixed<int32_t>(&out, frame.to.value());
  AppendFixed<uint64_t>(&out, frame.sequence);
  AppendFixed<uint64_t>(&out, frame.payload.size());
  out.append(frame.payload);
  return out;
}

absl::StatusOr<Frame> DecodeFrame(absl::string_view bytes) {
  if (bytes.size() < kHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("transport frame of ", bytes.size(), " bytes is shorter than its ", kHeaderBytes, "-byte header"));
  }
  size_t pos = 0;
  const uint32_t magic = ReadFixed<uint32_t>(bytes, &pos);
  const uint32_t version = ReadFixed<uint32_t>(bytes, &pos);
  if (magic != kMagic || version != kVersion) {
    return absl::InvalidArgumentError(absl::StrCat("not a transport frame (magic ", magic, ", version ", version,
                                                   "); expected magic ", kMagic, " version ", kVersion));
  }
  Frame frame;
  frame.from = Rank(ReadFixed<int32_t>(bytes, &pos));
  frame.to = Rank(ReadFixed<int32_t>(bytes, &pos));
  frame.sequence = ReadFixed<uint64_t>(bytes, &pos);
  const uint64_t length = ReadFixed<uint64_t>(bytes, &pos);
  if (length != bytes.size() - kHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("transport frame declares ", length, " payload bytes but carries ", bytes.size() - kHeaderBytes));
  }
  frame.payload.assign(bytes.data() + kHeaderBytes, length);
  return frame;
}

}  // namespace comm
}  // namespace oneflow_like
