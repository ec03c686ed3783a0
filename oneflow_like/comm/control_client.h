// ControlClient: one rank's connection to the ControlServer (control_server.h): rendezvous,
// key-value store, counters, barriers and failure detection for a multi-process job.
//
//   ControlOptions options;            // same token / world size / port on every rank
//   options.job_token = "secret";
//   options.world_size = 2;
//   options.master_port = 29500;
//   ASSIGN_OR_RETURN(std::unique_ptr<ControlClient> client, ControlClient::Connect(options, rank, "node-a"));
//   client->SetFailureHandler([](const absl::Status& failure) { LOG(ERROR) << failure; });
//   if (rank == 0) RETURN_IF_ERROR(client->Set("address/0", "10.0.0.1:7000"));
//   ASSIGN_OR_RETURN(std::string address, client->Get("address/0", /*timeout_ms=*/10000));
//   ASSIGN_OR_RETURN(int64_t arrived, client->Add("arrivals", 1));   // 1, 2, ... across ranks
//   RETURN_IF_ERROR(client->Barrier("ready", /*timeout_ms=*/10000));
//   client->ReportStep(12);            // carried by the next heartbeat
//
// Liveness: a background thread sends a heartbeat (with the last reported step) every
// heartbeat_interval_ms and watches the master's heartbeats. The job fails when the server
// reports another rank dead, silent or aborted (Aborted, e.g. "rank 3 (host node-a, pid 1234)
// stopped answering (last heartbeat 5.2 s ago) after step 12"), or when the master itself closes
// the connection or is silent for heartbeat_timeout_ms (Unavailable, "rank 0 (master, host ...)").
// From then on health() returns that status, every pending and later call returns it, and the
// failure handler runs once on the client's thread (or at once on the caller's thread if it is
// installed after the failure). Abort() on this rank sets health() but does not call the handler.
//
// Restart rounds (ControlOptions::restart_round): a server of an EARLIER round than the client
// is a master about to exit (its job failed), so Connect keeps retrying until a server of the
// client's round answers or connect_timeout_ms passes; a server of a LATER round refuses the
// client for good (FailedPrecondition naming both rounds: this rank is stale).
//
// Errors: Connect gives Unavailable when no server answers within connect_timeout_ms (also when
// only a server of an earlier round did), PermissionDenied for a wrong token, InvalidArgument for a rank out of range, AlreadyExists for
// a rank registered twice. Get/Barrier give DeadlineExceeded after their timeout (a barrier names
// how many ranks arrived). No call waits longer than its timeout plus heartbeat_timeout_ms.
// Thread-safety: every method is thread-safe. The handler must not destroy the client.
#ifndef ONEFLOW_LIKE_COMM_CONTROL_CLIENT_H_
#define ONEFLOW_LIKE_COMM_CONTROL_CLIENT_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "oneflow_like/comm/control_wire.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace comm {

class ControlClient {
 public:
  // Connects (retrying until connect_timeout_ms), authenticates with the token, registers
  // `rank` with its `host` name; fails if the rank is out of range or already registered.
  static absl::StatusOr<std::unique_ptr<ControlClient>> Connect(ControlOptions options, int32_t rank,
                                                                std::string host);
  ~ControlClient();  // deregisters cleanly (a clean exit is not a failure)
  ControlClient(const ControlClient&) = delete;
  ControlClient& operator=(const ControlClient&) = delete;

  absl::Status Set(const std::string& key, const std::string& value);
  // Blocks until the key exists, or DeadlineExceeded; fails early (Aborted) if the job fails.
  absl::StatusOr<std::string> Get(const std::string& key, int64_t timeout_ms);
  // Atomic counter (stored as a decimal string under `key`); returns the new value.
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta);
  // Returns when all world_size ranks have called Barrier(name); DeadlineExceeded otherwise.
  absl::Status Barrier(const std::string& name, int64_t timeout_ms);
  void ReportStep(int64_t step) { step_ = step; }
  void SetFailureHandler(std::function<void(const absl::Status&)> handler);
  absl::Status health() const;
  // Tells every other rank the job is failing, naming this rank and `reason`.
  void Abort(const std::string& reason);

  int32_t rank() const { return rank_; }

 private:
  struct Pending {
    bool done = false;
    absl::Status status;
    std::string value;
    int64_t number = 0;
  };

  ControlClient(ControlOptions options, int32_t rank, std::string host, int fd)
      : options_(std::move(options)), rank_(rank), host_(std::move(host)), fd_(fd) {}
  // Sends a request and waits for its reply at most wait_ms + heartbeat_timeout_ms.
  absl::StatusOr<Pending> Call(ControlMessage request, int64_t wait_ms);
  absl::Status SendMessage(const ControlMessage& message);
  // Checks sizes and the timeout, then Call()s; the reply's error status becomes the result.
  absl::StatusOr<Pending> Request(MessageType type, const std::string& key, const std::string& value, int64_t number,
                                  int64_t wait_ms);
  // Sends heartbeats, watches the master, dispatches replies; `buffer` = bytes already read.
  void ReaderLoop(std::string buffer);
  // Handles every whole frame at the front of *buffer; false (after Fail) on undecodable bytes.
  bool DispatchFrames(std::string* buffer);
  // Records the first failure, completes every pending call with it, runs the handler.
  void Fail(const absl::Status& failure, bool call_handler);
  std::string Master() const;  // "rank 0 (master, host h, pid p)"

  const ControlOptions options_;
  const int32_t rank_;
  const std::string host_;
  const int fd_;
  std::string master_host_;
  int64_t master_pid_ = 0;
  std::atomic<int64_t> step_{-1};
  std::atomic<bool> stopping_{false};
  std::mutex write_mutex_;  // one writer at a time on fd_

  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable replied_;
  uint64_t next_request_id_ = 1;
  std::map<uint64_t, std::shared_ptr<Pending>> pending_;
  absl::Status failure_;
  std::function<void(const absl::Status&)> handler_;
  bool handler_due_ = false;  // a failure happened that the handler has not seen yet

  std::thread reader_;
};

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_CONTROL_CLIENT_H_
