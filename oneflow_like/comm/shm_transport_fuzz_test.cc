// Fuzzes ShmTransport's reassembly of records into messages: a fake writer puts records with
// valid checksums but random first/last flags, sizes and announced message sizes (around the
// receiver's max_message_bytes) into a live transport's incoming ring. The transport must
// deliver only messages within its limit and otherwise report DataLoss naming the peer, never
// crash or hang. Fixed seed: reproducible.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/comm/crc32c.h"
#include "oneflow_like/comm/shm_ring.h"
#include "oneflow_like/comm/shm_transport.h"
#include "oneflow_like/comm/transport_testing.h"

namespace oneflow_like {
namespace comm {
namespace {

constexpr char kToken[] = "fuzz-token";
constexpr uint64_t kRing = kShmMinCapacity;  // 64 KiB: records of up to 16 KiB - 64
constexpr int64_t kMaxMessage = 10000;       // the receiver's limit: under a record (16 KiB - 64)
constexpr size_t kHeadAt = 64, kTailAt = 192;

struct Header {  // shm_ring.cc's record header
  uint32_t magic;
  uint32_t flags;
  int32_t from;
  int32_t to;
  uint64_t sequence;
  uint64_t bytes;
  uint64_t message_bytes;
  uint32_t checksum;
};

std::vector<std::unique_ptr<ShmTransport>> ConnectedPair() {
  std::vector<std::unique_ptr<ShmTransport>> world;
  std::vector<std::string> endpoints;
  for (int32_t r = 0; r < 2; ++r) {
    ShmTransportOptions options;
    options.rank = r, options.world_size = 2, options.peers = {1 - r};
    options.job_token = kToken, options.ring_bytes = kRing, options.max_message_bytes = kMaxMessage;
    world.push_back(*ShmTransport::Listen(options));
    endpoints.push_back(world.back()->endpoint());
  }
  std::future<absl::Status> zero = std::async(std::launch::async, [&] { return world[0]->Connect(endpoints); });
  EXPECT_TRUE(world[1]->Connect(endpoints).ok());
  EXPECT_TRUE(zero.get().ok());
  return world;
}

TEST(ShmTransportFuzzTest, RandomRecordSequencesAreMessagesWithinTheLimitOrDataLoss) {
  std::mt19937_64 random(20261126);
  auto below = [&](uint64_t n) { return random() % n; };
  int delivered_total = 0, data_loss = 0, clean = 0;
  for (int trial = 0; trial < 150; ++trial) {
    testing_util::Inbox inbox;    // before the transports: outlive their I/O threads
    testing_util::Errors errors;
    auto world = ConnectedPair();
    world[1]->SetErrorHandler(errors.Handler());
    size_t mapped = 0;
    char* ring = world[1]->IncomingRingForTesting(Rank(0), &mapped);
    ASSERT_NE(ring, nullptr);
    char* data = ring + kShmControlBytes;
    // Records as rank 0's writer would lay them out, before rank 1 has a receiver (so its I/O
    // thread leaves the ring alone): no wrap, sizes and flags random.
    // Mostly messages as a correct writer splits them (some over the limit), each record's
    // flags, size or announced message size sometimes changed.
    uint64_t offset = 0, sequence = 0;
    const uint64_t max_record = kRing / 4 - kShmRecordHeaderBytes;
    for (int m = 0, messages = 1 + static_cast<int>(below(5)); m < messages; ++m) {
      const uint64_t size = below(4) == 0 ? kMaxMessage - 2 + below(5) : below(3) == 0 ? below(100) : below(30000);
      uint64_t written = 0;
      bool full = false;
      do {
        Header header{};
        header.magic = 0x52534c4f;
        header.from = 0, header.to = 1, header.sequence = sequence;
        header.bytes = std::min(size - written, below(2) == 0 ? max_record : 1 + below(max_record));
        header.flags = (written == 0 ? 1u : 0u) | (written + header.bytes == size ? 2u : 0u);
        header.message_bytes = size;
        switch (below(8)) {
          case 0: header.flags = static_cast<uint32_t>(below(4)); break;
          case 1: header.message_bytes = below(3) == 0 ? ~uint64_t{0} - below(2) : header.bytes + below(40000); break;
          case 2: header.bytes = below(max_record + 1); break;
          default: break;
        }
        const uint64_t slot = (kShmRecordHeaderBytes + header.bytes + 63) / 64 * 64;
        if (offset + slot > kRing) {
          full = true;
          break;
        }
        header.checksum = Crc32c(&header, offsetof(Header, checksum));
        std::memcpy(data + offset, &header, sizeof(header));
        std::memset(data + offset + kShmRecordHeaderBytes, 'a' + m, header.bytes);
        offset += slot;
        ++sequence;
        written += std::min(header.bytes, size - written);
      } while (written < size);
      if (full) break;
    }
    std::memcpy(ring + kHeadAt, &offset, sizeof(offset));
    world[1]->SetReceiver(inbox.Receiver());
    // Done when the ring is consumed or the edge broke.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    uint64_t tail = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      std::memcpy(&tail, ring + kTailAt, sizeof(tail));
      if (tail == offset || errors.Count() > 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_TRUE(tail == offset || errors.Count() > 0) << "trial " << trial << ": the transport stalled";
    if (errors.Count() > 0) {
      const absl::Status status = errors.WaitForFirst();
      ASSERT_EQ(status.code(), absl::StatusCode::kDataLoss) << "trial " << trial << ": " << status;
      ASSERT_NE(std::string(status.message()).find("shm transport rank 1: from rank 0"), std::string::npos) << status;
      ++data_loss;
    } else {
      ++clean;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::lock_guard<std::mutex> lock(inbox.mu);
    for (const auto& message : inbox.messages) {
      ASSERT_EQ(message.first, 0);
      ASSERT_LE(static_cast<int64_t>(message.second.size()), kMaxMessage) << "trial " << trial;
    }
    delivered_total += static_cast<int>(inbox.messages.size());
  }
  EXPECT_GT(delivered_total, 20);
  EXPECT_GT(data_loss, 20);
  EXPECT_GT(clean, 5);
  std::printf("delivered %d messages; %d trials ended in DataLoss, %d consumed everything\n", delivered_total,
              data_loss, clean);
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like
