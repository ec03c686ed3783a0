// ControlServer: the master of the control plane. It runs inside rank 0's process on its own
// thread and serves every rank's ControlClient (control_client.h) over TCP:
//   - authentication: the first message of every connection must be a Hello carrying the job
//     token; a wrong token, garbage bytes or an oversized frame close that connection (logged to
//     stderr with the remote address) while the job goes on;
//   - registration: each rank in [0, world_size) registers once (host name and pid); a rank of
//     another restart round (ControlOptions::restart_round) is refused naming both rounds;
//   - a key-value store with blocking Get, atomic counters (Add) and named barriers;
//   - liveness: heartbeats both ways. A registered rank that is silent for longer than
//     heartbeat_timeout_ms, or whose connection closes without deregistering, fails the job:
//     every other rank receives a failure naming it ("rank 3 (host node-a, pid 1234) stopped
//     answering (last heartbeat 5.2 s ago) after step 12"), and every pending Get/Barrier is
//     answered with Aborted. Abort from a rank does the same with that rank's reason.
//
//   ControlOptions options;
//   options.job_token = "secret";
//   options.world_size = 2;
//   ASSIGN_OR_RETURN(std::unique_ptr<ControlServer> server, ControlServer::Start(options));
//   options.master_port = server->port();   // give this to every rank
//
// The server never blocks on a peer: sockets are non-blocking and one poll() loop serves all.
// Every wait a client asks for is bounded by the timeout it sends.
// Thread-safety: port() may be called from any thread; destroying the server stops its thread
// and closes every connection (clients then report the master gone).
#ifndef ONEFLOW_LIKE_COMM_CONTROL_SERVER_H_
#define ONEFLOW_LIKE_COMM_CONTROL_SERVER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "oneflow_like/comm/control_wire.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace comm {

class ControlServer {
 public:
  // InvalidArgument for bad options; Unavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<ControlServer>> Start(ControlOptions options);
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  int32_t port() const { return port_; }

 private:
  struct Connection {
    int fd = -1;
    std::string peer;              // "ip:port"
    std::string in;                // bytes received, not yet parsed
    std::string out;               // bytes to send
    int64_t accepted_ms = 0;
    bool closed = false;           // remove at the end of this loop iteration
    // Set by a successful Hello.
    int32_t rank = -1;
    std::string host;
    int64_t pid = 0;
    int64_t last_heard_ms = 0;
    int64_t last_step = -1;
    bool deregistered = false;
  };
  struct Waiter {
    uint64_t connection_id;
    uint64_t request_id;
    int32_t rank;
    std::string key;
    int64_t timeout_ms;
    int64_t deadline_ms;
  };
  struct BarrierState {
    std::set<int32_t> arrived;
    std::vector<Waiter> waiters;
  };

  explicit ControlServer(ControlOptions options) : options_(std::move(options)) {}
  void Run();
  void AcceptAll(int64_t now_ms);
  void ReadFrom(uint64_t id, Connection& connection, int64_t now_ms);
  void Handle(uint64_t id, Connection& connection, const ControlMessage& message, int64_t now_ms);
  void HandleHello(uint64_t id, Connection& connection, const ControlMessage& message, int64_t now_ms);
  void HandleBarrier(uint64_t id, Connection& connection, const ControlMessage& message, int64_t now_ms);
  void CheckTimers(int64_t now_ms);
  void Reply(uint64_t connection_id, uint64_t request_id, const absl::Status& status, const std::string& value = "",
             int64_t number = 0);
  void Send(Connection& connection, const ControlMessage& message);
  void Flush(Connection& connection);
  // Refuses an unregistered connection: logs why with the peer address, closes it.
  void Refuse(Connection& connection, const std::string& why);
  // Closes a connection; a registered rank that did not deregister fails the job.
  void Drop(Connection& connection, const std::string& why, int64_t now_ms);
  void FailJob(const absl::Status& failure, int32_t origin_rank);
  std::string Describe(const Connection& connection) const;  // "rank 3 (host node-a, pid 1234)"

  const ControlOptions options_;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  int32_t port_ = 0;
  std::string host_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;

  // Owned by the server thread.
  uint64_t next_connection_id_ = 1;
  std::map<uint64_t, Connection> connections_;
  std::map<int32_t, uint64_t> rank_connections_;
  std::map<std::string, std::string> store_;
  std::vector<Waiter> get_waiters_;
  std::map<std::string, BarrierState> barriers_;
  absl::Status failure_;
  int64_t last_heartbeat_sent_ms_ = 0;
};

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_CONTROL_SERVER_H_
