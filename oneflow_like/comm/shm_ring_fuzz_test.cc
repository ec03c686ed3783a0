// Fuzzes ShmRing's reader with what a broken or hostile writer could publish: record headers
// WITH A VALID CHECKSUM (a checksum is no secret) but random fields, random head counters and
// random control-block fields. Every Peek must return a record inside the ring, none, or
// DataLoss -- never crash, loop or touch bytes outside the mapping (the mapping is allocated to
// its exact size, so an AddressSanitizer build, --copt=-fsanitize=address
// --linkopt=-fsanitize=address, catches any stray access). Fixed seed: reproducible.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "oneflow_like/comm/crc32c.h"
#include "oneflow_like/comm/shm_ring.h"

namespace oneflow_like {
namespace comm {
namespace {

constexpr uint64_t kCapacity = kShmMinCapacity;  // 64 KiB: records of up to 16 KiB - 64
constexpr size_t kMapped = kShmControlBytes + kCapacity;
constexpr int32_t kFrom = 6;
constexpr int32_t kTo = 7;
// Control-block offsets (shm_ring.cc: each counter on its own cache line).
constexpr size_t kMagicAt = 0, kCapacityAt = 8, kFromAt = 16, kToAt = 20;
constexpr size_t kHeadAt = 64, kReaderWaitingAt = 128, kTailAt = 192, kWriterWaitingAt = 256;

// The record header as shm_ring.cc stores it.
struct Header {
  uint32_t magic;
  uint32_t flags;
  int32_t from;
  int32_t to;
  uint64_t sequence;
  uint64_t bytes;
  uint64_t message_bytes;
  uint32_t checksum;
};
constexpr uint32_t kRecordMagic = 0x52534c4f;
constexpr uint32_t kPadding = 4;

// Exactly kMapped bytes, 64-byte aligned, zeroed: no slack for a stray access to hide in.
struct Mapping {
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> bytes{static_cast<char*>(std::aligned_alloc(64, kMapped))};
  Mapping() { std::memset(bytes.get(), 0, kMapped); }
  char* base() { return bytes.get(); }
  char* data() { return base() + kShmControlBytes; }
  template <typename T>
  void Put(size_t offset, T value) { std::memcpy(base() + offset, &value, sizeof(T)); }
  template <typename T>
  T Get(size_t offset) {
    T value;
    std::memcpy(&value, base() + offset, sizeof(T));
    return value;
  }
};

// Aborts the process if the fuzz loop stops making progress (a Peek that loops forever).
class Watchdog {
 public:
  Watchdog() : thread_([this] { Watch(); }) {}
  ~Watchdog() {
    done_.store(true);
    thread_.join();
  }
  void Tick() { ticks_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void Watch() {
    uint64_t last = ticks_.load();
    auto since = std::chrono::steady_clock::now();
    while (!done_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const uint64_t now = ticks_.load();
      if (now != last) {
        last = now;
        since = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - since > std::chrono::seconds(10)) {
        std::fprintf(stderr, "shm_ring_fuzz_test: a Peek made no progress for 10 s (a loop)\n");
        std::abort();
      }
    }
  }
  std::atomic<uint64_t> ticks_{0};
  std::atomic<bool> done_{false};
  std::thread thread_;
};

class Fuzzer {
 public:
  explicit Fuzzer(uint32_t seed) : random_(seed) {}

  uint64_t U64() { return (uint64_t{random_()} << 32) | random_(); }
  uint64_t Below(uint64_t n) { return U64() % n; }
  bool OneIn(uint64_t n) { return Below(n) == 0; }

  // A payload size: valid ones, the edges of every check, and garbage.
  uint64_t Bytes(const ShmRing& ring, uint64_t to_end) {
    const uint64_t max = ring.max_record_bytes();
    switch (Below(12)) {
      case 0: return 0;
      case 1: return Below(256);
      case 2: return Below(max + 1);
      case 3: return max;
      case 4: return max + 1 + Below(64);
      case 5: return to_end - kShmRecordHeaderBytes;        // the padding that fits
      case 6: return to_end - kShmRecordHeaderBytes + 64;   // past the end
      case 7: return to_end >= 128 ? to_end - 128 : 0;      // short padding
      case 8: return kCapacity;
      case 9: return ~uint64_t{0} - Below(64);              // overflows a careless sum
      case 10: return uint64_t{1} << (32 + Below(31));
      default: return U64();
    }
  }
  uint64_t MessageBytes(uint64_t bytes) {
    switch (Below(7)) {
      case 0: case 1: return bytes;
      case 2: return bytes + 1 + Below(100000);
      case 3: return bytes > 0 ? bytes - 1 : 0;
      case 4: return 0;
      case 5: return ~uint64_t{0};
      default: return U64();
    }
  }
  uint32_t Flags() {
    switch (Below(6)) {
      case 0: return 3;          // a whole message
      case 1: return 1 + Below(2);  // first or last
      case 2: return kPadding;
      case 3: return Below(8);
      case 4: return kPadding | (1 + Below(3));
      default: return static_cast<uint32_t>(U64());
    }
  }

