// Internal to ShmTransport (shm_transport.h): what it keeps per peer rank -- the set-up
// connection, the two rings (peer -> this rank, created here; this rank -> peer, the peer's),
// their eventfds and the queue of messages waiting for room. Not for other users.
#ifndef ONEFLOW_LIKE_COMM_SHM_PEER_H_
#define ONEFLOW_LIKE_COMM_SHM_PEER_H_

#include <sys/mman.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "oneflow_like/comm/shm_ring.h"
#include "oneflow_like/comm/shm_transport.h"
#include "oneflow_like/comm/socket_util.h"

namespace oneflow_like {
namespace comm {

// The I/O thread's epoll tags: epoll_event.data.u64 = kind << 56 | rank. Each descriptor has
// its own kind, so the thread reads only the one that fired.
constexpr uint64_t kShmWakeTag = uint64_t{0} << 56;
constexpr uint64_t kShmSocketTag = uint64_t{1} << 56;
constexpr uint64_t kShmDataTag = uint64_t{2} << 56;   // in_data: the peer published into our ring
constexpr uint64_t kShmSpaceTag = uint64_t{3} << 56;  // out_space: the peer made room in its ring
constexpr uint64_t kShmTagMask = uint64_t{0xff} << 56;

// A shared mapping, unmapped on destruction.
class ShmMapping {
 public:
  ShmMapping() = default;
  ShmMapping(char* base, size_t bytes) : base_(base), bytes_(bytes) {}
  ShmMapping(ShmMapping&& other) noexcept : base_(other.base_), bytes_(other.bytes_) { other.base_ = nullptr; }
  ShmMapping& operator=(ShmMapping&& other) noexcept {
    std::swap(base_, other.base_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  ~ShmMapping() {
    if (base_ != nullptr) munmap(base_, bytes_);
  }
  char* base() const { return base_; }
  size_t bytes() const { return bytes_; }

 private:
  char* base_ = nullptr;
  size_t bytes_ = 0;
};

// One message on its way into a ring: `prefix` then the body (the owned string, or a view of
// the caller's registered memory). `written` counts the bytes already in the ring.
struct ShmTransport::Outgoing {
  std::string prefix;
  std::string owned;
  absl::string_view external;
  bool uses_owned = false;
  size_t written = 0;
  bool started = false;  // a record was written (an empty message is one record)
  absl::string_view body() const { return uses_owned ? absl::string_view(owned) : external; }
  size_t size() const { return prefix.size() + body().size(); }
  bool done() const { return started && written == size(); }
};

struct ShmTransport::Peer {
  int32_t rank = -1;
  std::atomic<bool> ready{false};  // set (release) by Connect once everything below exists
  ScopedFd socket;                 // the set-up connection; EOF: the peer's process is gone

  // peer -> this rank (the I/O thread's).
  ShmMapping in_mapping;
  std::optional<ShmRing> in;
  ScopedFd in_data;   // the peer writes it when we sleep; we wait on it
  ScopedFd in_space;  // we write it when the peer waits for room
  std::string assembly;  // a message that spans several records
  uint64_t assembly_bytes = 0;  // its size, as its first record announced
  bool assembling = false;
  bool in_broken = false;
  bool closed = false;    // its socket ended
  bool reported = false;  // the error handler was called

  // this rank -> peer.
  std::mutex mu;
  ShmMapping out_mapping;            // guarded by mu (set once by Connect)
  std::optional<ShmRing> out;        // guarded by mu
  ScopedFd out_data;                 // we write it when the peer sleeps (checked: a non-blocking eventfd)
  ScopedFd out_space;                // the peer writes it when we wait for room (checked likewise)
  std::deque<ShmTransport::Outgoing> pending;  // guarded by mu: waiting for room, in order
  absl::Status failure;              // guarded by mu: the edge is broken
};

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_SHM_PEER_H_
