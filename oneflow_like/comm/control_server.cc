#include "oneflow_like/comm/control_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/comm/socket_util.h"

namespace oneflow_like {
namespace comm {
namespace {

std::string Seconds(int64_t ms) { return absl::StrFormat("%.1f s", static_cast<double>(ms) / 1000.0); }

}  // namespace

absl::StatusOr<std::unique_ptr<ControlServer>> ControlServer::Start(ControlOptions options) {
  RETURN_IF_ERROR(ValidateControlOptions(options));
  std::unique_ptr<ControlServer> server(new ControlServer(std::move(options)));
  ASSIGN_OR_RETURN(ScopedFd listener,
                   ListenTcp(server->options_.master_address, server->options_.master_port, &server->port_));
  server->listen_fd_ = listener.release();  // non-blocking
  if (pipe(server->wake_pipe_) != 0) return absl::UnavailableError("control server: pipe() failed");
  server->host_ = LocalHostName();
  server->thread_ = std::thread([s = server.get()] { s->Run(); });
  return server;
}

ControlServer::~ControlServer() {
  stopping_ = true;
  if (wake_pipe_[1] >= 0) {
    const char byte = 1;
    (void)!write(wake_pipe_[1], &byte, 1);
  }
  if (thread_.joinable()) thread_.join();
  for (auto& entry : connections_) close(entry.second.fd);
  if (listen_fd_ >= 0) close(listen_fd_);
  for (int fd : wake_pipe_) {
    if (fd >= 0) close(fd);
  }
}

void ControlServer::Run() {
  std::vector<pollfd> entries;
  std::vector<uint64_t> ids;
  while (!stopping_) {
    entries.clear();
    ids.clear();
    entries.push_back({listen_fd_, POLLIN, 0});
    entries.push_back({wake_pipe_[0], POLLIN, 0});
    for (auto& entry : connections_) {
      ids.push_back(entry.first);
      entries.push_back({entry.second.fd, static_cast<short>(POLLIN | (entry.second.out.empty() ? 0 : POLLOUT)), 0});
    }
    // Wake at least twice per heartbeat interval, and for the nearest request deadline.
    int64_t wait_ms = std::max<int64_t>(1, options_.heartbeat_interval_ms / 2);
    const int64_t before_ms = MonotonicMs();
    for (const Waiter& waiter : get_waiters_) wait_ms = std::min(wait_ms, waiter.deadline_ms - before_ms);
    for (const auto& barrier : barriers_) {
      for (const Waiter& waiter : barrier.second.waiters) wait_ms = std::min(wait_ms, waiter.deadline_ms - before_ms);
    }
    poll(entries.data(), entries.size(), static_cast<int>(std::max<int64_t>(wait_ms, 1)));
    if (stopping_) break;
    const int64_t now_ms = MonotonicMs();
    if (entries[0].revents & POLLIN) AcceptAll(now_ms);
    for (size_t i = 0; i < ids.size(); ++i) {
      auto found = connections_.find(ids[i]);
      if (found == connections_.end() || found->second.closed) continue;
      const short events = entries[i + 2].revents;
      if (events & POLLOUT) Flush(found->second);
      if (events & (POLLIN | POLLHUP | POLLERR)) ReadFrom(ids[i], found->second, now_ms);
    }
    CheckTimers(now_ms);
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (it->second.closed) {
        close(it->second.fd);
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
  }
}

void ControlServer::AcceptAll(int64_t now_ms) {
  while (true) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    SetNoDelay(fd);  // small messages must not wait for a delayed ACK (Nagle)
    Connection connection;
    connection.fd = fd;
    connection.peer = RemoteAddress(fd);
    connection.accepted_ms = now_ms;
    connections_.emplace(next_connection_id_++, std::move(connection));
  }
}

void ControlServer::ReadFrom(uint64_t id, Connection& connection, int64_t now_ms) {
  char chunk[64 * 1024];
  // A bounded number of reads per wake-up, so one flooding peer cannot starve the others.
  for (int round = 0; round < 16; ++round) {
    const ssize_t n = recv(connection.fd, chunk, sizeof(chunk), 0);
    if (n > 0) {
      connection.in.append(chunk, static_cast<size_t>(n));
      if (connection.rank >= 0) connection.last_heard_ms = now_ms;
      // Parse as we go so an oversized frame is refused before its body is buffered.
      while (!connection.closed) {
        absl::StatusOr<size_t> size = PeekControlFrame(connection.in, options_.max_message_bytes);
        if (!size.ok()) {
          Drop(connection, std::string(size.status().message()), now_ms);
          return;
        }
        if (*size == 0 || *size > connection.in.size()) break;
        absl::StatusOr<ControlMessage> message = DecodeControlFrame(absl::string_view(connection.in).substr(0, *size));
        connection.in.erase(0, *size);
        if (!message.ok()) {
          Drop(connection, std::string(message.status().message()), now_ms);
          return;
        }
        Handle(id, connection, *message, now_ms);
      }
      if (connection.closed) return;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    Drop(connection, n == 0 ? "the connection closed" : "the connection broke", now_ms);
    return;
  }
}

void ControlServer::Handle(uint64_t id, Connection& connection, const ControlMessage& message, int64_t now_ms) {
  if (connection.rank < 0) {
    if (message.type != MessageType::kHello) {
      Refuse(connection, absl::StrCat("first message is ", MessageTypeName(message.type), ", not Hello"));
      return;
    }
    HandleHello(id, connection, message, now_ms);
    return;
  }
  const bool is_request = message.type == MessageType::kSet || message.type == MessageType::kGet ||
                          message.type == MessageType::kAdd || message.type == MessageType::kBarrier;
  if (is_request && !failure_.ok()) {
    Reply(id, message.request_id, failure_);
    return;
  }
  switch (message.type) {
    case MessageType::kHeartbeat:
      connection.last_step = message.a;
      return;
    case MessageType::kSet: {
      store_[message.key] = message.value;
      Reply(id, message.request_id, absl::OkStatus());
      for (auto it = get_waiters_.begin(); it != get_waiters_.end();) {
        if (it->key == message.key) {
          Reply(it->connection_id, it->request_id, absl::OkStatus(), message.value);
          it = get_waiters_.erase(it);
        } else {
          ++it;
        }
      }
      return;
    }
    case MessageType::kGet: {
      auto found = store_.find(message.key);
      if (found != store_.end()) {
        Reply(id, message.request_id, absl::OkStatus(), found->second);
      } else {
        const int64_t timeout_ms = std::min(std::max<int64_t>(message.a, 0), kMaxWaitMs);
        get_waiters_.push_back({id, message.request_id, connection.rank, message.key, timeout_ms, now_ms + timeout_ms});
      }
      return;
    }
    case MessageType::kAdd: {
      std::string& slot = store_[message.key];
      int64_t value = 0;
      if (!slot.empty() && !absl::SimpleAtoi(slot, &value)) {
        Reply(id, message.request_id,
              absl::InvalidArgumentError(absl::StrCat("Add('", message.key, "'): the key holds '", slot.substr(0, 64),
                                                      "', not an integer counter; hint: use a separate key")));
        return;
      }
      value += message.a;
      slot = absl::StrCat(value);
      Reply(id, message.request_id, absl::OkStatus(), slot, value);
      return;
    }
    case MessageType::kBarrier:
      HandleBarrier(id, connection, message, now_ms);
      return;
    case MessageType::kAbort:
      FailJob(absl::AbortedError(absl::StrCat(Describe(connection), " aborted the job ",
                                              DescribeStep(std::max(message.a, connection.last_step)), ": ",
                                              message.value)),
              connection.rank);
      return;
    case MessageType::kDeregister:
      connection.deregistered = true;
      rank_connections_.erase(connection.rank);
      for (auto& barrier : barriers_) barrier.second.arrived.erase(connection.rank);
      Reply(id, message.request_id, absl::OkStatus());
      return;
    default:
      Drop(connection, absl::StrCat("unexpected ", MessageTypeName(message.type), " message from a client"), now_ms);
  }
}

void ControlServer::HandleHello(uint64_t id, Connection& connection, const ControlMessage& message, int64_t now_ms) {
  const int32_t rank = static_cast<int32_t>(message.a);
  const std::string claim = absl::StrCat(" (claims rank ", message.a, ", host ", message.value.substr(0, 64), ")");
  absl::Status refusal;
  if (message.key != options_.job_token) {
    refusal = absl::PermissionDeniedError("wrong job token; hint: every rank must be started with the same job token");
  } else if (message.code != options_.restart_round) {
    refusal = absl::FailedPreconditionError(absl::StrCat(
        "the rank is of restart round ", message.code, " but the job is at round ", options_.restart_round,
        message.code < options_.restart_round
            ? "; hint: a stale rank of an earlier round is still running, stop it"
            : "; hint: the master is of an earlier round and should exit soon"));
  } else if (message.a < 0 || message.a >= options_.world_size) {
    refusal = absl::InvalidArgumentError(absl::StrCat("rank ", message.a, " is out of range: the job has world_size ",
                                                      options_.world_size, " (ranks 0..", options_.world_size - 1,
                                                      "); hint: check the rank and world size given to this process"));
  } else if (rank_connections_.count(rank) > 0) {
    const Connection& other = connections_.at(rank_connections_.at(rank));
    refusal = absl::AlreadyExistsError(absl::StrCat("rank ", rank, " is already registered by host ", other.host,
                                                    ", pid ", other.pid, "; hint: two processes were given the same rank"));
  } else if (!failure_.ok()) {
    refusal = absl::AbortedError(absl::StrCat("the job has already failed: ", failure_.message()));
  }
  ControlMessage welcome;
  welcome.type = MessageType::kWelcome;
  welcome.a = options_.restart_round;
  if (!refusal.ok()) {
    welcome.code = static_cast<int32_t>(refusal.code());
    welcome.value = std::string(refusal.message());
    Send(connection, welcome);
    Refuse(connection, absl::StrCat(refusal.message(), claim));
    return;
  }
  connection.rank = rank;
  connection.host = message.value;
  connection.pid = message.b;
  connection.last_heard_ms = now_ms;
  rank_connections_[rank] = id;
  welcome.value = host_;
  welcome.b = getpid();
  Send(connection, welcome);
}

void ControlServer::HandleBarrier(uint64_t id, Connection& connection, const ControlMessage& message, int64_t now_ms) {
  BarrierState& barrier = barriers_[message.key];
  if (!barrier.arrived.insert(connection.rank).second) {
    Reply(id, message.request_id,
          absl::FailedPreconditionError(absl::StrCat("rank ", connection.rank, " is already waiting in barrier '",
                                                     message.key, "'; hint: one Barrier call per rank at a time")));
    return;
  }
  const int64_t timeout_ms = std::min(std::max<int64_t>(message.a, 0), kMaxWaitMs);
  barrier.waiters.push_back({id, message.request_id, connection.rank, message.key, timeout_ms, now_ms + timeout_ms});
  if (static_cast<int32_t>(barrier.arrived.size()) < options_.world_size) return;
  std::vector<Waiter> released = std::move(barrier.waiters);
  barriers_.erase(message.key);
  for (const Waiter& waiter : released) Reply(waiter.connection_id, waiter.request_id, absl::OkStatus());
}

void ControlServer::CheckTimers(int64_t now_ms) {
  for (auto it = get_waiters_.begin(); it != get_waiters_.end();) {
    if (it->deadline_ms <= now_ms) {
      Reply(it->connection_id, it->request_id,
            absl::DeadlineExceededError(absl::StrCat("Get('", it->key, "') timed out after ", it->timeout_ms,
                                                     " ms: no rank set the key")));
      it = get_waiters_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = barriers_.begin(); it != barriers_.end();) {
    BarrierState& barrier = it->second;
    for (auto waiter = barrier.waiters.begin(); waiter != barrier.waiters.end();) {
      if (waiter->deadline_ms > now_ms) {
        ++waiter;
        continue;
      }
      std::vector<int32_t> missing;
      for (int32_t rank = 0; rank < options_.world_size; ++rank) {
        if (barrier.arrived.count(rank) == 0) missing.push_back(rank);
      }
      Reply(waiter->connection_id, waiter->request_id,
            absl::DeadlineExceededError(absl::StrCat(
                "barrier '", it->first, "' timed out after ", waiter->timeout_ms, " ms: ", barrier.arrived.size(),
                " of ", options_.world_size, " ranks arrived (missing ranks ", absl::StrJoin(missing, ", "), ")")));
      barrier.arrived.erase(waiter->rank);
      waiter = barrier.waiters.erase(waiter);
    }
    it = barrier.waiters.empty() ? barriers_.erase(it) : std::next(it);
  }
  for (auto& entry : connections_) {
    Connection& connection = entry.second;
    if (connection.closed || connection.deregistered) continue;
    if (connection.rank < 0 && now_ms - connection.accepted_ms > options_.heartbeat_timeout_ms) {
      Refuse(connection, absl::StrCat("no Hello within ", options_.heartbeat_timeout_ms, " ms"));
    } else if (connection.rank >= 0 && now_ms - connection.last_heard_ms > options_.heartbeat_timeout_ms) {
      FailJob(absl::AbortedError(absl::StrCat(Describe(connection), " stopped answering (last heartbeat ",
                                              Seconds(now_ms - connection.last_heard_ms), " ago) ",
                                              DescribeStep(connection.last_step))),
              connection.rank);
      connection.deregistered = true;  // reported once; keep the socket so a resumed process sees the failure
      rank_connections_.erase(connection.rank);
    }
  }
  if (now_ms - last_heartbeat_sent_ms_ >= options_.heartbeat_interval_ms) {
    last_heartbeat_sent_ms_ = now_ms;
    ControlMessage heartbeat;
    heartbeat.type = MessageType::kHeartbeat;
    for (auto& entry : connections_) {
      if (entry.second.rank >= 0 && !entry.second.closed) Send(entry.second, heartbeat);
    }
  }
}

void ControlServer::Reply(uint64_t connection_id, uint64_t request_id, const absl::Status& status,
                          const std::string& value, int64_t number) {
  auto found = connections_.find(connection_id);
  if (found == connections_.end() || found->second.closed) return;
  ControlMessage reply;
  reply.type = MessageType::kReply;
  reply.request_id = request_id;
  reply.code = static_cast<int32_t>(status.code());
  reply.value = status.ok() ? value : std::string(status.message());
  reply.a = number;
  Send(found->second, reply);
}

void ControlServer::Send(Connection& connection, const ControlMessage& message) {
  connection.out.append(EncodeControlMessage(message));
  Flush(connection);
}

void ControlServer::Flush(Connection& connection) {
  while (!connection.out.empty() && !connection.closed) {
    const ssize_t n = send(connection.fd, connection.out.data(), connection.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      connection.out.erase(0, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;  // EAGAIN: poll() waits for POLLOUT; errors show up as POLLERR/EOF on the read side
    }
  }
  // A peer that does not read its replies must not grow our memory without bound.
  if (static_cast<int64_t>(connection.out.size()) > 4 * options_.max_message_bytes) {
    Drop(connection, "the peer does not read its control connection", MonotonicMs());
  }
}

void ControlServer::Refuse(Connection& connection, const std::string& why) {
  std::fprintf(stderr, "control server: refused connection from %s: %s\n", connection.peer.c_str(), why.c_str());
  connection.closed = true;
}

void ControlServer::Drop(Connection& connection, const std::string& why, int64_t now_ms) {
  if (connection.closed) return;
  if (connection.rank < 0) {
    Refuse(connection, why);
    return;
  }
  connection.closed = true;
  if (connection.deregistered) return;
  rank_connections_.erase(connection.rank);
  FailJob(absl::AbortedError(absl::StrCat(Describe(connection), " died: ", why,
                                          " without deregistering (last heartbeat ",
                                          Seconds(now_ms - connection.last_heard_ms), " ago) ",
                                          DescribeStep(connection.last_step))),
          connection.rank);
}

void ControlServer::FailJob(const absl::Status& failure, int32_t origin_rank) {
  if (!failure_.ok()) return;  // the first failure is the one everybody reports
  failure_ = failure;
  std::fprintf(stderr, "control server: job failed: %s\n", std::string(failure.message()).c_str());
  ControlMessage notice;
  notice.type = MessageType::kFailure;
  notice.code = static_cast<int32_t>(failure.code());
  notice.value = std::string(failure.message());
  for (auto& entry : connections_) {
    Connection& connection = entry.second;
    if (connection.rank >= 0 && connection.rank != origin_rank && !connection.closed) Send(connection, notice);
  }
  for (const Waiter& waiter : get_waiters_) Reply(waiter.connection_id, waiter.request_id, failure);
  get_waiters_.clear();
  for (auto& barrier : barriers_) {
    for (const Waiter& waiter : barrier.second.waiters) Reply(waiter.connection_id, waiter.request_id, failure);
  }
  barriers_.clear();
}

std::string ControlServer::Describe(const Connection& connection) const {
  return absl::StrCat("rank ", connection.rank, " (host ", connection.host, ", pid ", connection.pid, ")");
}

}  // namespace comm
}  // namespace oneflow_like
