#include "oneflow_like/comm/shm_ring.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "oneflow_like/comm/crc32c.h"

namespace oneflow_like {
namespace comm {
namespace {

constexpr uint64_t kControlMagic = 0x474e495248534c4full;  // "OLSHRING"
constexpr uint32_t kRecordMagic = 0x52534c4f;              // "OLSR"
constexpr uint32_t kFirst = 1;
constexpr uint32_t kLast = 2;
constexpr uint32_t kPadding = 4;

// The record header as stored (same machine on both sides: native layout).
struct RecordHeader {
  uint32_t magic;
  uint32_t flags;
  int32_t from;
  int32_t to;
  uint64_t sequence;
  uint64_t bytes;
  uint64_t message_bytes;
  uint32_t checksum;  // of the bytes before it
};
constexpr size_t kChecksummed = offsetof(RecordHeader, checksum);
static_assert(sizeof(RecordHeader) <= kShmRecordHeaderBytes, "record header fits its slot");

uint64_t SlotBytes(uint64_t payload_bytes) {
  return (kShmRecordHeaderBytes + payload_bytes + 63) / 64 * 64;
}

}  // namespace

struct ShmRing::Control {
  uint64_t magic;
  uint64_t capacity;
  int32_t from;
  int32_t to;
  alignas(64) uint64_t head;       // written by the writer
  alignas(64) uint32_t reader_waiting;
  alignas(64) uint64_t tail;       // written by the reader
  alignas(64) uint32_t writer_waiting;
};

ShmRing::ShmRing(char* base, uint64_t capacity, Rank from, Rank to)
    : base_(base), capacity_(capacity), from_(from), to_(to) {}

ShmRing::Control* ShmRing::control() const { return reinterpret_cast<Control*>(base_); }

absl::Status ShmRing::CheckCapacity(uint64_t capacity) {
  if (capacity % 64 != 0 || capacity < kShmMinCapacity || capacity > kShmMaxCapacity) {
    return absl::InvalidArgumentError(absl::StrCat("shared-memory ring capacity ", capacity,
                                                   " bytes: need a multiple of 64 in [", kShmMinCapacity, ", ",
                                                   kShmMaxCapacity, "]"));
  }
  return absl::OkStatus();
}

ShmRing ShmRing::Create(char* base, uint64_t capacity, Rank from, Rank to) {
  static_assert(sizeof(Control) <= kShmControlBytes, "control block fits");
  ShmRing ring(base, capacity, from, to);
  Control* c = ring.control();
  c->capacity = capacity;
  c->from = from.value();
  c->to = to.value();
  __atomic_store_n(&c->magic, kControlMagic, __ATOMIC_RELEASE);
  return ring;
}

absl::StatusOr<ShmRing> ShmRing::Attach(char* base, uint64_t mapped_bytes, Rank from, Rank to) {
  ShmRing ring(base, 0, from, to);
  const Control* c = ring.control();
  const uint64_t magic = __atomic_load_n(&c->magic, __ATOMIC_ACQUIRE);
  const uint64_t capacity = c->capacity;
  if (magic != kControlMagic) return ring.Corrupt(absl::StrCat("bad control block magic ", magic));
  if (mapped_bytes < kShmControlBytes || capacity != mapped_bytes - kShmControlBytes || !CheckCapacity(capacity).ok()) {
    return ring.Corrupt(absl::StrCat("control block says capacity ", capacity, " for a mapping of ", mapped_bytes,
                                     " bytes"));
  }
  if (c->from != from.value() || c->to != to.value()) {
    return ring.Corrupt(absl::StrCat("control block is for the edge ", c->from, " -> ", c->to));
  }
  ring.capacity_ = capacity;
  ring.head_ = __atomic_load_n(&c->head, __ATOMIC_ACQUIRE);
  ring.tail_ = __atomic_load_n(&c->tail, __ATOMIC_ACQUIRE);
  if (ring.head_ != 0 || ring.tail_ != 0) return ring.Corrupt("a fresh ring has been written to already");
  return ring;
}

absl::Status ShmRing::Corrupt(absl::string_view what) const {
  return absl::DataLossError(absl::StrCat("shared-memory ring from rank ", from_.value(), " to rank ", to_.value(),
                                          " is corrupt: ", what));
}

// ---- Writer ----

bool ShmRing::HasRoomFor(uint64_t payload_bytes) const {
  const uint64_t tail = __atomic_load_n(&control()->tail, __ATOMIC_ACQUIRE);
  if (tail > head_ || head_ - tail > capacity_) return true;  // corrupt: let TryWriteRecord say so
  const uint64_t free_bytes = capacity_ - (head_ - tail);
  const uint64_t to_end = capacity_ - head_ % capacity_;
  const uint64_t slot = SlotBytes(std::min(payload_bytes, max_record_bytes()));
  return slot <= to_end ? slot <= free_bytes : to_end <= free_bytes;  // a padding record is progress
}

void ShmRing::WritePadding(uint64_t position) {
  RecordHeader header{kRecordMagic, kPadding, from_.value(), to_.value(), write_sequence_++,
                      capacity_ - position - kShmRecordHeaderBytes, 0, 0};
  header.checksum = Crc32c(&header, kChecksummed);
  std::memcpy(data() + position, &header, sizeof(header));
  head_ += capacity_ - position;
  __atomic_store_n(&control()->head, head_, __ATOMIC_RELEASE);
}

absl::StatusOr<bool> ShmRing::TryWriteRecord(absl::string_view a, absl::string_view b, size_t* written) {
  const uint64_t total = a.size() + b.size();
  const uint64_t tail = __atomic_load_n(&control()->tail, __ATOMIC_ACQUIRE);
  if (tail > head_ || head_ - tail > capacity_) {
    return Corrupt(absl::StrCat("the reader's tail ", tail, " is impossible against the head ", head_));
  }
  const uint64_t bytes = std::min<uint64_t>(total - *written, max_record_bytes());
  const uint64_t slot = SlotBytes(bytes);
  uint64_t free_bytes = capacity_ - (head_ - tail);
  uint64_t position = head_ % capacity_;
  if (slot > capacity_ - position) {  // does not fit before the end: pad and wrap
    if (capacity_ - position > free_bytes) return false;
    WritePadding(position);
    free_bytes -= capacity_ - position;
    position = 0;
  }
  if (slot > free_bytes) return false;
  uint32_t flags = 0;
  if (*written == 0) flags |= kFirst;
  if (*written + bytes == total) flags |= kLast;
  RecordHeader header{kRecordMagic, flags, from_.value(), to_.value(), write_sequence_++, bytes, total, 0};
  header.checksum = Crc32c(&header, kChecksummed);
  char* out = data() + position;
  std::memcpy(out, &header, sizeof(header));
  out += kShmRecordHeaderBytes;
  // The record carries message bytes [*written, *written + bytes) of a + b.
  uint64_t from = *written, left = bytes;
  if (from < a.size()) {
    const uint64_t n = std::min<uint64_t>(left, a.size() - from);
    std::memcpy(out, a.data() + from, n);
    out += n, from += n, left -= n;
  }
  if (left > 0) std::memcpy(out, b.data() + (from - a.size()), left);
  head_ += slot;
  __atomic_store_n(&control()->head, head_, __ATOMIC_RELEASE);
  *written += bytes;
  return true;
}

bool ShmRing::TakeReaderWaiting() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);  // the head store before the flag load (pairs with SetReaderWaiting)
  if (__atomic_load_n(&control()->reader_waiting, __ATOMIC_RELAXED) == 0) return false;
  return __atomic_exchange_n(&control()->reader_waiting, 0u, __ATOMIC_SEQ_CST) != 0;
}

