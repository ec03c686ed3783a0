#include "oneflow_like/comm/unix_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"

namespace oneflow_like {
namespace comm {
namespace {

constexpr size_t kMaxFds = 8;

absl::Status Wait(int fd, short events, absl::Time deadline, absl::string_view what, absl::string_view doing) {
  while (true) {
    const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(ms + 1, 60000))));
    if (n > 0) return absl::OkStatus();
    if (n < 0 && errno != EINTR) {
      return absl::UnavailableError(absl::StrCat("poll while ", doing, " ", what, ": ", std::strerror(errno)));
    }
    if (n == 0 && absl::Now() >= deadline) return absl::DeadlineExceededError(absl::StrCat("timed out ", doing, " ", what));
  }
}

absl::StatusOr<sockaddr_un> Address(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("unix socket path '", path, "' is empty or longer than ",
                                                   sizeof(address.sun_path) - 1, " bytes"));
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  return address;
}

}  // namespace

absl::StatusOr<UnixListener> UnixListener::Create(absl::string_view name) {
  const char* tmp = std::getenv("TMPDIR");
  std::string base = tmp != nullptr && *tmp != '\0' && std::strlen(tmp) < 60 ? tmp : "/tmp";
  std::string directory = absl::StrCat(base, "/ol-shm-XXXXXX");
  if (mkdtemp(&directory[0]) == nullptr) {  // mode 0700
    return absl::UnavailableError(absl::StrCat("mkdtemp ", directory, ": ", std::strerror(errno)));
  }
  UnixListener listener;
  listener.directory_ = directory;
  listener.path_ = absl::StrCat(directory, "/", name, ".sock");
  ASSIGN_OR_RETURN(sockaddr_un address, Address(listener.path_));
  listener.socket_.reset(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!listener.socket_.valid() ||
      bind(listener.socket_.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(listener.socket_.get(), 128) != 0) {
    return absl::UnavailableError(absl::StrCat("listening at ", listener.path_, ": ", std::strerror(errno)));
  }
  return listener;
}

UnixListener::UnixListener(UnixListener&& other) noexcept { *this = std::move(other); }

UnixListener& UnixListener::operator=(UnixListener&& other) noexcept {
  if (this != &other) {
    Close();
    socket_ = std::move(other.socket_);
    directory_ = std::move(other.directory_);
    path_ = std::move(other.path_);
    other.directory_.clear();
    other.path_.clear();
  }
  return *this;
}

void UnixListener::Close() {
  socket_.reset();
  if (!path_.empty()) unlink(path_.c_str());
  if (!directory_.empty()) rmdir(directory_.c_str());
  directory_.clear();
}

absl::StatusOr<ScopedFd> UnixListener::Accept(absl::Time deadline, uid_t* peer_uid) {
  while (true) {
    RETURN_IF_ERROR(Wait(socket_.get(), POLLIN, deadline, path_, "accepting at"));
    ScopedFd socket(accept4(socket_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!socket.valid()) {
      if (WouldBlock(errno) || errno == ECONNABORTED) continue;
      return absl::UnavailableError(absl::StrCat("accept at ", path_, ": ", std::strerror(errno)));
    }
    ucred credentials{};
    socklen_t size = sizeof(credentials);
    if (getsockopt(socket.get(), SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) {
      return absl::UnavailableError(absl::StrCat("SO_PEERCRED at ", path_, ": ", std::strerror(errno)));
    }
    *peer_uid = credentials.uid;
    return socket;
  }
}

absl::StatusOr<ScopedFd> DialUnix(const std::string& path, absl::Time deadline) {
  ASSIGN_OR_RETURN(sockaddr_un address, Address(path));
  while (true) {
    ScopedFd socket(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));  // blocking connect, then non-blocking
    if (!socket.valid()) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
    if (connect(socket.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0) {
      // Whoever listens there must be us (our user id) before anything, the job token first of
      // all, is sent: a listener another user put at a path ours left would otherwise get it.
      ucred credentials{};
      socklen_t size = sizeof(credentials);
      if (getsockopt(socket.get(), SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) {
        return absl::UnavailableError(absl::StrCat("SO_PEERCRED of ", path, ": ", std::strerror(errno)));
      }
      if (credentials.uid != geteuid()) {
        return absl::PermissionDeniedError(absl::StrCat("the listener at ", path, " runs as user id ", credentials.uid,
                                                        ", not ours (", geteuid(), "): not dialing it"));
      }
      fcntl(socket.get(), F_SETFL, fcntl(socket.get(), F_GETFL) | O_NONBLOCK);
      return socket;
    }
    const int error = errno;
    if (error == ENOENT) {  // published only once bound: gone, or another /tmp
      return absl::UnavailableError(absl::StrCat(
          "connecting to ", path, ": no such socket (the listener is gone, or this process does not see its /tmp: ",
          "another machine or mount namespace)"));
    }
    if (error != ECONNREFUSED && error != EAGAIN && error != EINTR) {
      return absl::UnavailableError(absl::StrCat("connecting to ", path, ": ", std::strerror(error)));
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("connecting to ", path, ": ", std::strerror(error)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

absl::Status SendMessageWithFds(int socket, absl::string_view bytes, const std::vector<int>& fds, absl::Time deadline,
                                absl::string_view what) {
  if (fds.size() > kMaxFds) return absl::InvalidArgumentError("too many descriptors for one message");
  iovec io{const_cast<char*>(bytes.data()), bytes.size()};
  char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  if (!fds.empty()) {
    message.msg_control = control;
    message.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
  }
  while (true) {
    const ssize_t n = sendmsg(socket, &message, MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(bytes.size())) return absl::OkStatus();
    if (n >= 0) return absl::UnavailableError(absl::StrCat("short message to ", what));
    if (!WouldBlock(errno)) return absl::UnavailableError(absl::StrCat("sending to ", what, ": ", std::strerror(errno)));
    RETURN_IF_ERROR(Wait(socket, POLLOUT, deadline, what, "sending to"));
  }
}

absl::StatusOr<UnixMessage> ReceiveMessageWithFds(int socket, size_t max_bytes, absl::Time deadline,
                                                  absl::string_view what) {
  UnixMessage received;
  received.bytes.resize(max_bytes + 1);  // one more: a longer message shows as truncated
  iovec io{&received.bytes[0], received.bytes.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  ssize_t n;
  while ((n = recvmsg(socket, &message, MSG_CMSG_CLOEXEC)) < 0) {
    if (!WouldBlock(errno)) return absl::UnavailableError(absl::StrCat("reading from ", what, ": ", std::strerror(errno)));
    RETURN_IF_ERROR(Wait(socket, POLLIN, deadline, what, "reading from"));
  }
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr; header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
      received.fds.emplace_back(fd);  // owned from here: closed on every error below
    }
  }
  if (n == 0) return absl::UnavailableError(absl::StrCat(what, " closed the connection"));
  if ((message.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 || static_cast<size_t>(n) > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("message from ", what, " is longer than ", max_bytes,
                                                   " bytes or carries too many descriptors"));
  }
  received.bytes.resize(static_cast<size_t>(n));
  return received;
}

}  // namespace comm
}  // namespace oneflow_like
