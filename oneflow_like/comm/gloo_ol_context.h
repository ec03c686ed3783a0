// Internal to the gloo backend: gloo's transport context (gloo/transport/context.h) over one of
// our Transports (transport.h) among the context's members, so that gloo's algorithms run on
// token-authenticated, checksummed links (gloo_ol_transport.h makes the Transport). Only gloo's
// unbound-buffer path exists: the algorithms the backend calls (allreduce, allgatherv,
// alltoallv, broadcast) and point-to-point send/recv use nothing else; bound buffers
// (Pair::createSendBuffer / createRecvBuffer) throw gloo::EnforceNotMet saying so.
//
// Matching. A message carries its slot and length; the receiver matches it by (sender, slot)
// against the receives posted so far, oldest first, so sends and receives of one (peer, slot)
// pair up in FIFO order. A message with no posted receive yet is kept (copied) until one comes;
// a receive from a set of ranks takes the oldest kept message of any of them, else the first to
// arrive. A message whose receive was posted is copied once on the receiving side, from the
// transport's receive buffer into the posted buffer; one that came early twice (into the kept
// copy, then into the buffer). Its length must equal the posted receive's: anything else fails
// the context (never a write past the buffer), as do undecodable bytes.
//
// Sends are eager, unlike gloo's TCP transport (a rendezvous: there the data moves once the
// receiver posted its receive, and a send completes after that). Here a send completes before
// send() returns, as soon as the caller's memory may change, whether or not the receiver posted:
// messages below kDirectSendBytes are copied once into the transport's queue; larger ones are
// written from the caller's memory for as long as the socket takes them at once
// (Transport::SendRegistered), and only the rest is copied (Transport::UnregisterMemory). So a
// receiver keeps what arrives before its receive: at most `max_early_bytes` in all per context
// (OlGlooDeviceOptions, default 1 GiB); a message past that fails the context naming its sender
// and the sizes (so does a failed allocation for it). One message is at most 2 GiB (the
// transport's max_frame_bytes). (Completing large sends when the receiver acknowledged them
// instead, with no copy at all, was measured no faster here: the ack needs the peer's I/O thread
// scheduled.)
//
// Failures. A broken link, bytes a peer should not have sent, a size mismatch or a wait past its
// timeout (the context's, gloo::IoException as gloo's TCP transport throws), or early messages
// past max_early_bytes fail the whole context: every pending and later wait throws
// gloo::IoException with the first failure, which names the member. abortWaitRecv /
// abortWaitSend make the current (or next) wait return false, as in gloo even if an operation
// completed meanwhile (that completion stays for the next wait).
//
// Closing. A context that goes away says goodbye to its peers and waits (at most the timeout)
// for their answers: per-link order then guarantees that everything it sent was received (sends
// complete once queued). A member that said goodbye has left: its connection closing is no
// failure, messages it sent before still complete receives, but a receive that only it could
// satisfy, or a send to it, fails the context naming it. A member that vanishes without a
// goodbye (a crash) is a broken link.
// Thread-safety: every method is thread-safe (gloo calls from the algorithms' threads; the
// transport delivers on its own thread).
#ifndef ONEFLOW_LIKE_COMM_GLOO_OL_CONTEXT_H_
#define ONEFLOW_LIKE_COMM_GLOO_OL_CONTEXT_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gloo/transport/context.h"
#include "gloo/transport/pair.h"
#include "gloo/transport/unbound_buffer.h"
#include "oneflow_like/comm/transport.h"

namespace oneflow_like {
namespace comm {

// One member's end of a context's links: a Transport whose ranks are the context's members,
// delivering on a thread of its own (TcpTransport). LoopbackHub does not fit as it is: it delivers
// on the sender's thread holding the edge's lock, and a goodbye is answered from the receiver,
// so two members closing at once would deadlock on the two edges' locks.
class GlooMesh {
 public:
  virtual ~GlooMesh() = default;
  virtual Transport* transport() = 0;
  // What the other members need to reach this one (at most kMaxAddressBytes bytes).
  virtual std::string address() const = 0;
  // addresses[k] = member k's address() (this member's entry unused). Blocks until every link
  // is up or the mesh's timeout passed.
  virtual absl::Status Connect(const std::vector<std::string>& addresses) = 0;
  // Called (on any thread) once per broken link: the member at its other end and why.
  virtual void SetErrorHandler(std::function<void(int member, const absl::Status&)> handler) = 0;
  static constexpr size_t kMaxAddressBytes = 160;
};

class OlUnboundBuffer;

class OlGlooContext final : public ::gloo::transport::Context, public std::enable_shared_from_this<OlGlooContext> {
 public:
  static constexpr size_t kDirectSendBytes = size_t{256} << 10;

