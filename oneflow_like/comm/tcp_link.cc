#include "oneflow_like/comm/tcp_link.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "oneflow_like/comm/crc32c.h"

namespace oneflow_like {
namespace comm {
namespace {

constexpr size_t kMaxIovecs = 256;                  // up to three per frame, gathered per sendmsg
constexpr size_t kDirectReadBytes = 64 * 1024;      // payload rests this large skip the staging buffer
constexpr size_t kDirectReadChunk = 256 * 1024;     // per recv, so the checksum reads warm cache
constexpr size_t kStagedReadBytes = 64 * 1024;      // per recv into the staging buffer
constexpr size_t kReadBudget = size_t{16} << 20;    // per OnReadable call, for fairness among links

}  // namespace

TcpLink::TcpLink(TcpLinkOptions options) : options_(std::move(options)) {}

TcpLink::~TcpLink() {
  const int fd = fd_.exchange(-1);
  if (fd >= 0) close(fd);
  if (close_after_writer_ >= 0) close(close_after_writer_);
}

absl::Status TcpLink::Send(absl::string_view payload, bool may_block) {
  if (static_cast<int64_t>(payload.size()) > options_.max_frame_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("message of ", payload.size(), " bytes to rank ",
                                                   options_.peer.value(), " exceeds max_frame_bytes (",
                                                   options_.max_frame_bytes, "); split it or raise the limit"));
  }
  FrameHeader header{options_.self, options_.peer, 0, payload.size(), 0};
  if (may_block && payload.size() >= kDirectSendBytes) {
    header.payload_checksum = Crc32c(payload.data(), payload.size());
    std::unique_lock<std::mutex> lock(mu_);
    if (!failure_.ok()) {
      return absl::UnavailableError(absl::StrCat("link to rank ", options_.peer.value(), " is down: ", failure_.message()));
    }
    if (fd_.load() >= 0 && queue_.empty() && !writer_busy_) {
      header.sequence = next_send_sequence_++;
      char header_bytes[kFrameHeaderBytes];
      EncodeFrameHeader(header, header_bytes);
      writer_busy_ = true;
      const int fd = fd_.load();
      lock.unlock();
      absl::Status written = WriteBlocking(fd, header_bytes, payload);
      lock.lock();
      writer_busy_ = false;
      if (!written.ok() && failure_.ok()) failure_ = written;  // the I/O thread reports it (EOF/EPOLLERR)
      if (close_after_writer_ >= 0) {
        close(close_after_writer_);
        close_after_writer_ = -1;
      } else if (written.ok() && fd_.load() >= 0 && !queue_.empty()) {
        absl::Status flushed = FlushLocked();  // what others queued meanwhile
        if (!flushed.ok() && failure_.ok()) failure_ = flushed;
      }
      return written;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.ok()) {
      return absl::UnavailableError(absl::StrCat("link to rank ", options_.peer.value(), " is down: ", failure_.message()));
    }
    if (fd_.load() >= 0 && queue_.empty() && !writer_busy_) return SendIdleLocked(header, payload);
  }
  Outgoing out;
  out.payload_size = payload.size();
  if (!payload.empty()) {
    SpareBuffer buffer = TakeBuffer(payload.size());
    out.payload = std::move(buffer.data);
    out.payload_capacity = buffer.capacity;
    header.payload_checksum = CopyWithCrc32c(out.payload.get(), payload.data(), payload.size(), 0);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!failure_.ok()) {
    return absl::UnavailableError(absl::StrCat("link to rank ", options_.peer.value(), " is down: ", failure_.message()));
  }
  header.sequence = next_send_sequence_++;
  EncodeFrameHeader(header, out.header);
  queue_.push_back(std::move(out));
  // Written on attach, by the I/O thread, or by a busy direct writer when it is done.
  if (fd_.load() < 0 || queue_.size() > 1 || writer_busy_) return absl::OkStatus();
  absl::Status flushed = FlushLocked();
  if (!flushed.ok() && failure_.ok()) failure_ = flushed;  // the I/O thread reports it (EPOLLERR/EOF)
  return flushed;
}

std::string SparePayloads::Take(size_t bytes) {
  if (bytes >= kMinBytes) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < spares_.size(); ++i) {
      if (spares_[i].capacity() >= bytes && spares_[i].capacity() <= 2 * bytes) {
        std::string spare = std::move(spares_[i]);
        spares_.erase(spares_.begin() + static_cast<std::ptrdiff_t>(i));
        bytes_ -= spare.capacity();
        return spare;
      }
    }
  }
  std::string fresh;
  fresh.reserve(bytes);
  return fresh;
}

