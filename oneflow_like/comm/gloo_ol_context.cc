#include "oneflow_like/comm/gloo_ol_context.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gloo/common/error.h"
#include "gloo/common/logging.h"

namespace oneflow_like {
namespace comm {
namespace {

// A message: this header, then `nbytes` bytes (none for an ack). Little-endian (x86).
//   u32 magic "OLGM" | u32 kind | u64 slot | u64 nbytes
constexpr uint32_t kMagic = 0x4d474c4f;  // "OLGM"
constexpr size_t kHeaderBytes = 24;
enum Kind : uint32_t { kData = 1, kBye = 2, kByeAck = 3 };

std::string Header(Kind kind, uint64_t slot, uint64_t nbytes) {
  char out[kHeaderBytes];
  const uint32_t magic = kMagic, k = kind;
  std::memcpy(out, &magic, 4);
  std::memcpy(out + 4, &k, 4);
  std::memcpy(out + 8, &slot, 8);
  std::memcpy(out + 16, &nbytes, 8);
  return std::string(out, kHeaderBytes);
}

std::string Hex(uint64_t slot) { return absl::StrCat("0x", absl::Hex(slot)); }

// gloo's address of one pair: a fixed-size record (connectFullMesh cuts the members' addresses
// out of one byte string by equal shares) carrying the mesh address of this member.
constexpr char kAddressMagic[8] = {'O', 'L', 'G', 'L', 'O', 'O', '1', '\0'};
constexpr size_t kAddressBytes = sizeof(kAddressMagic) + 1 + GlooMesh::kMaxAddressBytes;

class OlAddress final : public ::gloo::transport::Address {
 public:
  explicit OlAddress(std::string mesh_address) : mesh_address_(std::move(mesh_address)) {}
  std::string str() const override { return mesh_address_; }
  std::vector<char> bytes() const override {
    std::vector<char> out(kAddressBytes, '\0');
    std::memcpy(out.data(), kAddressMagic, sizeof(kAddressMagic));
    out[sizeof(kAddressMagic)] = static_cast<char>(mesh_address_.size());
    std::memcpy(out.data() + sizeof(kAddressMagic) + 1, mesh_address_.data(), mesh_address_.size());
    return out;
  }
  // The mesh address in `bytes`, or an empty string if they are not an OlAddress.
  static std::string Parse(const std::vector<char>& bytes) {
    if (bytes.size() != kAddressBytes || std::memcmp(bytes.data(), kAddressMagic, sizeof(kAddressMagic)) != 0) {
      return "";
    }
    const size_t n = static_cast<unsigned char>(bytes[sizeof(kAddressMagic)]);
    if (n > GlooMesh::kMaxAddressBytes) return "";
    return std::string(bytes.data() + sizeof(kAddressMagic) + 1, n);
  }

 private:
  std::string mesh_address_;
};

class OlPair final : public ::gloo::transport::Pair {
 public:
  OlPair(OlGlooContext* context, int peer) : context_(context), peer_(peer), address_(context->address()) {}
  const ::gloo::transport::Address& address() const override { return address_; }
  void connect(const std::vector<char>& bytes) override {
    const std::string mesh_address = OlAddress::Parse(bytes);
    GLOO_ENFORCE(!mesh_address.empty(), "ol gloo transport: member ", peer_,
                 "'s address is not one of ours (do all members use the same gloo transport?)");
    context_->ConnectPeer(peer_, mesh_address);
  }
  void close() override {}  // the context's mesh closes with the context
  void setSync(bool, bool) override {}  // every wait blocks on a condition variable anyway
  std::unique_ptr<::gloo::transport::Buffer> createSendBuffer(int, void*, size_t) override { Unsupported(); }
  std::unique_ptr<::gloo::transport::Buffer> createRecvBuffer(int, void*, size_t) override { Unsupported(); }
  // gloo's UnboundBuffer resolves an unspecified length before it calls these; so do ours.
  void send(::gloo::transport::UnboundBuffer* buf, uint64_t slot, size_t offset, size_t nbytes) override {
    buf->send(peer_, slot, offset, nbytes);
  }
  void recv(::gloo::transport::UnboundBuffer* buf, uint64_t slot, size_t offset, size_t nbytes) override {
    buf->recv(peer_, slot, offset, nbytes);
  }

