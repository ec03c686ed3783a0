#include "oneflow_like/comm/ibverbs_transport.h"

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <new>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/comm/crc32c.h"

namespace oneflow_like {
namespace comm {
namespace {

// wr_id = peer rank << 8 | kind.
constexpr uint64_t kReceiveKind = 1, kDataKind = 2, kCreditKind = 3, kReadKind = 4;
constexpr int64_t kMaxRingBytes = 1LL << 30;

absl::Status VerbsError(absl::string_view call, int error_number) {
  return absl::UnavailableError(absl::StrCat("ibverbs: ", call, " failed: ", std::strerror(error_number)));
}

}  // namespace

absl::Status ValidateIbverbsOptions(const IbverbsTransportOptions& o) {
  auto bad = [](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("IbverbsTransportOptions: ", what));
  };
  if (o.world_size < 1 || o.world_size > (1 << 20))
    return bad(absl::StrCat("world_size ", o.world_size, " is not in [1, 2^20]"));
  if (o.rank < 0 || o.rank >= o.world_size)
    return bad(absl::StrCat("rank ", o.rank, " is outside [0, ", o.world_size, ")"));
  if (o.port_num < 1 || o.port_num > 255)
    return bad(absl::StrCat("port_num ", o.port_num, " is not in [1, 255] (ports are 1-based)"));
  if (o.gid_index < 0 || o.gid_index > 255) return bad(absl::StrCat("gid_index ", o.gid_index, " is not in [0, 255]"));
  if (o.slot_bytes < 64 || o.slot_bytes > IbverbsImmediate::kMaxValue)
    return bad(absl::StrCat("slot_bytes ", o.slot_bytes, " is not in [64, 2^30)"));
  if (o.slots_per_peer < 1 || o.slots_per_peer > 1024)
    return bad(absl::StrCat("slots_per_peer ", o.slots_per_peer, " is not in [1, 1024]"));
  if (o.slot_bytes * o.slots_per_peer > kMaxRingBytes) {
    return bad(absl::StrCat("slot_bytes * slots_per_peer = ", o.slot_bytes * o.slots_per_peer,
                            " exceeds the 1 GiB per-peer ring limit; use fewer or smaller slots"));
  }
  if (o.max_message_bytes < 1 || o.max_message_bytes > (1LL << 40))
    return bad(absl::StrCat("max_message_bytes ", o.max_message_bytes, " is not in [1, 2^40]"));
  if (o.connect_timeout_ms < 1)
    return bad(absl::StrCat("connect_timeout_ms ", o.connect_timeout_ms, " must be positive"));
  if (o.pull_min_bytes < 0) return bad(absl::StrCat("pull_min_bytes ", o.pull_min_bytes, " must be >= 0"));
  return absl::OkStatus();
}

struct IbverbsTransport::Peer {
  Peer(Rank self, int32_t r, int64_t ring_bytes, int64_t max_message_bytes)
      : rank(r),
        ring(new (std::nothrow) char[ring_bytes]),
        staging(new (std::nothrow) char[ring_bytes]),
        assembler(Rank(r), self, max_message_bytes) {}
  // A pull in progress (completion thread only; post_pending also read by the poll loop).
  struct Pull {
    bool active = false;
    bool post_pending = false;  // the next READ waits for a free send-queue entry
    Rank from;
    IbverbsPullRequest request;
    std::string message;  // prefix + the bytes read so far
    uint64_t done = 0;
    uint32_t chunk = 0;   // bytes of the READ in flight
  };
  const int32_t rank;
  std::unique_ptr<char[]> ring;     // the peer writes here
  std::unique_ptr<char[]> staging;  // we write to the peer from here (slot i -> its ring slot i)
  std::unique_ptr<ibv_mr, int (*)(ibv_mr*)> ring_region{nullptr, ibv_dereg_mr};
  std::unique_ptr<ibv_mr, int (*)(ibv_mr*)> staging_region{nullptr, ibv_dereg_mr};
  std::unique_ptr<char[]> landing;  // one slot: where RDMA READs of a pull land
  std::unique_ptr<ibv_mr, int (*)(ibv_mr*)> landing_region{nullptr, ibv_dereg_mr};
  std::unique_ptr<ibv_qp, int (*)(ibv_qp*)> queue_pair{nullptr, ibv_destroy_qp};
  uint32_t psn = 0;
  IbverbsEndpointInfo remote;  // set by Connect

  std::mutex send_mu;          // held for a whole message, so fragments of two messages never interleave
  uint64_t next_sequence = 0;  // guarded by send_mu