void SparePayloads::Put(std::string written) {
  const size_t capacity = written.capacity();
  if (capacity < kMinBytes || capacity > kMaxBytes) return;
  written.clear();  // keeps the capacity
  std::lock_guard<std::mutex> lock(mu_);
  while (!spares_.empty() && (spares_.size() >= kMaxBuffers || bytes_ + capacity > kMaxBytes)) {
    bytes_ -= spares_.front().capacity();  // drop the oldest
    spares_.erase(spares_.begin());
  }
  bytes_ += capacity;
  spares_.push_back(std::move(written));
}

size_t SparePayloads::bytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

absl::Status TcpLink::SendWithTail(std::string head, absl::string_view tail) {
  const size_t size = head.size() + tail.size();
  if (static_cast<int64_t>(size) > options_.max_frame_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("message of ", size, " bytes to rank ", options_.peer.value(),
                                                   " exceeds max_frame_bytes (", options_.max_frame_bytes,
                                                   "); split it or raise the limit"));
  }
  FrameHeader header{options_.self, options_.peer, 0, size,
                     Crc32cExtend(Crc32c(head.data(), head.size()), tail.data(), tail.size())};
  Outgoing out;
  out.payload_size = head.size();
  out.owned = std::move(head);
  out.tail = tail;
  std::lock_guard<std::mutex> lock(mu_);
  if (!failure_.ok()) {
    return absl::UnavailableError(absl::StrCat("link to rank ", options_.peer.value(), " is down: ", failure_.message()));
  }
  header.sequence = next_send_sequence_++;
  EncodeFrameHeader(header, out.header);
  queue_.push_back(std::move(out));
  // Written on attach, by the I/O thread, or by a busy direct writer when it is done.
  if (fd_.load() < 0 || queue_.size() > 1 || writer_busy_) return absl::OkStatus();
  absl::Status flushed = FlushLocked();  // non-blocking: EPOLLOUT takes over when the socket is full
  if (!flushed.ok() && failure_.ok()) failure_ = flushed;
  return flushed;
}

void TcpLink::DetachTails(const char* begin, const char* end) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Outgoing& out : queue_) {
    if (out.tail.empty() || out.tail.data() < begin || out.tail.data() >= end) continue;
    // Same bytes in the same order: `written` holds. A spare string (written, it goes back to
    // the pool) rather than a fresh one, so that the pool's strings do not pile up unused.
    const size_t size = out.owned.size() + out.tail.size();
    std::string owned = options_.spares != nullptr ? options_.spares->Take(size) : std::string();
    owned.reserve(size);
    owned.append(out.owned);
    owned.append(out.tail.data(), out.tail.size());
    out.owned = std::move(owned);
    out.payload_size += out.tail.size();
    out.tail = absl::string_view();
  }
}

absl::Status TcpLink::SendOwned(std::string payload) {
  return SendWithTail(std::move(payload), absl::string_view());  // the whole payload is the owned head
}

