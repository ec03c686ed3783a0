#include "oneflow_like/comm/control_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "oneflow_like/comm/socket_util.h"

namespace oneflow_like {
namespace comm {
namespace {

// Reads one whole frame from a blocking socket into/out of *buffer, until deadline_ms.
absl::StatusOr<ControlMessage> ReadFrame(int fd, std::string* buffer, int64_t max_message_bytes,
                                         int64_t deadline_ms) {
  while (true) {
    ASSIGN_OR_RETURN(size_t size, PeekControlFrame(*buffer, max_message_bytes));
    if (size != 0 && size <= buffer->size()) {
      absl::StatusOr<ControlMessage> message = DecodeControlFrame(absl::string_view(*buffer).substr(0, size));
      buffer->erase(0, size);
      return message;
    }
    const int64_t wait_ms = deadline_ms - MonotonicMs();
    pollfd entry{fd, POLLIN, 0};
    if (wait_ms <= 0 || poll(&entry, 1, static_cast<int>(wait_ms)) <= 0) {
      return absl::DeadlineExceededError("the control server did not answer in time");
    }
    char chunk[4096];
    const ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
    if (n < 0 && WouldBlock(errno)) continue;
    if (n <= 0) return absl::UnavailableError("the control server closed the connection");
    buffer->append(chunk, static_cast<size_t>(n));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<ControlClient>> ControlClient::Connect(ControlOptions options, int32_t rank,
                                                                      std::string host) {
  RETURN_IF_ERROR(ValidateControlOptions(options));
  if (options.master_port <= 0) {
    return absl::InvalidArgumentError("ControlClient: master_port must be the server's port (it is 0)");
  }
  const std::string where = absl::StrCat(options.master_address, ":", options.master_port);
  const int64_t deadline_ms = MonotonicMs() + options.connect_timeout_ms;
  ControlMessage hello;
  hello.type = MessageType::kHello;
  hello.key = options.job_token;
  hello.value = host;
  hello.a = rank;
  hello.b = getpid();
  hello.code = options.restart_round;
  while (true) {
    // DialTcp retries while the server is not listening yet.
    absl::StatusOr<ScopedFd> connected = DialTcp(where, absl::Now() + absl::Milliseconds(deadline_ms - MonotonicMs()));
    if (!connected.ok()) {
      if (connected.status().code() == absl::StatusCode::kInvalidArgument) return connected.status();
      return absl::UnavailableError(absl::StrCat("rank ", rank, " could not reach the control server at ", where,
                                                 " within ", options.connect_timeout_ms, " ms (",
                                                 connected.status().message(),
                                                 "); hint: is rank 0 running, and are address and port right?"));
    }
    const int fd = connected->release();  // non-blocking; every wait below is a poll() with a deadline
    const int64_t answer_deadline_ms = std::max(deadline_ms, MonotonicMs() + options.heartbeat_timeout_ms);
    std::string buffer;
    absl::Status sent = WriteAllBefore(fd, EncodeControlMessage(hello),
                                       absl::Now() + absl::Milliseconds(answer_deadline_ms - MonotonicMs()), where);
    absl::StatusOr<ControlMessage> welcome =
        sent.ok() ? ReadFrame(fd, &buffer, options.max_message_bytes, answer_deadline_ms) : sent;
    if (welcome.ok() && welcome->type == MessageType::kWelcome && welcome->code == 0) {
      std::unique_ptr<ControlClient> client(new ControlClient(std::move(options), rank, std::move(host), fd));
      client->master_host_ = welcome->value;
      client->master_pid_ = welcome->b;
      // `buffer` may already hold the master's first heartbeat.
      client->reader_ = std::thread([c = client.get(), rest = std::move(buffer)]() mutable { c->ReaderLoop(std::move(rest)); });
      return client;
    }
    close(fd);
    const bool earlier_round = welcome.ok() && welcome->type == MessageType::kWelcome &&
                               welcome->a < options.restart_round;
    // A rank of a restart round may reach the failed round's master while it exits: the
    // connection closes before any answer. Retried like an earlier round's answer.
    const bool master_leaving =
        options.restart_round > 0 && !welcome.ok() && welcome.status().code() == absl::StatusCode::kUnavailable;
    if (master_leaving && MonotonicMs() + 100 < deadline_ms) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (earlier_round) {  // the master of a failed round, about to exit: wait for this round's
      if (MonotonicMs() + 100 < deadline_ms) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      return absl::UnavailableError(absl::StrCat("rank ", rank, " of restart round ", options.restart_round,
                                                 " found only a control server of round ", welcome->a, " at ", where,
                                                 " within ", options.connect_timeout_ms,
                                                 " ms; hint: is rank 0 of this round running?"));
    }
    absl::Status status = !welcome.ok() ? welcome.status()
                          : welcome->type != MessageType::kWelcome
                              ? absl::UnavailableError(absl::StrCat("expected Welcome, got ",
                                                                    MessageTypeName(welcome->type)))
                              : StatusFromWire(welcome->code, welcome->value);
    return absl::Status(status.code(), absl::StrCat("control server at ", where, " refused rank ", rank, " (host ",
                                                    host, "): ", status.message()));
  }
}

ControlClient::~ControlClient() {
  bool healthy;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    healthy = failure_.ok();
  }
  if (healthy) {
    ControlMessage bye;
    bye.type = MessageType::kDeregister;
    (void)Call(bye, 0);  // best effort: a lost master is already reported
  }
  stopping_ = true;
  shutdown(fd_, SHUT_RDWR);  // wakes the reader
  if (reader_.joinable()) reader_.join();
  close(fd_);
}

absl::StatusOr<ControlClient::Pending> ControlClient::Request(MessageType type, const std::string& key,
                                                             const std::string& value, int64_t number,
                                                             int64_t wait_ms) {
  if (static_cast<int64_t>(key.size() + value.size()) + 256 > options_.max_message_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(MessageTypeName(type), "('", key.substr(0, 64), "') of ",
                                                   key.size() + value.size(), " bytes does not fit in max_message_bytes (",
                                                   options_.max_message_bytes, "); hint: store large data elsewhere"));
  }
  if (wait_ms < 0) {
    return absl::InvalidArgumentError(absl::StrCat(MessageTypeName(type), "('", key.substr(0, 64), "'): negative timeout ",
                                                   wait_ms, " ms"));
  }
  ControlMessage request;
  request.type = type;
  request.key = key;
  request.value = value;
  request.a = number;
  ASSIGN_OR_RETURN(Pending reply, Call(std::move(request), wait_ms));
  RETURN_IF_ERROR(reply.status);
  return reply;
}

absl::Status ControlClient::Set(const std::string& key, const std::string& value) {
  return Request(MessageType::kSet, key, value, 0, 0).status();
}

absl::StatusOr<std::string> ControlClient::Get(const std::string& key, int64_t timeout_ms) {
  timeout_ms = std::min(timeout_ms, kMaxWaitMs);
  ASSIGN_OR_RETURN(Pending reply, Request(MessageType::kGet, key, "", timeout_ms, timeout_ms));
  return std::move(reply.value);
}

absl::StatusOr<int64_t> ControlClient::Add(const std::string& key, int64_t delta) {
  ASSIGN_OR_RETURN(Pending reply, Request(MessageType::kAdd, key, "", delta, 0));
  return reply.number;
}

absl::Status ControlClient::Barrier(const std::string& name, int64_t timeout_ms) {
  timeout_ms = std::min(timeout_ms, kMaxWaitMs);
  return Request(MessageType::kBarrier, name, "", timeout_ms, timeout_ms).status();
}

void ControlClient::SetFailureHandler(std::function<void(const absl::Status&)> handler) {
  absl::Status failure;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    handler_ = std::move(handler);
    if (!handler_due_ || !handler_) return;
    handler_due_ = false;
    failure = failure_;
  }
  handler_(failure);
}

absl::Status ControlClient::health() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

void ControlClient::Abort(const std::string& reason) {
  ControlMessage abort;
  abort.type = MessageType::kAbort;
  abort.value = reason.substr(0, static_cast<size_t>(options_.max_message_bytes / 2));
  abort.a = step_;
  (void)SendMessage(abort);  // if the master is gone, the other ranks learn that from it
  Fail(absl::AbortedError(absl::StrCat("rank ", rank_, " (host ", host_, ", pid ", getpid(), ") aborted the job ",
                                       DescribeStep(abort.a), ": ", reason)),
       /*call_handler=*/false);
}

absl::StatusOr<ControlClient::Pending> ControlClient::Call(ControlMessage request, int64_t wait_ms) {
  auto pending = std::make_shared<Pending>();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    RETURN_IF_ERROR(failure_);
    request.request_id = next_request_id_++;
    pending_[request.request_id] = pending;
  }
  absl::Status sent = SendMessage(request);
  std::unique_lock<std::mutex> lock(mutex_);
  if (sent.ok()) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms + options_.heartbeat_timeout_ms);
    replied_.wait_until(lock, deadline, [&] { return pending->done; });
  }
  pending_.erase(request.request_id);
  if (!pending->done) {
    if (!sent.ok()) return sent;
    return absl::DeadlineExceededError(absl::StrCat("no reply from ", Master(), " to ", MessageTypeName(request.type),
                                                    "('", request.key.substr(0, 64), "') within ",
                                                    wait_ms + options_.heartbeat_timeout_ms, " ms"));
  }
  return *pending;
}