  std::mutex mu;  // guards the fields below; shared by senders and the completion thread
  std::condition_variable changed;
  int64_t credits = 0;              // free slots in the peer's ring
  uint64_t fragments_sent = 0;      // next slot = fragments_sent % slots
  uint32_t outstanding_writes = 0;  // posted, completion not yet polled
  bool hello_received = false;
  absl::Status broken;  // first failure; OK while the link is healthy

  // Completion thread only.
  uint64_t fragments_received = 0;  // next ring slot = fragments_received % slots
  uint32_t credits_to_return = 0;
  FrameAssembler assembler;
  Pull pull;
  std::deque<std::pair<int64_t, IbverbsImmediate>> deferred;  // (ring slot, immediate) behind a pull
};

IbverbsTransport::IbverbsTransport(IbverbsTransportOptions options)
    : options_(std::move(options)),
      context_(nullptr, ibv_close_device),
      protection_domain_(nullptr, ibv_dealloc_pd),
      channel_(nullptr, ibv_destroy_comp_channel),
      completion_queue_(nullptr, ibv_destroy_cq) {}

IbverbsTransport::~IbverbsTransport() {
  stopping_ = true;
  if (poller_.joinable()) poller_.join();
  peers_.clear();  // QPs and MRs before the CQ, PD and context
  regions_.clear();
}

absl::StatusOr<std::unique_ptr<IbverbsTransport>> IbverbsTransport::Open(IbverbsTransportOptions options) {
  RETURN_IF_ERROR(ValidateIbverbsOptions(options));
  std::unique_ptr<IbverbsTransport> transport(new IbverbsTransport(std::move(options)));
  RETURN_IF_ERROR(transport->Initialize());
  return transport;
}

absl::Status IbverbsTransport::Initialize() {
  int count = 0;
  errno = 0;
  ibv_device** devices = ibv_get_device_list(&count);
  const int list_errno = errno;
  if (devices == nullptr || count == 0) {
    if (devices != nullptr) ibv_free_device_list(devices);
    return absl::UnavailableError(absl::StrCat(
        "no RDMA device found (ibv_get_device_list returned 0 devices",
        list_errno != 0 ? absl::StrCat(": ", std::strerror(list_errno)) : "",
        "); the ibverbs transport needs an InfiniBand or RoCE device; use the TCP transport on this machine"));
  }
  std::vector<std::string> names;
  ibv_device* chosen = nullptr;
  for (int i = 0; i < count; ++i) {
    names.push_back(ibv_get_device_name(devices[i]));
    if (chosen == nullptr && (options_.device_name.empty() || names.back() == options_.device_name))
      chosen = devices[i];
  }
  if (chosen != nullptr) context_.reset(ibv_open_device(chosen));
  const int open_errno = errno;
  ibv_free_device_list(devices);
  if (chosen == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("RDMA device \"", options_.device_name, "\" not found; available: ", absl::StrJoin(names, ", ")));
  }
  if (context_ == nullptr) return VerbsError("ibv_open_device", open_errno);

  ibv_port_attr port;
  if (int error = ibv_query_port(context_.get(), options_.port_num, &port)) return VerbsError("ibv_query_port", error);
  if (port.state != IBV_PORT_ACTIVE) {
    return absl::UnavailableError(absl::StrCat("ibverbs: port ", options_.port_num, " of ",
                                               ibv_get_device_name(context_->device), " is not active (state ",
                                               ibv_port_state_str(port.state), ")"));
  }
  link_layer_ = port.link_layer;
  mtu_ = port.active_mtu;
  lid_ = port.lid;
  ibv_gid gid;
  if (ibv_query_gid(context_.get(), options_.port_num, options_.gid_index, &gid) != 0) {  // -1 and errno
    return VerbsError(absl::StrCat("ibv_query_gid (gid_index ", options_.gid_index, ")"), errno);
  }
  std::memcpy(gid_.data(), gid.raw, gid_.size());

  protection_domain_.reset(ibv_alloc_pd(context_.get()));
  if (protection_domain_ == nullptr) return VerbsError("ibv_alloc_pd", errno);
  channel_.reset(ibv_create_comp_channel(context_.get()));
  if (channel_ == nullptr) return VerbsError("ibv_create_comp_channel", errno);
  // Data writes wait below send_queue_depth_ - 2, so a credit return and a pull's READ always
  // find room.
  send_queue_depth_ = 2 * options_.slots_per_peer + 3;
  // Unpolled arrivals per peer: <= slots data writes plus <= slots credit returns.
  receive_queue_depth_ = 2 * options_.slots_per_peer + 2;
  const int cq_size = (options_.world_size - 1) * (send_queue_depth_ + receive_queue_depth_) + 1;
  completion_queue_.reset(ibv_create_cq(context_.get(), cq_size, nullptr, channel_.get(), 0));
  if (completion_queue_ == nullptr) return VerbsError("ibv_create_cq", errno);

