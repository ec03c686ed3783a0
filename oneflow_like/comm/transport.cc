#include "oneflow_like/comm/transport.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace oneflow_like {
namespace comm {
namespace {

constexpr uint32_t kMagic = 0x4f4c4652;  // "OLFR"
constexpr uint32_t kVersion = 1;
// magic, version, from, to (4 bytes each), sequence, payload length (8 bytes each).
constexpr size_t kHeaderBytes = 4 * 4 + 8 * 2;

template <typename T>
void Put(std::string* out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // host order: all ranks of a job share an architecture
  out->append(bytes, sizeof(T));
}

template <typename T>
T Get(absl::string_view bytes, size_t* pos) {
  T value;
  std::memcpy(&value, bytes.data() + *pos, sizeof(T));
  *pos += sizeof(T);
  return value;
}

}  // namespace

std::string EncodeFrame(const Frame& frame) {
  std::string out;
  out.reserve(kHeaderBytes + frame.payload.size());
  Put<uint32_t>(&out, kMagic);
  Put<uint32_t>(&out, kVersion);
  Put<int32_t>(&out, frame.from.value());
  Put<int32_t>(&out, frame.to.value());
  Put<uint64_t>(&out, frame.sequence);
  Put<uint64_t>(&out, frame.payload.size());
  out.append(frame.payload);
  return out;
}

absl::StatusOr<Frame> DecodeFrame(absl::string_view bytes) {
  if (bytes.size() < kHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("transport frame of ", bytes.size(), " bytes is shorter than its ", kHeaderBytes, "-byte header"));
  }
  size_t pos = 0;
  const uint32_t magic = Get<uint32_t>(bytes, &pos);
  const uint32_t version = Get<uint32_t>(bytes, &pos);
  if (magic != kMagic || version != kVersion) {
    return absl::InvalidArgumentError(absl::StrCat("not a transport frame (magic ", magic, ", version ", version,
                                                   "); expected magic ", kMagic, " version ", kVersion));
  }
  Frame frame;
  frame.from = Rank(Get<int32_t>(bytes, &pos));
  frame.to = Rank(Get<int32_t>(bytes, &pos));
  frame.sequence = Get<uint64_t>(bytes, &pos);
  const uint64_t length = Get<uint64_t>(bytes, &pos);
  if (length != bytes.size() - kHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("transport frame declares ", length, " payload bytes but carries ", bytes.size() - kHeaderBytes));
  }
  frame.payload.assign(bytes.data() + kHeaderBytes, length);
  return frame;
}

}  // namespace comm
}  // namespace oneflow_like