absl::Status TcpLink::SendIdleLocked(FrameHeader header, absl::string_view payload) {
  // Nothing queued: write straight from the caller's bytes; copy only what the socket leaves.
  header.payload_checksum = Crc32c(payload.data(), payload.size());
  header.sequence = next_send_sequence_++;
  Outgoing out;
  EncodeFrameHeader(header, out.header);
  const size_t total = kFrameHeaderBytes + payload.size();
  while (out.written < total) {
    iovec iov[2];
    size_t count = 0;
    if (out.written < kFrameHeaderBytes) iov[count++] = {out.header + out.written, kFrameHeaderBytes - out.written};
    const size_t payload_done = out.written > kFrameHeaderBytes ? out.written - kFrameHeaderBytes : 0;
    if (payload_done < payload.size()) {
      iov[count++] = {const_cast<char*>(payload.data()) + payload_done, payload.size() - payload_done};
    }
    msghdr message{};
    message.msg_iov = iov;
    message.msg_iovlen = count;
    const ssize_t n = sendmsg(fd_.load(), &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && WouldBlock(errno)) break;
    if (n < 0) {
      failure_ = absl::UnavailableError(
          absl::StrCat("writing to rank ", options_.peer.value(), " failed: ", std::strerror(errno)));
      return failure_;  // the I/O thread reports it (EPOLLERR/EOF)
    }
    options_.bytes_sent->fetch_add(n, std::memory_order_relaxed);
    out.written += static_cast<size_t>(n);
  }
  if (out.written == total) return absl::OkStatus();
  out.payload_size = payload.size();
  if (!payload.empty()) {
    // Only the unwritten tail is copied (at its own offset, so the queue logic stays uniform).
    const size_t payload_done = out.written > kFrameHeaderBytes ? out.written - kFrameHeaderBytes : 0;
    out.payload.reset(new char[payload.size()]);
    out.payload_capacity = payload.size();
    std::memcpy(out.payload.get() + payload_done, payload.data() + payload_done, payload.size() - payload_done);
  }
  queue_.push_back(std::move(out));
  SetWritableInterestLocked(true);
  return absl::OkStatus();
}

absl::Status TcpLink::WriteBlocking(int fd, const char* header, absl::string_view payload) {
  const size_t total = kFrameHeaderBytes + payload.size();
  size_t written = 0;
  while (written < total) {
    iovec iov[2];
    size_t count = 0;
    if (written < kFrameHeaderBytes) iov[count++] = {const_cast<char*>(header) + written, kFrameHeaderBytes - written};
    const size_t payload_done = written > kFrameHeaderBytes ? written - kFrameHeaderBytes : 0;
    iov[count++] = {const_cast<char*>(payload.data()) + payload_done, payload.size() - payload_done};
    msghdr message{};
    message.msg_iov = iov;
    message.msg_iovlen = count;
    const ssize_t n = sendmsg(fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      options_.bytes_sent->fetch_add(n, std::memory_order_relaxed);
      written += static_cast<size_t>(n);
    } else if (n < 0 && WouldBlock(errno)) {
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, -1);  // POLLERR/POLLHUP wake it too; then sendmsg reports the error
    } else {
      return absl::UnavailableError(
          absl::StrCat("writing to rank ", options_.peer.value(), " failed: ", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

TcpLink::SpareBuffer TcpLink::TakeBuffer(size_t size) {
  if (size >= kMinSpareBytes) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < spares_.size(); ++i) {
      if (spares_[i].capacity >= size && spares_[i].capacity <= 2 * size) {
        SpareBuffer buffer = std::move(spares_[i]);
        spares_.erase(spares_.begin() + static_cast<std::ptrdiff_t>(i));
        spare_bytes_ -= buffer.capacity;
        return buffer;
      }
    }
  }
  SpareBuffer buffer;
  buffer.data.reset(new char[size]);  // uninitialized: filled by the copy
  buffer.capacity = size;
  return buffer;
}

void TcpLink::RecycleLocked(Outgoing& written) {
  const size_t capacity = written.payload_capacity;
  if (capacity < kMinSpareBytes || capacity > kMaxSpareBytes) return;
  while (!spares_.empty() && (spares_.size() >= kMaxSpareBuffers || spare_bytes_ + capacity > kMaxSpareBytes)) {
    spare_bytes_ -= spares_.front().capacity;  // drop the oldest
    spares_.erase(spares_.begin());
  }
  spares_.push_back({std::move(written.payload), capacity});
  spare_bytes_ += capacity;
}

absl::Status TcpLink::Attach(ScopedFd socket) {
  std::lock_guard<std::mutex> lock(mu_);
  fd_.store(socket.release());
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = options_.epoll_tag;
  if (epoll_ctl(options_.epoll_fd, EPOLL_CTL_ADD, fd_.load(), &event) != 0) {
    return absl::InternalError(absl::StrCat("epoll_ctl(ADD) for the link to rank ", options_.peer.value(), ": ",
                                            std::strerror(errno)));
  }
  if (!queue_.empty()) {
    absl::Status flushed = FlushLocked();
    if (!flushed.ok() && failure_.ok()) failure_ = flushed;
  }
  return absl::OkStatus();
}

void TcpLink::SetWritableInterestLocked(bool want) {
  if (want == want_writable_) return;
  want_writable_ = want;
  epoll_event event{};
  event.events = EPOLLIN | (want ? EPOLLOUT : 0);
  event.data.u64 = options_.epoll_tag;
  epoll_ctl(options_.epoll_fd, EPOLL_CTL_MOD, fd_.load(), &event);
}

absl::Status TcpLink::FlushLocked() {
  while (!queue_.empty()) {
    iovec iov[kMaxIovecs];
    size_t count = 0;
    for (auto it = queue_.begin(); it != queue_.end() && count + 3 <= kMaxIovecs; ++it) {
      if (it->written < kFrameHeaderBytes) {
        iov[count++] = {it->header + it->written, kFrameHeaderBytes - it->written};
      }
      const size_t payload_done = it->written > kFrameHeaderBytes ? it->written - kFrameHeaderBytes : 0;
      if (payload_done < it->payload_size) {
        iov[count++] = {const_cast<char*>(it->bytes()) + payload_done, it->payload_size - payload_done};
      }
      const size_t tail_done = payload_done > it->payload_size ? payload_done - it->payload_size : 0;
      if (tail_done < it->tail.size()) {
        iov[count++] = {const_cast<char*>(it->tail.data()) + tail_done, it->tail.size() - tail_done};
      }
    }
    msghdr message{};
    message.msg_iov = iov;
    message.msg_iovlen = count;
    const ssize_t n = sendmsg(fd_.load(), &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (WouldBlock(errno)) {
        SetWritableInterestLocked(true);
        return absl::OkStatus();
      }
      return absl::UnavailableError(
          absl::StrCat("writing to rank ", options_.peer.value(), " failed: ", std::strerror(errno)));
    }
    options_.bytes_sent->fetch_add(n, std::memory_order_relaxed);
    size_t left = static_cast<size_t>(n);
    while (left > 0) {  // every frame has >= kFrameHeaderBytes, so a finished one is popped here
      Outgoing& front = queue_.front();
      const size_t total = kFrameHeaderBytes + front.payload_size + front.tail.size();
      const size_t take = std::min(left, total - front.written);
      front.written += take;
      left -= take;
      if (front.written == total) {
        RecycleLocked(front);
        if (options_.spares != nullptr && front.payload == nullptr) options_.spares->Put(std::move(front.owned));
        queue_.pop_front();
      }
    }
  }
  SetWritableInterestLocked(false);
  return absl::OkStatus();
}

absl::Status TcpLink::OnWritable() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failure_.ok()) return failure_;
  if (fd_.load() < 0 || writer_busy_) return absl::OkStatus();  // the busy writer flushes after
  return FlushLocked();
}