  std::mt19937 generator(std::random_device{}());
  const int64_t ring_bytes = options_.slot_bytes * options_.slots_per_peer;
  peers_.resize(options_.world_size);
  for (int32_t r = 0; r < options_.world_size; ++r) {
    if (r == options_.rank) continue;
    peers_[r] = std::make_unique<Peer>(rank(), r, ring_bytes, options_.max_message_bytes);
    Peer& p = *peers_[r];
    if (p.ring == nullptr || p.staging == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("ibverbs: cannot allocate 2 x ", ring_bytes, " bytes for peer ", r));
    }
    p.credits = options_.slots_per_peer;
    p.ring_region.reset(ibv_reg_mr(protection_domain_.get(), p.ring.get(), ring_bytes,
                                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
    // Registered memory is pinned: a low `ulimit -l` makes these fail with ENOMEM or EPERM.
    if (p.ring_region == nullptr) return VerbsError("ibv_reg_mr (receive ring; check ulimit -l)", errno);
    p.staging_region.reset(ibv_reg_mr(protection_domain_.get(), p.staging.get(), ring_bytes, IBV_ACCESS_LOCAL_WRITE));
    if (p.staging_region == nullptr) return VerbsError("ibv_reg_mr (staging; check ulimit -l)", errno);
    p.landing.reset(new (std::nothrow) char[options_.slot_bytes]);
    if (p.landing == nullptr) return absl::ResourceExhaustedError("ibverbs: cannot allocate the pull landing buffer");
    p.landing_region.reset(
        ibv_reg_mr(protection_domain_.get(), p.landing.get(), options_.slot_bytes, IBV_ACCESS_LOCAL_WRITE));
    if (p.landing_region == nullptr) return VerbsError("ibv_reg_mr (pull landing; check ulimit -l)", errno);

    ibv_qp_init_attr init{};
    init.send_cq = completion_queue_.get();
    init.recv_cq = completion_queue_.get();
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = send_queue_depth_;
    init.cap.max_recv_wr = receive_queue_depth_;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    p.queue_pair.reset(ibv_create_qp(protection_domain_.get(), &init));
    if (p.queue_pair == nullptr) return VerbsError("ibv_create_qp", errno);
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = options_.port_num;
    attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (int error = ibv_modify_qp(p.queue_pair.get(), &attr,
                                  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
      return VerbsError("ibv_modify_qp (INIT)", error);
    }
    p.psn = generator() & 0xffffff;
    for (uint32_t i = 0; i < receive_queue_depth_; ++i) RETURN_IF_ERROR(PostReceive(p));
  }
  return absl::OkStatus();
}

std::vector<std::string> IbverbsTransport::LocalEndpoints() const {
  std::vector<std::string> endpoints(options_.world_size);
  for (const std::unique_ptr<Peer>& p : peers_) {
    if (p == nullptr) continue;
    IbverbsEndpointInfo info;
    info.from_rank = options_.rank;
    info.to_rank = p->rank;
    info.lid = lid_;
    info.gid = gid_;
    info.mtu = static_cast<uint8_t>(mtu_);
    info.qp_number = p->queue_pair->qp_num;
    info.packet_sequence_number = p->psn;
    info.ring_address = reinterpret_cast<uint64_t>(p->ring.get());
    info.ring_rkey = p->ring_region->rkey;
    info.slot_bytes = options_.slot_bytes;
    info.slots = options_.slots_per_peer;
    endpoints[p->rank] = info.Encode();
  }
  return endpoints;
}

absl::Status IbverbsTransport::Connect(const std::vector<std::string>& remote_endpoints_for_me) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (connected_) return absl::FailedPreconditionError("IbverbsTransport::Connect called twice");
    if (receiver_ == nullptr) return absl::FailedPreconditionError("IbverbsTransport: SetReceiver before Connect");
  }
  if (static_cast<int32_t>(remote_endpoints_for_me.size()) != options_.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("IbverbsTransport::Connect: got ", remote_endpoints_for_me.size(),
                                                   " endpoints for a world of ", options_.world_size));
  }
  std::vector<IbverbsEndpointInfo> remotes(options_.world_size);
  for (int32_t r = 0; r < options_.world_size; ++r) {
    if (r == options_.rank) continue;
    ASSIGN_OR_RETURN(remotes[r], IbverbsEndpointInfo::Decode(remote_endpoints_for_me[r]));
    const IbverbsEndpointInfo& info = remotes[r];
    if (info.from_rank != r || info.to_rank != options_.rank || info.slot_bytes != options_.slot_bytes ||
        info.slots != options_.slots_per_peer) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", options_.rank, ": endpoint ", r, " is \"", remote_endpoints_for_me[r],
                       "\" but should come from rank ", r, " for rank ", options_.rank,
                       " with slot_bytes=", options_.slot_bytes, " slots=", options_.slots_per_peer,
                       " (did the ranks use different options, or was the list not indexed by peer rank?)"));
    }
  }
  for (int32_t r = 0; r < options_.world_size; ++r) {
    if (r != options_.rank) RETURN_IF_ERROR(ConnectPeer(*peer(r), remotes[r]));
  }
  poller_ = std::thread([this] { PollLoop(); });
  {
    std::lock_guard<std::mutex> lock(mu_);  // also publishes poller_ to Send
    connected_ = true;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.connect_timeout_ms);
  for (int32_t r = 0; r < options_.world_size; ++r) {
    if (r == options_.rank) continue;
    Peer& p = *peer(r);
    {
      std::lock_guard<std::mutex> lock(p.mu);
      ++p.outstanding_writes;
    }
    RETURN_IF_ERROR(PostWrite(p, kCreditKind, 0, 0, IbverbsImmediate::Credit(0)));  // credit 0 = hello
  }
  for (int32_t r = 0; r < options_.world_size; ++r) {
    if (r == options_.rank) continue;
    Peer& p = *peer(r);
    std::unique_lock<std::mutex> lock(p.mu);
    if (!p.changed.wait_until(lock, deadline, [&] { return p.hello_received || !p.broken.ok(); })) {
      return absl::DeadlineExceededError(absl::StrCat("rank ", options_.rank, ": no hello from peer rank ", r,
                                                      " within ", options_.connect_timeout_ms,
                                                      " ms (is it running Connect?)"));
    }
    RETURN_IF_ERROR(p.broken);
  }
  return absl::OkStatus();
}

