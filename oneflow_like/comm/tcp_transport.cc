#include "oneflow_like/comm/tcp_transport.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/comm/tcp_hello.h"

namespace oneflow_like {
namespace comm {
namespace {

// epoll_event.data.u64 = kind << 56 | index.
constexpr uint64_t kListenerTag = uint64_t{0} << 56;
constexpr uint64_t kWakeTag = uint64_t{1} << 56;
constexpr uint64_t kLinkTag = uint64_t{2} << 56;
constexpr uint64_t kStrangerTag = uint64_t{3} << 56;
constexpr uint64_t kTagMask = uint64_t{0xff} << 56;
constexpr size_t kStagingBytes = 256 * 1024;

}  // namespace

absl::StatusOr<std::unique_ptr<TcpTransport>> TcpTransport::Listen(TcpTransportOptions options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("tcp transport: rank ", options.rank, " with world size ",
                                                   options.world_size, "; need 0 <= rank < world_size"));
  }
  if (options.world_size > 1 && options.job_token.empty()) {
    return absl::InvalidArgumentError("tcp transport: job_token is empty; every rank needs the job's shared token "
                                      "(e.g. from the control plane)");
  }
  if (options.job_token.size() > kMaxHelloTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat("tcp transport: job_token of ", options.job_token.size(),
                                                   " bytes exceeds the limit of ", kMaxHelloTokenBytes));
  }
  if (options.max_frame_bytes < 0 || options.connect_timeout_ms < 0 || options.max_pending_connections < 0) {
    return absl::InvalidArgumentError(
        "tcp transport: max_frame_bytes, connect_timeout_ms and max_pending_connections must be >= 0");
  }
  std::unique_ptr<TcpTransport> transport(new TcpTransport(std::move(options)));
  RETURN_IF_ERROR(transport->Start());
  return transport;
}

TcpTransport::TcpTransport(TcpTransportOptions options)
    : options_(std::move(options)),
      link_up_(options_.world_size, false),
      reported_(options_.world_size, false),
      staging_(new char[kStagingBytes]) {}

absl::Status TcpTransport::Start() {
  ASSIGN_OR_RETURN(listener_, ListenTcp(options_.bind_address, options_.port, &port_));
  epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  wake_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_.valid() || !wake_.valid()) {
    return absl::InternalError(absl::StrCat("tcp transport: epoll/eventfd: ", std::strerror(errno)));
  }
  epoll_event listen_event{};
  listen_event.events = EPOLLIN;
  listen_event.data.u64 = kListenerTag;
  epoll_event wake_event{};
  wake_event.events = EPOLLIN;
  wake_event.data.u64 = kWakeTag;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listener_.get(), &listen_event) != 0 ||
      epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &wake_event) != 0) {
    return absl::InternalError(absl::StrCat("tcp transport: epoll_ctl: ", std::strerror(errno)));
  }
  for (int32_t r = 0; r < options_.world_size; ++r) {
    if (r == options_.rank) {
      links_.push_back(nullptr);
      continue;
    }
    TcpLinkOptions link{Rank(options_.rank), Rank(r),  options_.max_frame_bytes, epoll_.get(),
                        kLinkTag | static_cast<uint64_t>(r), &bytes_sent_, &bytes_received_,
                        options_.keep_spare_payloads ? &spares_ : nullptr};
    links_.push_back(std::make_unique<TcpLink>(link));
  }
  io_thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

TcpTransport::~TcpTransport() {
  stopping_.store(true);
  if (io_thread_.joinable()) {
    Wake();
    io_thread_.join();
  }
  links_.clear();  // closes the sockets: peers see EOF
}

std::string TcpTransport::endpoint() const { return absl::StrCat(options_.bind_address, ":", port_); }

void TcpTransport::Wake() {
  const uint64_t one = 1;
  ssize_t ignored = write(wake_.get(), &one, sizeof(one));
  (void)ignored;
}

void TcpTransport::SetErrorHandler(std::function<void(const absl::Status&)> handler) {
  if (!handler) return SetLinkErrorHandler(nullptr);
  SetLinkErrorHandler([handler = std::move(handler)](Rank, const absl::Status& status) { handler(status); });
}

void TcpTransport::SetLinkErrorHandler(std::function<void(Rank peer, const absl::Status&)> handler) {
  std::lock_guard<std::mutex> lock(mu_);
  error_handler_ = std::make_shared<std::function<void(Rank, const absl::Status&)>>(std::move(handler));
}

void TcpTransport::SetReceiver(Receiver receiver) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    receiver_ = std::make_shared<Receiver>(std::move(receiver));
  }
  // A delivery to the old receiver may be running on the I/O thread: wait for it, so the caller
  // may free what the old receiver uses once this returns (the runtime's teardown does).
  if (std::this_thread::get_id() != io_thread_.get_id()) {
    std::lock_guard<std::mutex> wait(delivery_mu_);
  }
  Wake();  // the I/O thread delivers what arrived before
}

