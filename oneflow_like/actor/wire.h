// Actor messages that cross ranks, as bytes for the transport (comm/transport.h). Local
// messages use dense ActorIds; a remote one names plan-wide ids instead (task ids and register
// ids are unique across the whole Plan), and a "ready" carries the buffer's payload: the
// slots of that buffer packed one after another.
//
//   RemoteMessage m{RemoteKind::kReady, RegisterId(7), /*buffer=*/1, TaskId(3), TaskId(12), bytes};
//   std::string wire = EncodeRemoteMessage(m);
//   ASSIGN_OR_RETURN(RemoteMessage back, DecodeRemoteMessage(wire));
//
// Pure functions; thread-safe.
#ifndef ONEFLOW_LIKE_ACTOR_WIRE_H_
#define ONEFLOW_LIKE_ACTOR_WIRE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "oneflow_like/core/ids.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace actor {

enum class RemoteKind : uint8_t {
  kReady = 1,      // producer rank -> consumer rank: register buffer filled; payload attached
  kReturned = 2,   // consumer rank -> producer rank: the mirror's consumers are done with it
  kEndOfData = 3,  // producer rank -> consumer rank: the register will not be produced again
};

struct RemoteMessage {
  RemoteKind kind = RemoteKind::kReady;
  RegisterId register_id;
  int32_t buffer = 0;
  TaskId source_task;       // the sending task
  TaskId destination_task;  // the receiving task (for kReady/kEndOfData: a consumer of the mirror)
  std::string payload;      // kReady only
  // kReady: more payload bytes, appended after `payload` in order by EncodeRemoteMessage (not
  // owned: e.g. the slots of a register buffer, packed straight into the wire bytes).
  std::vector<absl::string_view> payload_parts;
  int64_t payload_size() const {
    int64_t n = static_cast<int64_t>(payload.size());
    for (absl::string_view part : payload_parts) n += static_cast<int64_t>(part.size());
    return n;
  }
};

std::string EncodeRemoteMessage(const RemoteMessage& message);
// The same bytes, written into `*out` (cleared first; its capacity is reused).
void EncodeRemoteMessageInto(const RemoteMessage& message, std::string* out);
// InvalidArgument for truncated bytes, an unknown kind or a negative buffer/id.
absl::StatusOr<RemoteMessage> DecodeRemoteMessage(absl::string_view bytes);
// As DecodeRemoteMessage, but the payload is not copied: the result's `payload` stays empty and
// `*payload` views the payload inside `bytes`.
absl::StatusOr<RemoteMessage> DecodeRemoteMessageView(absl::string_view bytes, absl::string_view* payload);

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_WIRE_H_
