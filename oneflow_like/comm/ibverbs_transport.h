// IbverbsTransport: a Transport (transport.h) over RDMA (InfiniBand or RoCE) reliable-connected
// queue pairs, one QP per pair of ranks. Messages travel as Frames with per-edge sequence
// numbers, exactly like the loopback and TCP transports.
//
// Design: RDMA WRITE WITH IMMEDIATE into the receiver's slot ring, with credits; and, for large
// payloads sent from registered memory (SendRegistered: the runtime's register blocks), the pull
// model: a pull request through the ring, then the receiver RDMA-READs the producer's bytes.
//   For every peer, a rank owns a receive ring of `slots_per_peer` slots of `slot_bytes`,
//   registered with ibv_reg_mr for remote write; the peer learns its address and rkey from the
//   endpoint info. Send encodes a Frame, cuts it into fragments of at most slot_bytes, copies each
//   into a registered staging slot and RDMA-writes it into the next ring slot (round robin). The
//   32-bit immediate (IbverbsImmediate, ibverbs_wire.h) carries the fragment length and a
//   last-fragment flag and raises a receive completion at the peer, whose completion thread
//   copies the fragment out, reassembles and checks frames (FrameAssembler), delivers them in
//   order and returns the slots as credits (a zero-length write-with-immediate that carries the
//   count). A sender starts with slots_per_peer credits and waits in Send for one.
//   Why both? Pulling costs a round trip more per message and pays off only for zero-copy
//   payloads registered in place, which only SendRegistered offers (its caller keeps the bytes
//   unchanged until the peer replied; no "read done" notice is needed). Small messages and
//   plain Sends are pushed: credits give back-pressure for free, and RC ordering tells the
//   receiver which slot is next without any header in the slot.
//
// Usage (ranks exchange endpoint strings through the control plane):
//   IbverbsTransportOptions options;
//   options.rank = 0; options.world_size = 2;
//   ASSIGN_OR_RETURN(std::unique_ptr<IbverbsTransport> t, IbverbsTransport::Open(options));
//   t->SetReceiver(on_message);                    // before Connect
//   publish t->LocalEndpoints()[p] for every peer p; collect, for every peer p, the string that
//   p published for this rank into endpoints_for_me[p] (endpoints_for_me[own rank] is ignored)
//   RETURN_IF_ERROR(t->Connect(endpoints_for_me)); // all ranks call Connect at about the same time
//   RETURN_IF_ERROR(t->Send(Rank(1), bytes));      // rank 1's receiver sees (Rank(0), bytes)
//
// Errors: invalid options are InvalidArgument (ValidateIbverbsOptions). Open is Unavailable
// "no RDMA device found ..." when ibv_get_device_list finds none, NotFound for an unknown
// device_name, Unavailable when a verbs call fails (naming the call). Connect is InvalidArgument
// for garbage or mismatched endpoint strings, FailedPrecondition without a receiver or when
// called twice, DeadlineExceeded when a peer's hello does not arrive within connect_timeout_ms.
// Send is InvalidArgument for an unknown rank or a payload over max_message_bytes,
// FailedPrecondition before Connect, Unavailable once the link to that peer broke (a failed work
// completion, named with the peer, or a protocol violation by the peer); a broken link stays
// broken and is reported once to the error handler.
// Resources: per peer, 2 * slots_per_peer * slot_bytes bytes of registered (pinned) memory (ring
// and staging; 64 MiB with the defaults) and one RC QP. Destroy a transport only when no Send is
// running; its peers see their links break (Unavailable) unless they are destroyed too, so tear
// down after a control-plane barrier.
// Thread-safety: Send, SetReceiver and SetErrorHandler are thread-safe; call Open/Connect from
// one thread. Messages from peers are delivered on the transport's completion thread, messages to
// self on the sender's thread. Receiver and error handler must not block, and a receiver must not
// Send to its own rank. A receiver may Send to a peer only while that peer's ring has room for
// the whole message (otherwise Send returns FailedPrecondition and sends nothing, instead of
// deadlocking the completion thread that would deliver the credit). A Send waiting for credits
// waits as long as the peer holds its slots (back-pressure); a dead peer ends the wait with
// Unavailable once the RC retries are exhausted.
// Testing: ibverbs_transport_fake_test runs this class over an in-process fake of libibverbs
// (ibverbs_fake_verbs.cc); ibverbs_transport_test runs it over a real device when one exists.
#ifndef ONEFLOW_LIKE_COMM_IBVERBS_TRANSPORT_H_
#define ONEFLOW_LIKE_COMM_IBVERBS_TRANSPORT_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "oneflow_like/comm/ibverbs_wire.h"
#include "oneflow_like/comm/transport.h"

struct ibv_context;
struct ibv_pd;
struct ibv_comp_channel;
struct ibv_cq;
struct ibv_wc;
struct ibv_mr;

namespace oneflow_like {
namespace comm {

struct IbverbsTransportOptions {
  int32_t rank = 0;
  int32_t world_size = 1;
  std::string device_name;                // "" = the first device ibv_get_device_list returns
  int port_num = 1;                       // HCA port (1-based)
  int gid_index = 0;                      // GID table entry (matters for RoCE; IB uses the LID)
  int64_t slot_bytes = 4 << 20;           // one fragment; in [64, 2^30)
  int32_t slots_per_peer = 8;             // ring depth = credits per peer; in [1, 1024]
  int64_t max_message_bytes = 1LL << 30;  // larger payloads are rejected; smaller ones fragmented
  int64_t connect_timeout_ms = 30000;     // Connect waits this long for every peer's hello
  // SendRegistered payloads of at least this many bytes in registered memory are pulled by the
  // receiver (RDMA READ); smaller ones are pushed through the ring like Send.
  int64_t pull_min_bytes = 64 << 10;
};

// InvalidArgument naming the bad field and its allowed range.
absl::Status ValidateIbverbsOptions(const IbverbsTransportOptions& options);

class IbverbsTransport final : public Transport {
 public:
  // Receives the link's first error; its message names this rank and the peer rank.
  using ErrorHandler = std::function<void(const absl::Status& error)>;