absl::Status TcpTransport::Send(Rank to, absl::string_view payload) {
  if (to.value() < 0 || to.value() >= options_.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("tcp transport: destination rank ", to.value(),
                                                   " is outside the world [0, ", options_.world_size, ")"));
  }
  if (to.value() != options_.rank) {
    // The I/O thread (a receiver calling Send) must never wait for a socket.
    return links_[to.value()]->Send(payload, /*may_block=*/std::this_thread::get_id() != io_thread_.get_id());
  }
  ReceivedPayload copy;
  copy.size = copy.capacity = payload.size();
  if (!payload.empty()) {
    copy.data.reset(new char[payload.size()]);
    std::memcpy(copy.data.get(), payload.data(), payload.size());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    self_messages_.push_back(std::move(copy));
  }
  Wake();
  return absl::OkStatus();
}

absl::Status TcpTransport::SendOwned(Rank to, std::string payload) {
  if (to.value() < 0 || to.value() >= options_.world_size || to.value() == options_.rank) {
    return Send(to, payload);  // errors and self-sends as Send
  }
  return links_[to.value()]->SendOwned(std::move(payload));
}

absl::Status TcpTransport::SendRegistered(Rank to, absl::string_view prefix, absl::string_view payload) {
  if (to.value() < 0 || to.value() >= options_.world_size || to.value() == options_.rank) {
    return Transport::SendRegistered(to, prefix, payload);  // errors and self-sends copy
  }
  return links_[to.value()]->SendWithTail(std::string(prefix), payload);
}

void TcpTransport::UnregisterMemory(const char* base, size_t bytes) {
  for (const std::unique_ptr<TcpLink>& link : links_) {
    if (link != nullptr) link->DetachTails(base, base + bytes);
  }
}

absl::Status TcpTransport::Connect(const std::vector<std::string>& endpoints) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (connect_called_) return absl::FailedPreconditionError("tcp transport: Connect was already called");
    connect_called_ = true;
  }
  if (static_cast<int32_t>(endpoints.size()) != options_.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("tcp transport: Connect got ", endpoints.size(),
                                                   " endpoints for a world of ", options_.world_size,
                                                   " (one per rank, endpoints[r] = rank r's endpoint())"));
  }
  const absl::Time deadline = absl::Now() + absl::Milliseconds(options_.connect_timeout_ms);
  std::vector<std::string> dial_errors;
  for (int32_t peer = options_.rank + 1; peer < options_.world_size; ++peer) {
    absl::Status dialed = Dial(peer, endpoints[peer], deadline);
    if (absl::IsDeadlineExceeded(dialed)) {
      dial_errors.push_back(std::string(dialed.message()));
      break;  // the deadline passed: the remaining ranks are missing too
    }
    RETURN_IF_ERROR(dialed);
  }
  std::unique_lock<std::mutex> lock(mu_);
  auto missing = [this] {
    std::vector<int32_t> ranks;
    for (int32_t r = 0; r < options_.world_size; ++r) {
      if (r != options_.rank && !link_up_[r]) ranks.push_back(r);
    }
    return ranks;
  };
  while (!missing().empty()) {
    if (link_up_changed_.wait_until(lock, absl::ToChronoTime(deadline)) == std::cv_status::timeout &&
        !missing().empty()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "tcp transport rank ", options_.rank, ": Connect timed out after ", options_.connect_timeout_ms,
          " ms; no link to rank(s) ", absl::StrJoin(missing(), ", "),
          dial_errors.empty() ? "" : absl::StrCat(" (", absl::StrJoin(dial_errors, "; "), ")")));
    }
  }
  if (options_.close_listener_after_connect) {  // the I/O thread owns the listener: it closes it
    close_listener_ = true;
    Wake();
    link_up_changed_.wait(lock, [this] { return listener_closed_; });
  }
  return absl::OkStatus();
}