absl::Status ControlClient::SendMessage(const ControlMessage& message) {
  const std::string bytes = EncodeControlMessage(message);
  std::lock_guard<std::mutex> lock(write_mutex_);
  return WriteAllBefore(fd_, bytes, absl::Now() + absl::Milliseconds(options_.heartbeat_timeout_ms), "the master");
}

void ControlClient::ReaderLoop(std::string buffer) {
  int64_t last_sent_ms = 0;
  int64_t last_heard_ms = MonotonicMs();
  if (!DispatchFrames(&buffer)) return;
  while (!stopping_) {
    int64_t now_ms = MonotonicMs();
    if (now_ms - last_sent_ms >= options_.heartbeat_interval_ms) {
      ControlMessage heartbeat;
      heartbeat.type = MessageType::kHeartbeat;
      heartbeat.a = step_;
      (void)SendMessage(heartbeat);  // a broken link shows up on the read side
      last_sent_ms = now_ms;
    }
    if (now_ms - last_heard_ms > options_.heartbeat_timeout_ms) {
      Fail(absl::UnavailableError(absl::StrFormat("%s stopped answering (last heartbeat %.1f s ago)", Master(),
                                                  (now_ms - last_heard_ms) / 1000.0)),
           true);
      return;
    }
    pollfd entry{fd_, POLLIN, 0};
    const int64_t wait_ms = std::max<int64_t>(1, options_.heartbeat_interval_ms - (now_ms - last_sent_ms));
    if (poll(&entry, 1, static_cast<int>(wait_ms)) <= 0 || stopping_) continue;
    char chunk[64 * 1024];
    const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
    if (n < 0 && WouldBlock(errno)) continue;
    now_ms = MonotonicMs();
    if (stopping_) return;
    if (n <= 0) {
      Fail(absl::UnavailableError(absl::StrFormat("%s is gone: the control connection closed (last heartbeat %.1f s ago)",
                                                  Master(), (now_ms - last_heard_ms) / 1000.0)),
           true);
      return;
    }
    last_heard_ms = now_ms;
    buffer.append(chunk, static_cast<size_t>(n));
    if (!DispatchFrames(&buffer)) return;
  }
}

