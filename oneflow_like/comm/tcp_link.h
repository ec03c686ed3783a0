// TcpLink: the link between this rank and one peer rank over one TCP socket, as used by
// TcpTransport (tcp_transport.h). It owns the outgoing frame queue and the incoming frame
// parser; the transport owns the epoll loop and decides what a failure means.
//
//   TcpLink link({/*self=*/Rank(0), /*peer=*/Rank(1), max_frame_bytes, epoll_fd, tag, &sent, &received});
//   link.Send("early");                 // queued: the socket is not attached yet
//   link.Attach(std::move(socket));     // registers with epoll, flushes the queue
//   // I/O thread, on epoll events:
//   RETURN_IF_ERROR(link.OnReadable(staging, [](Rank from, ReceivedPayload* p) {...}));
//   RETURN_IF_ERROR(link.OnWritable());
//
// Sending (SendOwned): the caller's string is queued as is (no copy); if nothing else is queued
// the caller writes what the socket takes at once, the I/O thread the rest.
// Sending (Send): a large payload (>= kDirectSendBytes) sent from a thread other than the I/O thread
// while nothing is queued is written from the caller's bytes, the caller waiting for the socket
// (no copy; meanwhile other sends on the link queue behind it). Otherwise, when nothing is
// queued, Send writes at once from the caller's bytes and copies only what the socket does not
// take; otherwise it copies the payload once (computing its CRC-32C
// in the same pass) into the queue, using a recycled buffer for large payloads (at most
// kMaxSpareBuffers written buffers, kMaxSpareBytes in all, are kept per link). Queued frames
// are written by the I/O thread on EPOLLOUT, many per sendmsg. Writes never block, so two ranks
// sending large messages to each other cannot deadlock as long as both I/O threads read.
// Receiving: frames are parsed from a staging buffer; large payloads are read straight into
// their own buffer, checksummed chunk by chunk while still in cache. Every header field is
// checked (magic, header checksum, addressing, sequence, length <= max_frame_bytes) before
// anything is allocated; any violation is DataLoss naming the peer. EOF or a socket error is
// Unavailable naming the peer.
// Thread-safety: Send, Attach and Close are thread-safe; OnReadable and OnWritable must be
// called from the one I/O thread.
#ifndef ONEFLOW_LIKE_COMM_TCP_LINK_H_
#define ONEFLOW_LIKE_COMM_TCP_LINK_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "oneflow_like/comm/socket_util.h"
#include "oneflow_like/comm/transport.h"

namespace oneflow_like {
namespace comm {

// A received payload; the receive path reuses its buffer for the next frame unless the
// delivery callback moves `data` out.
struct ReceivedPayload {
  std::unique_ptr<char[]> data;
  size_t size = 0;
  size_t capacity = 0;
  absl::string_view view() const { return absl::string_view(data.get(), size); }
};

// Written SendOwned payloads kept for reuse, shared by one transport's links: a fresh large
// buffer costs a page fault per 4 KiB when first written, a recycled one none. Keeps at most
// kMaxBuffers strings of at least kMinBytes capacity, kMaxBytes in all. Thread-safe.
class SparePayloads {
 public:
  static constexpr size_t kMinBytes = size_t{1} << 20;
  static constexpr size_t kMaxBuffers = 4;
  static constexpr size_t kMaxBytes = size_t{256} << 20;
  // An empty string with capacity >= `bytes`: a kept one of capacity <= 2 x bytes, else new.
  std::string Take(size_t bytes);
  // Keeps `written` (its contents are dropped) if it is large enough and there is room.
  void Put(std::string written);
  size_t bytes();  // kept now

 private:
  std::mutex mu_;
  std::vector<std::string> spares_;  // guarded by mu_
  size_t bytes_ = 0;                 // guarded by mu_
};

struct TcpLinkOptions {
  Rank self;
  Rank peer;
  int64_t max_frame_bytes = int64_t{1} << 31;  // larger frames are refused both ways
  int epoll_fd = -1;                          // the transport's epoll instance
  uint64_t epoll_tag = 0;                     // epoll_event.data.u64 of this link's socket
  std::atomic<int64_t>* bytes_sent = nullptr;      // wire bytes, incremented by the link
  std::atomic<int64_t>* bytes_received = nullptr;
  SparePayloads* spares = nullptr;  // where written SendOwned payloads go (null: freed)
};

class TcpLink {
 public:
  static constexpr size_t kMinSpareBytes = 64 * 1024;     // smaller buffers are not recycled
  static constexpr size_t kMaxSpareBuffers = 2;
  static constexpr size_t kMaxSpareBytes = size_t{160} << 20;
  static constexpr size_t kDirectSendBytes = size_t{1} << 20;
  using DeliverFunction = absl::FunctionRef<void(Rank from, ReceivedPayload* payload)>;

  explicit TcpLink(TcpLinkOptions options);
  ~TcpLink();  // closes the socket
  TcpLink(const TcpLink&) = delete;
  TcpLink& operator=(const TcpLink&) = delete;

