// ShmTransport's set-up (shm_transport.h): the token-checked hello over the unix socket, then
// each side passes the descriptors of the ring it reads (SCM_RIGHTS) and maps the other's.
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/comm/shm_peer.h"
#include "oneflow_like/comm/shm_transport.h"
#include "oneflow_like/comm/tcp_hello.h"

namespace oneflow_like {
namespace comm {
namespace {

constexpr uint32_t kOfferMagic = 0x4f534c4f;  // "OLSO"
constexpr int64_t kStrangerHelloMs = 2000;    // a connection that says nothing is refused after this

// "Here is the ring you write to me": sent with [memfd, data eventfd, space eventfd].
struct Offer {
  uint32_t magic;
  int32_t from;  // the writer of the ring (the receiver of this offer)
  int32_t to;    // its reader (the sender of this offer)
  uint32_t reserved;
  uint64_t capacity;
};

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// A descriptor the peer passed as a ring's `which` eventfd must be one, and non-blocking: our
// threads write and read it (a pipe or a blocking descriptor could stall them).
absl::Status CheckPeerEventFd(int fd, absl::string_view which, const std::string& who) {
  const std::string path = absl::StrCat("/proc/self/fdinfo/", fd);
  std::string info;
  if (FILE* file = std::fopen(path.c_str(), "r")) {
    char buffer[512];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0 && info.size() < 8192) info.append(buffer, n);
    std::fclose(file);
  } else {
    return absl::FailedPreconditionError(absl::StrCat(who, ": cannot check its ", which, " descriptor (", path, ": ",
                                                      std::strerror(errno), ")"));
  }
  if (info.find("eventfd-count:") == std::string::npos) {
    return absl::DataLossError(absl::StrCat(who, " sent a malformed ring offer: its ", which,
                                            " descriptor is not an eventfd"));
  }
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || (flags & O_NONBLOCK) == 0) {
    return absl::DataLossError(absl::StrCat(who, " sent a malformed ring offer: its ", which,
                                            " eventfd is blocking (need EFD_NONBLOCK)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ShmTransport::Connect(const std::vector<std::string>& endpoints) {
  const std::string self = absl::StrCat("shm transport rank ", options_.rank);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (connect_called_) return absl::FailedPreconditionError(absl::StrCat(self, ": Connect was already called"));
    connect_called_ = true;
  }
  if (static_cast<int32_t>(endpoints.size()) != options_.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(self, ": Connect got ", endpoints.size(), " endpoints for a world of ",
                                                   options_.world_size, " (endpoints[r] = rank r's endpoint())"));
  }
  for (int32_t peer : options_.peers) {
    if (endpoints[peer].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(self, ": no endpoint for rank ", peer));
    }
  }
  const absl::Time deadline = absl::Now() + absl::Milliseconds(options_.connect_timeout_ms);
  // The lower peers dial us first, then we dial the higher ones: every rank does the same, so
  // the dialing goes round in rank order and nobody waits for a rank that waits for it.
  std::vector<int32_t> missing;
  absl::Status accepted = AcceptLowerPeers(deadline, &missing);
  if (!accepted.ok()) {
    if (absl::IsDeadlineExceeded(accepted)) {
      return absl::DeadlineExceededError(absl::StrCat(self, ": Connect timed out after ", options_.connect_timeout_ms,
                                                      " ms; no shared-memory link from rank(s) ",
                                                      absl::StrJoin(missing, ", ")));
    }
    return accepted;
  }
  for (int32_t peer : options_.peers) {
    if (peer > options_.rank) RETURN_IF_ERROR(DialHigherPeer(peer, endpoints[peer], deadline));
  }
  listener_.Close();  // nothing more to accept: the socket file and directory go
  endpoint_.clear();
  for (int32_t rank : options_.peers) {
    Peer& peer = *peers_[rank];
    epoll_event socket_event{};
    socket_event.events = EPOLLIN | EPOLLRDHUP;
    socket_event.data.u64 = kShmSocketTag | static_cast<uint64_t>(rank);
    epoll_event ring_event{};
    ring_event.events = EPOLLIN;
    ring_event.data.u64 = kShmDataTag | static_cast<uint64_t>(rank);
    epoll_event space_event{};
    space_event.events = EPOLLIN;
    space_event.data.u64 = kShmSpaceTag | static_cast<uint64_t>(rank);
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, peer.socket.get(), &socket_event) != 0 ||
        epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, peer.in_data.get(), &ring_event) != 0 ||
        epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, peer.out_space.get(), &space_event) != 0) {
      return Errno(absl::StrCat(self, ": epoll_ctl"));
    }
    peer.ready.store(true, std::memory_order_release);
  }
  Wake();  // sends queued before Connect go now
  return absl::OkStatus();
}

