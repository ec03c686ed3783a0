#include "oneflow_like/train/distributed.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "oneflow_like/comm/hybrid_transport.h"
#include "oneflow_like/comm/ibverbs_rendezvous.h"
#include "oneflow_like/comm/shm_transport.h"
#include "oneflow_like/core/status.h"
#include "oneflow_like/train/fault_injection.h"
#include "oneflow_like/train/plan_agreement.h"

namespace oneflow_like {
namespace train {
namespace {

absl::StatusOr<std::string> Variable(const char* name, bool required) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    if (!required) return std::string();
    return absl::InvalidArgumentError(absl::StrCat("environment variable ", name,
                                                   " is not set (launch the job with tools/olrun, which sets RANK, ",
                                                   "WORLD_SIZE, MASTER_ADDR, MASTER_PORT and OL_JOB_TOKEN)"));
  }
  return std::string(value);
}

absl::StatusOr<int64_t> Integer(const char* name, bool required, int64_t fallback, int64_t min, int64_t max) {
  ASSIGN_OR_RETURN(std::string text, Variable(name, required));
  if (text.empty()) return fallback;
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < min || value > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment variable ", name, "='", text, "': expected an integer in [", min, ", ", max, "]"));
  }
  return value;
}

// This machine, as the ranks compare it: the host name and the kernel's boot id (two containers
// or hosts with one name differ in the boot id or cannot share memory anyway).
std::string HostIdentity(const std::string& host) {
  std::string boot_id;
  if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char line[128] = {0};
    if (std::fgets(line, sizeof(line), f) != nullptr) boot_id = line;
    std::fclose(f);
  }
  while (!boot_id.empty() && (boot_id.back() == '\n' || boot_id.back() == ' ')) boot_id.pop_back();
  return absl::StrCat(host, "/", boot_id);
}

bool IsLoopback(const std::string& address) {
  return address == "localhost" || address.rfind("127.", 0) == 0 || address == "::1";
}

}  // namespace

bool LaunchedByLauncher() { return std::getenv("WORLD_SIZE") != nullptr; }