void ShmRing::SetWriterWaiting() {
  __atomic_store_n(&control()->writer_waiting, 1u, __ATOMIC_SEQ_CST);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);  // the flag before re-reading the tail
}

// ---- Reader ----

bool ShmRing::HasData() const { return __atomic_load_n(&control()->head, __ATOMIC_ACQUIRE) != tail_; }

absl::StatusOr<std::optional<ShmRecord>> ShmRing::Peek(bool* wake_writer) {
  while (true) {
    const uint64_t head = __atomic_load_n(&control()->head, __ATOMIC_ACQUIRE);
    if (head == tail_) return std::optional<ShmRecord>();
    if (head < tail_ || head - tail_ > capacity_) {
      return Corrupt(absl::StrCat("the writer's head ", head, " is impossible against the tail ", tail_));
    }
    const uint64_t available = head - tail_;
    const uint64_t position = tail_ % capacity_;
    const std::string where = absl::StrCat("record ", read_sequence_, " at offset ", position);
    if (available < kShmRecordHeaderBytes) return Corrupt(absl::StrCat(where, ": only ", available, " bytes published"));
    RecordHeader header;
    std::memcpy(&header, data() + position, sizeof(header));  // read once: the checks and the use agree
    if (header.magic != kRecordMagic) return Corrupt(absl::StrCat(where, ": bad magic ", header.magic));
    if (header.checksum != Crc32c(&header, kChecksummed)) return Corrupt(absl::StrCat(where, ": header checksum mismatch"));
    if (header.from != from_.value() || header.to != to_.value()) {
      return Corrupt(absl::StrCat(where, ": addressed ", header.from, " -> ", header.to));
    }
    if (header.sequence != read_sequence_) {
      return Corrupt(absl::StrCat(where, ": sequence ", header.sequence, ", expected ", read_sequence_));
    }
    const uint64_t to_end = capacity_ - position;
    if (header.flags == kPadding) {
      // A writer pads only the end of the ring that a record does not fit in, never a whole
      // pass (position 0): so one Peek skips at most one padding (a writer publishing full-ring
      // padding again and again would otherwise hold the reader here forever).
      if (position == 0 || header.bytes != to_end - kShmRecordHeaderBytes || to_end > available) {
        return Corrupt(absl::StrCat(where, ": padding of ", header.bytes, " bytes, ", to_end, " to the end, ",
                                    available, " published"));
      }
      ShmRecord padding;
      padding.slot_bytes = to_end;
      *wake_writer = Consume(padding) || *wake_writer;
      continue;
    }
    if ((header.flags & ~(kFirst | kLast)) != 0) return Corrupt(absl::StrCat(where, ": bad flags ", header.flags));
    if (header.bytes > max_record_bytes() || SlotBytes(header.bytes) > std::min(to_end, available)) {
      return Corrupt(absl::StrCat(where, ": ", header.bytes, " payload bytes with ", std::min(to_end, available),
                                  " bytes of record published before the end (at most ", max_record_bytes(), ")"));
    }
    const bool whole = header.flags == (kFirst | kLast);
    if (header.message_bytes < header.bytes || (whole && header.message_bytes != header.bytes)) {
      return Corrupt(absl::StrCat(where, ": ", header.bytes, " bytes of a message of ", header.message_bytes));
    }
    ShmRecord record;
    record.first = (header.flags & kFirst) != 0;
    record.last = (header.flags & kLast) != 0;
    record.message_bytes = header.message_bytes;
    record.payload = absl::string_view(data() + position + kShmRecordHeaderBytes, header.bytes);
    record.slot_bytes = SlotBytes(header.bytes);
    return std::optional<ShmRecord>(record);
  }
}

bool ShmRing::Consume(const ShmRecord& record) {
  ++read_sequence_;
  tail_ += record.slot_bytes;
  __atomic_store_n(&control()->tail, tail_, __ATOMIC_RELEASE);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);  // the tail store before the flag load (pairs with SetWriterWaiting)
  if (__atomic_load_n(&control()->writer_waiting, __ATOMIC_RELAXED) == 0) return false;
  return __atomic_exchange_n(&control()->writer_waiting, 0u, __ATOMIC_SEQ_CST) != 0;
}

void ShmRing::SetReaderWaiting(bool waiting) {
  __atomic_store_n(&control()->reader_waiting, waiting ? 1u : 0u, __ATOMIC_SEQ_CST);
  if (waiting) __atomic_thread_fence(__ATOMIC_SEQ_CST);  // the flag before re-reading the head
}

}  // namespace comm
}  // namespace oneflow_like