absl::Status IbverbsTransport::ConnectPeer(Peer& p, const IbverbsEndpointInfo& remote) {
  p.remote = remote;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = static_cast<ibv_mtu>(std::min<int>(mtu_, remote.mtu));  // both ends must fit
  attr.dest_qp_num = remote.qp_number;
  attr.rq_psn = remote.packet_sequence_number;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;
  attr.ah_attr.dlid = remote.lid;
  attr.ah_attr.port_num = options_.port_num;
  if (link_layer_ == IBV_LINK_LAYER_ETHERNET || remote.lid == 0) {  // RoCE: route by GID
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid.data(), remote.gid.size());
    attr.ah_attr.grh.sgid_index = options_.gid_index;
    attr.ah_attr.grh.hop_limit = 64;
  }
  if (int error = ibv_modify_qp(p.queue_pair.get(), &attr,
                                IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
    return VerbsError(absl::StrCat("ibv_modify_qp (RTR) for peer rank ", p.rank), error);
  }
  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = p.psn;
  attr.timeout = 17;  // 4.096 us * 2^17 = 0.54 s per try; 8 tries tolerate ~4 s between peers' Connects
  attr.retry_cnt = 7;
  attr.rnr_retry = 7;  // infinite: a receiver out of posted receives delays, never fails
  attr.max_rd_atomic = 1;
  if (int error = ibv_modify_qp(p.queue_pair.get(), &attr,
                                IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                    IBV_QP_MAX_QP_RD_ATOMIC)) {
    return VerbsError(absl::StrCat("ibv_modify_qp (RTS) for peer rank ", p.rank), error);
  }
  return absl::OkStatus();
}

absl::Status IbverbsTransport::PostReceive(Peer& p) {
  ibv_recv_wr request{};
  request.wr_id = (static_cast<uint64_t>(p.rank) << 8) | kReceiveKind;
  request.num_sge = 0;  // write-with-immediate consumes a receive but places data via the rkey
  ibv_recv_wr* bad = nullptr;
  if (int error = ibv_post_recv(p.queue_pair.get(), &request, &bad)) {
    return VerbsError(absl::StrCat("ibv_post_recv for peer rank ", p.rank), error);
  }
  return absl::OkStatus();
}

