// Transport: moves opaque byte messages (small control messages and register payloads) from
// one rank to another. It knows nothing of actors: the runtime encodes its messages to bytes
// (actor/wire.h) and decodes them on arrival.
//
// One Transport object is the endpoint of ONE rank: Send(to, bytes) and a receiver callback.
// Every message crosses the wire as a Frame: a fixed 40-byte header plus the payload bytes
// (EncodeFrame / DecodeFrame; streaming transports use EncodeFrameHeader / DecodeFrameHeader):
//   u32 magic "OLFR" | u32 version | i32 from | i32 to | u64 sequence | u64 payload length |
//   u32 payload CRC-32C | u32 header CRC-32C (of the 36 bytes before it) | payload
// all little-endian. The receiving side checks that the sequence numbers of each edge arrive as
// 0, 1, 2, ... so reordering or loss is detected instead of silently corrupting the actor
// protocol, and the checksums catch corrupt or desynchronized bytes (the header's before its
// length is trusted).
//
//   std::unique_ptr<LoopbackHub> hub = LoopbackHub::Create(2);   // loopback_transport.h
//   Transport* t0 = hub->endpoint(Rank(0));
//   hub->endpoint(Rank(1))->SetReceiver([](Rank from, absl::string_view payload) {...});
//   RETURN_IF_ERROR(t0->Send(Rank(1), "hello"));   // rank 1's receiver sees (Rank(0), "hello")
//
// Errors: unknown ranks and sends to a rank without a receiver are InvalidArgument /
// FailedPrecondition; undecodable bytes are InvalidArgument; a checksum mismatch or a
// sequence gap is DataLoss;
// a broken link is Unavailable. Never a crash.
// Thread-safety: Send and SetReceiver are thread-safe. The receiver may run on any thread
// (for the loopback: the sender's thread) and must not block or call Send on the same edge.
#ifndef ONEFLOW_LIKE_COMM_TRANSPORT_H_
#define ONEFLOW_LIKE_COMM_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/strings/string_view.h"
#include "oneflow_like/core/ids.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace comm {

class Transport {
 public:
  // Called once per delivered message, in per-edge send order.
  using Receiver = std::function<void(Rank from, absl::string_view payload)>;

  virtual ~Transport() = default;
  virtual Rank rank() const = 0;
  virtual int32_t world_size() const = 0;
  // Installs (or replaces) this rank's receiver.
  virtual void SetReceiver(Receiver receiver) = 0;
  // Sends `payload` to rank `to` (which may be this rank). Returns once the message is handed
  // to the link (for the loopback: delivered).
  virtual absl::Status Send(Rank to, absl::string_view payload) = 0;
  // As Send, but the transport takes the bytes: it may keep them queued and return before
  // they are written, so the caller never waits for the peer to read (TcpTransport does).
  // Errors found after returning surface like a broken link. Default: Send.
  virtual absl::Status SendOwned(Rank to, std::string payload) { return Send(to, payload); }
  // Memory the caller will send from with SendRegistered (e.g. the runtime's register blocks).
  // A transport with remote memory access registers it (RDMA: ibv_reg_mr, readable by peers);
  // default: nothing to do. `base` must stay allocated while the transport lives.
  virtual absl::Status RegisterMemory(const char* base, size_t bytes) {
    (void)base, (void)bytes;
    return absl::OkStatus();
  }
  // The end of such memory: once this returns, the transport no longer reads it (a TCP transport
  // copies what it still had to write from there; an RDMA transport deregisters it, so a peer
  // still reading fails). Call before freeing it. Default: nothing to do.
  virtual void UnregisterMemory(const char* base, size_t bytes) { (void)base, (void)bytes; }
  // Sends the message `prefix` + `payload`, where `payload` lies in memory given to
  // RegisterMemory and stays unchanged until the receiver at `to` has been called with this
  // message (the caller learns that from the peer's reply, e.g. the actor protocol's "returned").
  // An RDMA transport lets the receiver RDMA-READ the payload straight from there (the pull
  // model); the default copies both into one buffer and calls SendOwned.
  virtual absl::Status SendRegistered(Rank to, absl::string_view prefix, absl::string_view payload) {
    std::string message = TakeBuffer(prefix.size() + payload.size());
    message.append(prefix.data(), prefix.size());
    message.append(payload.data(), payload.size());
    return SendOwned(to, std::move(message));
  }
  // An empty string with capacity >= `bytes` to build a SendOwned payload in; a transport may
  // hand out the buffers of payloads it finished writing (no page faults on large ones).
  virtual std::string TakeBuffer(size_t bytes) {
    std::string buffer;
    buffer.reserve(bytes);
    return buffer;
  }
};

// The wire unit of every transport.
struct Frame {
  Rank from;
  Rank to;
  uint64_t sequence = 0;  // per directed edge (from, to), from 0
  std::string payload;
};

std::string EncodeFrame(const Frame& frame);
// InvalidArgument for truncated bytes, a wrong magic/version or a length mismatch; DataLoss
// for a checksum mismatch.
absl::StatusOr<Frame> DecodeFrame(absl::string_view bytes);

// The header alone, for transports that stream payloads without building a Frame.
constexpr size_t kFrameHeaderBytes = 40;
struct FrameHeader {
  Rank from;
  Rank to;
  uint64_t sequence = 0;
  uint64_t payload_bytes = 0;
  uint32_t payload_checksum = 0;  // Crc32c (crc32c.h) of the payload
};
// Writes the kFrameHeaderBytes bytes of `header` (with its header checksum) to `out`.
void EncodeFrameHeader(const FrameHeader& header, char* out);
// Decodes the first kFrameHeaderBytes of `bytes`. InvalidArgument if there are fewer or the
// magic/version is wrong (not a frame at all); DataLoss if the header checksum does not match.
// The payload checksum is the caller's to verify once the payload is in.
absl::StatusOr<FrameHeader> DecodeFrameHeader(absl::string_view bytes);

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_TRANSPORT_H_