  // Sends one frame carrying `payload`. With `may_block` (the caller is not the I/O thread), a
  // payload of at least kDirectSendBytes on an attached link with nothing queued is written
  // straight from the caller's bytes, waiting for the socket (no copy); everything else is
  // copied into the queue at most once. InvalidArgument over max_frame_bytes; Unavailable once
  // the link failed.
  absl::Status Send(absl::string_view payload, bool may_block);
  // Sends one frame carrying `payload`, taking the string: never waits, never copies. On an
  // attached link with nothing queued it writes what the socket takes at once (from the
  // caller's thread) and queues the rest; the I/O thread writes it on EPOLLOUT. Errors as Send.
  absl::Status SendOwned(std::string payload);
  // Sends one frame carrying `head` + `tail` without copying `tail`: it is written from where it
  // is, so it must stay unchanged until the peer received the frame. Never waits. Errors as Send.
  absl::Status SendWithTail(std::string head, absl::string_view tail);
  // Queued frames whose tail starts in [begin, end) get a copy of it, so that memory may go
  // (into a spare string of TcpLinkOptions::spares when one fits: written, it goes back there).
  void DetachTails(const char* begin, const char* end);
  // The link is up: takes the (non-blocking) socket, registers it with epoll and starts writing.
  absl::Status Attach(ScopedFd socket);
  bool attached() const { return fd_.load() >= 0; }

  // I/O thread. Reads what is available (up to a budget) and delivers every complete frame.
  // An error means the link is unusable; the caller then calls Close.
  absl::Status OnReadable(char* staging, size_t staging_size, DeliverFunction deliver);
  // I/O thread. Writes queued frames until the socket is full or the queue empty.
  absl::Status OnWritable();
  // Fails the link with `status` (unless it failed already), closes the socket and drops the
  // queue. Returns the link's first failure. Must be called from the I/O thread once attached.
  absl::Status Close(const absl::Status& status);

 private:
  struct Outgoing {
    char header[kFrameHeaderBytes];
    std::unique_ptr<char[]> payload;
    std::string owned;  // SendOwned's payload (then `payload` is null)
    size_t payload_size = 0;  // of bytes(); the frame's payload is those then `tail`
    absl::string_view tail;   // SendWithTail: not owned
    size_t payload_capacity = 0;
    size_t written = 0;  // of header + payload
    const char* bytes() const { return payload != nullptr ? payload.get() : owned.data(); }
  };
  struct SpareBuffer {
    std::unique_ptr<char[]> data;
    size_t capacity = 0;
  };
  // A buffer of at least `size` bytes for an outgoing payload: a recycled one if it fits
  // (large buffers are recycled because fresh ones cost a page fault per 4 KiB), else new.
  SpareBuffer TakeBuffer(size_t size);
  void RecycleLocked(Outgoing& written);
  absl::Status FlushLocked();        // REQUIRES: mu_ held, fd_ >= 0
  // Send on an attached link with an empty queue. REQUIRES: mu_ held.
  absl::Status SendIdleLocked(FrameHeader header, absl::string_view payload);
  // Writes the whole frame from the caller's thread, waiting with poll(); mu_ is NOT held, the
  // link is marked writer_busy_ meanwhile (others queue behind it).
  absl::Status WriteBlocking(int fd, const char* header, absl::string_view payload);
  void SetWritableInterestLocked(bool want);
  // Parses `bytes` (from the staging buffer) into the current frame(s).
  absl::Status Consume(const char* bytes, size_t size, DeliverFunction deliver);
  absl::Status StartPayload();       // header_bytes_ is complete
  absl::Status FinishFrame(DeliverFunction deliver);
  absl::Status LinkError(absl::string_view what) const;  // DataLoss naming the peer

  const TcpLinkOptions options_;
  std::atomic<int> fd_{-1};

  // Sending side.
  std::mutex mu_;
  std::deque<Outgoing> queue_;  // guarded by mu_
  uint64_t next_send_sequence_ = 0;  // guarded by mu_
  bool want_writable_ = false;  // EPOLLOUT requested; guarded by mu_
  bool writer_busy_ = false;    // a caller writes a frame without mu_; guarded by mu_
  int close_after_writer_ = -1;  // socket Close left for the busy writer to close; guarded by mu_
  absl::Status failure_;        // first failure; guarded by mu_
  std::vector<SpareBuffer> spares_;  // written payload buffers for reuse; guarded by mu_
  size_t spare_bytes_ = 0;           // guarded by mu_

  // Receiving side (I/O thread only).
  char header_bytes_[kFrameHeaderBytes];
  size_t header_filled_ = 0;
  bool in_payload_ = false;
  FrameHeader header_;
  ReceivedPayload payload_;
  size_t payload_filled_ = 0;
  uint32_t payload_checksum_ = 0;  // of payload_[0, payload_filled_)
  uint64_t next_receive_sequence_ = 0;
};

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_TCP_LINK_H_
