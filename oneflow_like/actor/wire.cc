#include "oneflow_like/actor/wire.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "oneflow_like/core/fixed_codec.h"

namespace oneflow_like {
namespace actor {
namespace {

// kind (1), register id (8), buffer (4), source task (8), destination task (8).
constexpr size_t kHeaderBytes = 1 + 8 + 4 + 8 + 8;

}  // namespace

std::string EncodeRemoteMessage(const RemoteMessage& message) {
  std::string out;
  EncodeRemoteMessageInto(message, &out);
  return out;
}

void EncodeRemoteMessageInto(const RemoteMessage& message, std::string* out) {
  out->clear();
  out->reserve(kHeaderBytes + static_cast<size_t>(message.payload_size()));
  AppendFixed<uint8_t>(out, static_cast<uint8_t>(message.kind));
  AppendFixed<int64_t>(out, message.register_id.value());
  AppendFixed<int32_t>(out, message.buffer);
  AppendFixed<int64_t>(out, message.source_task.value());
  AppendFixed<int64_t>(out, message.destination_task.value());
  out->append(message.payload);
  for (absl::string_view part : message.payload_parts) out->append(part.data(), part.size());
}

absl::StatusOr<RemoteMessage> DecodeRemoteMessage(absl::string_view bytes) {
  absl::string_view payload;
  ASSIGN_OR_RETURN(RemoteMessage message, DecodeRemoteMessageView(bytes, &payload));
  message.payload.assign(payload.data(), payload.size());
  return message;
}

absl::StatusOr<RemoteMessage> DecodeRemoteMessageView(absl::string_view bytes, absl::string_view* payload) {
  if (bytes.size() < kHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("actor message of ", bytes.size(), " bytes is shorter than its ", kHeaderBytes, "-byte header"));
  }
  size_t pos = 0;
  RemoteMessage message;
  const uint8_t kind = ReadFixed<uint8_t>(bytes, &pos);
  if (kind < 1 || kind > 3) return absl::InvalidArgumentError(absl::StrCat("unknown actor message kind ", kind));
  message.kind = static_cast<RemoteKind>(kind);
  message.register_id = RegisterId(ReadFixed<int64_t>(bytes, &pos));
  message.buffer = ReadFixed<int32_t>(bytes, &pos);
  message.source_task = TaskId(ReadFixed<int64_t>(bytes, &pos));
  message.destination_task = TaskId(ReadFixed<int64_t>(bytes, &pos));
  if (!message.register_id.valid() || message.buffer < 0 || !message.source_task.valid() ||
      !message.destination_task.valid()) {
    return absl::InvalidArgumentError(
        absl::StrCat("actor message with a negative id: register ", message.register_id.value(), " buffer ",
                     message.buffer, " tasks ", message.source_task.value(), " -> ", message.destination_task.value()));
  }
  if (message.kind != RemoteKind::kReady && bytes.size() != kHeaderBytes) {
    return absl::InvalidArgumentError("actor message: only 'ready' carries a payload");
  }
  *payload = bytes.substr(pos);
  return message;
}

}  // namespace actor
}  // namespace oneflow_like
