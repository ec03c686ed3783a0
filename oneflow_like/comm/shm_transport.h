// ShmTransport: the data-plane Transport (transport.h) between processes of ONE node, through
// shared memory. One object is the endpoint of one rank; it serves a given set of peer ranks
// (those on this node) and itself. Each directed edge is a ring of records in a memfd segment
// (shm_ring.h) created by the receiving rank: the sender copies each message into the ring once,
// the receiver's callback reads the payload straight from the shared mapping (messages larger
// than a ring record, a quarter of the ring, are reassembled first).
//
//   ShmTransportOptions options;
//   options.rank = 1; options.world_size = 4; options.peers = {0};   // rank 0 shares the node
//   options.job_token = token;                                        // from the control plane
//   ASSIGN_OR_RETURN(std::unique_ptr<ShmTransport> shm, ShmTransport::Listen(options));
//   publish(shm->endpoint());                     // a unix socket path, through the control plane
//   shm->SetErrorHandler(...);  shm->SetReceiver(...);
//   RETURN_IF_ERROR(shm->Connect(endpoints));     // endpoints[r] for every r in options.peers
//
// Set-up and authentication: Listen makes a private directory (mkdtemp, mode 0700) with a
// SOCK_SEQPACKET unix socket in it. In Connect the lower rank of each pair dials the higher one
// and the two exchange hellos carrying the job token (tcp_hello.h, constant-time compare; a
// connection from another user, with a wrong token or rank is refused, logged and counted, and
// the accept goes on), then each passes the other the descriptors of the ring it will read
// (memfd, sealed against shrinking; a "data" and a "space" eventfd, each checked to be a
// non-blocking eventfd, else the peer is refused naming it) with SCM_RIGHTS. The
// segments have no name in any file system: only a process that passed the token check holds
// them. After Connect the socket file and directory are removed; each pair keeps its
// connection open, so a peer whose process ends (exit, crash, SIGKILL) is seen at once as EOF.
//
// Delivery: one I/O thread per transport reads every ring and delivers on that thread, one
// message at a time, in per-edge order, the view valid during the call. Messages that arrive
// before SetReceiver stay in the ring (and self-sends in a queue) until it is called. Wake-ups:
// the I/O thread sleeps in epoll after announcing it in each ring's control block; a sender
// writes the ring's data eventfd only if the reader announced sleeping (no syscall per message
// otherwise), and the reader writes the space eventfd only if a sender waits for room.
// Sending never waits for the peer: Send, SendOwned and SendRegistered write into the ring
// from the caller's thread while there is room and nothing is queued on the edge; the rest of
// the message is queued (Send copies it, SendOwned keeps the string, SendRegistered keeps the
// view of the caller's registered memory until UnregisterMemory copies it) and the I/O thread
// writes it as the reader makes room. The I/O thread always keeps reading, so two ranks sending
// large messages to each other cannot deadlock.
// Errors: Listen/Connect with bad options or endpoints are InvalidArgument; a peer that refuses
// our hello is Unavailable; Connect past connect_timeout_ms is DeadlineExceeded naming the
// ranks still missing. A corrupt ring (any header field, size, offset or counter that is not
// what the protocol allows; every one is checked before use), or a message over this rank's
// max_message_bytes (even in one record), is DataLoss naming the peer; a
// peer whose connection ends is Unavailable naming it (after what it wrote was delivered).
// Either breaks that edge and calls the error handler once for the peer; later Sends to it
// return that error. Sends to a rank this transport does not serve are InvalidArgument.
// Payloads carry no checksum (shared memory is not a wire; record headers do).
// Thread-safety: all public methods are thread-safe. The receiver and the error handler run on
// the I/O thread and must not block (they may call Send). The destructor closes every
// connection (peers see EOF), joins the I/O thread and unmaps the rings.
#ifndef ONEFLOW_LIKE_COMM_SHM_TRANSPORT_H_
#define ONEFLOW_LIKE_COMM_SHM_TRANSPORT_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "oneflow_like/comm/socket_util.h"
#include "oneflow_like/comm/tcp_link.h"
#include "oneflow_like/comm/transport.h"
#include "oneflow_like/comm/unix_socket.h"

