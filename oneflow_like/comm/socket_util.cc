#include "oneflow_like/comm/socket_util.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace oneflow_like {
namespace comm {
namespace {

std::string ErrnoText(int error) { return std::strerror(error); }

// Milliseconds left until `deadline` for poll(), at least 0.
int PollTimeout(absl::Time deadline) {
  const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
  return static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(ms + 1, 60000)));
}

// Waits for `events` on `fd` until `deadline`: OK when ready.
absl::Status WaitFor(int fd, short events, absl::Time deadline, absl::string_view what, const char* doing) {
  while (true) {
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, PollTimeout(deadline));
    if (n > 0) return absl::OkStatus();
    if (n < 0 && errno != EINTR) return absl::UnavailableError(absl::StrCat("poll while ", doing, " ", what, ": ", ErrnoText(errno)));
    if (n == 0 && absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("timed out ", doing, " ", what));
    }
  }
}

}  // namespace

ScopedFd& ScopedFd::operator=(ScopedFd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

int ScopedFd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void ScopedFd::reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

absl::Status ParseEndpoint(absl::string_view endpoint, std::string* host, int32_t* port) {
  const size_t colon = endpoint.rfind(':');
  int32_t value = 0;
  if (colon == absl::string_view::npos || colon == 0 || !absl::SimpleAtoi(endpoint.substr(colon + 1), &value) ||
      value < 1 || value > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("endpoint \"", endpoint, "\" is not host:port (e.g. \"127.0.0.1:45678\", port 1..65535)"));
  }
  *host = std::string(endpoint.substr(0, colon));
  *port = value;
  return absl::OkStatus();
}

absl::StatusOr<ScopedFd> ListenTcp(const std::string& address, int32_t port, int32_t* bound_port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("bind address \"", address, "\" is not a numeric IPv4 address (e.g. \"127.0.0.1\")"));
  }
  if (port < 0 || port > 65535) return absl::InvalidArgumentError(absl::StrCat("port ", port, " is outside 0..65535"));
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ScopedFd fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return absl::UnavailableError(absl::StrCat("socket(): ", ErrnoText(errno)));
  const int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::UnavailableError(absl::StrCat("bind to ", address, ":", port, ": ", ErrnoText(errno)));
  }
  if (listen(fd.get(), 128) != 0) return absl::UnavailableError(absl::StrCat("listen on ", address, ": ", ErrnoText(errno)));
  socklen_t length = sizeof(addr);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
    return absl::UnavailableError(absl::StrCat("getsockname: ", ErrnoText(errno)));
  }
  *bound_port = ntohs(addr.sin_port);
  return fd;
}

absl::StatusOr<ScopedFd> DialTcp(absl::string_view endpoint, absl::Time deadline) {
  std::string host;
  int32_t port = 0;
  RETURN_IF_ERROR(ParseEndpoint(endpoint, &host, &port));
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int resolved = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (resolved != 0 || found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot resolve \"", host, "\" of endpoint ", endpoint, ": ",
                                                   gai_strerror(resolved)));
  }
  sockaddr_in addr;
  std::memcpy(&addr, found->ai_addr, sizeof(addr));
  freeaddrinfo(found);
  std::string last_error = "no attempt";
  while (true) {
    ScopedFd fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return absl::UnavailableError(absl::StrCat("socket(): ", ErrnoText(errno)));
    int error = 0;
    if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      error = errno;
      if (error == EINPROGRESS) {
        absl::Status ready = WaitFor(fd.get(), POLLOUT, deadline, endpoint, "connecting to");
        if (!ready.ok()) return ready;
        socklen_t length = sizeof(error);
        getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
      }
    }
    if (error == 0) {
      SetNoDelay(fd.get());
      return fd;
    }
    last_error = ErrnoText(error);
    if (error != ECONNREFUSED && error != ETIMEDOUT && error != ECONNRESET) {
      return absl::UnavailableError(absl::StrCat("connect to ", endpoint, ": ", last_error));
    }
    if (absl::Now() + absl::Milliseconds(20) >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("timed out connecting to ", endpoint, " (last: ", last_error, ")"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the peer may not listen yet
  }
}

absl::Status WriteAllBefore(int fd, absl::string_view bytes, absl::Time deadline, absl::string_view what) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && WouldBlock(errno)) {
      RETURN_IF_ERROR(WaitFor(fd, POLLOUT, deadline, what, "writing to"));
    } else {
      return absl::UnavailableError(absl::StrCat("writing to ", what, ": ", ErrnoText(errno)));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadExactlyBefore(int fd, char* out, size_t size, absl::Time deadline, absl::string_view what) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = recv(fd, out + done, size - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n == 0) {
      return absl::UnavailableError(absl::StrCat(what, " closed the connection"));
    } else if (WouldBlock(errno)) {
      RETURN_IF_ERROR(WaitFor(fd, POLLIN, deadline, what, "reading from"));
    } else {
      return absl::UnavailableError(absl::StrCat("reading from ", what, ": ", ErrnoText(errno)));
    }
  }
  return absl::OkStatus();
}

std::string RemoteAddress(int fd) {
  sockaddr_in addr{};
  socklen_t length = sizeof(addr);
  char text[INET_ADDRSTRLEN] = {};
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0 || addr.sin_family != AF_INET ||
      inet_ntop(AF_INET, &addr.sin_addr, text, sizeof(text)) == nullptr) {
    return "unknown address";
  }
  return absl::StrCat(text, ":", ntohs(addr.sin_port));
}

void SetNoDelay(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace comm
}  // namespace oneflow_like
