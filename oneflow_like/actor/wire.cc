#include "oneflow_like/actor/wire.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace oneflow_like {
namespace actor {
namespace {

// kind (1), register id (8), buffer (4), source task (8), destination task (8).
constexpr size_t kHeaderBytes = 1 + 8 + 4 + 8 + 8;

template <typename T>
void Put(std::string* out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
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

std::string EncodeRemoteMessage(const RemoteMessage& message) {
  std::string out;
  out.reserve(kHeaderBytes + message.payload.size());
  Put<uint8_t>(&out, static_cast<uint8_t>(message.kind));
  Put<int64_t>(&out, message.register_id.value());
  Put<int32_t>(&out, message.buffer);
  Put<int64_t>(&out, message.source_task.value());
  Put<int64_t>(&out, message.destination_task.value());
  out.append(message.payload);
  return out;
}

absl::StatusOr<RemoteMessage> DecodeRemoteMessage(absl::string_view bytes) {
  if (bytes.size() < kHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("actor message of ", bytes.size(), " bytes is shorter than its ", kHeaderBytes, "-byte header"));
  }
  size_t pos = 0;
  RemoteMessage message;
  const uint8_t kind = Get<uint8_t>(bytes, &pos);
  if (kind < 1 || kind > 3) return absl::InvalidArgumentError(absl::StrCat("unknown actor message kind ", kind));
  message.kind = static_cast<RemoteKind>(kind);
  message.register_id = RegisterId(Get<int64_t>(bytes, &pos));
  message.buffer = Get<int32_t>(bytes, &pos);
  message.source_task = TaskId(Get<int64_t>(bytes, &pos));
  message.destination_task = TaskId(Get<int64_t>(bytes, &pos));
  if (!message.register_id.valid() || message.buffer < 0 || !message.source_task.valid() ||
      !message.destination_task.valid()) {
    return absl::InvalidArgumentError(
        absl::StrCat("actor message with a negative id: register ", message.register_id.value(), " buffer ",
                     message.buffer, " tasks ", message.source_task.value(), " -> ", message.destination_task.value()));
  }
  if (message.kind != RemoteKind::kReady && bytes.size() != kHeaderBytes) {
    return absl::InvalidArgumentError("actor message: only 'ready' carries a payload");
  }
  message.payload.assign(bytes.data() + pos, bytes.size() - pos);
  return message;
}

}  // namespace actor
}  // namespace oneflow_like