absl::Status TcpLink::Close(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failure_.ok()) failure_ = status;
  const int fd = fd_.exchange(-1);
  if (fd >= 0) {
    epoll_ctl(options_.epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
    if (writer_busy_) {
      shutdown(fd, SHUT_RDWR);    // wakes the writer, which closes the socket when it is out
      close_after_writer_ = fd;
    } else {
      close(fd);
    }
  }
  queue_.clear();
  spares_.clear();
  spare_bytes_ = 0;
  return failure_;
}

absl::Status TcpLink::LinkError(absl::string_view what) const {
  return absl::DataLossError(absl::StrCat("link from rank ", options_.peer.value(), ": ", what,
                                          "; dropping the link (corrupt bytes or not a transport peer)"));
}

absl::Status TcpLink::OnReadable(char* staging, size_t staging_size, DeliverFunction deliver) {
  const int fd = fd_.load();
  if (fd < 0) return absl::OkStatus();
  size_t budget = kReadBudget;
  while (budget > 0) {
    const size_t payload_left = in_payload_ ? payload_.size - payload_filled_ : 0;
    const bool direct = payload_left >= kDirectReadBytes;
    char* target = direct ? payload_.data.get() + payload_filled_ : staging;
    // Staged reads stay small: the part of a large payload that lands in staging is copied again.
    const size_t want = direct ? std::min(payload_left, kDirectReadChunk) : std::min(staging_size, kStagedReadBytes);
    const ssize_t n = recv(fd, target, want, 0);
    if (n == 0) {
      return absl::UnavailableError(absl::StrCat("link to rank ", options_.peer.value(),
                                                 " closed by the peer (EOF; did rank ", options_.peer.value(),
                                                 " exit or crash?)"));
    }
    if (n < 0) {
      if (WouldBlock(errno)) return absl::OkStatus();
      return absl::UnavailableError(
          absl::StrCat("link to rank ", options_.peer.value(), " broke: ", std::strerror(errno)));
    }
    options_.bytes_received->fetch_add(n, std::memory_order_relaxed);
    budget -= std::min(budget, static_cast<size_t>(n));
    if (direct) {
      payload_checksum_ = Crc32cExtend(payload_checksum_, target, static_cast<size_t>(n));
      payload_filled_ += static_cast<size_t>(n);
      if (payload_filled_ == payload_.size) RETURN_IF_ERROR(FinishFrame(deliver));
    } else {
      RETURN_IF_ERROR(Consume(staging, static_cast<size_t>(n), deliver));
    }
  }
  return absl::OkStatus();
}

