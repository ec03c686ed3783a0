#include "oneflow_like/comm/ibverbs_wire.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "oneflow_like/core/fixed_codec.h"

namespace oneflow_like {
namespace comm {
namespace {

constexpr const char* kEndpointMagic = "ibverbs-endpoint-v1";
constexpr uint32_t kCreditFlag = 1u << 31;
constexpr uint32_t kLastFragmentFlag = 1u << 30;

template <typename T>
absl::Status ParseField(absl::string_view token, absl::string_view key, int index, uint64_t min, uint64_t max, T* out) {
  absl::string_view value = token;
  uint64_t number = 0;
  if (!absl::ConsumePrefix(&value, key) || !absl::ConsumePrefix(&value, "=") || !absl::SimpleAtoi(value, &number) ||
      number < min || number > max) {
    return absl::InvalidArgumentError(absl::StrCat("ibverbs endpoint info: field ", index, " should be \"", key,
                                                   "=<integer in [", min, ", ", max, "]>\" but is \"", token, "\""));
  }
  *out = static_cast<T>(number);
  return absl::OkStatus();
}

}  // namespace

std::string IbverbsEndpointInfo::Encode() const {
  return absl::StrCat(kEndpointMagic, " from=", from_rank, " to=", to_rank, " lid=", lid, " gid=",
                      absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(gid.data()), gid.size())),
                      " mtu=", mtu, " qpn=", qp_number, " psn=", packet_sequence_number, " ring=", ring_address,
                      " rkey=", ring_rkey, " slot_bytes=", slot_bytes, " slots=", slots);
}

absl::StatusOr<IbverbsEndpointInfo> IbverbsEndpointInfo::Decode(absl::string_view text) {
  std::vector<absl::string_view> tokens = absl::StrSplit(text, ' ');
  if (tokens.size() != 12 || tokens[0] != kEndpointMagic) {
    return absl::InvalidArgumentError(absl::StrCat("ibverbs endpoint info: expected \"", kEndpointMagic,
                                                   "\" and 11 key=value fields, got \"", text.substr(0, 200), "\""));
  }
  IbverbsEndpointInfo info;
  RETURN_IF_ERROR(ParseField(tokens[1], "from", 1, 0, 1 << 20, &info.from_rank));
  RETURN_IF_ERROR(ParseField(tokens[2], "to", 2, 0, 1 << 20, &info.to_rank));
  RETURN_IF_ERROR(ParseField(tokens[3], "lid", 3, 0, 0xffff, &info.lid));
  absl::string_view gid_hex = tokens[4];
  if (!absl::ConsumePrefix(&gid_hex, "gid=") || gid_hex.size() != 32 ||
      !std::all_of(gid_hex.begin(), gid_hex.end(),
                   [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); })) {
    return absl::InvalidArgumentError(
        absl::StrCat("ibverbs endpoint info: field 4 should be \"gid=<32 hex digits>\" but is \"", tokens[4], "\""));
  }
  const std::string gid_bytes = absl::HexStringToBytes(gid_hex);
  std::memcpy(info.gid.data(), gid_bytes.data(), info.gid.size());
  RETURN_IF_ERROR(ParseField(tokens[5], "mtu", 5, 1, 5, &info.mtu));
  RETURN_IF_ERROR(ParseField(tokens[6], "qpn", 6, 0, 0xffffff, &info.qp_number));
  RETURN_IF_ERROR(ParseField(tokens[7], "psn", 7, 0, 0xffffff, &info.packet_sequence_number));
  RETURN_IF_ERROR(ParseField(tokens[8], "ring", 8, 0, UINT64_MAX, &info.ring_address));
  RETURN_IF_ERROR(ParseField(tokens[9], "rkey", 9, 0, UINT32_MAX, &info.ring_rkey));
  RETURN_IF_ERROR(ParseField(tokens[10], "slot_bytes", 10, 64, IbverbsImmediate::kMaxValue, &info.slot_bytes));
  RETURN_IF_ERROR(ParseField(tokens[11], "slots", 11, 1, 1024, &info.slots));
  return info;
}

