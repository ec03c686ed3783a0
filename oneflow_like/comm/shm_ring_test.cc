#include "oneflow_like/comm/shm_ring.h"

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oneflow_like/comm/crc32c.h"

namespace oneflow_like {
namespace comm {
namespace {

using ::testing::HasSubstr;
constexpr uint64_t kCapacity = kShmMinCapacity;  // 64 KiB: records of up to 16 KiB - 64

// A zeroed mapping stand-in (64-byte aligned) with a writer and a reader view on it.
struct Segment {
  std::vector<uint64_t> words = std::vector<uint64_t>((kShmControlBytes + kCapacity) / 8 + 8, 0);
  char* base() { return reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(words.data()) + 63) / 64 * 64); }
  char* data() { return base() + kShmControlBytes; }
};

std::string Bytes(size_t size, int seed) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>((i * 131 + seed * 7) & 0xff);
  return s;
}

// Reads one whole message (possibly several records) or returns the error.
absl::StatusOr<std::string> ReadMessage(ShmRing& reader) {
  std::string message;
  while (true) {
    bool wake = false;
    ASSIGN_OR_RETURN(std::optional<ShmRecord> record, reader.Peek(&wake));
    if (!record.has_value()) return absl::NotFoundError("empty");
    message.append(record->payload.data(), record->payload.size());
    const bool last = record->last;
    reader.Consume(*record);
    if (last) return message;
  }
}

// Writes a whole message; false if the ring filled up first.
bool WriteMessage(ShmRing& writer, absl::string_view a, absl::string_view b) {
  size_t written = 0;
  bool started = false;
  while (!started || written < a.size() + b.size()) {
    absl::StatusOr<bool> wrote = writer.TryWriteRecord(a, b, &written);
    EXPECT_TRUE(wrote.ok()) << wrote.status();
    if (!wrote.ok() || !*wrote) return false;
    started = true;
  }
  return true;
}

TEST(ShmRingTest, CarriesMessagesInOrderAcrossWrapsAndFragments) {
  Segment segment;
  ShmRing reader = ShmRing::Create(segment.base(), kCapacity, Rank(0), Rank(1));
  absl::StatusOr<ShmRing> writer = ShmRing::Attach(segment.base(), kShmControlBytes + kCapacity, Rank(0), Rank(1));
  ASSERT_TRUE(writer.ok()) << writer.status();
  // Sizes that wrap the ring many times, empty ones, and ones of several records (> 16 KiB).
  const size_t sizes[] = {0, 1, 100, 5000, 16320, 16321, 40000, 63, 64, 0, 12345};
  for (int round = 0; round < 40; ++round) {
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
      const std::string message = Bytes(sizes[i], round * 100 + static_cast<int>(i));
      ASSERT_TRUE(WriteMessage(*writer, message.substr(0, 3), message.size() > 3 ? message.substr(3) : ""))
          << "round " << round << " message " << i;
      absl::StatusOr<std::string> read = ReadMessage(reader);
      ASSERT_TRUE(read.ok()) << read.status();
      ASSERT_TRUE(*read == message) << "round " << round << " message " << i;
    }
  }
  bool wake = false;
  absl::StatusOr<std::optional<ShmRecord>> empty = reader.Peek(&wake);
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->has_value());
}

TEST(ShmRingTest, AFullRingRefusesUntilTheReaderConsumesAndFlagsTheWaitingWriter) {
  Segment segment;
  ShmRing reader = ShmRing::Create(segment.base(), kCapacity, Rank(2), Rank(3));
  ShmRing writer = *ShmRing::Attach(segment.base(), kShmControlBytes + kCapacity, Rank(2), Rank(3));
  const std::string record(8000, 'x');
  int written = 0;
  while (WriteMessage(writer, record, "")) ++written;
  EXPECT_EQ(written, static_cast<int>(kCapacity / 8064));  // 8000 + 64 header, padded to 64
  writer.SetWriterWaiting();
  EXPECT_FALSE(writer.HasRoomFor(record.size()));
  bool wake = false;
  absl::StatusOr<std::optional<ShmRecord>> first = reader.Peek(&wake);
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_TRUE(reader.Consume(**first));  // the writer said it waits
  EXPECT_TRUE(writer.HasRoomFor(record.size()));
  EXPECT_TRUE(WriteMessage(writer, record, ""));
  // Reader sleeping: the writer's publication reports it once.
  reader.SetReaderWaiting(true);
  EXPECT_TRUE(writer.TakeReaderWaiting());
  EXPECT_FALSE(writer.TakeReaderWaiting());
}