// REQUIRES: the caller counted this write in p.outstanding_writes.
absl::Status IbverbsTransport::PostWrite(Peer& p, uint64_t kind, int64_t slot, uint32_t length, uint32_t immediate) {
  ibv_sge piece{};
  piece.addr = reinterpret_cast<uint64_t>(p.staging.get() + slot * options_.slot_bytes);
  piece.length = length;
  piece.lkey = p.staging_region->lkey;
  ibv_send_wr request{};
  request.wr_id = (static_cast<uint64_t>(p.rank) << 8) | kind;
  request.sg_list = length > 0 ? &piece : nullptr;
  request.num_sge = length > 0 ? 1 : 0;
  request.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  request.send_flags = IBV_SEND_SIGNALED;
  request.imm_data = htonl(immediate);
  request.wr.rdma.remote_addr = p.remote.ring_address + slot * options_.slot_bytes;
  request.wr.rdma.rkey = p.remote.ring_rkey;
  ibv_send_wr* bad = nullptr;
  if (int error = ibv_post_send(p.queue_pair.get(), &request, &bad)) {
    absl::Status status = VerbsError(absl::StrCat("ibv_post_send to peer rank ", p.rank), error);
    MarkBroken(p, status);
    return status;
  }
  return absl::OkStatus();
}

void IbverbsTransport::SetReceiver(Receiver receiver) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    receiver_ = std::make_shared<Receiver>(std::move(receiver));
  }
  // A delivery to the old receiver may be running on the completion thread: wait for it, so
  // the caller may free what the old receiver uses once this returns.
  if (std::this_thread::get_id() != poller_.get_id()) {
    std::lock_guard<std::mutex> wait(delivery_mu_);
  }
}

void IbverbsTransport::SetErrorHandler(ErrorHandler handler) {
  std::lock_guard<std::mutex> lock(mu_);
  error_handler_ = std::make_shared<ErrorHandler>(std::move(handler));
}

absl::Status IbverbsTransport::Send(Rank to, absl::string_view payload) {
  if (to.value() < 0 || to.value() >= options_.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("ibverbs transport: destination rank ", to.value(),
                                                   " is outside the world [0, ", options_.world_size, ")"));
  }
  if (static_cast<int64_t>(payload.size()) > options_.max_message_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("ibverbs transport: message of ", payload.size(), " bytes to rank ",
                                                   to.value(), " exceeds max_message_bytes ",
                                                   options_.max_message_bytes));
  }
  if (to.value() == options_.rank) return SendToSelf(payload);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!connected_) return absl::FailedPreconditionError("ibverbs transport: Send before Connect");
  }
  Peer& p = *peer(to.value());
  std::lock_guard<std::mutex> message_lock(p.send_mu);
  const std::string frame = EncodeFrame(Frame{rank(), to, p.next_sequence, std::string(payload)});
  return SendFrameLocked(p, to, frame, /*pull=*/false);
}

absl::Status IbverbsTransport::SendFrameLocked(Peer& p, Rank to, const std::string& frame, bool pull) {
  if (std::this_thread::get_id() == poller_.get_id()) {
    // A receiver callback: only this thread returns credits, so it must not wait for one. Check
    // that the whole frame fits now (other senders wait on send_mu), so a frame is never cut.
    const int64_t fragments = (static_cast<int64_t>(frame.size()) + options_.slot_bytes - 1) / options_.slot_bytes;
    std::lock_guard<std::mutex> lock(p.mu);
    if (p.broken.ok() && (p.credits < fragments || p.outstanding_writes + fragments + 1 >= send_queue_depth_)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "ibverbs transport: a receiver callback sent ", fragments, " fragment(s) to rank ", to.value(), " but only ",
          p.credits, " slot(s) are free; waiting here would deadlock the completion thread (nothing was sent)"));
    }
  }
  for (size_t offset = 0; offset < frame.size();) {
    const size_t length = std::min<size_t>(options_.slot_bytes, frame.size() - offset);
    const bool last = offset + length == frame.size();
    int64_t slot = 0;
    {
      std::unique_lock<std::mutex> lock(p.mu);
      p.changed.wait(lock, [&] {
        return !p.broken.ok() || (p.credits > 0 && p.outstanding_writes + 2 < send_queue_depth_);
      });
      RETURN_IF_ERROR(p.broken);
      slot = static_cast<int64_t>(p.fragments_sent++ % options_.slots_per_peer);
      --p.credits;
      ++p.outstanding_writes;
    }
    std::memcpy(p.staging.get() + slot * options_.slot_bytes, frame.data() + offset, length);
    const uint32_t immediate = pull ? IbverbsImmediate::Pull(length) : IbverbsImmediate::Data(length, last);
    RETURN_IF_ERROR(PostWrite(p, kDataKind, slot, length, immediate));
    offset += length;
  }
  ++p.next_sequence;
  return absl::OkStatus();
}