absl::Status ShmTransport::AcceptLowerPeers(absl::Time deadline, std::vector<int32_t>* missing) {
  auto still_missing = [&] {
    missing->clear();
    for (int32_t peer : options_.peers) {
      if (peer < options_.rank && !peers_[peer]->socket.valid()) missing->push_back(peer);
    }
    return !missing->empty();
  };
  while (still_missing()) {
    uid_t uid = 0;
    ASSIGN_OR_RETURN(ScopedFd socket, listener_.Accept(deadline, &uid));
    const std::string who = absl::StrCat("a connection to ", listener_.path());
    if (uid != geteuid()) {
      Refuse(who, absl::StrCat("it comes from user id ", uid, ", not ours"));
      continue;
    }
    const absl::Time hello_deadline = std::min(deadline, absl::Now() + absl::Milliseconds(kStrangerHelloMs));
    absl::StatusOr<UnixMessage> message =
        ReceiveMessageWithFds(socket.get(), kHelloFixedBytes + kMaxHelloTokenBytes, hello_deadline, who);
    if (!message.ok()) {
      Refuse(who, std::string(message.status().message()));
      continue;
    }
    absl::StatusOr<Hello> hello = DecodeHello(message->bytes);
    absl::Status checked = !message->fds.empty() ? absl::InvalidArgumentError("its hello carries descriptors")
                           : hello.ok()          ? CheckHello(*hello, options_.job_token, options_.world_size)
                                                 : hello.status();
    if (checked.ok()) {
      const int32_t rank = hello->rank;
      if (rank >= options_.rank || PeerOf(rank) == nullptr) {
        checked = absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is not a lower rank of this node"));
      } else if (peers_[rank]->socket.valid()) {
        checked = absl::InvalidArgumentError(absl::StrCat("duplicate rank ", rank));
      }
    }
    if (!checked.ok()) {
      Refuse(who, std::string(checked.message()));
      continue;
    }
    Peer& peer = *peers_[hello->rank];
    const std::string peer_name = absl::StrCat("rank ", peer.rank);
    RETURN_IF_ERROR(SendMessageWithFds(socket.get(), EncodeHello({options_.world_size, options_.rank, options_.job_token}),
                                       {}, deadline, peer_name));
    peer.socket = std::move(socket);
    RETURN_IF_ERROR(ExchangeRings(peer, deadline));
  }
  return absl::OkStatus();
}

absl::Status ShmTransport::DialHigherPeer(int32_t rank, const std::string& path, absl::Time deadline) {
  const std::string who = absl::StrCat("rank ", rank, " at ", path);
  absl::StatusOr<ScopedFd> socket = DialUnix(path, deadline);
  if (!socket.ok()) {
    return absl::Status(socket.status().code(), absl::StrCat("shm transport rank ", options_.rank, ": dialing ", who,
                                                             ": ", socket.status().message()));
  }
  RETURN_IF_ERROR(SendMessageWithFds(socket->get(), EncodeHello({options_.world_size, options_.rank, options_.job_token}),
                                     {}, deadline, who));
  absl::StatusOr<UnixMessage> reply =
      ReceiveMessageWithFds(socket->get(), kHelloFixedBytes + kMaxHelloTokenBytes, deadline, who);
  if (absl::IsUnavailable(reply.status())) {
    return absl::UnavailableError(absl::StrCat(who, " refused our hello (", reply.status().message(),
                                               "): wrong job token or world size? Its stderr says"));
  }
  RETURN_IF_ERROR(reply.status());
  absl::StatusOr<Hello> hello = DecodeHello(reply->bytes);
  absl::Status checked = hello.ok() ? CheckHello(*hello, options_.job_token, options_.world_size) : hello.status();
  if (checked.ok() && hello->rank != rank) {
    checked = absl::InvalidArgumentError(absl::StrCat("it answered as rank ", hello->rank));
  }
  if (!checked.ok()) return absl::UnavailableError(absl::StrCat(who, " answered with a bad hello: ", checked.message()));
  peers_[rank]->socket = *std::move(socket);
  return ExchangeRings(*peers_[rank], deadline);
}

