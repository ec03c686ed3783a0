// TcpTransport: the data-plane Transport (transport.h) between processes over TCP. One object
// is the endpoint of one rank; every pair of ranks shares one TCP connection, dialed by the
// lower rank and authenticated by a hello in both directions (tcp_hello.h: magic, version, job
// token, rank, world size). Frames (transport.h: length, CRC-32C of header and payload, per-edge
// sequence number) are written and read by one epoll I/O thread per transport on non-blocking
// sockets with TCP_NODELAY (tcp_link.h).
//
//   TcpTransportOptions options;
//   options.rank = 1; options.world_size = 2; options.job_token = token;   // from the control plane
//   ASSIGN_OR_RETURN(std::unique_ptr<TcpTransport> transport, TcpTransport::Listen(options));
//   publish(transport->endpoint());                        // e.g. "127.0.0.1:45678"
//   transport->SetErrorHandler([](const absl::Status& s) { /* abort the job */ });
//   transport->SetReceiver([](Rank from, absl::string_view payload) { /* must not block */ });
//   RETURN_IF_ERROR(transport->Connect(all_endpoints));   // blocks until every peer link is up
//   RETURN_IF_ERROR(transport->Send(Rank(0), bytes));
//
// Delivery: the receiver runs on the I/O thread, one message at a time (never concurrently with
// itself), once per message, in per-edge send order; the payload view is valid only during the
// call. Messages that arrive before SetReceiver are kept and delivered once it is called.
// Self-sends are delivered the same way. Send may be called before Connect: frames wait for
// the link. Payloads of >= 1 MiB (TcpLink::kDirectSendBytes) sent while nothing is queued on
// the link are written straight from the caller's bytes, Send waiting until the socket took
// them all (no copy: the bulk path). Everything else never waits for the network: on an idle
// link Send writes at once and copies what the socket does not take; otherwise it copies the
// payload once into the link's queue (unbounded: the caller bounds what is in flight). Send
// from the I/O thread (inside a receiver or error handler) never waits. The I/O thread always
// keeps reading, so two ranks sending large messages to each other cannot deadlock.
// SendOwned (what the actor runtime uses) never waits and never copies: on an idle link it
// writes what the socket takes at once and queues the rest of the caller's string as is; the
// I/O thread writes it on EPOLLOUT. SendRegistered copies nothing at all: the payload is written
// from the caller's memory, which the caller keeps unchanged until the peer received it.
// Errors: Listen/Connect with bad options or endpoints are InvalidArgument; a peer refusing our
// hello is Unavailable; Connect past connect_timeout_ms is DeadlineExceeded naming the ranks
// still missing. An incoming connection with garbage bytes, a wrong token, a wrong world size, a
// rank that must not dial us or a duplicate rank is refused: one stderr line with its address
// and the reason, closed, counted in refused_connections(); the job goes on. Once a peer link
// is up, EOF or a socket error (Unavailable) and garbage, checksum, sequence or size violations
// (DataLoss) close that link and call the error handler once for it, naming the peer rank;
// later Sends to that rank return Unavailable.
// Thread-safety: all public methods are thread-safe. The receiver and the error handler run on
// the I/O thread and must not block (they may call Send). The destructor closes every link
// (peers see EOF) and joins the I/O thread; no callback runs after it returns.
#ifndef ONEFLOW_LIKE_COMM_TCP_TRANSPORT_H_
#define ONEFLOW_LIKE_COMM_TCP_TRANSPORT_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "oneflow_like/comm/socket_util.h"
#include "oneflow_like/comm/tcp_link.h"
#include "oneflow_like/comm/transport.h"

namespace oneflow_like {
namespace comm {

struct TcpTransportOptions {
  int32_t rank = 0;
  int32_t world_size = 1;
  std::string bind_address = "127.0.0.1";      // numeric IPv4; bind only here
  int32_t port = 0;                            // 0 = ephemeral
  std::string job_token;                       // every connection must present it (required if world_size > 1)
  int64_t max_frame_bytes = int64_t{1} << 31;  // larger length on the wire -> the link is dropped with an error
  int64_t connect_timeout_ms = 30000;          // Connect, and a stranger's time to finish its hello
  // Once Connect succeeded, close the listening socket (later connections are refused by the
  // kernel) and drop the connections still in their hello (counted as refused). For users that
  // never take a late connection (gloo's contexts: gloo_ol_transport.h). Default: keep listening
  // (a stranger or a duplicate rank is refused at the hello).
  bool close_listener_after_connect = false;
  // Accepted connections still in their hello, at most (0: no limit); a connection past it is
  // closed at once and counted as refused.
  int32_t max_pending_connections = 0;
  // Keep written large SendOwned / detached payloads for reuse (TakeBuffer, up to
  // SparePayloads::kMaxBytes); false frees them once written.
  bool keep_spare_payloads = true;
};

class TcpTransport : public Transport {
 public:
  // Binds and listens; starts the I/O thread. The data endpoint to publish is endpoint().
  static absl::StatusOr<std::unique_ptr<TcpTransport>> Listen(TcpTransportOptions options);
  ~TcpTransport() override;
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  std::string endpoint() const;  // "127.0.0.1:45678"
  // Dials every higher rank (retrying while it refuses, until the deadline), waits for every
  // lower rank to dial us. endpoints[r] = rank r's endpoint() (this rank's entry is unused).
  // Call once.
  absl::Status Connect(const std::vector<std::string>& endpoints);
  // Called once per broken peer link (from the I/O thread). Without a handler the error is
  // printed to stderr.
  void SetErrorHandler(std::function<void(const absl::Status&)> handler);
  // The same, told which peer's link broke (replaces the handler above).
  void SetLinkErrorHandler(std::function<void(Rank peer, const absl::Status&)> handler);