absl::Status IbverbsTransport::RegisterMemory(const char* base, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  std::unique_ptr<ibv_mr, int (*)(ibv_mr*)> region(
      ibv_reg_mr(protection_domain_.get(), const_cast<char*>(base), bytes, IBV_ACCESS_REMOTE_READ), ibv_dereg_mr);
  if (region == nullptr) {
    return VerbsError(absl::StrCat("ibv_reg_mr of ", bytes, " bytes for remote reads (check ulimit -l)"), errno);
  }
  std::lock_guard<std::mutex> lock(regions_mu_);
  regions_.push_back(std::move(region));
  return absl::OkStatus();
}

void IbverbsTransport::UnregisterMemory(const char* base, size_t bytes) {
  std::lock_guard<std::mutex> lock(regions_mu_);
  regions_.erase(std::remove_if(regions_.begin(), regions_.end(),
                                [&](const auto& region) { return region->addr == base && region->length == bytes; }),
                 regions_.end());
}

absl::Status IbverbsTransport::SendRegistered(Rank to, absl::string_view prefix, absl::string_view payload) {
  if (to.value() < 0 || to.value() >= options_.world_size || to.value() == options_.rank ||
      static_cast<int64_t>(payload.size()) < options_.pull_min_bytes ||
      static_cast<int64_t>(prefix.size() + payload.size()) > options_.max_message_bytes) {
    return Transport::SendRegistered(to, prefix, payload);  // pushed (and errors) as Send
  }
  IbverbsPullRequest request;
  {
    std::lock_guard<std::mutex> lock(regions_mu_);
    const uint64_t begin = reinterpret_cast<uint64_t>(payload.data()), end = begin + payload.size();
    for (const auto& region : regions_) {
      const uint64_t r_begin = reinterpret_cast<uint64_t>(region->addr), r_end = r_begin + region->length;
      if (begin >= r_begin && end <= r_end) request.rkey = region->rkey, request.address = begin;
    }
  }
  if (request.address == 0) return Transport::SendRegistered(to, prefix, payload);  // not registered
  request.length = payload.size();
  request.crc32c = Crc32c(payload.data(), payload.size());
  request.prefix = std::string(prefix);
  const std::string announced = request.Encode();
  if (static_cast<int64_t>(kFrameHeaderBytes + announced.size()) > options_.slot_bytes) {
    return Transport::SendRegistered(to, prefix, payload);  // the request must fit one slot
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!connected_) return absl::FailedPreconditionError("ibverbs transport: Send before Connect");
  }
  Peer& p = *peer(to.value());
  std::lock_guard<std::mutex> message_lock(p.send_mu);
  return SendFrameLocked(p, to, EncodeFrame(Frame{rank(), to, p.next_sequence, announced}), /*pull=*/true);
}

absl::Status IbverbsTransport::SendToSelf(absl::string_view payload) {
  std::lock_guard<std::mutex> lock(self_mu_);
  ASSIGN_OR_RETURN(Frame frame, DecodeFrame(EncodeFrame(Frame{rank(), rank(), self_sequence_, std::string(payload)})));
  std::shared_ptr<Receiver> receiver;
  {
    std::lock_guard<std::mutex> receiver_lock(mu_);
    receiver = receiver_;
  }
  if (receiver == nullptr || !*receiver) {
    return absl::FailedPreconditionError(absl::StrCat("rank ", options_.rank, " has no receiver installed"));
  }
  ++self_sequence_;
  (*receiver)(frame.from, frame.payload);
  return absl::OkStatus();
}

void IbverbsTransport::PollLoop() {
  ibv_wc completions[32];
  auto drain = [&] {
    const int n = ibv_poll_cq(completion_queue_.get(), 32, completions);
    if (n < 0) {
      for (const std::unique_ptr<Peer>& p : peers_) {
        if (p != nullptr) MarkBroken(*p, absl::UnavailableError("ibv_poll_cq failed"));
      }
      stopping_ = true;
    }
    for (int i = 0; i < n; ++i) HandleCompletion(completions[i]);
    for (const std::unique_ptr<Peer>& p : peers_) {
      if (p != nullptr && p->credits_to_return > 0) ReturnCredits(*p);
      if (p != nullptr && p->pull.post_pending) PostRead(*p);
    }
    return n;
  };
  while (!stopping_) {
    if (drain() != 0) continue;
    if (ibv_req_notify_cq(completion_queue_.get(), 0) != 0 || drain() != 0) continue;
    pollfd event{channel_->fd, POLLIN, 0};
    if (::poll(&event, 1, /*timeout_ms=*/50) > 0) {  // the timeout only bounds the shutdown check
      ibv_cq* cq = nullptr;
      void* cq_context = nullptr;
      if (ibv_get_cq_event(channel_.get(), &cq, &cq_context) == 0) ibv_ack_cq_events(cq, 1);
    }
  }
}

