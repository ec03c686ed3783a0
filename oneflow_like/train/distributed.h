// DistributedContext: what one process of a multi-process job needs to run its rank of a Plan:
// the environment set by the launcher (olrun, or torchrun-style variables), the control plane
// (rank 0 hosts the server: rendezvous, key-value store, barriers, heartbeats), and the data
// transport connected to every peer. OL_TRANSPORT=shm (the default): ranks of the same node
// (NODE_RANK / LOCAL_WORLD_SIZE, cross-checked with each rank's host identity published in the
// key-value store) through shared memory (comm/shm_transport.h), the others over TCP
// (comm/hybrid_transport.h); OL_TRANSPORT=tcp: TCP to everyone; OL_TRANSPORT=ibverbs: RDMA
// (comm/ibverbs_transport.h; its queue-pair endpoints are exchanged through the key-value store).
//
//   ASSIGN_OR_RETURN(DistributedEnv env, DistributedEnvFromEnviron());   // RANK, WORLD_SIZE, ...
//   ASSIGN_OR_RETURN(std::unique_ptr<DistributedContext> ctx, DistributedContext::Create(env));
//   RETURN_IF_ERROR(ctx->CheckPlan(plan));         // every rank compiled the same plan
//   // ctx->transport() is this rank's endpoint; ctx->control() the key-value store.
//
// Rendezvous: every rank registers with the control server at MASTER_ADDR:MASTER_PORT (with the
// job token), publishes its data endpoint ("data_endpoint/<rank>"), reads everyone's and
// connects the transport. Both channels authenticate with OL_JOB_TOKEN. With shared memory a
// rank also publishes "shm_endpoint/<rank>" (its host identity and the path of its unix socket,
// in a private 0700 directory); same-node peers dial it and pass the token in a hello before any
// segment is handed over (SCM_RIGHTS), so the rings are reachable only by processes of this
// user id (comm/README.md: what that means).
// Failures: a peer that dies or stops answering (control heartbeats), a broken data link, or a
// peer's Abort make failure() non-OK (naming the rank, its host and its last step); waits of
// the rank executor return it. As a last resort against a main thread stuck elsewhere, the
// process exits with status 1 if it is still alive `exit_grace_ms` after a failure.
// Thread-safety: failure() and Abort() are thread-safe; the rest is for the main thread.
#ifndef ONEFLOW_LIKE_TRAIN_DISTRIBUTED_H_
#define ONEFLOW_LIKE_TRAIN_DISTRIBUTED_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "oneflow_like/comm/control_client.h"
#include "oneflow_like/comm/control_server.h"
#include "oneflow_like/comm/tcp_transport.h"
#include "oneflow_like/comm/gloo_collective.h"
#include "oneflow_like/comm/transport.h"
#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace train {

struct DistributedEnv {
  int32_t rank = 0;             // RANK
  int32_t world_size = 1;       // WORLD_SIZE
  int32_t local_rank = 0;       // LOCAL_RANK (default 0)
  // The node this rank runs on: NODE_RANK and LOCAL_WORLD_SIZE (olrun sets both; without them
  // every rank counts as a node of its own). Ranks of node n are n*L .. n*L+L-1.
  int32_t node_rank = 0;
  int32_t local_world_size = 1;
  int32_t restart_round = 0;    // OL_RESTART_ROUND (olrun --max-restarts; default 0)
  std::string master_address;   // MASTER_ADDR
  int32_t master_port = 0;      // MASTER_PORT
  std::string job_token;        // OL_JOB_TOKEN (required)
  // OL_BIND_ADDR: the interface the data transport listens on; default 127.0.0.1 when the
  // master is a loopback address, else required (multi-node: this node's address).
  std::string bind_address;
  int64_t heartbeat_timeout_ms = 5000;  // OL_HEARTBEAT_TIMEOUT_MS
  int64_t connect_timeout_ms = 60000;   // OL_CONNECT_TIMEOUT_MS: rendezvous and link set-up
  std::string transport = "shm";        // OL_TRANSPORT: shm (same node; TCP across) | tcp | ibverbs
  int64_t shm_ring_bytes = int64_t{16} << 20;  // OL_SHM_RING_MB: per directed same-node edge
  std::string ib_device;                // OL_IB_DEVICE: RDMA device name ("" = the first one)
  // OL_GLOO_TRANSPORT: what gloo's collectives (--boxing=collective) run on: ol (ours, every
  // connection token-checked) | gloo_tcp (gloo's own TCP; comm/README.md: garbage at gloo's ports)
  comm::GlooTransport gloo_transport = comm::GlooOptions().transport;
  std::string host;                     // gethostname()
};

// True when the launcher's variables are present (WORLD_SIZE is set).
bool LaunchedByLauncher();
// Reads the variables; InvalidArgument naming a missing or malformed one.
absl::StatusOr<DistributedEnv> DistributedEnvFromEnviron();

class DistributedContext {
 public:
  // A rank whose data transport cannot be set up (e.g. OL_BIND_ADDR is not an address of this
  // node) aborts the job through the control plane before returning the error, so its peers stop
  // at once, naming it, instead of waiting OL_CONNECT_TIMEOUT_MS for its endpoint.
  static absl::StatusOr<std::unique_ptr<DistributedContext>> Create(const DistributedEnv& env);
  ~DistributedContext();

  const DistributedEnv& env() const { return env_; }
  int32_t rank() const { return env_.rank; }
  int32_t world_size() const { return env_.world_size; }
  comm::ControlClient* control() const { return client_.get(); }
  comm::Transport* transport() const { return transport_.get(); }
  // What carries the data, for logs: "TCP transport", "shared-memory transport (ranks 0-3 of
  // this node; TCP to the others)", "RDMA transport".
  const std::string& transport_description() const { return transport_description_; }

  // Every rank publishes what it must agree on (plan_agreement.h: a per-rank plan's job
  // agreement, else the content hash); each compares with rank 0's, before any data moves.
  // FailedPrecondition naming what differs.
  absl::Status CheckPlan(const PlanProto& plan);
  // OK, or the job's first failure (a peer's death, a broken link, an abort); a peer's abort
  // relayed by the control plane replaces a broken link to it that came first (its cause).
  absl::Status failure() const;
  // Tells every rank this one fails with `reason` (then the caller exits non-zero).
  void Abort(const std::string& reason);
  // After the job's last barrier: link EOFs from finishing peers are no longer failures.
  void MarkFinished() { finished_ = true; }

  int64_t exit_grace_ms() const { return 2 * env_.heartbeat_timeout_ms + 5000; }

 private:
  DistributedContext() = default;
  void OnFailure(const absl::Status& status);
  absl::Status ConnectTcp();
  // The ranks sharing this node (NODE_RANK / LOCAL_WORLD_SIZE), this rank excluded, after
  // checking with their published host identity that they really run on this machine.
  absl::StatusOr<std::vector<int32_t>> SameNodePeers();
  absl::Status ConnectIbverbs();

  DistributedEnv env_;
  std::unique_ptr<comm::ControlServer> server_;  // rank 0 only
  std::unique_ptr<comm::ControlClient> client_;
  std::unique_ptr<comm::Transport> transport_;
  std::string transport_description_ = "TCP transport";
  mutable std::mutex mu_;
  absl::Status failure_;
  std::atomic<bool> finished_{false};
  std::atomic<bool> watchdog_started_{false};
};

}  // namespace train
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_TRAIN_DISTRIBUTED_H_
