#include "oneflow_like/comm/shm_transport.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "oneflow_like/comm/shm_peer.h"
#include "oneflow_like/comm/tcp_hello.h"

namespace oneflow_like {
namespace comm {
namespace {

// A message reassembled from several records keeps its buffer for the next one up to this
// size (no page faults for repeated large registers); larger buffers are released.
constexpr uint64_t kKeptAssemblyBytes = uint64_t{256} << 20;
constexpr int kRecordsPerPass = 64;  // per ring, so one busy edge does not starve the others

// Wake-ups on eventfds, some of them the peer's. Neither call ever waits: the descriptors are
// non-blocking (Connect checks the peer's), and each first polls without a timeout, so even a
// peer that later clears O_NONBLOCK on the shared file description cannot stall us unless it
// races the poll. EAGAIN on a write means the counter is saturated: the reader is woken anyway.
void Signal(int eventfd_fd) {
  pollfd ready{eventfd_fd, POLLOUT, 0};
  if (poll(&ready, 1, 0) != 1 || (ready.revents & POLLOUT) == 0) return;
  const uint64_t one = 1;
  ssize_t ignored;
  do {
    ignored = write(eventfd_fd, &one, sizeof(one));
  } while (ignored < 0 && errno == EINTR);
}

void Drain(int eventfd_fd) {
  pollfd ready{eventfd_fd, POLLIN, 0};
  if (poll(&ready, 1, 0) != 1 || (ready.revents & POLLIN) == 0) return;
  uint64_t count;
  ssize_t ignored = read(eventfd_fd, &count, sizeof(count));
  (void)ignored;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShmTransport>> ShmTransport::Listen(ShmTransportOptions options) {
  const std::string self = absl::StrCat("shm transport rank ", options.rank);
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("shm transport: rank ", options.rank, " with world size ",
                                                   options.world_size, "; need 0 <= rank < world_size"));
  }
  std::vector<bool> seen(options.world_size, false);
  for (int32_t peer : options.peers) {
    if (peer < 0 || peer >= options.world_size || peer == options.rank || seen[peer]) {
      return absl::InvalidArgumentError(absl::StrCat(self, ": peer rank ", peer,
                                                     " is outside the world, this rank or listed twice"));
    }
    seen[peer] = true;
  }
  if (!options.peers.empty() && options.job_token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(self, ": job_token is empty; every rank needs the job's token"));
  }
  if (options.job_token.size() > kMaxHelloTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat(self, ": job_token of ", options.job_token.size(),
                                                   " bytes exceeds the limit of ", kMaxHelloTokenBytes));
  }
  absl::Status capacity = ShmRing::CheckCapacity(options.ring_bytes);
  if (!capacity.ok()) return absl::InvalidArgumentError(absl::StrCat(self, ": ", capacity.message()));
  if (options.max_message_bytes < 0 || options.connect_timeout_ms < 0) {
    return absl::InvalidArgumentError(absl::StrCat(self, ": max_message_bytes and connect_timeout_ms must be >= 0"));
  }
  std::unique_ptr<ShmTransport> transport(new ShmTransport(std::move(options)));
  RETURN_IF_ERROR(transport->Start());
  return transport;
}

ShmTransport::ShmTransport(ShmTransportOptions options) : options_(std::move(options)) {}

absl::Status ShmTransport::Start() {
  peers_.resize(options_.world_size);
  for (int32_t rank : options_.peers) {
    peers_[rank] = std::make_unique<Peer>();
    peers_[rank]->rank = rank;
  }
  if (!options_.peers.empty()) {
    ASSIGN_OR_RETURN(listener_, UnixListener::Create(absl::StrCat("rank", options_.rank)));
    endpoint_ = listener_.path();
  }
  epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  wake_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_.valid() || !wake_.valid()) {
    return absl::InternalError(absl::StrCat("shm transport: epoll/eventfd: ", std::strerror(errno)));
  }
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = kShmWakeTag;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &event) != 0) {
    return absl::InternalError(absl::StrCat("shm transport: epoll_ctl: ", std::strerror(errno)));
  }
  io_thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

ShmTransport::~ShmTransport() {
  stopping_.store(true);
  if (io_thread_.joinable()) {
    Wake();
    io_thread_.join();
  }
  peers_.clear();  // closes the connections (peers see EOF) and unmaps the rings
}

void ShmTransport::Wake() { Signal(wake_.get()); }

bool ShmTransport::Serves(Rank to) const {
  return to.value() == options_.rank || PeerOf(to.value()) != nullptr;
}