absl::StatusOr<DistributedEnv> DistributedEnvFromEnviron() {
  DistributedEnv env;
  ASSIGN_OR_RETURN(int64_t world, Integer("WORLD_SIZE", true, 1, 1, 1 << 20));
  env.world_size = static_cast<int32_t>(world);
  ASSIGN_OR_RETURN(int64_t rank, Integer("RANK", true, 0, 0, world - 1));
  env.rank = static_cast<int32_t>(rank);
  ASSIGN_OR_RETURN(int64_t local_rank, Integer("LOCAL_RANK", false, 0, 0, 1 << 20));
  env.local_rank = static_cast<int32_t>(local_rank);
  ASSIGN_OR_RETURN(int64_t local_world, Integer("LOCAL_WORLD_SIZE", false, 1, 1, world));
  env.local_world_size = static_cast<int32_t>(local_world);
  ASSIGN_OR_RETURN(int64_t node_rank, Integer("NODE_RANK", false, rank / local_world, 0, world - 1));
  env.node_rank = static_cast<int32_t>(node_rank);
  if (int64_t{env.node_rank} * local_world + local_rank != rank) {
    if (std::getenv("LOCAL_WORLD_SIZE") != nullptr || std::getenv("NODE_RANK") != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("RANK=", rank, " is not NODE_RANK=", env.node_rank,
                                                     " x LOCAL_WORLD_SIZE=", local_world, " + LOCAL_RANK=", local_rank,
                                                     " (olrun numbers the ranks node by node)"));
    }
    env.node_rank = static_cast<int32_t>(rank);  // no node information: a node per rank
    env.local_world_size = 1;
  }
  ASSIGN_OR_RETURN(int64_t round, Integer("OL_RESTART_ROUND", false, 0, 0, 1 << 30));
  env.restart_round = static_cast<int32_t>(round);
  ASSIGN_OR_RETURN(env.master_address, Variable("MASTER_ADDR", true));
  ASSIGN_OR_RETURN(int64_t port, Integer("MASTER_PORT", true, 0, 1, 65535));
  env.master_port = static_cast<int32_t>(port);
  ASSIGN_OR_RETURN(env.job_token, Variable("OL_JOB_TOKEN", true));
  ASSIGN_OR_RETURN(env.bind_address, Variable("OL_BIND_ADDR", false));
  if (env.bind_address.empty()) {
    if (!IsLoopback(env.master_address)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "MASTER_ADDR=", env.master_address, " is not a loopback address: set OL_BIND_ADDR to this node's ",
          "address on the network the ranks share (the data transport listens only there)"));
    }
    env.bind_address = "127.0.0.1";
  }
  ASSIGN_OR_RETURN(env.heartbeat_timeout_ms, Integer("OL_HEARTBEAT_TIMEOUT_MS", false, 5000, 100, 3600000));
  ASSIGN_OR_RETURN(env.connect_timeout_ms, Integer("OL_CONNECT_TIMEOUT_MS", false, 60000, 100, 3600000));
  ASSIGN_OR_RETURN(std::string transport, Variable("OL_TRANSPORT", false));
  if (!transport.empty()) env.transport = transport;
  if (env.transport != "shm" && env.transport != "tcp" && env.transport != "ibverbs") {
    return absl::InvalidArgumentError(absl::StrCat("environment variable OL_TRANSPORT='", env.transport,
                                                   "': expected shm (the default), tcp or ibverbs"));
  }
  ASSIGN_OR_RETURN(int64_t ring_mb, Integer("OL_SHM_RING_MB", false, 16, 1, 1024));
  env.shm_ring_bytes = ring_mb << 20;
  ASSIGN_OR_RETURN(env.ib_device, Variable("OL_IB_DEVICE", false));
  ASSIGN_OR_RETURN(std::string gloo_transport, Variable("OL_GLOO_TRANSPORT", false));
  if (!gloo_transport.empty()) {
    absl::StatusOr<comm::GlooTransport> parsed = comm::ParseGlooTransport(gloo_transport);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable OL_GLOO_TRANSPORT: ", parsed.status().message()));
    }
    env.gloo_transport = *parsed;
  }
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  env.host = host[0] != '\0' ? host : "unknown-host";
  return env;
}

absl::StatusOr<std::unique_ptr<DistributedContext>> DistributedContext::Create(const DistributedEnv& env) {
  std::unique_ptr<DistributedContext> ctx(new DistributedContext());
  ctx->env_ = env;
  comm::ControlOptions control;
  control.master_address = env.master_address;
  control.master_port = env.master_port;
  control.job_token = env.job_token;
  control.world_size = env.world_size;
  control.connect_timeout_ms = env.connect_timeout_ms;
  control.heartbeat_timeout_ms = env.heartbeat_timeout_ms;
  control.heartbeat_interval_ms = std::max<int64_t>(20, env.heartbeat_timeout_ms / 10);
  control.restart_round = env.restart_round;
  if (env.rank == 0) {
    absl::StatusOr<std::unique_ptr<comm::ControlServer>> server = comm::ControlServer::Start(control);
    if (!server.ok()) {
      return absl::Status(server.status().code(), absl::StrCat("rank 0: cannot start the control server on ",
                                                               env.master_address, ":", env.master_port, ": ",
                                                               server.status().message()));
    }
    ctx->server_ = *std::move(server);
  }
  ASSIGN_OR_RETURN(ctx->client_, comm::ControlClient::Connect(control, env.rank, env.host));
  DistributedContext* raw = ctx.get();
  ctx->client_->SetFailureHandler([raw](const absl::Status& status) { raw->OnFailure(status); });
  MaybeInjectFault("rendezvous", env.rank);

  const absl::Status linked = env.transport == "ibverbs" ? ctx->ConnectIbverbs() : ctx->ConnectTcp();
  if (!linked.ok()) {
    // Tell the others before leaving: destroying the client would deregister as if this rank
    // had finished, and the peers would wait the whole connect timeout for its endpoint.
    ctx->client_->Abort(std::string(linked.message()));
    return linked;
  }
  return ctx;
}