bool ControlClient::DispatchFrames(std::string* buffer) {
  while (true) {
    absl::StatusOr<size_t> size = PeekControlFrame(*buffer, options_.max_message_bytes);
    if (size.ok() && (*size == 0 || *size > buffer->size())) return true;
    absl::StatusOr<ControlMessage> message =
        size.ok() ? DecodeControlFrame(absl::string_view(*buffer).substr(0, *size)) : size.status();
    if (size.ok()) buffer->erase(0, *size);
    if (!message.ok()) {
      Fail(absl::UnavailableError(absl::StrCat(Master(), " sent an undecodable message: ", message.status().message())),
           true);
      return false;
    }
    if (message->type == MessageType::kReply) {
      std::lock_guard<std::mutex> lock(mutex_);
      auto found = pending_.find(message->request_id);
      if (found != pending_.end()) {
        found->second->done = true;
        found->second->status = StatusFromWire(message->code, message->value);
        found->second->value = std::move(message->value);
        found->second->number = message->a;
        replied_.notify_all();
      }
    } else if (message->type == MessageType::kFailure) {
      Fail(StatusFromWire(message->code, message->value), true);
    }
    // kHeartbeat: hearing from the master is all it says.
  }
}

void ControlClient::Fail(const absl::Status& failure, bool call_handler) {
  std::function<void(const absl::Status&)> handler;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_.ok()) return;
    failure_ = failure.ok() ? absl::InternalError("control plane failed with an OK status") : failure;
    for (auto& entry : pending_) {
      if (!entry.second->done) {
        entry.second->done = true;
        entry.second->status = failure_;
      }
    }
    replied_.notify_all();
    if (!call_handler) return;
    if (handler_) {
      handler = handler_;
    } else {
      handler_due_ = true;
    }
  }
  if (handler) handler(failure);
}

std::string ControlClient::Master() const {
  return absl::StrCat("rank 0 (master, host ", master_host_, ", pid ", master_pid_, ")");
}

}  // namespace comm
}  // namespace oneflow_like