  Rank rank() const override { return Rank(options_.rank); }
  int32_t world_size() const override { return options_.world_size; }
  void SetReceiver(Receiver receiver) override;
  absl::Status Send(Rank to, absl::string_view payload) override;
  absl::Status SendOwned(Rank to, std::string payload) override;
  // Zero copy: `payload` is written from where it lies (the contract of Transport).
  absl::Status SendRegistered(Rank to, absl::string_view prefix, absl::string_view payload) override;
  void UnregisterMemory(const char* base, size_t bytes) override;
  std::string TakeBuffer(size_t bytes) override { return spares_.Take(bytes); }

  // Wire bytes (frame headers + payloads) written to / read from peer links; self-sends and
  // hellos are not counted.
  int64_t bytes_sent() const { return bytes_sent_.load(); }
  int64_t bytes_received() const { return bytes_received_.load(); }
  // Incoming connections refused at the hello.
  int64_t refused_connections() const { return refused_connections_.load(); }
  // Bytes of written payloads kept for reuse (see keep_spare_payloads).
  size_t spare_payload_bytes() { return spares_.bytes(); }

 private:
  struct Stranger {  // an accepted connection that has not completed its hello
    ScopedFd socket;
    std::string address;
    std::string received;
    absl::Time deadline;
  };

  explicit TcpTransport(TcpTransportOptions options);
  absl::Status Start();
  absl::Status Dial(int32_t peer, const std::string& endpoint, absl::Time deadline);
  void MarkLinkUp(int32_t peer);
  void Wake();

  // I/O thread.
  void Run();
  void Accept();
  void OnStrangerReadable(uint64_t id);
  void AdmitStranger(uint64_t id, Stranger& stranger);
  void Refuse(uint64_t id, const std::string& reason);
  void OnLinkEvent(int32_t peer, uint32_t events);
  void BreakLink(int32_t peer, const absl::Status& status);
  void Deliver(Rank from, ReceivedPayload* payload);
  void DeliverQueued();
  void CloseListenerIfAsked();

  const TcpTransportOptions options_;
  int32_t port_ = 0;
  ScopedFd listener_;
  ScopedFd epoll_;
  ScopedFd wake_;  // eventfd: SetReceiver, self-sends, shutdown
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> bytes_sent_{0};
  std::atomic<int64_t> bytes_received_{0};
  std::atomic<int64_t> refused_connections_{0};
  SparePayloads spares_;                         // before links_: outlives them
  std::vector<std::unique_ptr<TcpLink>> links_;  // [rank]; null for this rank

  std::mutex mu_;
  std::mutex delivery_mu_;  // held by the I/O thread while it calls a receiver (see SetReceiver)
  std::condition_variable link_up_changed_;
  std::vector<bool> link_up_;    // guarded by mu_
  bool connect_called_ = false;  // guarded by mu_
  bool close_listener_ = false;     // asked of the I/O thread; guarded by mu_
  bool listener_closed_ = false;    // guarded by mu_ (listener_ itself: I/O thread once running)
  std::shared_ptr<Receiver> receiver_;                                       // guarded by mu_
  std::shared_ptr<std::function<void(Rank, const absl::Status&)>> error_handler_;  // guarded by mu_
  std::deque<ReceivedPayload> self_messages_;                                // guarded by mu_

  // I/O thread only.
  std::deque<std::pair<Rank, ReceivedPayload>> undelivered_;  // waiting for a receiver, in order
  std::map<uint64_t, Stranger> strangers_;
  uint64_t next_stranger_id_ = 0;
  std::vector<bool> reported_;  // [rank]: error handler called
  std::unique_ptr<char[]> staging_;

  std::thread io_thread_;  // last: starts after everything above exists
};

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_TCP_TRANSPORT_H_