namespace oneflow_like {
namespace comm {

struct ShmTransportOptions {
  int32_t rank = 0;
  int32_t world_size = 1;
  std::vector<int32_t> peers;                  // other ranks on this node (served through shared memory)
  std::string job_token;                       // every connection must present it (required with peers)
  uint64_t ring_bytes = uint64_t{16} << 20;    // per directed edge, allocated by the receiver
  int64_t max_message_bytes = int64_t{1} << 31;  // a larger message in a ring is DataLoss
  int64_t connect_timeout_ms = 30000;
};

class ShmTransport : public Transport {
 public:
  // Checks the options, listens on a fresh unix socket, starts the I/O thread.
  static absl::StatusOr<std::unique_ptr<ShmTransport>> Listen(ShmTransportOptions options);
  ~ShmTransport() override;
  ShmTransport(const ShmTransport&) = delete;
  ShmTransport& operator=(const ShmTransport&) = delete;

  // The unix socket path to publish (empty after Connect).
  std::string endpoint() const { return endpoint_; }
  // Connects to every peer (endpoints[r] = rank r's endpoint(); other entries are unused).
  // Call once.
  absl::Status Connect(const std::vector<std::string>& endpoints);
  // Called once per broken edge (from the I/O thread). Without a handler it goes to stderr.
  void SetErrorHandler(std::function<void(const absl::Status&)> handler);
  // Whether Send(to, ...) goes through this transport (this rank and options.peers).
  bool Serves(Rank to) const;

  Rank rank() const override { return Rank(options_.rank); }
  int32_t world_size() const override { return options_.world_size; }
  void SetReceiver(Receiver receiver) override;
  absl::Status Send(Rank to, absl::string_view payload) override;
  absl::Status SendOwned(Rank to, std::string payload) override;
  absl::Status SendRegistered(Rank to, absl::string_view prefix, absl::string_view payload) override;
  void UnregisterMemory(const char* base, size_t bytes) override;
  std::string TakeBuffer(size_t bytes) override { return spares_.Take(bytes); }

  int64_t refused_connections() const { return refused_connections_.load(); }
  // Payload bytes delivered from peers' rings (self-sends not counted).
  int64_t bytes_received() const { return bytes_received_.load(); }
  // Tests: the mapping of the ring `from` -> this rank (control block, then data), its size.
  char* IncomingRingForTesting(Rank from, size_t* bytes);

 private:
  struct Peer;
  struct Outgoing;

  explicit ShmTransport(ShmTransportOptions options);
  absl::Status Start();
  Peer* PeerOf(int32_t rank) const;
  absl::Status Enqueue(Rank to, Outgoing message, bool copy_if_queued);
  // Writes what fits of `message` on the edge. REQUIRES: peer.mu held, the edge connected.
  absl::StatusOr<bool> WriteLocked(Peer& peer, Outgoing& message);
  void Wake();

  // Set-up (Connect's thread).
  absl::Status AcceptLowerPeers(absl::Time deadline, std::vector<int32_t>* missing);
  absl::Status DialHigherPeer(int32_t peer, const std::string& path, absl::Time deadline);
  absl::Status ExchangeRings(Peer& peer, absl::Time deadline);
  void Refuse(const std::string& who, const std::string& reason);

  // I/O thread.
  void Run();
  bool Pass();                   // one round over every edge; whether anything moved
  bool ReadRing(Peer& peer);
  bool DrainPending(Peer& peer);
  void OnSocketEvent(Peer& peer);
  void BreakEdge(Peer& peer, const absl::Status& status);
  void Deliver(Rank from, absl::string_view payload);

  const ShmTransportOptions options_;
  std::string endpoint_;
  UnixListener listener_;
  ScopedFd epoll_;
  ScopedFd wake_;  // eventfd: SetReceiver, self-sends, queued sends, shutdown
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> refused_connections_{0};
  std::atomic<int64_t> bytes_received_{0};
  SparePayloads spares_;
  std::vector<std::unique_ptr<Peer>> peers_;  // [rank]; null for ranks not served and this rank

  std::mutex mu_;
  std::mutex delivery_mu_;  // held by the I/O thread while it calls the receiver
  bool connect_called_ = false;                                              // guarded by mu_
  std::shared_ptr<Receiver> receiver_;                                       // guarded by mu_
  std::shared_ptr<std::function<void(const absl::Status&)>> error_handler_;  // guarded by mu_
  std::deque<std::string> self_messages_;                                    // guarded by mu_

  std::thread io_thread_;  // last: starts after everything above exists
};

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_SHM_TRANSPORT_H_
