// ShmRing: one directed edge (from -> to) of the shared-memory transport (shm_transport.h): a
// single-producer single-consumer byte ring in a shared mapping, written by rank `from` and
// read by rank `to` in another process of the same node.
//
// Layout of the mapping (kControlBytes + capacity bytes):
//   control block: magic, capacity, from, to (written once by the creator, the receiver);
//                  head (bytes ever written; the sender's), reader_waiting (the receiver sleeps),
//                  tail (bytes ever consumed; the receiver's), writer_waiting (the sender waits
//                  for room) -- each on its own cache line;
//   data:          records, each a 64-byte header slot then its payload, padded to 64 bytes:
//                  u32 magic "OLSR" | u32 flags (first, last, padding) | i32 from | i32 to |
//                  u64 sequence (per record, from 0) | u64 bytes (this record's payload) |
//                  u64 message_bytes (the whole message's) | u32 CRC-32C of the 44 bytes before.
// A record never wraps: when it does not fit before the end of the data, the writer fills the
// rest with a padding record and starts at offset 0. A message larger than max_record_bytes()
// travels as several records (first .. last), each published as soon as it is written.
//
//   ShmRing ring = ...;                                   // ShmRing::Create / ShmRing::Attach
//   size_t written = 0;                                   // sender:
//   while (written < message.size()) {
//     ASSIGN_OR_RETURN(bool wrote, ring.TryWriteRecord(prefix, payload, &written));
//     if (!wrote) break;                                   // full: retry when the reader made room
//   }
//   ASSIGN_OR_RETURN(std::optional<ShmRecord> record, ring.Peek(&wake));   // receiver
//   ... use record->payload (a view into the shared mapping) ...
//   ring.Consume(*record);
//
// Trust: the peer process could scribble over the mapping (a bug, a crash mid-write). Each
// side keeps its own counter locally and reads only the other's from shared memory; every
// value read from there (the other counter, each header field, each length and offset) is
// checked before use, so a corrupt ring is DataLoss naming the edge, never a read or write out
// of bounds. Payloads carry no checksum: shared memory is not a wire (the header has one).
// Thread-safety: the writer side (TryWriteRecord, the writer_waiting flag) belongs to one
// thread at a time, as does the reader side (Peek, Consume, reader_waiting); the two sides run
// concurrently in different processes.
#ifndef ONEFLOW_LIKE_COMM_SHM_RING_H_
#define ONEFLOW_LIKE_COMM_SHM_RING_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"
#include "oneflow_like/core/ids.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace comm {

constexpr size_t kShmControlBytes = 4096;
constexpr size_t kShmRecordHeaderBytes = 64;
constexpr size_t kShmMinCapacity = size_t{64} << 10;
constexpr size_t kShmMaxCapacity = size_t{1} << 30;

// One record as the reader sees it; `payload` points into the shared mapping and stays valid
// until Consume.
struct ShmRecord {
  bool first = false;
  bool last = false;
  uint64_t message_bytes = 0;  // the whole message's (equal to payload.size() when first && last)
  absl::string_view payload;
  uint64_t slot_bytes = 0;  // header + payload + padding: what Consume frees
};

class ShmRing {
 public:
  // Whether `capacity` is usable: a multiple of 64 in [kShmMinCapacity, kShmMaxCapacity].
  static absl::Status CheckCapacity(uint64_t capacity);
  // Initializes the control block of a fresh zeroed mapping of kControlBytes + capacity bytes
  // (the creator of the segment). REQUIRES: CheckCapacity(capacity).
  static ShmRing Create(char* base, uint64_t capacity, Rank from, Rank to);
  // Checks the control block of a mapping of `mapped_bytes` made by the peer (magic, capacity
  // against the mapping, ranks). DataLoss naming the edge otherwise.
  static absl::StatusOr<ShmRing> Attach(char* base, uint64_t mapped_bytes, Rank from, Rank to);

  uint64_t capacity() const { return capacity_; }
  // The largest payload one record carries (a quarter of the ring, less the header).
  uint64_t max_record_bytes() const { return capacity_ / 4 - kShmRecordHeaderBytes; }

  // ---- Writer (rank `from`) ----
  // Writes the next record of the message `a` + `b` from byte *written on (the whole message if
  // it fits in one record, else up to max_record_bytes()) and publishes it; advances *written.
  // An empty message is one empty record. Returns false, writing nothing of the message, when
  // the ring has no room yet (it may have published a padding record to wrap). DataLoss if the
  // reader's tail in shared memory is impossible.
  absl::StatusOr<bool> TryWriteRecord(absl::string_view a, absl::string_view b, size_t* written);
  // The reader sleeps (reader_waiting was set): clears the flag; the caller then wakes it.
  bool TakeReaderWaiting();
  // Announces that the writer waits for room; the caller then checks HasRoomFor again.
  void SetWriterWaiting();
  // Whether a record of `payload_bytes` (plus a possible wrap) fits now.
  bool HasRoomFor(uint64_t payload_bytes) const;

  // ---- Reader (rank `to`) ----
  // The next record, or nullopt when the ring is empty. DataLoss naming the edge when the head
  // or the record's header is corrupt (bad magic, checksum, ranks, sequence, flags or sizes).
  // Padding records are consumed on the way; if that frees room for a waiting writer,
  // *wake_writer is set (as Consume returns).
  absl::StatusOr<std::optional<ShmRecord>> Peek(bool* wake_writer);
  // Frees `record` (the one Peek returned last). Returns whether the writer waits for room
  // (writer_waiting was set; now cleared): the caller then wakes it.
  bool Consume(const ShmRecord& record);
  // Announces that the reader is about to sleep / is awake.
  void SetReaderWaiting(bool waiting);
  // Whether a record is published and not consumed (cheap; no validation).
  bool HasData() const;

 private:
  struct Control;
  ShmRing(char* base, uint64_t capacity, Rank from, Rank to);
  Control* control() const;
  char* data() const { return base_ + kShmControlBytes; }
  absl::Status Corrupt(absl::string_view what) const;  // DataLoss naming the edge
  void WritePadding(uint64_t position);

  char* base_ = nullptr;
  uint64_t capacity_ = 0;
  Rank from_;
  Rank to_;
  // Local copies: the writer's head and record sequence, the reader's tail and next sequence.
  uint64_t head_ = 0;
  uint64_t write_sequence_ = 0;
  uint64_t tail_ = 0;
  uint64_t read_sequence_ = 0;
};

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_SHM_RING_H_