 private:
  [[noreturn]] static void Unsupported() {
    throw ::gloo::EnforceNotMet(__FILE__, __LINE__, "unbound buffers only",
                                "ol gloo transport: bound buffers (createSendBuffer / createRecvBuffer) are not "
                                "implemented; only gloo's unbound-buffer algorithms run over this transport");
  }
  OlGlooContext* const context_;
  const int peer_;
  const OlAddress address_;
};

}  // namespace

OlGlooContext::OlGlooContext(int rank, int size, std::unique_ptr<GlooMesh> mesh, size_t max_early_bytes)
    : ::gloo::transport::Context(rank, size),
      mesh_(std::move(mesh)),
      transport_(mesh_ == nullptr ? nullptr : mesh_->transport()),
      peer_addresses_(size),
      max_early_bytes_(max_early_bytes),
      left_(size, false),
      broken_(size, false),
      awaiting_goodbye_(size, false) {
  if (mesh_ == nullptr) return;
  mesh_->SetErrorHandler([this](int member, const absl::Status& status) { OnLinkError(member, status); });
  transport_->SetReceiver([this](Rank from, absl::string_view message) { OnMessage(from.value(), message); });
}

OlGlooContext::~OlGlooContext() {
  if (mesh_ == nullptr) return;
  SayGoodbye();
  closing_.store(true);  // what still arrives is dropped
  mesh_.reset();         // joins the transport's thread before the rest goes
}

void OlGlooContext::SayGoodbye() {
  {
    std::lock_guard<std::mutex> lock(connect_mu_);
    if (!connected_) return;
  }
  std::vector<int> peers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int k = 0; k < size; ++k) {
      if (k == rank || left_[k] || broken_[k]) continue;
      awaiting_goodbye_[k] = true;
      peers.push_back(k);
    }
  }
  for (int k : peers) {
    if (!transport_->Send(Rank(k), Header(kBye, 0, 0)).ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      awaiting_goodbye_[k] = false;
    }
  }
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait_for(lock, getTimeout(), [&] {
    return std::none_of(awaiting_goodbye_.begin(), awaiting_goodbye_.end(), [](bool b) { return b; });
  });
}

void OlGlooContext::OnLinkError(int member, const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  broken_[member] = true;
  awaiting_goodbye_[member] = false;
  changed_.notify_all();
  if (left_[member]) return;  // it said goodbye: closing is what it does next
  FailLocked(absl::StrCat("ol gloo transport, member ", rank, ": the link to member ", member, " failed: ",
                          status.message()));
}

void OlGlooContext::OnBye(int from) {
  const absl::Status answered = transport_->Send(Rank(from), Header(kByeAck, 0, 0));
  (void)answered;  // if it cannot be sent the link broke: the member stops waiting for it anyway
  std::lock_guard<std::mutex> lock(mu_);
  left_[from] = true;
  awaiting_goodbye_[from] = false;
  changed_.notify_all();
  for (const PostedRecv& recv : posted_) CheckSourcesLocked(recv);
}

void OlGlooContext::CheckSourcesLocked(const PostedRecv& recv) {
  for (int k : recv.from) {
    if (!left_[k]) return;
  }
  FailLocked(absl::StrCat("ol gloo transport, member ", rank, ": member(s) ", absl::StrJoin(recv.from, ","),
                          " closed the context while this member waits for ", recv.buffer->last_recv_));
}

std::unique_ptr<::gloo::transport::Pair>& OlGlooContext::createPair(int rank) {
  GLOO_ENFORCE(rank >= 0 && rank < size && rank != this->rank, "ol gloo transport: no pair for member ", rank,
               " in a context of ", size, " (this member is ", this->rank, ")");
  pairs_[rank] = std::make_unique<OlPair>(this, rank);
  return pairs_[rank];
}

std::unique_ptr<::gloo::transport::UnboundBuffer> OlGlooContext::createUnboundBuffer(void* ptr, size_t size) {
  return std::make_unique<OlUnboundBuffer>(shared_from_this(), ptr, size);
}

