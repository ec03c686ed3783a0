#include "oneflow_like/comm/control_wire.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "oneflow_like/core/fixed_codec.h"

namespace oneflow_like {
namespace comm {
namespace {

constexpr uint32_t kMagic = 0x50434c4f;  // "OLCP" read as little-endian bytes
constexpr uint32_t kVersion = 1;
// type, request id, code, a, b, two string lengths.
constexpr size_t kFixedBodyBytes = 1 + 8 + 4 + 8 + 8 + 4 + 4;

// Reads a u32-length-prefixed string at *pos; false when it does not fit in `body`.
bool ReadString(absl::string_view body, size_t* pos, std::string* out) {
  if (body.size() - *pos < 4) return false;
  const uint32_t length = ReadFixed<uint32_t>(body, pos);
  if (body.size() - *pos < length) return false;
  out->assign(body.data() + *pos, length);
  *pos += length;
  return true;
}

}  // namespace

absl::Status ValidateControlOptions(const ControlOptions& options) {
  auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("ControlOptions: ", what));
  };
  if (options.world_size < 1) return bad(absl::StrCat("world_size is ", options.world_size, "; it must be >= 1"));
  if (options.master_port < 0 || options.master_port > 65535) {
    return bad(absl::StrCat("master_port ", options.master_port, " is not a TCP port (0..65535)"));
  }
  if (options.connect_timeout_ms <= 0 || options.heartbeat_interval_ms <= 0 || options.heartbeat_timeout_ms <= 0) {
    return bad("connect_timeout_ms, heartbeat_interval_ms and heartbeat_timeout_ms must be > 0");
  }
  if (options.heartbeat_timeout_ms <= options.heartbeat_interval_ms) {
    return bad(absl::StrCat("heartbeat_timeout_ms (", options.heartbeat_timeout_ms,
                            ") must exceed heartbeat_interval_ms (", options.heartbeat_interval_ms,
                            "); hint: use a timeout of several intervals"));
  }
  if (options.restart_round < 0) return bad(absl::StrCat("restart_round is ", options.restart_round, "; it must be >= 0"));
  if (options.max_message_bytes < 1024) {
    return bad(absl::StrCat("max_message_bytes is ", options.max_message_bytes, "; it must be >= 1024"));
  }
  return absl::OkStatus();
}

int64_t MonotonicMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string LocalHostName() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "unknown-host";
  return name;
}

std::string DescribeStep(int64_t step) {
  return step < 0 ? "before reporting any step" : absl::StrCat("after step ", step);
}

const char* MessageTypeName(MessageType type) {
  switch (type) {
    case MessageType::kHello: return "Hello";
    case MessageType::kWelcome: return "Welcome";
    case MessageType::kHeartbeat: return "Heartbeat";
    case MessageType::kSet: return "Set";
    case MessageType::kGet: return "Get";
    case MessageType::kAdd: return "Add";
    case MessageType::kBarrier: return "Barrier";
    case MessageType::kReply: return "Reply";
    case MessageType::kAbort: return "Abort";
    case MessageType::kFailure: return "Failure";
    case MessageType::kDeregister: return "Deregister";
  }
  return "Unknown";
}

std::string EncodeControlMessage(const ControlMessage& message) {
  std::string out;
  const uint64_t body_bytes = kFixedBodyBytes + message.key.size() + message.value.size();
  out.reserve(kControlFrameHeaderBytes + body_bytes);
  AppendFixed<uint32_t>(&out, kMagic);
  AppendFixed<uint32_t>(&out, kVersion);
  AppendFixed<uint64_t>(&out, body_bytes);
  AppendFixed<uint8_t>(&out, static_cast<uint8_t>(message.type));
  AppendFixed<uint64_t>(&out, message.request_id);
  AppendFixed<int32_t>(&out, message.code);
  AppendFixed<int64_t>(&out, message.a);
  AppendFixed<int64_t>(&out, message.b);
  AppendFixed<uint32_t>(&out, static_cast<uint32_t>(message.key.size()));
  out.append(message.key);
  AppendFixed<uint32_t>(&out, static_cast<uint32_t>(message.value.size()));
  out.append(message.value);
  return out;
}

absl::StatusOr<size_t> PeekControlFrame(absl::string_view buffer, int64_t max_message_bytes) {
  size_t pos = 0;
  if (buffer.size() >= 8) {
    const uint32_t magic = ReadFixed<uint32_t>(buffer, &pos);
    const uint32_t version = ReadFixed<uint32_t>(buffer, &pos);
    if (magic != kMagic || version != kVersion) {
      return absl::InvalidArgumentError(absl::StrCat("not a control-plane frame (magic 0x", absl::Hex(magic),
                                                     ", version ", version, "); expected magic 0x",
                                                     absl::Hex(kMagic), " version ", kVersion));
    }
  } else {
    // Reject garbage as early as possible: the bytes we have must be a prefix of the magic.
    std::string magic;
    AppendFixed<uint32_t>(&magic, kMagic);
    const size_t have = std::min<size_t>(buffer.size(), 4);
    if (absl::string_view(magic).substr(0, have) != buffer.substr(0, have)) {
      return absl::InvalidArgumentError("not a control-plane frame (wrong magic)");
    }
  }
  if (buffer.size() < kControlFrameHeaderBytes) return size_t{0};
  const uint64_t body_bytes = ReadFixed<uint64_t>(buffer, &pos);
  if (body_bytes > static_cast<uint64_t>(max_message_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("control message of ", body_bytes,
                                                   " bytes exceeds max_message_bytes (", max_message_bytes, ")"));
  }
  if (body_bytes < kFixedBodyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("control message body of ", body_bytes, " bytes is shorter than ", kFixedBodyBytes));
  }
  return static_cast<size_t>(kControlFrameHeaderBytes + body_bytes);
}

absl::StatusOr<ControlMessage> DecodeControlFrame(absl::string_view frame) {
  ASSIGN_OR_RETURN(size_t size, PeekControlFrame(frame, static_cast<int64_t>(frame.size())));
  if (size == 0 || size != frame.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("control frame of ", frame.size(), " bytes does not match its declared size ", size));
  }
  absl::string_view body = frame.substr(kControlFrameHeaderBytes);
  size_t pos = 0;
  ControlMessage message;
  const uint8_t type = ReadFixed<uint8_t>(body, &pos);
  if (type < 1 || type > kLastMessageType) {
    return absl::InvalidArgumentError(absl::StrCat("unknown control message type ", static_cast<int>(type)));
  }
  message.type = static_cast<MessageType>(type);
  message.request_id = ReadFixed<uint64_t>(body, &pos);
  message.code = ReadFixed<int32_t>(body, &pos);
  message.a = ReadFixed<int64_t>(body, &pos);
  message.b = ReadFixed<int64_t>(body, &pos);
  if (!ReadString(body, &pos, &message.key) || !ReadString(body, &pos, &message.value) || pos != body.size()) {
    return absl::InvalidArgumentError(absl::StrCat("control message ", MessageTypeName(message.type),
                                                   " has string lengths that do not match its ",
                                                   body.size(), "-byte body"));
  }
  return message;
}

absl::Status StatusFromWire(int32_t code, const std::string& message) {
  if (code < 0 || code > static_cast<int32_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::InternalError(absl::StrCat("control reply with unknown status code ", code, ": ", message));
  }
  return absl::Status(static_cast<absl::StatusCode>(code), message);
}

}  // namespace comm
}  // namespace oneflow_like