bool IbverbsEndpointInfo::operator==(const IbverbsEndpointInfo& o) const {
  return from_rank == o.from_rank && to_rank == o.to_rank && lid == o.lid && gid == o.gid && mtu == o.mtu &&
         qp_number == o.qp_number && packet_sequence_number == o.packet_sequence_number &&
         ring_address == o.ring_address && ring_rkey == o.ring_rkey && slot_bytes == o.slot_bytes && slots == o.slots;
}

uint32_t IbverbsImmediate::Data(uint32_t length, bool last) {
  return (length & kMaxValue) | (last ? kLastFragmentFlag : 0);
}

uint32_t IbverbsImmediate::Credit(uint32_t count) { return kCreditFlag | (count & kMaxValue); }

uint32_t IbverbsImmediate::Pull(uint32_t length) { return kCreditFlag | kLastFragmentFlag | (length & kMaxValue); }

IbverbsImmediate IbverbsImmediate::Parse(uint32_t immediate) {
  IbverbsImmediate parsed;
  parsed.credit = (immediate & kCreditFlag) != 0;
  parsed.last = (immediate & kLastFragmentFlag) != 0;
  parsed.value = immediate & kMaxValue;
  if (parsed.credit && parsed.last) {
    parsed.pull = true;
    parsed.credit = parsed.last = false;
  }
  return parsed;
}

namespace {
constexpr char kPullMagic[] = "OLPR";
constexpr size_t kPullFixedBytes = 4 + 8 + 4 + 8 + 4;
}  // namespace

std::string IbverbsPullRequest::Encode() const {
  std::string out(kPullMagic, 4);
  AppendFixed<uint64_t>(&out, address);
  AppendFixed<uint32_t>(&out, rkey);
  AppendFixed<uint64_t>(&out, length);
  AppendFixed<uint32_t>(&out, crc32c);
  out.append(prefix);
  return out;
}

absl::StatusOr<IbverbsPullRequest> IbverbsPullRequest::Decode(absl::string_view bytes) {
  if (bytes.size() < kPullFixedBytes || bytes.substr(0, 4) != absl::string_view(kPullMagic, 4)) {
    return absl::InvalidArgumentError(absl::StrCat("a pull request of ", bytes.size(),
                                                   " bytes without its magic and fixed fields"));
  }
  size_t pos = 4;
  IbverbsPullRequest request;
  request.address = ReadFixed<uint64_t>(bytes, &pos);
  request.rkey = ReadFixed<uint32_t>(bytes, &pos);
  request.length = ReadFixed<uint64_t>(bytes, &pos);
  request.crc32c = ReadFixed<uint32_t>(bytes, &pos);
  request.prefix = std::string(bytes.substr(pos));
  return request;
}

FrameAssembler::FrameAssembler(Rank from, Rank to, int64_t max_payload_bytes)
    : from_(from), to_(to), max_frame_bytes_(static_cast<uint64_t>(max_payload_bytes) + EncodeFrame(Frame{}).size()) {}

absl::StatusOr<std::optional<Frame>> FrameAssembler::Add(absl::string_view fragment, bool last) {
  RETURN_IF_ERROR(error_);
  if (partial_.size() + fragment.size() > max_frame_bytes_) {
    error_ = absl::DataLossError(absl::StrCat("ibverbs transport: frame ", from_.value(), " -> ", to_.value(),
                                              " grows beyond ", max_frame_bytes_, " bytes (max_message_bytes plus the ",
                                              "frame header); do both ranks use the same max_message_bytes?"));
    return error_;
  }
  partial_.append(fragment.data(), fragment.size());
  if (!last) return std::optional<Frame>();
  absl::StatusOr<Frame> frame = DecodeFrame(partial_);
  partial_.clear();
  if (!frame.ok()) {
    error_ = frame.status();
  } else if (frame->from != from_ || frame->to != to_ || frame->sequence != next_sequence_) {
    error_ = absl::DataLossError(absl::StrCat("ibverbs transport: frame ", frame->from.value(), " -> ",
                                              frame->to.value(), " sequence ", frame->sequence, " arrived on edge ",
                                              from_.value(), " -> ", to_.value(), " which expects sequence ",
                                              next_sequence_, " (lost, duplicated or misrouted)"));
  }
  RETURN_IF_ERROR(error_);
  ++next_sequence_;
  return std::optional<Frame>(std::move(*frame));
}

}  // namespace comm
}  // namespace oneflow_like