void IbverbsTransport::HandleCompletion(const ibv_wc& completion) {
  const uint64_t kind = completion.wr_id & 0xff;
  const int64_t peer_rank = static_cast<int64_t>(completion.wr_id >> 8);
  if (peer_rank < 0 || peer_rank >= options_.world_size || peer(peer_rank) == nullptr) return;  // not ours
  Peer& p = *peer(peer_rank);
  if (completion.status != IBV_WC_SUCCESS) {
    MarkBroken(p, absl::UnavailableError(absl::StrCat(kind == kReceiveKind ? "receive"
                                                      : kind == kDataKind  ? "data write"
                                                      : kind == kReadKind  ? "RDMA read (pull)"
                                                                           : "credit write",
                                                      " completion failed: ", ibv_wc_status_str(completion.status),
                                                      " (vendor error ", completion.vendor_err, ")")));
    return;
  }
  if (kind != kReceiveKind) {
    {
      std::lock_guard<std::mutex> lock(p.mu);
      --p.outstanding_writes;
      p.changed.notify_all();
    }
    if (kind == kReadKind) ReadDone(p);
    return;
  }
  absl::Status reposted = PostReceive(p);
  if (!reposted.ok()) return MarkBroken(p, reposted);
  if (completion.opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(completion.wc_flags & IBV_WC_WITH_IMM)) {
    return MarkBroken(p, absl::DataLossError(absl::StrCat("unexpected receive opcode ", completion.opcode)));
  }
  const IbverbsImmediate immediate = IbverbsImmediate::Parse(ntohl(completion.imm_data));
  if (!immediate.credit) return HandleData(p, immediate);
  const uint32_t count = immediate.value;
  int64_t in_use = 0;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    in_use = options_.slots_per_peer - p.credits;
    if (count <= in_use) {
      p.hello_received |= count == 0;
      p.credits += count;
      p.changed.notify_all();
      return;
    }
  }
  MarkBroken(p, absl::DataLossError(
                    absl::StrCat("the peer returned ", count, " credits but only ", in_use, " slots are in use")));
}

void IbverbsTransport::HandleData(Peer& p, const IbverbsImmediate& immediate) {
  {
    std::lock_guard<std::mutex> lock(p.mu);
    if (!p.broken.ok()) return;  // after a failure the stream cannot be trusted
  }
  const int64_t slot = static_cast<int64_t>(p.fragments_received++ % options_.slots_per_peer);
  if (p.pull.active || !p.deferred.empty()) {
    p.deferred.emplace_back(slot, immediate);  // stays in its ring slot until the pull is delivered
    return;
  }
  ProcessFragment(p, slot, immediate);
}

void IbverbsTransport::ProcessFragment(Peer& p, int64_t slot, const IbverbsImmediate& immediate) {
  if (immediate.value > options_.slot_bytes) {
    return MarkBroken(p, absl::DataLossError(absl::StrCat("the peer wrote a fragment of ", immediate.value,
                                                          " bytes into a ", options_.slot_bytes, "-byte slot")));
  }
  const absl::string_view fragment(p.ring.get() + slot * options_.slot_bytes, immediate.value);
  absl::StatusOr<std::optional<Frame>> frame = p.assembler.Add(fragment, immediate.last || immediate.pull);
  ++p.credits_to_return;  // the fragment is copied out: its slot is free again
  if (!frame.ok()) return MarkBroken(p, frame.status());
  if (!frame->has_value()) return;
  if (!immediate.pull) return Deliver(p, (*frame)->from, (*frame)->payload);
  absl::StatusOr<IbverbsPullRequest> request = IbverbsPullRequest::Decode((*frame)->payload);
  if (!request.ok()) return MarkBroken(p, absl::DataLossError(request.status().message()));
  if (request->length + request->prefix.size() > static_cast<uint64_t>(options_.max_message_bytes)) {
    return MarkBroken(p, absl::DataLossError(absl::StrCat("a pull request of ", request->length,
                                                          " bytes exceeds max_message_bytes ",
                                                          options_.max_message_bytes)));
  }
  Peer::Pull& pull = p.pull;
  pull.active = true;
  pull.from = (*frame)->from;
  pull.request = *std::move(request);
  pull.message = std::move(pull.request.prefix);
  pull.message.reserve(pull.message.size() + pull.request.length);
  pull.done = 0;
  if (pull.request.length == 0) return FinishPull(p);
  PostRead(p);
}

