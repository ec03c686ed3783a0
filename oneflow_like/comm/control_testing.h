// Test helpers for the control plane: short-timeout options, a failure recorder, and raw
// (non-blocking) sockets that speak or abuse the wire protocol. Test-only.
#ifndef ONEFLOW_LIKE_COMM_CONTROL_TESTING_H_
#define ONEFLOW_LIKE_COMM_CONTROL_TESTING_H_

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "oneflow_like/comm/control_plane.h"
#include "oneflow_like/comm/socket_util.h"

namespace oneflow_like {
namespace comm {
namespace testing_util {

// Heartbeat 50 ms, silence timeout 500 ms; ephemeral server port.
inline ControlOptions TestOptions(int32_t world_size) {
  ControlOptions options;
  options.job_token = "test-token";
  options.world_size = world_size;
  options.connect_timeout_ms = 5000;
  options.heartbeat_interval_ms = 50;
  options.heartbeat_timeout_ms = 500;
  options.max_message_bytes = 1 << 16;
  return options;
}

inline ControlOptions ClientOptions(ControlOptions options, const ControlServer& server) {
  options.master_port = server.port();
  return options;
}

// Collects what a failure handler receives.
class FailureRecorder {
 public:
  std::function<void(const absl::Status&)> Handler() {
    return [this](const absl::Status& status) {
      std::lock_guard<std::mutex> lock(mutex_);
      failures_.push_back(status);
      changed_.notify_all();
    };
  }
  // The first failure, or OK if none arrived within the (hang-guard) timeout.
  absl::Status WaitForFailure(int64_t timeout_ms = 10000) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return !failures_.empty(); });
    return failures_.empty() ? absl::OkStatus() : failures_.front();
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mutex_);
    return failures_.size();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<absl::Status> failures_;
};

// One rank in a test: a connected client whose failures are recorded.
struct TestRank {
  std::unique_ptr<ControlClient> client;
  FailureRecorder recorder;
};

// Connects `rank` (host "host<rank>") to `server`; nullptr (and a test failure) if that fails.
inline std::unique_ptr<TestRank> JoinRank(const ControlOptions& options, const ControlServer& server, int32_t rank) {
  auto joined = std::make_unique<TestRank>();
  absl::StatusOr<std::unique_ptr<ControlClient>> client =
      ControlClient::Connect(ClientOptions(options, server), rank, absl::StrCat("host", rank));
  EXPECT_TRUE(client.ok()) << client.status();
  if (!client.ok()) return nullptr;
  joined->client = std::move(client).value();
  joined->client->SetFailureHandler(joined->recorder.Handler());
  return joined;
}

inline int RawConnect(int32_t port) {
  absl::StatusOr<ScopedFd> fd = DialTcp(absl::StrCat("127.0.0.1:", port), absl::Now() + absl::Seconds(5));
  return fd.ok() ? fd->release() : -1;
}

inline bool RawSend(int fd, const std::string& bytes) {
  return WriteAllBefore(fd, bytes, absl::Now() + absl::Seconds(5), "the server").ok();
}

inline std::string HelloBytes(const std::string& token, int64_t rank, const std::string& host, int64_t pid) {
  ControlMessage hello;
  hello.type = MessageType::kHello;
  hello.key = token;
  hello.value = host;
  hello.a = rank;
  hello.b = pid;
  return EncodeControlMessage(hello);
}

// Reads one frame (hang guard 5 s); an error if the peer closed or sent garbage.
inline absl::StatusOr<ControlMessage> RawReadMessage(int fd) {
  std::string buffer;
  const int64_t deadline_ms = MonotonicMs() + 5000;
  while (true) {
    absl::StatusOr<size_t> size = PeekControlFrame(buffer, 1 << 20);
    if (!size.ok()) return size.status();
    if (*size != 0 && *size <= buffer.size()) return DecodeControlFrame(absl::string_view(buffer).substr(0, *size));
    pollfd entry{fd, POLLIN, 0};
    const int64_t wait_ms = deadline_ms - MonotonicMs();
    if (wait_ms <= 0 || poll(&entry, 1, static_cast<int>(wait_ms)) <= 0) return absl::DeadlineExceededError("no frame");
    char byte;
    if (recv(fd, &byte, 1, 0) != 1) return absl::UnavailableError("peer closed");
    buffer.push_back(byte);
  }
}

// True when the peer closes `fd` (EOF or reset) within the hang guard; unread data is skipped.
inline bool WaitForPeerClose(int fd, int64_t timeout_ms = 5000) {
  const int64_t deadline_ms = MonotonicMs() + timeout_ms;
  char chunk[4096];
  while (MonotonicMs() < deadline_ms) {
    pollfd entry{fd, POLLIN, 0};
    if (poll(&entry, 1, static_cast<int>(deadline_ms - MonotonicMs())) <= 0) return false;
    if (recv(fd, chunk, sizeof(chunk), 0) <= 0) return true;
  }
  return false;
}

}  // namespace testing_util
}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_CONTROL_TESTING_H_
