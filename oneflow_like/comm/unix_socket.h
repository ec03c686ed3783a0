// Unix-domain SOCK_SEQPACKET helpers for the shared-memory transport's set-up (shm_transport.h):
// a listening socket in a fresh private directory, dialing with a deadline, and whole messages
// that may carry file descriptors (SCM_RIGHTS).
//
//   ASSIGN_OR_RETURN(UnixListener listener, UnixListener::Create("rank3"));
//   publish(listener.path());                       // "/tmp/ol-shm-Ab12Cd/rank3.sock"
//   ASSIGN_OR_RETURN(ScopedFd socket, DialUnix(path, deadline));
//   RETURN_IF_ERROR(SendMessageWithFds(socket.get(), bytes, {memfd, eventfd}, deadline, "rank 2"));
//   ASSIGN_OR_RETURN(UnixMessage m, ReceiveMessageWithFds(socket.get(), 4096, deadline, "rank 2"));
//
// The directory is created by mkdtemp (mode 0700): only this user can reach the socket at all;
// the transport's hello then checks the job token. Every socket is non-blocking and
// close-on-exec; received descriptors are close-on-exec. Errors: EOF and socket errors are
// Unavailable, a passed deadline DeadlineExceeded, each naming `what`. Thread-compatible.
#ifndef ONEFLOW_LIKE_COMM_UNIX_SOCKET_H_
#define ONEFLOW_LIKE_COMM_UNIX_SOCKET_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "oneflow_like/comm/socket_util.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace comm {

class UnixListener {
 public:
  // mkdtemp("<dir>/ol-shm-XXXXXX") with <dir> = $TMPDIR if short enough, else /tmp; listens at
  // "<that>/<name>.sock".
  static absl::StatusOr<UnixListener> Create(absl::string_view name);
  UnixListener() = default;
  UnixListener(UnixListener&& other) noexcept;
  UnixListener& operator=(UnixListener&& other) noexcept;
  ~UnixListener() { Close(); }

  const std::string& path() const { return path_; }
  int fd() const { return socket_.get(); }
  // Accepts one connection, waiting until `deadline`; *peer_uid receives the peer's user id.
  absl::StatusOr<ScopedFd> Accept(absl::Time deadline, uid_t* peer_uid);
  // Stops listening and removes the socket file and its directory.
  void Close();

 private:
  ScopedFd socket_;
  std::string directory_;
  std::string path_;
};

// Connects to the listener at `path`, retrying while it refuses (not listening yet), until
// `deadline`. A missing path is Unavailable at once (callers dial only published paths, which
// exist from before they are published), and a listener of another user id is PermissionDenied
// (checked with SO_PEERCRED before the caller sends anything).
absl::StatusOr<ScopedFd> DialUnix(const std::string& path, absl::Time deadline);

struct UnixMessage {
  std::string bytes;
  std::vector<ScopedFd> fds;
};
// One message (at most 64 KiB) with `fds` attached, waiting for room until `deadline`.
absl::Status SendMessageWithFds(int socket, absl::string_view bytes, const std::vector<int>& fds, absl::Time deadline,
                                absl::string_view what);
// One message of at most `max_bytes` (longer: InvalidArgument) with up to 8 descriptors.
absl::StatusOr<UnixMessage> ReceiveMessageWithFds(int socket, size_t max_bytes, absl::Time deadline,
                                                  absl::string_view what);

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_UNIX_SOCKET_H_