std::string OlGlooContext::address() const { return mesh_ == nullptr ? std::string() : mesh_->address(); }

void OlGlooContext::ConnectPeer(int peer, const std::string& address) {
  std::vector<std::string> addresses;
  {
    std::lock_guard<std::mutex> lock(connect_mu_);
    GLOO_ENFORCE(peer_addresses_[peer].empty(), "ol gloo transport: member ", peer, " connected twice");
    peer_addresses_[peer] = address;
    if (++peers_known_ < size - 1) return;
    addresses = peer_addresses_;
  }
  const absl::Status connected = mesh_->Connect(addresses);
  if (!connected.ok()) {
    const std::string why = absl::StrCat("ol gloo transport, member ", rank, ": connecting: ", connected.ToString());
    Fail(why);
    throw ::gloo::IoException(why);
  }
  std::lock_guard<std::mutex> lock(connect_mu_);
  connected_ = true;
}

void OlGlooContext::Fail(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  FailLocked(why);
}

void OlGlooContext::FailLocked(const std::string& why) {
  if (failure_.empty()) failure_ = why;
  changed_.notify_all();
}

void OlGlooContext::ThrowFailureLocked() const { throw ::gloo::IoException(failure_); }

void OlGlooContext::Send(OlUnboundBuffer* buffer, int to, uint64_t slot, size_t offset, size_t nbytes) {
  GLOO_ENFORCE(to >= 0 && to < size, "ol gloo transport: send to member ", to, " outside the context of ", size);
  const char* data = static_cast<const char*>(buffer->ptr) + offset;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.empty()) ThrowFailureLocked();
    buffer->last_send_ = absl::StrCat("a send of ", nbytes, " bytes to member ", to, " (slot ", Hex(slot), ")");
    if (to == rank) {  // a message to itself: delivered here
      ArriveLocked(to, slot, absl::string_view(data, nbytes));
      if (!failure_.empty()) ThrowFailureLocked();  // past max_early_bytes
      buffer->send_done_.push_back(to);
      changed_.notify_all();
      return;
    }
    if (left_[to]) {
      FailLocked(absl::StrCat("ol gloo transport, member ", rank, ": member ", to, " closed the context before ",
                              buffer->last_send_));
      ThrowFailureLocked();
    }
  }
  absl::Status sent;
  if (nbytes >= kDirectSendBytes) {  // the socket takes what it can straight from `data`
    sent = transport_->SendRegistered(Rank(to), Header(kData, slot, nbytes), absl::string_view(data, nbytes));
    transport_->UnregisterMemory(data, nbytes);  // the rest is copied: the caller may reuse `data`
  } else {
    std::string message = transport_->TakeBuffer(kHeaderBytes + nbytes);
    message.append(Header(kData, slot, nbytes));
    message.append(data, nbytes);
    sent = transport_->SendOwned(Rank(to), std::move(message));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!sent.ok()) {
    FailLocked(absl::StrCat("ol gloo transport, member ", rank, ": sending to member ", to, ": ", sent.message()));
    ThrowFailureLocked();
  }
  buffer->send_done_.push_back(to);
  changed_.notify_all();
}

void OlGlooContext::Recv(OlUnboundBuffer* buffer, std::vector<int> from, uint64_t slot, size_t offset,
                         size_t nbytes) {
  GLOO_ENFORCE(!from.empty(), "ol gloo transport: a receive from no member");
  for (int r : from) {
    GLOO_ENFORCE(r >= 0 && r < size, "ol gloo transport: receive from member ", r, " outside the context of ", size);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!failure_.empty()) ThrowFailureLocked();
  buffer->last_recv_ = absl::StrCat("a receive of ", nbytes, " bytes from member(s) ", absl::StrJoin(from, ","),
                                    " (slot ", Hex(slot), ")");
  PostedRecv recv{buffer, slot, std::move(from), offset, nbytes};
  auto early = early_.find(slot);
  if (early != early_.end()) {
    std::deque<Early>& kept = early->second;
    for (auto it = kept.begin(); it != kept.end(); ++it) {
      if (std::find(recv.from.begin(), recv.from.end(), it->from) == recv.from.end()) continue;
      const Early message = std::move(*it);
      kept.erase(it);
      if (kept.empty()) early_.erase(early);
      early_bytes_ -= message.bytes.size();
      DeliverLocked(recv, message.from, message.bytes);
      if (!failure_.empty()) ThrowFailureLocked();
      return;
    }
  }
  CheckSourcesLocked(recv);
  if (!failure_.empty()) ThrowFailureLocked();
  posted_.push_back(std::move(recv));
}