  // Opens the device, registers the rings and creates one QP per peer (in state INIT).
  static absl::StatusOr<std::unique_ptr<IbverbsTransport>> Open(IbverbsTransportOptions options);
  ~IbverbsTransport() override;

  Rank rank() const override { return Rank(options_.rank); }
  int32_t world_size() const override { return options_.world_size; }
  void SetReceiver(Receiver receiver) override;
  // Called once per peer whose link breaks (on the completion thread, or on the thread of a Send
  // whose post failed).
  void SetErrorHandler(ErrorHandler handler);
  // Returns after the last fragment is posted to the QP (not when it is delivered).
  absl::Status Send(Rank to, absl::string_view payload) override;
  // Registers [base, base + bytes) for remote reads by the peers (ibv_reg_mr, REMOTE_READ).
  absl::Status RegisterMemory(const char* base, size_t bytes) override;
  void UnregisterMemory(const char* base, size_t bytes) override;
  // The pull model: a payload of at least pull_min_bytes inside registered memory is announced
  // by a one-slot pull request (address, rkey, length, CRC-32C, prefix); the receiver's
  // completion thread RDMA-READs it in slot_bytes chunks into a registered landing buffer,
  // checks the CRC and delivers prefix + payload, in order with the peer's other messages
  // (fragments arriving meanwhile wait in the ring). Anything else goes as Send.
  absl::Status SendRegistered(Rank to, absl::string_view prefix, absl::string_view payload) override;
  // Messages this rank received by pulling (RDMA READ), so far.
  int64_t messages_pulled() const { return messages_pulled_.load(); }

  // Entry p is the encoded IbverbsEndpointInfo of this rank's QP for peer p; "" for own rank.
  std::vector<std::string> LocalEndpoints() const;
  // Moves every QP INIT -> RTR -> RTS, starts the completion thread and exchanges a hello with
  // every peer. remote_endpoints_for_me[p] is what peer p's LocalEndpoints()[rank()] returned.
  absl::Status Connect(const std::vector<std::string>& remote_endpoints_for_me);

 private:
  struct Peer;
  explicit IbverbsTransport(IbverbsTransportOptions options);
  absl::Status Initialize();
  absl::Status ConnectPeer(Peer& peer, const IbverbsEndpointInfo& remote);
  absl::Status PostReceive(Peer& peer);
  absl::Status PostWrite(Peer& peer, uint64_t kind, int64_t slot, uint32_t length, uint32_t immediate);
  // Sends one encoded frame through the ring (pull: a one-slot pull request). REQUIRES: the
  // peer's send_mu held.
  absl::Status SendFrameLocked(Peer& peer, Rank to, const std::string& frame, bool pull);
  void ProcessFragment(Peer& peer, int64_t slot, const IbverbsImmediate& immediate);
  void Deliver(Peer& peer, Rank from, absl::string_view payload);
  void PostRead(Peer& peer);     // the next chunk of the peer's pull
  void ReadDone(Peer& peer);     // a chunk landed
  void FinishPull(Peer& peer);   // all chunks landed: check, deliver, resume deferred fragments
  absl::Status SendToSelf(absl::string_view payload);
  void PollLoop();
  void HandleCompletion(const ibv_wc& completion);
  void HandleData(Peer& peer, const IbverbsImmediate& immediate);
  void ReturnCredits(Peer& peer);
  void MarkBroken(Peer& peer, absl::Status error);
  Peer* peer(int32_t rank) { return peers_[rank].get(); }

  const IbverbsTransportOptions options_;
  uint32_t send_queue_depth_ = 0;
  uint32_t receive_queue_depth_ = 0;
  uint8_t link_layer_ = 0;
  int mtu_ = 0;  // ibv_mtu enum value of the port
  uint16_t lid_ = 0;
  std::array<uint8_t, 16> gid_{};

  // Verbs objects, destroyed in reverse order (QPs and MRs live in peers_).
  std::unique_ptr<ibv_context, int (*)(ibv_context*)> context_;
  std::unique_ptr<ibv_pd, int (*)(ibv_pd*)> protection_domain_;
  std::unique_ptr<ibv_comp_channel, int (*)(ibv_comp_channel*)> channel_;
  std::unique_ptr<ibv_cq, int (*)(ibv_cq*)> completion_queue_;
  std::vector<std::unique_ptr<Peer>> peers_;  // [rank]; null for own rank
  std::mutex regions_mu_;                     // guards regions_
  std::vector<std::unique_ptr<ibv_mr, int (*)(ibv_mr*)>> regions_;  // RegisterMemory's, peer-readable

  mutable std::mutex mu_;  // guards receiver_, error_handler_, connected_
  std::mutex delivery_mu_;  // held by the completion thread while it calls the receiver
  std::shared_ptr<Receiver> receiver_;
  std::shared_ptr<ErrorHandler> error_handler_;
  bool connected_ = false;
  std::mutex self_mu_;          // held while a frame to self is delivered, so they stay in order
  uint64_t self_sequence_ = 0;  // next frame to self (sent == delivered: same thread)

  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> messages_pulled_{0};
  std::thread poller_;
};

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_IBVERBS_TRANSPORT_H_