  // `mesh` may be null for a context of one member (nothing to reach). At most
  // `max_early_bytes` of messages without a posted receive are kept (past it the context fails).
  OlGlooContext(int rank, int size, std::unique_ptr<GlooMesh> mesh, size_t max_early_bytes);
  ~OlGlooContext() override;

  std::unique_ptr<::gloo::transport::Pair>& createPair(int rank) override;
  std::unique_ptr<::gloo::transport::UnboundBuffer> createUnboundBuffer(void* ptr, size_t size) override;

  // Pair::connect: records member `peer`'s address; once every pair has one, connects the mesh
  // (throws gloo::IoException if that fails).
  void ConnectPeer(int peer, const std::string& address);
  std::string address() const;  // this member's, for its pairs

  // Fails the context (the first failure stays) and wakes every wait.
  void Fail(const std::string& why);

  // The buffer operations (OlUnboundBuffer forwards here).
  void Send(OlUnboundBuffer* buffer, int to, uint64_t slot, size_t offset, size_t nbytes);
  void Recv(OlUnboundBuffer* buffer, std::vector<int> from, uint64_t slot, size_t offset, size_t nbytes);
  bool Wait(OlUnboundBuffer* buffer, bool recv, int* rank, std::chrono::milliseconds timeout);
  void Abort(OlUnboundBuffer* buffer, bool recv);
  void Forget(OlUnboundBuffer* buffer);  // the buffer is going away

 private:
  struct PostedRecv {
    OlUnboundBuffer* buffer;
    uint64_t slot;
    std::vector<int> from;
    size_t offset, nbytes;
  };
  struct Early {  // a message that came before its receive
    int from;
    std::string bytes;
  };

  void OnMessage(int from, absl::string_view message);  // the transport's thread
  void OnLinkError(int member, const absl::Status& status);
  void OnBye(int from);
  // Sends goodbye to every member still there and waits for their answers (the destructor).
  void SayGoodbye();
  // The context fails if a member that left is the only one `recv` may come from.
  void CheckSourcesLocked(const PostedRecv& recv);  // REQUIRES: mu_ held
  // A message from `from` (maybe this member): into the oldest matching receive, else kept.
  void ArriveLocked(int from, uint64_t slot, absl::string_view bytes);  // REQUIRES: mu_ held
  void FailLocked(const std::string& why);  // REQUIRES: mu_ held
  size_t CountEarlyLocked() const;          // messages in early_; REQUIRES: mu_ held
  // Copies `bytes` into the receive and completes it, or fails the context on a size mismatch.
  void DeliverLocked(const PostedRecv& recv, int from, absl::string_view bytes);
  [[noreturn]] void ThrowFailureLocked() const;

  std::unique_ptr<GlooMesh> mesh_;
  Transport* const transport_;  // mesh_'s (null without one), valid while its thread may call us
  std::atomic<bool> closing_{false};
  std::mutex connect_mu_;
  std::vector<std::string> peer_addresses_;  // guarded by connect_mu_
  int peers_known_ = 0;                      // guarded by connect_mu_
  bool connected_ = false;                   // guarded by connect_mu_

  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::string failure_;                              // empty: healthy
  std::list<PostedRecv> posted_;                     // receives without a message, oldest first
  std::map<uint64_t, std::deque<Early>> early_;      // [slot]: messages without a receive
  const size_t max_early_bytes_;
  size_t early_bytes_ = 0;                           // of early_'s messages
  std::vector<bool> left_;                           // [member]: said goodbye
  std::vector<bool> broken_;                         // [member]: its link failed
  std::vector<bool> awaiting_goodbye_;               // [member]: SayGoodbye waits for its answer
};

// gloo's unbound buffer over an OlGlooContext (kept alive by the buffer).
class OlUnboundBuffer final : public ::gloo::transport::UnboundBuffer {
 public:
  OlUnboundBuffer(std::shared_ptr<OlGlooContext> context, void* ptr, size_t size);
  ~OlUnboundBuffer() override;

  bool waitRecv(int* rank, std::chrono::milliseconds timeout) override;
  bool waitSend(int* rank, std::chrono::milliseconds timeout) override;
  void abortWaitRecv() override;
  void abortWaitSend() override;
  void send(int dstRank, uint64_t slot, size_t offset, size_t nbytes) override;
  void recv(int srcRank, uint64_t slot, size_t offset, size_t nbytes) override;
  void recv(std::vector<int> srcRanks, uint64_t slot, size_t offset, size_t nbytes) override;

 private:
  friend class OlGlooContext;
  const std::shared_ptr<OlGlooContext> context_;
  // Guarded by the context's mu_.
  std::deque<int> recv_done_, send_done_;  // ranks of completed operations not waited for yet
  bool abort_recv_ = false, abort_send_ = false;
  std::string last_recv_, last_send_;  // the latest operation, for timeout messages
};

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_GLOO_OL_CONTEXT_H_