ShmTransport::Peer* ShmTransport::PeerOf(int32_t rank) const {
  if (rank < 0 || rank >= options_.world_size) return nullptr;
  return peers_[rank].get();
}

char* ShmTransport::IncomingRingForTesting(Rank from, size_t* bytes) {
  Peer* peer = PeerOf(from.value());
  if (peer == nullptr || !peer->ready.load()) return nullptr;
  *bytes = peer->in_mapping.bytes();
  return peer->in_mapping.base();
}

void ShmTransport::SetErrorHandler(std::function<void(const absl::Status&)> handler) {
  std::lock_guard<std::mutex> lock(mu_);
  error_handler_ = std::make_shared<std::function<void(const absl::Status&)>>(std::move(handler));
}

void ShmTransport::SetReceiver(Receiver receiver) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    receiver_ = std::make_shared<Receiver>(std::move(receiver));
  }
  // A delivery to the old receiver may be running: wait for it (the runtime's teardown frees
  // what the old receiver used once this returns).
  if (std::this_thread::get_id() != io_thread_.get_id()) {
    std::lock_guard<std::mutex> wait(delivery_mu_);
  }
  Wake();  // what arrived before is delivered now
}

// ---- Sending ----

absl::Status ShmTransport::Send(Rank to, absl::string_view payload) {
  Outgoing message;
  message.external = payload;
  return Enqueue(to, std::move(message), /*copy_if_queued=*/true);
}

absl::Status ShmTransport::SendOwned(Rank to, std::string payload) {
  Outgoing message;
  message.owned = std::move(payload);
  message.uses_owned = true;
  return Enqueue(to, std::move(message), /*copy_if_queued=*/false);
}

absl::Status ShmTransport::SendRegistered(Rank to, absl::string_view prefix, absl::string_view payload) {
  Outgoing message;
  message.prefix = std::string(prefix);
  message.external = payload;  // stays unchanged until the peer got it (the contract)
  return Enqueue(to, std::move(message), /*copy_if_queued=*/false);
}

absl::Status ShmTransport::Enqueue(Rank to, Outgoing message, bool copy_if_queued) {
  if (to.value() == options_.rank) {
    std::string copy = message.prefix;
    copy.append(message.body().data(), message.body().size());
    {
      std::lock_guard<std::mutex> lock(mu_);
      self_messages_.push_back(std::move(copy));
    }
    Wake();
    return absl::OkStatus();
  }
  Peer* peer = PeerOf(to.value());
  if (peer == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("shm transport rank ", options_.rank, ": destination rank ",
                                                   to.value(), " is not on this node (world of ",
                                                   options_.world_size, ")"));
  }
  if (static_cast<int64_t>(message.size()) > options_.max_message_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("shm transport rank ", options_.rank, ": a message of ",
                                                   message.size(), " bytes to rank ", to.value(),
                                                   " exceeds max_message_bytes ", options_.max_message_bytes));
  }
  std::unique_lock<std::mutex> lock(peer->mu);
  if (!peer->failure.ok()) return peer->failure;
  if (peer->out.has_value() && peer->pending.empty()) {
    absl::StatusOr<bool> done = WriteLocked(*peer, message);
    if (!done.ok()) {
      lock.unlock();
      BreakEdge(*peer, done.status());
      return done.status();
    }
    if (*done) {
      if (message.uses_owned) spares_.Put(std::move(message.owned));
      return absl::OkStatus();
    }
  }
  if (copy_if_queued && !message.uses_owned) {  // Send: the caller's bytes are not ours to keep
    message.owned = std::string(message.external);
    message.uses_owned = true;
  }
  peer->pending.push_back(std::move(message));
  lock.unlock();
  Wake();  // the I/O thread writes it as the reader makes room
  return absl::OkStatus();
}

absl::StatusOr<bool> ShmTransport::WriteLocked(Peer& peer, Outgoing& message) {
  while (!message.done()) {
    ASSIGN_OR_RETURN(bool wrote, peer.out->TryWriteRecord(message.prefix, message.body(), &message.written));
    if (!wrote) break;
    message.started = true;
    if (peer.out->TakeReaderWaiting()) Signal(peer.out_data.get());
  }
  return message.done();
}

void ShmTransport::UnregisterMemory(const char* base, size_t bytes) {
  const char* end = base + bytes;
  for (const std::unique_ptr<Peer>& peer : peers_) {
    if (peer == nullptr) continue;
    std::lock_guard<std::mutex> lock(peer->mu);
    for (Outgoing& message : peer->pending) {
      if (message.uses_owned || message.external.empty()) continue;
      if (message.external.data() >= base && message.external.data() < end) {
        message.owned = std::string(message.external);
        message.uses_owned = true;
      }
    }
  }
}

