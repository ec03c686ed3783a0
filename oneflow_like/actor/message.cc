#include "oneflow_like/actor/message.h"

#include "absl/strings/str_cat.h"

namespace oneflow_like {
namespace actor {

std::string MessageKindName(MessageKind kind) {
  switch (kind) {
    case MessageKind::kRegisterReady:
      return "ready";
    case MessageKind::kRegisterReturned:
      return "returned";
    case MessageKind::kEndOfData:
      return "end_of_data";
    case MessageKind::kStartStep:
      return "start_step";
    case MessageKind::kEndOfStream:
      return "end_of_stream";
    case MessageKind::kReport:
      return "report";
    case MessageKind::kStop:
      return "stop";
    case MessageKind::kWake:
      return "wake";
    case MessageKind::kActFinished:
      return "act_finished";
  }
  return "unknown";
}

std::string MessageToString(const ActorMessage& message) {
  return absl::StrCat(MessageKindName(message.kind), "(actor=", message.actor.value(), ", port=", message.port,
                      ", buffer=", message.buffer, ")");
}

}  // namespace actor
}  // namespace oneflow_like