absl::Status TcpTransport::Dial(int32_t peer, const std::string& endpoint, absl::Time deadline) {
  const std::string who = absl::StrCat("rank ", peer, " at ", endpoint);
  absl::StatusOr<ScopedFd> socket = DialTcp(endpoint, deadline);
  if (!socket.ok()) {
    return absl::Status(socket.status().code(), absl::StrCat("dialing ", who, ": ", socket.status().message()));
  }
  const int fd = socket->get();
  RETURN_IF_ERROR(WriteAllBefore(fd, EncodeHello({options_.world_size, options_.rank, options_.job_token}), deadline, who));
  std::string reply(kHelloFixedBytes, '\0');
  absl::Status read = ReadExactlyBefore(fd, &reply[0], reply.size(), deadline, who);
  if (absl::IsUnavailable(read)) {
    return absl::UnavailableError(absl::StrCat(who, " refused our hello (", read.message(),
                                               "): wrong job token, world size or a duplicate rank? Its stderr says"));
  }
  RETURN_IF_ERROR(read);
  absl::StatusOr<size_t> size = PeekHello(reply);
  if (!size.ok()) return absl::UnavailableError(absl::StrCat(who, " answered with a bad hello: ", size.status().message()));
  reply.resize(*size);
  RETURN_IF_ERROR(ReadExactlyBefore(fd, &reply[kHelloFixedBytes], *size - kHelloFixedBytes, deadline, who));
  absl::StatusOr<Hello> hello = DecodeHello(reply);
  absl::Status checked = hello.ok() ? CheckHello(*hello, options_.job_token, options_.world_size) : hello.status();
  if (checked.ok() && hello->rank != peer) {
    checked = absl::InvalidArgumentError(
        absl::StrCat("it answered as rank ", hello->rank, " (are the endpoints in rank order?)"));
  }
  if (!checked.ok()) return absl::UnavailableError(absl::StrCat(who, " answered with a bad hello: ", checked.message()));
  RETURN_IF_ERROR(links_[peer]->Attach(std::move(*socket)));
  MarkLinkUp(peer);
  return absl::OkStatus();
}

void TcpTransport::MarkLinkUp(int32_t peer) {
  std::lock_guard<std::mutex> lock(mu_);
  link_up_[peer] = true;
  link_up_changed_.notify_all();
}

// ---- I/O thread ----

void TcpTransport::Run() {
  epoll_event events[64];
  while (!stopping_.load()) {
    const int timeout_ms = strangers_.empty() ? -1 : 100;
    const int n = epoll_wait(epoll_.get(), events, 64, timeout_ms);
    for (int i = 0; i < n && !stopping_.load(); ++i) {
      const uint64_t tag = events[i].data.u64;
      const uint64_t index = tag & ~kTagMask;
      switch (tag & kTagMask) {
        case kListenerTag:
          Accept();
          break;
        case kWakeTag: {
          uint64_t count;
          ssize_t ignored = read(wake_.get(), &count, sizeof(count));
          (void)ignored;
          CloseListenerIfAsked();
          DeliverQueued();
          break;
        }
        case kLinkTag:
          OnLinkEvent(static_cast<int32_t>(index), events[i].events);
          break;
        case kStrangerTag:
          OnStrangerReadable(index);
          break;
      }
    }
    const absl::Time now = absl::Now();
    for (auto it = strangers_.begin(); it != strangers_.end();) {
      const uint64_t id = it->first;
      const bool late = it->second.deadline < now;
      ++it;
      if (late) Refuse(id, absl::StrCat("no complete hello within ", options_.connect_timeout_ms, " ms"));
    }
  }
}

void TcpTransport::CloseListenerIfAsked() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!close_listener_ || listener_closed_) return;
  }
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, listener_.get(), nullptr);
  listener_.reset();  // connections to the port are refused by the kernel from now on
  while (!strangers_.empty()) {
    Refuse(strangers_.begin()->first, "every peer is connected: this transport takes no more connections");
  }
  std::lock_guard<std::mutex> lock(mu_);
  listener_closed_ = true;
  link_up_changed_.notify_all();
}

void TcpTransport::Accept() {
  while (listener_.valid()) {
    const int fd = accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or a transient error: epoll tells us again
    if (options_.max_pending_connections > 0 &&
        strangers_.size() >= static_cast<size_t>(options_.max_pending_connections)) {
      std::fprintf(stderr, "tcp transport rank %d: refused connection from %s: %zu connections already wait for "
                   "their hello (max_pending_connections)\n", options_.rank, RemoteAddress(fd).c_str(),
                   strangers_.size());
      refused_connections_.fetch_add(1);
      close(fd);
      continue;
    }
    const uint64_t id = next_stranger_id_++;
    Stranger& stranger = strangers_[id];
    stranger.socket.reset(fd);
    stranger.address = RemoteAddress(fd);
    stranger.deadline = absl::Now() + absl::Milliseconds(options_.connect_timeout_ms);
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = kStrangerTag | id;
    epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &event);
  }
}

void TcpTransport::OnStrangerReadable(uint64_t id) {
  auto it = strangers_.find(id);
  if (it == strangers_.end()) return;
  Stranger& stranger = it->second;
  while (true) {
    absl::StatusOr<size_t> size = PeekHello(stranger.received);
    if (!size.ok()) return Refuse(id, std::string(size.status().message()));
    if (*size != 0 && stranger.received.size() == *size) return AdmitStranger(id, stranger);
    // Read no further than the hello: whatever follows belongs to the link.
    const size_t want = (*size == 0 ? kHelloFixedBytes : *size) - stranger.received.size();
    char buffer[kHelloFixedBytes + kMaxHelloTokenBytes];
    const ssize_t n = recv(stranger.socket.get(), buffer, want, 0);
    if (n == 0) return Refuse(id, "closed before completing its hello");
    if (n < 0) {
      if (WouldBlock(errno)) return;
      return Refuse(id, absl::StrCat("socket error before the hello: ", std::strerror(errno)));
    }
    stranger.received.append(buffer, static_cast<size_t>(n));
  }
}