// ---- I/O thread ----

void ShmTransport::Run() {
  epoll_event events[32];
  while (!stopping_.load()) {
    if (Pass()) continue;
    // About to sleep: announce it in every ring, then look once more (a writer that published
    // before seeing the flag is caught here; one after it writes the data eventfd).
    for (const std::unique_ptr<Peer>& peer : peers_) {
      if (peer != nullptr && peer->ready.load(std::memory_order_acquire) && !peer->in_broken) {
        peer->in->SetReaderWaiting(true);
      }
    }
    bool more = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      more = !self_messages_.empty() && receiver_ != nullptr;
      for (const std::unique_ptr<Peer>& peer : peers_) {
        if (peer != nullptr && peer->ready.load(std::memory_order_acquire) && !peer->in_broken) {
          more |= receiver_ != nullptr && peer->in->HasData();
        }
      }
    }
    const int n = more ? 0 : epoll_wait(epoll_.get(), events, 32, -1);
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = events[i].data.u64;
      const int32_t rank = static_cast<int32_t>(tag & ~kShmTagMask);
      switch (tag & kShmTagMask) {  // read only the descriptor that fired
        case kShmWakeTag:
          Drain(wake_.get());
          break;
        case kShmDataTag:
          Drain(peers_[rank]->in_data.get());
          break;
        case kShmSpaceTag:
          Drain(peers_[rank]->out_space.get());
          break;
        case kShmSocketTag:
          OnSocketEvent(*peers_[rank]);
          break;
      }
    }
    for (const std::unique_ptr<Peer>& peer : peers_) {
      if (peer != nullptr && peer->ready.load(std::memory_order_acquire) && !peer->in_broken) {
        peer->in->SetReaderWaiting(false);
      }
    }
  }
}

bool ShmTransport::Pass() {
  bool moved = false;
  std::deque<std::string> self_messages;
  bool have_receiver;
  {
    std::lock_guard<std::mutex> lock(mu_);
    have_receiver = receiver_ != nullptr;
    if (have_receiver) self_messages.swap(self_messages_);
  }
  for (const std::string& message : self_messages) Deliver(Rank(options_.rank), message);
  moved |= !self_messages.empty();
  for (const std::unique_ptr<Peer>& peer : peers_) {
    if (peer == nullptr || !peer->ready.load(std::memory_order_acquire)) continue;
    if (!peer->reported) {  // a sender found the edge broken: report it from here
      absl::Status failure;
      {
        std::lock_guard<std::mutex> lock(peer->mu);
        failure = peer->failure;
      }
      if (!failure.ok()) BreakEdge(*peer, failure);
    }
    if (have_receiver && !peer->in_broken) moved |= ReadRing(*peer);
    moved |= DrainPending(*peer);
    if (peer->closed && !peer->reported && (peer->in_broken || !have_receiver || !peer->in->HasData())) {
      BreakEdge(*peer, absl::UnavailableError(absl::StrCat(
                           "shm transport rank ", options_.rank, ": rank ", peer->rank,
                           " closed its shared-memory link (its process ended or dropped the transport)")));
    }
  }
  return moved;
}