absl::StatusOr<std::vector<int32_t>> DistributedContext::SameNodePeers() {
  std::vector<int32_t> peers;
  const int32_t first = env_.node_rank * env_.local_world_size;
  for (int32_t r = first; r < first + env_.local_world_size && r < env_.world_size; ++r) {
    if (r != env_.rank) peers.push_back(r);
  }
  if (peers.empty()) return peers;
  // NODE_RANK says which ranks share this node; their host identities must agree, or the
  // launcher's numbering is wrong (shared memory cannot reach another machine).
  const std::string mine = HostIdentity(env_.host);
  RETURN_IF_ERROR(client_->Set(absl::StrCat("host_identity/", env_.rank), mine));
  for (int32_t r : peers) {
    absl::StatusOr<std::string> theirs = client_->Get(absl::StrCat("host_identity/", r), env_.connect_timeout_ms);
    if (!theirs.ok()) {
      return absl::Status(theirs.status().code(), absl::StrCat("rendezvous: waiting for the host identity of rank ", r,
                                                               ": ", theirs.status().message()));
    }
    if (*theirs != mine) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", r, " has NODE_RANK=", env_.node_rank, " like rank ", env_.rank, " but runs on another machine (",
          *theirs, " vs ", mine, "): the launcher's NODE_RANK / LOCAL_WORLD_SIZE are wrong; OL_TRANSPORT=tcp ",
          "does not need them"));
    }
  }
  return peers;
}