 private:
  std::mt19937 random_;
};

struct Outcomes {
  int records = 0, paddings = 0, empty = 0, data_loss = 0, peeks = 0;
};

// One trial: a fresh ring, some valid traffic, then random headers and counters until the
// reader reports DataLoss (the transport drops the edge there) or the step budget runs out.
void Trial(Fuzzer& fuzz, Watchdog& watchdog, Outcomes& outcomes) {
  Mapping mapping;
  ShmRing reader = ShmRing::Create(mapping.base(), kCapacity, Rank(kFrom), Rank(kTo));
  // The reader's state as far as the test knows it: its tail and next record sequence.
  uint64_t tail = 0, sequence = 0;
  // Some real records first, so tail and sequence start anywhere in the ring.
  {
    ShmRing writer = *ShmRing::Attach(mapping.base(), kMapped, Rank(kFrom), Rank(kTo));
    const int messages = static_cast<int>(fuzz.Below(12));
    for (int i = 0; i < messages; ++i) {
      const std::string message(fuzz.Below(20000), 'm');
      size_t written = 0;
      bool started = false;
      while (!started || written < message.size()) {
        absl::StatusOr<bool> wrote = writer.TryWriteRecord(message, "", &written);
        ASSERT_TRUE(wrote.ok()) << wrote.status();
        if (!*wrote) break;
        started = true;
        while (true) {  // read it all back (padding included)
          bool wake = false;
          const uint64_t before = mapping.Get<uint64_t>(kTailAt);
          absl::StatusOr<std::optional<ShmRecord>> record = reader.Peek(&wake);
          ASSERT_TRUE(record.ok()) << record.status();
          if (mapping.Get<uint64_t>(kTailAt) != before) ++sequence;  // a padding went by
          if (!record->has_value()) break;
          reader.Consume(**record);
          ++sequence;
        }
      }
    }
    tail = mapping.Get<uint64_t>(kTailAt);
  }
  for (int step = 0; step < 40; ++step) {
    watchdog.Tick();
    const uint64_t position = fuzz.OneIn(5) ? fuzz.Below(kCapacity / 64) * 64 : tail % kCapacity;
    const uint64_t to_end = kCapacity - position;
    // Half the time a header a correct writer could publish, else one with random fields (each
    // field off by a little, at an edge, or garbage), always with a valid checksum.
    const bool valid = fuzz.OneIn(2);
    const bool pad = position != 0 && fuzz.OneIn(valid ? 4 : 8);
    Header header{};
    header.magic = kRecordMagic;
    header.flags = pad ? kPadding : static_cast<uint32_t>(1 + fuzz.Below(3));
    header.from = kFrom;
    header.to = kTo;
    header.sequence = sequence;
    header.bytes = pad ? to_end - kShmRecordHeaderBytes
                       : std::min<uint64_t>(fuzz.Below(reader.max_record_bytes() + 1),
                                            to_end - kShmRecordHeaderBytes);
    header.message_bytes = pad ? 0 : header.flags == 3 ? header.bytes : header.bytes + fuzz.Below(50000);
    if (!valid) {
      if (fuzz.OneIn(20)) header.magic = static_cast<uint32_t>(fuzz.U64());
      if (fuzz.OneIn(3)) header.flags = fuzz.Flags();
      if (fuzz.OneIn(15)) header.from = static_cast<int32_t>(fuzz.Below(16));
      if (fuzz.OneIn(15)) header.to = static_cast<int32_t>(fuzz.Below(16));
      if (fuzz.OneIn(10)) header.sequence = fuzz.OneIn(3) ? fuzz.U64() : sequence + fuzz.Below(3) - 1;
      if (fuzz.OneIn(2)) header.bytes = fuzz.Bytes(reader, to_end);
      if (fuzz.OneIn(2)) header.message_bytes = fuzz.MessageBytes(header.bytes);
    }
    header.checksum = Crc32c(&header, offsetof(Header, checksum));
    if (fuzz.OneIn(50)) header.checksum ^= 1u << fuzz.Below(32);
    std::memcpy(mapping.data() + position, &header, sizeof(header));
    // The head: exactly this record published, a valid publication of more, around the
    // edges, or garbage.
    uint64_t head;
    const uint64_t exact = tail + (header.flags == kPadding ? to_end : (header.bytes + 127) / 64 * 64);
    switch (valid ? 0 : fuzz.Below(10)) {
      case 0: case 1: head = exact; break;
      case 2: head = tail; break;
      case 3: head = tail + 64 * (1 + fuzz.Below(kCapacity / 64)); break;
      case 4: head = tail + to_end; break;
      case 5: head = tail + kCapacity + 64 * (1 + fuzz.Below(4)); break;
      case 6: head = tail - 64 * (1 + fuzz.Below(4)); break;
      case 7: head = tail + fuzz.Below(64); break;
      case 8: head = tail + 64 + fuzz.Below(kCapacity); break;  // not a multiple of 64
      default: head = fuzz.U64(); break;
    }
    mapping.Put<uint64_t>(kHeadAt, head);
    // Control-block fields the reader must not trust (or need).
    if (fuzz.OneIn(6)) {
      switch (fuzz.Below(7)) {
        case 0: mapping.Put<uint64_t>(kMagicAt, fuzz.U64()); break;
        case 1: mapping.Put<uint64_t>(kCapacityAt, fuzz.OneIn(2) ? fuzz.U64() : kCapacity * 4); break;
        case 2: mapping.Put<int32_t>(kFromAt, static_cast<int32_t>(fuzz.U64())); break;
        case 3: mapping.Put<int32_t>(kToAt, static_cast<int32_t>(fuzz.U64())); break;
        case 4: mapping.Put<uint32_t>(kReaderWaitingAt, static_cast<uint32_t>(fuzz.U64())); break;
        case 5: mapping.Put<uint64_t>(kTailAt, fuzz.U64()); break;
        default: mapping.Put<uint32_t>(kWriterWaitingAt, static_cast<uint32_t>(fuzz.U64())); break;
      }
    }
    const uint64_t tail_field = mapping.Get<uint64_t>(kTailAt);
    bool wake = false;
    ++outcomes.peeks;
    absl::StatusOr<std::optional<ShmRecord>> peeked = reader.Peek(&wake);
    watchdog.Tick();
    if (!peeked.ok()) {
      ASSERT_EQ(peeked.status().code(), absl::StatusCode::kDataLoss) << peeked.status();
      ASSERT_NE(std::string(peeked.status().message()).find("from rank 6 to rank 7 is corrupt"), std::string::npos)
          << peeked.status();
      ++outcomes.data_loss;
      return;  // the transport drops the edge here
    }
    if (mapping.Get<uint64_t>(kTailAt) != tail_field) {  // Peek skipped a padding record
      ++outcomes.paddings;
      ++sequence;
      tail = mapping.Get<uint64_t>(kTailAt);
    }
    if (!peeked->has_value()) {
      ++outcomes.empty;
      continue;
    }
    const ShmRecord& record = **peeked;
    ++outcomes.records;
    // The record lies inside the ring and inside what was published.
    const char* begin = record.payload.data();
    ASSERT_GE(begin, mapping.data() + kShmRecordHeaderBytes);
    ASSERT_LE(begin + record.payload.size(), mapping.data() + kCapacity);
    ASSERT_LE(record.payload.size(), reader.max_record_bytes());
    ASSERT_GE(record.slot_bytes, kShmRecordHeaderBytes + record.payload.size());
    ASSERT_LE(record.slot_bytes, head - tail);
    ASSERT_GE(record.message_bytes, record.payload.size());
    if (record.first && record.last) ASSERT_EQ(record.message_bytes, record.payload.size());
    uint64_t sum = 0;  // touch every payload byte (AddressSanitizer checks the view)
    for (char c : record.payload) sum += static_cast<unsigned char>(c);
    (void)sum;
    if (fuzz.OneIn(4)) continue;  // peek it again next step (the header may change under it)
    reader.Consume(record);
    tail += record.slot_bytes;
    ++sequence;
  }
}

TEST(ShmRingFuzzTest, RandomHeadersWithValidChecksumsAreRecordsOrDataLossNeverACrashOrLoop) {
  Fuzzer fuzz(20261126);
  Watchdog watchdog;
  Outcomes outcomes;
  for (int trial = 0; trial < 4000; ++trial) {
    Trial(fuzz, watchdog, outcomes);
    if (::testing::Test::HasFatalFailure()) {
      ADD_FAILURE() << "trial " << trial;
      return;
    }
  }
  // Every path was reached many times (the fuzz is not all rejected at the first check).
  EXPECT_GT(outcomes.records, 500) << "peeks " << outcomes.peeks;
  EXPECT_GT(outcomes.paddings, 100);
  EXPECT_GT(outcomes.empty, 500);
  EXPECT_GT(outcomes.data_loss, 1000);
  std::printf("peeks %d: records %d, paddings skipped %d, empty %d, DataLoss %d\n", outcomes.peeks, outcomes.records,
              outcomes.paddings, outcomes.empty, outcomes.data_loss);
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like