// Each corruption of the shared bytes is DataLoss naming the edge, never a read out of bounds.
class ShmRingCorruptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    reader_ = std::make_unique<ShmRing>(ShmRing::Create(segment_.base(), kCapacity, Rank(4), Rank(5)));
    writer_ = std::make_unique<ShmRing>(*ShmRing::Attach(segment_.base(), kShmControlBytes + kCapacity, Rank(4), Rank(5)));
    ASSERT_TRUE(WriteMessage(*writer_, "hello", ""));
  }
  absl::Status PeekStatus() {
    bool wake = false;
    return reader_->Peek(&wake).status();
  }
  uint64_t* head() { return reinterpret_cast<uint64_t*>(segment_.base() + 64); }
  Segment segment_;
  std::unique_ptr<ShmRing> reader_, writer_;
};

TEST_F(ShmRingCorruptionTest, Magic) {
  segment_.data()[0] ^= 1;
  const absl::Status status = PeekStatus();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("from rank 4 to rank 5 is corrupt: record 0 at offset 0: bad magic"));
}

TEST_F(ShmRingCorruptionTest, AnyHeaderByteFailsTheChecksum) {
  for (int byte = 4; byte < 44; ++byte) {
    segment_.data()[byte] ^= 0x40;
    const absl::Status status = PeekStatus();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << "byte " << byte;
    EXPECT_THAT(std::string(status.message()), HasSubstr("checksum")) << "byte " << byte;
    segment_.data()[byte] ^= 0x40;
  }
  EXPECT_TRUE(PeekStatus().ok());
}

// A header with a valid checksum (a checksum is no secret) that pads a whole pass of the ring:
// no writer does that (it pads only an end a record does not fit), and a writer publishing it
// again and again would hold the reader in Peek forever, so it is refused.
TEST_F(ShmRingCorruptionTest, PaddingAWholePassIsRefused) {
  struct {
    uint32_t magic, flags;
    int32_t from, to;
    uint64_t sequence, bytes, message_bytes;
    uint32_t checksum;
  } header;
  std::memcpy(&header, segment_.data(), sizeof(header));  // the record "hello": magic, ranks, sequence 0
  header.flags = 4;  // padding
  header.bytes = kCapacity - kShmRecordHeaderBytes;
  header.message_bytes = 0;
  header.checksum = Crc32c(&header, offsetof(decltype(header), checksum));
  std::memcpy(segment_.data(), &header, sizeof(header));
  *head() = kCapacity;
  const absl::Status status = PeekStatus();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("padding"));
}

TEST_F(ShmRingCorruptionTest, HeadBeyondTheRing) {
  *head() = kCapacity * 5;
  EXPECT_THAT(std::string(PeekStatus().message()), HasSubstr("head"));
  *head() = 32;  // less than a record header published
  EXPECT_THAT(std::string(PeekStatus().message()), HasSubstr("only 32 bytes published"));
}

TEST_F(ShmRingCorruptionTest, TailImpossibleForTheWriter) {
  uint64_t* tail = reinterpret_cast<uint64_t*>(segment_.base() + 192);
  *tail = 1 << 30;
  size_t written = 0;
  absl::StatusOr<bool> wrote = writer_->TryWriteRecord("x", "", &written);
  EXPECT_EQ(wrote.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(wrote.status().message()), HasSubstr("tail"));
}

TEST(ShmRingTest, AttachRefusesAForeignOrMisSizedControlBlock) {
  Segment segment;
  ShmRing::Create(segment.base(), kCapacity, Rank(0), Rank(1));
  EXPECT_EQ(ShmRing::Attach(segment.base(), kShmControlBytes + kCapacity, Rank(1), Rank(0)).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(ShmRing::Attach(segment.base(), kShmControlBytes + 2 * kCapacity, Rank(0), Rank(1)).status().code(),
            absl::StatusCode::kDataLoss);
  Segment blank;
  EXPECT_THAT(std::string(ShmRing::Attach(blank.base(), kShmControlBytes + kCapacity, Rank(0), Rank(1)).status().message()),
              HasSubstr("magic"));
  EXPECT_FALSE(ShmRing::CheckCapacity(1000).ok());
  EXPECT_TRUE(ShmRing::CheckCapacity(kCapacity).ok());
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like
