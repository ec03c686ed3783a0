// Small POSIX socket helpers for the TCP transport (IPv4): listening, dialing with a deadline,
// exact reads and writes with a deadline on non-blocking sockets, and an owning fd wrapper.
//
//   int32_t port = 0;
//   ASSIGN_OR_RETURN(ScopedFd listener, ListenTcp("127.0.0.1", /*port=*/0, &port));
//   ASSIGN_OR_RETURN(ScopedFd socket, DialTcp("127.0.0.1:" + std::to_string(port), deadline));
//   RETURN_IF_ERROR(WriteAllBefore(socket.get(), "hello", deadline));
//
// Every returned socket is non-blocking and close-on-exec. Errors: malformed endpoints or
// addresses are InvalidArgument; refused/broken connections and EOF are Unavailable; a passed
// deadline is DeadlineExceeded. All messages name the address. Thread-compatible.
#ifndef ONEFLOW_LIKE_COMM_SOCKET_UTIL_H_
#define ONEFLOW_LIKE_COMM_SOCKET_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace comm {

// Owns one file descriptor (closed on destruction). Movable, not copyable.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.release()) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept;
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Splits "host:port" (host = an IPv4 address or name, port in [1, 65535]).
absl::Status ParseEndpoint(absl::string_view endpoint, std::string* host, int32_t* port);

// A non-blocking listening socket bound to `address` (numeric IPv4) and `port` (0 = ephemeral);
// *bound_port receives the port actually bound.
absl::StatusOr<ScopedFd> ListenTcp(const std::string& address, int32_t port, int32_t* bound_port);

// Connects to `endpoint` ("host:port"), retrying while the peer refuses (it may not listen yet),
// until `deadline`. The socket has TCP_NODELAY.
absl::StatusOr<ScopedFd> DialTcp(absl::string_view endpoint, absl::Time deadline);

// Writes all of `bytes` / reads exactly `size` bytes, waiting with poll() until `deadline`.
// `what` names the other side in errors ("rank 2 at 127.0.0.1:4000").
absl::Status WriteAllBefore(int fd, absl::string_view bytes, absl::Time deadline, absl::string_view what);
absl::Status ReadExactlyBefore(int fd, char* out, size_t size, absl::Time deadline, absl::string_view what);

// "a.b.c.d:port" of the connected peer ("unknown address" if unavailable).
std::string RemoteAddress(int fd);
void SetNoDelay(int fd);
// Whether errno `error` after read/write means "try again later".
inline bool WouldBlock(int error) { return error == EAGAIN || error == EWOULDBLOCK || error == EINTR; }

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_SOCKET_UTIL_H_