void TcpTransport::AdmitStranger(uint64_t id, Stranger& stranger) {
  absl::StatusOr<Hello> hello = DecodeHello(stranger.received);
  absl::Status checked = hello.ok() ? CheckHello(*hello, options_.job_token, options_.world_size) : hello.status();
  if (!checked.ok()) return Refuse(id, std::string(checked.message()));
  const int32_t peer = hello->rank;
  if (peer >= options_.rank) {
    return Refuse(id, absl::StrCat("rank ", peer, " must not dial rank ", options_.rank, " (the lower rank dials)"));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (link_up_[peer]) return Refuse(id, absl::StrCat("duplicate rank ", peer, ": its link is already up"));
  }
  const std::string reply = EncodeHello({options_.world_size, options_.rank, options_.job_token});
  // A fresh socket's buffer takes the small reply whole; anything else is a broken stranger.
  if (send(stranger.socket.get(), reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
      static_cast<ssize_t>(reply.size())) {
    return Refuse(id, "could not send our hello reply");
  }
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, stranger.socket.get(), nullptr);
  SetNoDelay(stranger.socket.get());
  ScopedFd socket = std::move(stranger.socket);
  strangers_.erase(id);
  absl::Status attached = links_[peer]->Attach(std::move(socket));
  if (!attached.ok()) return BreakLink(peer, attached);
  MarkLinkUp(peer);
}

void TcpTransport::Refuse(uint64_t id, const std::string& reason) {
  auto it = strangers_.find(id);
  if (it == strangers_.end()) return;
  std::fprintf(stderr, "tcp transport rank %d: refused connection from %s: %s\n", options_.rank,
               it->second.address.c_str(), reason.c_str());
  refused_connections_.fetch_add(1);  // before the close, which the stranger may be waiting for
  strangers_.erase(it);               // closes the socket (and so removes it from epoll)
}

void TcpTransport::OnLinkEvent(int32_t peer, uint32_t events) {
  TcpLink& link = *links_[peer];
  if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
    absl::Status read = link.OnReadable(staging_.get(), kStagingBytes,
                                        [this](Rank from, ReceivedPayload* payload) { Deliver(from, payload); });
    if (!read.ok()) return BreakLink(peer, read);
  }
  if (events & EPOLLOUT) {
    absl::Status written = link.OnWritable();
    if (!written.ok()) return BreakLink(peer, written);
  }
}

void TcpTransport::BreakLink(int32_t peer, const absl::Status& status) {
  const absl::Status failure = links_[peer]->Close(status);
  if (reported_[peer]) return;
  reported_[peer] = true;
  std::shared_ptr<std::function<void(Rank, const absl::Status&)>> handler;
  {
    std::lock_guard<std::mutex> lock(mu_);
    handler = error_handler_;
  }
  if (handler != nullptr && *handler) {
    (*handler)(Rank(peer), failure);
  } else {
    std::fprintf(stderr, "tcp transport rank %d: %s\n", options_.rank, failure.ToString().c_str());
  }
}

void TcpTransport::Deliver(Rank from, ReceivedPayload* payload) {
  std::lock_guard<std::mutex> delivering(delivery_mu_);
  std::shared_ptr<Receiver> receiver;
  {
    std::lock_guard<std::mutex> lock(mu_);
    receiver = receiver_;
  }
  if (receiver != nullptr && undelivered_.empty()) {
    (*receiver)(from, payload->view());
  } else {
    undelivered_.emplace_back(from, std::move(*payload));  // the link allocates a new buffer
    payload->data = nullptr;
  }
}

void TcpTransport::DeliverQueued() {
  std::deque<ReceivedPayload> self_messages;
  {
    std::unique_lock<std::mutex> delivering(delivery_mu_);
    std::shared_ptr<Receiver> receiver;
    {
      std::lock_guard<std::mutex> lock(mu_);
      self_messages.swap(self_messages_);
      receiver = receiver_;
    }
    if (receiver != nullptr) {
      while (!undelivered_.empty()) {
        std::pair<Rank, ReceivedPayload> message = std::move(undelivered_.front());
        undelivered_.pop_front();
        (*receiver)(message.first, message.second.view());
      }
    }
  }
  for (ReceivedPayload& message : self_messages) Deliver(Rank(options_.rank), &message);
}

}  // namespace comm
}  // namespace oneflow_like
