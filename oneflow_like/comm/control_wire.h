// The control plane's options and wire format, shared by ControlServer (control_server.h) and
// ControlClient (control_client.h). Users normally include control_plane.h instead.
//
// Every control message travels as one frame over a TCP connection:
//   u32 magic "OLCP" | u32 version | u64 body length | body
//   body = u8 type | u64 request id | i32 status code | i64 a | i64 b | u32 n | key[n] | u32 m | value[m]
// All integers little-endian (core/fixed_codec.h). The meaning of a, b, key and value depends on
// the type (see MessageType). A reader bounds the body length by max_message_bytes BEFORE it
// allocates anything, so a hostile peer cannot make us allocate gigabytes.
//
//   ControlMessage hello{MessageType::kHello};
//   hello.key = "token"; hello.value = "node-a"; hello.a = /*rank=*/1; hello.b = getpid();
//   std::string bytes = EncodeControlMessage(hello);
//   absl::StatusOr<size_t> size = PeekControlFrame(bytes, /*max_message_bytes=*/1 << 20);
//   // *size == bytes.size(); DecodeControlFrame(bytes) gives `hello` back.
//
// Errors: a wrong magic/version, an unknown type, a body over the limit or a body whose
// declared string lengths do not fit are InvalidArgument. Pure functions; thread-safe.
#ifndef ONEFLOW_LIKE_COMM_CONTROL_WIRE_H_
#define ONEFLOW_LIKE_COMM_CONTROL_WIRE_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace comm {

struct ControlOptions {
  std::string master_address = "127.0.0.1";  // server: numeric IPv4 to bind; clients may use a host name
  int32_t master_port = 0;      // server: 0 = ephemeral (read back with port()); client: required
  std::string job_token;        // every connection must present it
  int32_t world_size = 1;
  int64_t connect_timeout_ms = 30000;   // client: keep retrying until the server is up
  int64_t heartbeat_interval_ms = 500;
  int64_t heartbeat_timeout_ms = 5000;  // silence longer than this = the peer is dead
  int64_t max_message_bytes = 16 << 20;
  // The launcher's restart round (olrun --max-restarts; OL_RESTART_ROUND): the server refuses a
  // client of another round, so a stale rank of an earlier round cannot join a restarted job.
  int32_t restart_round = 0;
};

// InvalidArgument naming the bad field (e.g. a non-positive world size or timeout).
absl::Status ValidateControlOptions(const ControlOptions& options);

enum class MessageType : uint8_t {
  kHello = 1,     // client -> server, first message: key = job token, value = host, a = rank, b = pid,
                  // code = the client's restart round
  kWelcome,       // server -> client: code = status of the Hello, value = error or master host, b = pid,
                  // a = the server's restart round
  kHeartbeat,     // both ways: a = last step (client -> server)
  kSet,           // key, value
  kGet,           // key, a = timeout ms
  kAdd,           // key, a = delta
  kBarrier,       // key = barrier name, a = timeout ms
  kReply,         // server -> client: code, value = error message or Get's value, a = Add's result
  kAbort,         // client -> server: value = reason, a = last step
  kFailure,       // server -> client: code, value = the failure message
  kDeregister,    // client -> server: clean exit (answered with kReply)
};
constexpr uint8_t kLastMessageType = static_cast<uint8_t>(MessageType::kDeregister);

const char* MessageTypeName(MessageType type);

struct ControlMessage {
  MessageType type = MessageType::kHeartbeat;
  uint64_t request_id = 0;  // matches a kReply to its request; 0 for one-way messages
  int32_t code = 0;         // an absl::StatusCode (replies)
  int64_t a = 0;
  int64_t b = 0;
  std::string key;
  std::string value;
};

// Longest wait a Get or Barrier may ask for (longer requests are clamped): one week.
constexpr int64_t kMaxWaitMs = int64_t{7} * 24 * 3600 * 1000;

// Monotonic milliseconds (steady clock), for deadlines and heartbeat ages.
int64_t MonotonicMs();

// This machine's host name ("unknown-host" if it cannot be read): a good `host` for Connect.
std::string LocalHostName();

// "after step 12", or "before reporting any step" for a negative step.
std::string DescribeStep(int64_t step);

// magic + version + body length.
constexpr size_t kControlFrameHeaderBytes = 4 + 4 + 8;

std::string EncodeControlMessage(const ControlMessage& message);

// Looks at the start of `buffer`: 0 if more bytes are needed to know the frame size, otherwise
// the size of the whole first frame (header + body; it may not all be in `buffer` yet).
// InvalidArgument for a wrong magic/version or a body larger than `max_message_bytes`.
absl::StatusOr<size_t> PeekControlFrame(absl::string_view buffer, int64_t max_message_bytes);

// Decodes exactly one whole frame (as sized by PeekControlFrame).
absl::StatusOr<ControlMessage> DecodeControlFrame(absl::string_view frame);

// Status <-> (code, message) for replies.
absl::Status StatusFromWire(int32_t code, const std::string& message);

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_CONTROL_WIRE_H_