absl::Status ShmTransport::ExchangeRings(Peer& peer, absl::Time deadline) {
  const std::string who = absl::StrCat("shm transport rank ", options_.rank, ": rank ", peer.rank);
  // The ring peer -> this rank: a sealed memfd (it cannot shrink under the peer's mapping).
  const size_t bytes = kShmControlBytes + options_.ring_bytes;
  ScopedFd memfd(memfd_create(absl::StrCat("oneflow_like-shm-", peer.rank, "-to-", options_.rank).c_str(),
                              MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!memfd.valid() || ftruncate(memfd.get(), static_cast<off_t>(bytes)) != 0 ||
      fcntl(memfd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return Errno(absl::StrCat(who, ": creating its ring of ", bytes, " bytes"));
  }
  void* in = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd.get(), 0);
  if (in == MAP_FAILED) return Errno(absl::StrCat(who, ": mapping its ring"));
  peer.in_mapping = ShmMapping(static_cast<char*>(in), bytes);
  peer.in = ShmRing::Create(peer.in_mapping.base(), options_.ring_bytes, Rank(peer.rank), Rank(options_.rank));
  peer.in_data.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  peer.in_space.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!peer.in_data.valid() || !peer.in_space.valid()) return Errno(absl::StrCat(who, ": eventfd"));
  Offer offer{kOfferMagic, peer.rank, options_.rank, 0, options_.ring_bytes};
  RETURN_IF_ERROR(SendMessageWithFds(peer.socket.get(), absl::string_view(reinterpret_cast<const char*>(&offer), sizeof(offer)),
                                     {memfd.get(), peer.in_data.get(), peer.in_space.get()}, deadline, who));

  // The ring this rank -> peer, from the peer's offer: everything checked before mapping.
  ASSIGN_OR_RETURN(UnixMessage message, ReceiveMessageWithFds(peer.socket.get(), sizeof(Offer), deadline, who));
  Offer theirs{};
  if (message.bytes.size() == sizeof(Offer)) std::memcpy(&theirs, message.bytes.data(), sizeof(Offer));
  if (message.bytes.size() != sizeof(Offer) || theirs.magic != kOfferMagic || theirs.from != options_.rank ||
      theirs.to != peer.rank || message.fds.size() != 3 || !ShmRing::CheckCapacity(theirs.capacity).ok()) {
    return absl::DataLossError(absl::StrCat(who, " sent a malformed ring offer (", message.bytes.size(), " bytes, ",
                                            message.fds.size(), " descriptors)"));
  }
  RETURN_IF_ERROR(CheckPeerEventFd(message.fds[1].get(), "data", who));
  RETURN_IF_ERROR(CheckPeerEventFd(message.fds[2].get(), "space", who));
  const uint64_t their_bytes = kShmControlBytes + theirs.capacity;
  struct stat info{};
  const int seals = fcntl(message.fds[0].get(), F_GET_SEALS);
  if (fstat(message.fds[0].get(), &info) != 0 || static_cast<uint64_t>(info.st_size) != their_bytes || seals < 0 ||
      (seals & F_SEAL_SHRINK) == 0) {
    return absl::DataLossError(absl::StrCat(who, " offered a ring segment that is not a sealed memfd of ",
                                            their_bytes, " bytes"));
  }
  void* out = mmap(nullptr, their_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, message.fds[0].get(), 0);
  if (out == MAP_FAILED) return Errno(absl::StrCat(who, ": mapping the ring it offered"));
  std::lock_guard<std::mutex> lock(peer.mu);
  peer.out_mapping = ShmMapping(static_cast<char*>(out), their_bytes);
  ASSIGN_OR_RETURN(ShmRing ring, ShmRing::Attach(peer.out_mapping.base(), their_bytes, Rank(options_.rank), Rank(peer.rank)));
  peer.out = ring;
  peer.out_data = std::move(message.fds[1]);
  peer.out_space = std::move(message.fds[2]);
  return absl::OkStatus();
}

void ShmTransport::Refuse(const std::string& who, const std::string& reason) {
  std::fprintf(stderr, "shm transport rank %d: refused %s: %s\n", options_.rank, who.c_str(), reason.c_str());
  refused_connections_.fetch_add(1);
}

}  // namespace comm
}  // namespace oneflow_like