void OlGlooContext::DeliverLocked(const PostedRecv& recv, int from, absl::string_view bytes) {
  if (bytes.size() != recv.nbytes) {
    FailLocked(absl::StrCat("ol gloo transport, member ", rank, ": member ", from, " sent ", bytes.size(),
                            " bytes in slot ", Hex(recv.slot), " where a receive of ", recv.nbytes,
                            " bytes was posted (refused: the members disagree on the message size)"));
    return;
  }
  if (!bytes.empty()) std::memcpy(static_cast<char*>(recv.buffer->ptr) + recv.offset, bytes.data(), bytes.size());
  recv.buffer->recv_done_.push_back(from);
  changed_.notify_all();
}

void OlGlooContext::OnMessage(int from, absl::string_view message) {
  if (closing_.load()) return;
  uint32_t magic = 0, kind = 0;
  uint64_t slot = 0, nbytes = 0;
  if (message.size() >= kHeaderBytes) {
    std::memcpy(&magic, message.data(), 4);
    std::memcpy(&kind, message.data() + 4, 4);
    std::memcpy(&slot, message.data() + 8, 8);
    std::memcpy(&nbytes, message.data() + 16, 8);
  }
  const bool sized = kind == kData ? nbytes <= message.size() && message.size() == kHeaderBytes + nbytes
                                   : message.size() == kHeaderBytes;
  if (magic != kMagic || kind < kData || kind > kByeAck || !sized) {
    return Fail(absl::StrCat("ol gloo transport, member ", rank, ": member ", from, " sent an undecodable message of ",
                             message.size(), " bytes"));
  }
  if (kind == kBye) return OnBye(from);
  if (kind == kByeAck) {
    std::lock_guard<std::mutex> lock(mu_);
    awaiting_goodbye_[from] = false;
    changed_.notify_all();
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  ArriveLocked(from, slot, message.substr(kHeaderBytes));
}

void OlGlooContext::ArriveLocked(int from, uint64_t slot, absl::string_view bytes) {
  if (!failure_.empty()) return;  // every wait throws from now on: dropped
  for (auto it = posted_.begin(); it != posted_.end(); ++it) {
    if (it->slot != slot || std::find(it->from.begin(), it->from.end(), from) == it->from.end()) continue;
    const PostedRecv recv = *it;
    posted_.erase(it);
    return DeliverLocked(recv, from, bytes);
  }
  // Kept until its receive comes (sends are eager), within max_early_bytes_. This may run on the
  // transport's I/O thread: a failure here fails the context, it never throws.
  if (bytes.size() > max_early_bytes_ - std::min(early_bytes_, max_early_bytes_)) {
    return FailLocked(absl::StrCat(
        "ol gloo transport, member ", rank, ": member ", from, " sent ", bytes.size(), " bytes in slot ", Hex(slot),
        " before any receive for it, with ", early_bytes_, " bytes of earlier messages kept unreceived in ",
        CountEarlyLocked(), " message(s): over the limit of ", max_early_bytes_,
        " bytes kept per context (max_early_bytes; do the members post the same receives?)"));
  }
  Early early{from, std::string()};
  try {
    early.bytes.assign(bytes.data(), bytes.size());
  } catch (const std::bad_alloc&) {
    return FailLocked(absl::StrCat("ol gloo transport, member ", rank, ": out of memory keeping the ", bytes.size(),
                                   " bytes member ", from, " sent in slot ", Hex(slot), " before any receive for it (",
                                   early_bytes_, " bytes of earlier messages kept)"));
  }
  early_bytes_ += bytes.size();
  early_[slot].push_back(std::move(early));
}

size_t OlGlooContext::CountEarlyLocked() const {
  size_t n = 0;
  for (const auto& [slot, kept] : early_) n += kept.size();
  return n;
}

bool OlGlooContext::Wait(OlUnboundBuffer* buffer, bool recv, int* rank_out, std::chrono::milliseconds timeout) {
  if (timeout == ::gloo::transport::kUnsetTimeout) timeout = getTimeout();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock<std::mutex> lock(mu_);
  std::deque<int>& done = recv ? buffer->recv_done_ : buffer->send_done_;
  bool& aborted = recv ? buffer->abort_recv_ : buffer->abort_send_;
  while (true) {  // gloo's order: a failure (unless one completed), then an abort, then a completion
    if (done.empty() && !failure_.empty()) ThrowFailureLocked();
    if (aborted) {  // as gloo: an abort interrupts this wait (only this one) even if one completed
      aborted = false;
      return false;
    }
    if (!done.empty()) {
      if (rank_out != nullptr) *rank_out = done.front();
      done.pop_front();
      return true;
    }
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && done.empty() && !aborted &&
        failure_.empty()) {
      FailLocked(absl::StrCat("ol gloo transport, member ", rank, ": timed out after ", timeout.count(),
                              " ms waiting for ", recv ? buffer->last_recv_ : buffer->last_send_));
      ThrowFailureLocked();
    }
  }
}