absl::Status DistributedContext::ConnectTcp() {
  comm::TcpTransportOptions data;
  data.rank = env_.rank;
  data.world_size = env_.world_size;
  data.bind_address = env_.bind_address;
  data.job_token = env_.job_token;
  data.connect_timeout_ms = env_.connect_timeout_ms;
  ASSIGN_OR_RETURN(std::unique_ptr<comm::TcpTransport> tcp, comm::TcpTransport::Listen(data));
  auto on_error = [this](const absl::Status& status) {
    if (!finished_) OnFailure(status);
  };
  tcp->SetErrorHandler(on_error);
  // Same-node peers through shared memory (OL_TRANSPORT=shm, the default).
  std::vector<int32_t> shm_peers;
  if (env_.transport == "shm") {
    ASSIGN_OR_RETURN(shm_peers, SameNodePeers());
  }
  std::unique_ptr<comm::ShmTransport> shm;
  if (!shm_peers.empty()) {
    comm::ShmTransportOptions local;
    local.rank = env_.rank;
    local.world_size = env_.world_size;
    local.peers = shm_peers;
    local.job_token = env_.job_token;
    local.ring_bytes = static_cast<uint64_t>(env_.shm_ring_bytes);
    local.connect_timeout_ms = env_.connect_timeout_ms;
    ASSIGN_OR_RETURN(shm, comm::ShmTransport::Listen(local));
    shm->SetErrorHandler(on_error);
    RETURN_IF_ERROR(client_->Set(absl::StrCat("shm_endpoint/", env_.rank), shm->endpoint()));
  }
  RETURN_IF_ERROR(client_->Set(absl::StrCat("data_endpoint/", env_.rank), tcp->endpoint()));
  auto endpoints_of = [this](const std::string& prefix, const std::vector<int32_t>& ranks,
                             std::vector<std::string>* endpoints) -> absl::Status {
    endpoints->assign(env_.world_size, "");
    for (int32_t r : ranks) {
      absl::StatusOr<std::string> endpoint = client_->Get(absl::StrCat(prefix, r), env_.connect_timeout_ms);
      if (!endpoint.ok()) {
        return absl::Status(endpoint.status().code(), absl::StrCat("rendezvous: waiting for the ", prefix, " of rank ",
                                                                   r, ": ", endpoint.status().message()));
      }
      (*endpoints)[r] = *endpoint;
    }
    return absl::OkStatus();
  };
  std::vector<int32_t> everyone(env_.world_size);
  for (int32_t r = 0; r < env_.world_size; ++r) everyone[r] = r;
  std::vector<std::string> endpoints;
  RETURN_IF_ERROR(endpoints_of("data_endpoint/", everyone, &endpoints));
  // The TCP links to same-node peers stay up but idle: their EOF is one more way to see a
  // peer's death.
  RETURN_IF_ERROR(tcp->Connect(endpoints));
  if (shm == nullptr) {
    transport_ = std::move(tcp);
    transport_description_ = "TCP transport";
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(endpoints_of("shm_endpoint/", shm_peers, &endpoints));
  const absl::Status connected = shm->Connect(endpoints);
  if (!connected.ok()) {  // e.g. the ranks of a "node" do not share /tmp (OL_TRANSPORT=tcp needs none)
    return absl::Status(connected.code(), absl::StrCat("OL_TRANSPORT=shm (the default; OL_TRANSPORT=tcp avoids it): ",
                                                       connected.message()));
  }
  const int32_t first = env_.node_rank * env_.local_world_size;
  transport_description_ = absl::StrCat("shared-memory transport to ranks ", first, "-", first + env_.local_world_size - 1,
                                        " of this node, TCP transport to the others");
  transport_ = std::make_unique<comm::HybridTransport>(std::move(shm), std::move(tcp));
  return absl::OkStatus();
}

absl::Status DistributedContext::ConnectIbverbs() {
  comm::IbverbsTransportOptions data;
  data.rank = env_.rank;
  data.world_size = env_.world_size;
  data.device_name = env_.ib_device;
  data.connect_timeout_ms = env_.connect_timeout_ms;
  absl::StatusOr<std::unique_ptr<comm::IbverbsTransport>> opened = comm::IbverbsTransport::Open(data);
  if (!opened.ok()) {
    return absl::Status(opened.status().code(),
                        absl::StrCat("OL_TRANSPORT=ibverbs: ", opened.status().message()));
  }
  comm::IbverbsTransport* rdma = opened->get();
  transport_ = *std::move(opened);
  transport_description_ = "RDMA transport";
  rdma->SetErrorHandler([this](const absl::Status& status) {
    if (!finished_) OnFailure(status);
  });
  // The runtime installs its receiver later; nothing may arrive before that (every rank holds a
  // barrier after creating its runtime), so anything that does is a protocol failure.
  const int32_t rank = env_.rank;
  rdma->SetReceiver([this, rank](Rank from, absl::string_view) {
    OnFailure(absl::InternalError(absl::StrCat("rank ", rank, " received a data message from rank ", from.value(),
                                               " before its runtime existed")));
  });
  return comm::ConnectIbverbsThroughControlPlane(rdma, client_.get(), env_.connect_timeout_ms);
}

DistributedContext::~DistributedContext() {
  finished_ = true;
  transport_.reset();
  client_.reset();
  server_.reset();
}

absl::Status DistributedContext::CheckPlan(const PlanProto& plan) {
  const std::string mine = PlanFingerprint(plan);
  RETURN_IF_ERROR(client_->Set(absl::StrCat("plan_hash/", env_.rank), mine));
  ASSIGN_OR_RETURN(std::string first, client_->Get("plan_hash/0", env_.connect_timeout_ms));
  return CompareWithRank0(mine, first, env_.rank);
}

absl::Status DistributedContext::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

void DistributedContext::Abort(const std::string& reason) {
  if (client_ != nullptr) client_->Abort(reason);
}

void DistributedContext::OnFailure(const absl::Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.ok()) {
      // A peer's own report (relayed by the control plane: Aborted) explains a broken link to it
      // (Unavailable) that may have come first: keep the report as the job's failure.
      if (absl::IsUnavailable(failure_) && absl::IsAborted(status)) failure_ = status;
      return;
    }
    failure_ = status;
  }
  if (watchdog_started_.exchange(true)) return;
  // Last resort: the main thread notices failure() in its waits and exits with a report; if it
  // is stuck somewhere else, end the process anyway.
  const int64_t grace = exit_grace_ms();
  const int32_t rank = env_.rank;
  const std::string message(status.message());
  std::thread([grace, rank, message] {
    std::this_thread::sleep_for(std::chrono::milliseconds(grace));
    std::fprintf(stderr, "rank %d: job failed (%s); exiting after %lld ms without a clean shutdown\n", rank,
                 message.c_str(), static_cast<long long>(grace));
    std::fflush(stderr);
    std::_Exit(1);
  }).detach();
}

}  // namespace train
}  // namespace oneflow_like