absl::Status TcpLink::Consume(const char* bytes, size_t size, DeliverFunction deliver) {
  while (size > 0) {
    if (!in_payload_) {
      const size_t take = std::min(size, kFrameHeaderBytes - header_filled_);
      std::memcpy(header_bytes_ + header_filled_, bytes, take);
      header_filled_ += take;
      bytes += take;
      size -= take;
      if (header_filled_ == kFrameHeaderBytes) RETURN_IF_ERROR(StartPayload());
      if (in_payload_ && payload_.size == 0) RETURN_IF_ERROR(FinishFrame(deliver));
      continue;
    }
    const size_t take = std::min(size, payload_.size - payload_filled_);
    payload_checksum_ = CopyWithCrc32c(payload_.data.get() + payload_filled_, bytes, take, payload_checksum_);
    payload_filled_ += take;
    bytes += take;
    size -= take;
    if (payload_filled_ == payload_.size) RETURN_IF_ERROR(FinishFrame(deliver));
  }
  return absl::OkStatus();
}

absl::Status TcpLink::StartPayload() {
  absl::StatusOr<FrameHeader> header = DecodeFrameHeader(absl::string_view(header_bytes_, kFrameHeaderBytes));
  if (!header.ok()) return LinkError(header.status().message());
  if (header->from != options_.peer || header->to != options_.self) {
    return LinkError(absl::StrCat("frame addressed ", header->from.value(), " -> ", header->to.value(), ", expected ",
                                  options_.peer.value(), " -> ", options_.self.value()));
  }
  if (header->sequence != next_receive_sequence_) {
    return LinkError(absl::StrCat("frame sequence ", header->sequence, " arrived, expected ", next_receive_sequence_,
                                  " (a frame was lost, duplicated or reordered)"));
  }
  if (header->payload_bytes > static_cast<uint64_t>(options_.max_frame_bytes)) {
    return LinkError(absl::StrCat("frame of ", header->payload_bytes, " bytes exceeds max_frame_bytes (",
                                  options_.max_frame_bytes, ")"));
  }
  header_ = *header;
  const size_t size = static_cast<size_t>(header_.payload_bytes);
  // Reuse the previous buffer unless it is too small (or wastefully large).
  if (payload_.data == nullptr || payload_.capacity < size || payload_.capacity > 4 * size + (size_t{1} << 20)) {
    payload_.data.reset(size == 0 ? nullptr : new char[size]);
    payload_.capacity = size;
  }
  payload_.size = size;
  payload_filled_ = 0;
  payload_checksum_ = 0;
  in_payload_ = true;
  return absl::OkStatus();
}

absl::Status TcpLink::FinishFrame(DeliverFunction deliver) {
  if (payload_checksum_ != header_.payload_checksum) {
    return LinkError(absl::StrCat("payload checksum mismatch in frame ", header_.sequence, " (", header_.payload_bytes,
                                  " bytes)"));
  }
  ++next_receive_sequence_;
  in_payload_ = false;
  header_filled_ = 0;
  deliver(options_.peer, &payload_);
  if (payload_.data == nullptr) payload_.capacity = 0;  // moved out by the callback
  return absl::OkStatus();
}

}  // namespace comm
}  // namespace oneflow_like