void IbverbsTransport::PostRead(Peer& p) {
  Peer::Pull& pull = p.pull;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    if (!p.broken.ok()) return;
    if (p.outstanding_writes >= send_queue_depth_) {  // retried by the poll loop
      pull.post_pending = true;
      return;
    }
    ++p.outstanding_writes;
  }
  pull.post_pending = false;
  pull.chunk = static_cast<uint32_t>(std::min<uint64_t>(options_.slot_bytes, pull.request.length - pull.done));
  ibv_sge piece{};
  piece.addr = reinterpret_cast<uint64_t>(p.landing.get());
  piece.length = pull.chunk;
  piece.lkey = p.landing_region->lkey;
  ibv_send_wr request{};
  request.wr_id = (static_cast<uint64_t>(p.rank) << 8) | kReadKind;
  request.sg_list = &piece;
  request.num_sge = 1;
  request.opcode = IBV_WR_RDMA_READ;
  request.send_flags = IBV_SEND_SIGNALED;
  request.wr.rdma.remote_addr = pull.request.address + pull.done;
  request.wr.rdma.rkey = pull.request.rkey;
  ibv_send_wr* bad = nullptr;
  if (int error = ibv_post_send(p.queue_pair.get(), &request, &bad)) {
    MarkBroken(p, VerbsError(absl::StrCat("ibv_post_send (RDMA read) to peer rank ", p.rank), error));
  }
}

void IbverbsTransport::ReadDone(Peer& p) {
  Peer::Pull& pull = p.pull;
  if (!pull.active) return MarkBroken(p, absl::InternalError("an RDMA read completed without a pull"));
  pull.message.append(p.landing.get(), pull.chunk);
  pull.done += pull.chunk;
  if (pull.done < pull.request.length) return PostRead(p);
  FinishPull(p);
}

void IbverbsTransport::FinishPull(Peer& p) {
  Peer::Pull& pull = p.pull;
  const size_t prefix = pull.message.size() - pull.request.length;
  const uint32_t crc = Crc32c(pull.message.data() + prefix, pull.request.length);
  if (crc != pull.request.crc32c) {
    return MarkBroken(p, absl::DataLossError(absl::StrCat("the ", pull.request.length,
                                                          " bytes pulled by RDMA read fail their CRC-32C")));
  }
  pull.active = false;
  messages_pulled_.fetch_add(1);
  const std::string message = std::move(pull.message);
  pull.message.clear();
  Deliver(p, pull.from, message);
  while (!pull.active && !p.deferred.empty()) {  // what arrived behind the pull, in order
    const auto [slot, immediate] = p.deferred.front();
    p.deferred.pop_front();
    {
      std::lock_guard<std::mutex> lock(p.mu);
      if (!p.broken.ok()) return;
    }
    ProcessFragment(p, slot, immediate);
  }
}

void IbverbsTransport::Deliver(Peer& p, Rank from, absl::string_view payload) {
  std::lock_guard<std::mutex> delivering(delivery_mu_);
  std::shared_ptr<Receiver> receiver;
  {
    std::lock_guard<std::mutex> lock(mu_);
    receiver = receiver_;
  }
  if (receiver == nullptr || !*receiver) {
    return MarkBroken(p, absl::FailedPreconditionError("no receiver installed for an arriving message"));
  }
  (*receiver)(from, payload);
}

void IbverbsTransport::ReturnCredits(Peer& p) {
  uint32_t count = 0;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    if (!p.broken.ok() || p.outstanding_writes >= send_queue_depth_) return;  // retried after the next completion
    count = p.credits_to_return;
    p.credits_to_return = 0;
    ++p.outstanding_writes;
  }
  PostWrite(p, kCreditKind, 0, 0, IbverbsImmediate::Credit(count)).IgnoreError();  // a failure marks the link broken
}

void IbverbsTransport::MarkBroken(Peer& p, absl::Status error) {
  error = absl::Status(error.code(), absl::StrCat("ibverbs transport rank ", options_.rank, ", link to peer rank ",
                                                  p.rank, ": ", error.message()));
  {
    std::lock_guard<std::mutex> lock(p.mu);
    if (!p.broken.ok()) return;  // report the first failure only (a QP error flushes every queued request)
    p.broken = error;
    p.changed.notify_all();
  }
  std::shared_ptr<ErrorHandler> handler;
  {
    std::lock_guard<std::mutex> lock(mu_);
    handler = error_handler_;
  }
  if (handler != nullptr && *handler) (*handler)(error);
}

}  // namespace comm
}  // namespace oneflow_like