bool ShmTransport::ReadRing(Peer& peer) {
  const std::string self = absl::StrCat("shm transport rank ", options_.rank);
  for (int i = 0; i < kRecordsPerPass; ++i) {
    bool wake_writer = false;
    absl::StatusOr<std::optional<ShmRecord>> peeked = peer.in->Peek(&wake_writer);
    if (wake_writer) Signal(peer.in_space.get());
    if (!peeked.ok()) {
      BreakEdge(peer, absl::DataLossError(absl::StrCat(self, ": from rank ", peer.rank, ": ", peeked.status().message())));
      return true;
    }
    if (!peeked->has_value()) return i > 0;
    const ShmRecord& record = **peeked;
    absl::Status bad;
    if (record.first == peer.assembling) {
      bad = absl::DataLossError(absl::StrCat(self, ": from rank ", peer.rank, ": a record ",
                                             record.first ? "starts a message inside another" : "continues no message"));
    } else if (record.first && record.message_bytes > static_cast<uint64_t>(options_.max_message_bytes)) {
      // Whole or the first of several: our limit, whatever the peer's sender allowed.
      bad = absl::DataLossError(absl::StrCat(self, ": from rank ", peer.rank, ": a message of ", record.message_bytes,
                                             " bytes exceeds max_message_bytes ", options_.max_message_bytes));
    } else if (record.first && record.last) {
      bytes_received_.fetch_add(static_cast<int64_t>(record.payload.size()));
      Deliver(Rank(peer.rank), record.payload);  // straight from the shared mapping
    } else if (record.first) {
      peer.assembling = true;
      peer.assembly_bytes = record.message_bytes;
      peer.assembly.clear();  // keeps its capacity: no page faults for the next large message
      // Reserved up to a bound only: the announced size is the peer's word (at most
      // max_message_bytes); beyond the bound the buffer grows as records arrive.
      peer.assembly.reserve(std::min<uint64_t>(record.message_bytes, kKeptAssemblyBytes));
      peer.assembly.append(record.payload.data(), record.payload.size());
    } else if (peer.assembly.size() + record.payload.size() > peer.assembly_bytes ||
               record.last != (peer.assembly.size() + record.payload.size() == peer.assembly_bytes)) {
      bad = absl::DataLossError(absl::StrCat(self, ": from rank ", peer.rank, ": a message's records add up to ",
                                             peer.assembly.size() + record.payload.size(),
                                             " bytes, not the size its first record announced"));
    } else {
      peer.assembly.append(record.payload.data(), record.payload.size());
      if (record.last) {
        peer.assembling = false;
        bytes_received_.fetch_add(static_cast<int64_t>(peer.assembly.size()));
        Deliver(Rank(peer.rank), peer.assembly);
        // One huge message does not pin its buffer for the rest of the job (per peer).
        if (peer.assembly.capacity() > kKeptAssemblyBytes) std::string().swap(peer.assembly);
      }
    }
    if (!bad.ok()) {
      BreakEdge(peer, bad);
      return true;
    }
    if (peer.in->Consume(record)) Signal(peer.in_space.get());
  }
  return true;
}

bool ShmTransport::DrainPending(Peer& peer) {
  std::unique_lock<std::mutex> lock(peer.mu);
  bool moved = false;
  while (!peer.pending.empty() && peer.failure.ok()) {
    Outgoing& message = peer.pending.front();
    const size_t before = message.written;
    const bool was_started = message.started;
    absl::StatusOr<bool> done = WriteLocked(peer, message);
    if (!done.ok()) {
      lock.unlock();
      BreakEdge(peer, done.status());
      return true;
    }
    moved |= message.written != before || message.started != was_started;
    if (*done) {
      if (message.uses_owned) spares_.Put(std::move(message.owned));
      peer.pending.pop_front();
      continue;
    }
    // No room: ask the reader to signal, then look again (it may have made room meanwhile).
    peer.out->SetWriterWaiting();
    if (!peer.out->HasRoomFor(message.size() - message.written)) break;
  }
  return moved;
}

void ShmTransport::OnSocketEvent(Peer& peer) {
  char byte;
  const ssize_t n = recv(peer.socket.get(), &byte, 1, MSG_DONTWAIT);
  if (n < 0 && WouldBlock(errno)) return;
  // EOF, an error, or bytes the protocol never sends after the set-up: the link is over.
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, peer.socket.get(), nullptr);
  peer.closed = true;
}

void ShmTransport::BreakEdge(Peer& peer, const absl::Status& status) {
  {
    std::lock_guard<std::mutex> lock(peer.mu);
    if (peer.failure.ok()) peer.failure = status;
    peer.pending.clear();
  }
  if (std::this_thread::get_id() != io_thread_.get_id()) {
    Wake();  // the I/O thread reports it (the handler runs there, once)
    return;
  }
  peer.in_broken = true;
  // Tell the peer: its side of the link reads EOF ("closed its shared-memory link") instead of
  // filling a ring nobody reads.
  if (peer.socket.valid()) shutdown(peer.socket.get(), SHUT_RDWR);
  if (peer.reported) return;
  peer.reported = true;
  absl::Status failure;
  {
    std::lock_guard<std::mutex> lock(peer.mu);
    failure = peer.failure;
  }
  std::shared_ptr<std::function<void(const absl::Status&)>> handler;
  {
    std::lock_guard<std::mutex> lock(mu_);
    handler = error_handler_;
  }
  if (handler != nullptr && *handler) {
    (*handler)(failure);
  } else {
    std::fprintf(stderr, "shm transport rank %d: %s\n", options_.rank, failure.ToString().c_str());
  }
}

void ShmTransport::Deliver(Rank from, absl::string_view payload) {
  std::lock_guard<std::mutex> delivering(delivery_mu_);
  std::shared_ptr<Receiver> receiver;
  {
    std::lock_guard<std::mutex> lock(mu_);
    receiver = receiver_;
  }
  if (receiver != nullptr && *receiver) (*receiver)(from, payload);
}

}  // namespace comm
}  // namespace oneflow_like