void OlGlooContext::Abort(OlUnboundBuffer* buffer, bool recv) {
  std::lock_guard<std::mutex> lock(mu_);
  (recv ? buffer->abort_recv_ : buffer->abort_send_) = true;
  changed_.notify_all();
}

void OlGlooContext::Forget(OlUnboundBuffer* buffer) {
  std::lock_guard<std::mutex> lock(mu_);
  posted_.remove_if([buffer](const PostedRecv& r) { return r.buffer == buffer; });
}

OlUnboundBuffer::OlUnboundBuffer(std::shared_ptr<OlGlooContext> context, void* ptr, size_t size)
    : ::gloo::transport::UnboundBuffer(ptr, size), context_(std::move(context)) {}

OlUnboundBuffer::~OlUnboundBuffer() { context_->Forget(this); }

bool OlUnboundBuffer::waitRecv(int* rank, std::chrono::milliseconds timeout) {
  return context_->Wait(this, /*recv=*/true, rank, timeout);
}
bool OlUnboundBuffer::waitSend(int* rank, std::chrono::milliseconds timeout) {
  return context_->Wait(this, /*recv=*/false, rank, timeout);
}
void OlUnboundBuffer::abortWaitRecv() { context_->Abort(this, /*recv=*/true); }
void OlUnboundBuffer::abortWaitSend() { context_->Abort(this, /*recv=*/false); }

namespace {
// The byte count of an operation at `offset` (gloo: unspecified means the rest of the buffer),
// refused if it does not fit.
size_t Checked(const char* what, size_t size, size_t offset, size_t nbytes) {
  if (nbytes == ::gloo::transport::UnboundBuffer::kUnspecifiedByteCount) {
    GLOO_ENFORCE(offset <= size, "ol gloo transport: ", what, " at offset ", offset, " of a buffer of ", size,
                 " bytes");
    return size - offset;
  }
  GLOO_ENFORCE(offset <= size && nbytes <= size - offset, "ol gloo transport: ", what, " of ", nbytes,
               " bytes at offset ", offset, " does not fit a buffer of ", size, " bytes");
  return nbytes;
}
}  // namespace

void OlUnboundBuffer::send(int dstRank, uint64_t slot, size_t offset, size_t nbytes) {
  context_->Send(this, dstRank, slot, offset, Checked("send", size, offset, nbytes));
}
void OlUnboundBuffer::recv(int srcRank, uint64_t slot, size_t offset, size_t nbytes) {
  recv(std::vector<int>{srcRank}, slot, offset, nbytes);
}
void OlUnboundBuffer::recv(std::vector<int> srcRanks, uint64_t slot, size_t offset, size_t nbytes) {
  context_->Recv(this, std::move(srcRanks), slot, offset, Checked("receive", size, offset, nbytes));
}

}  // namespace comm
}  // namespace oneflow_like
