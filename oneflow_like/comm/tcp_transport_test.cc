#include "oneflow_like/comm/tcp_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oneflow_like/comm/crc32c.h"
#include "oneflow_like/comm/tcp_hello.h"
#include "oneflow_like/comm/transport_testing.h"

namespace oneflow_like {
namespace comm {
namespace {

using ::testing::HasSubstr;
constexpr char kToken[] = "test-job-token";
using testing_util::Errors;
using testing_util::ExpectAllToAllKeepsPerEdgeOrder;
using testing_util::ExpectLargeSendsBothWaysDoNotDeadlock;
using testing_util::ExpectSendOwnedInterleavedWithSendKeepsOrder;
using testing_util::ExpectSendRegisteredSurvivesUnregister;
using testing_util::Inbox;
using testing_util::kHangGuard;
using testing_util::MessageSize;
using testing_util::Pattern;
using testing_util::TryConnect;
using testing_util::Raw;

TcpTransportOptions Options(int32_t rank, int32_t world_size) {
  TcpTransportOptions options;
  options.rank = rank;
  options.world_size = world_size;
  options.job_token = kToken;
  options.connect_timeout_ms = 20000;
  return options;
}

std::vector<std::unique_ptr<TcpTransport>> ListenAll(int32_t world_size, int64_t max_frame_bytes = int64_t{1} << 31) {
  std::vector<std::unique_ptr<TcpTransport>> world;
  for (int32_t r = 0; r < world_size; ++r) {
    TcpTransportOptions options = Options(r, world_size);
    options.max_frame_bytes = max_frame_bytes;
    absl::StatusOr<std::unique_ptr<TcpTransport>> transport = TcpTransport::Listen(options);
    EXPECT_TRUE(transport.ok()) << transport.status();
    if (transport.ok()) world.push_back(std::move(*transport));
  }
  return world;
}

std::vector<std::string> Endpoints(const std::vector<std::unique_ptr<TcpTransport>>& world) {
  std::vector<std::string> endpoints;
  for (const auto& t : world) endpoints.push_back(t->endpoint());
  return endpoints;
}

// Connects every rank concurrently (Connect blocks until all of a rank's links are up).
void ConnectAll(const std::vector<std::unique_ptr<TcpTransport>>& world) {
  const std::vector<std::string> endpoints = Endpoints(world);
  std::vector<std::future<absl::Status>> results;
  for (const auto& t : world) {
    results.push_back(std::async(std::launch::async, [&t, &endpoints] { return t->Connect(endpoints); }));
  }
  for (auto& result : results) {
    const absl::Status status = result.get();
    EXPECT_TRUE(status.ok()) << status;
  }
}

// A blocking client socket connected to `endpoint`, with a receive timeout as hang guard.
int RawConnect(const std::string& endpoint) {
  const int fd = TryConnect(endpoint);
  EXPECT_GE(fd, 0) << std::strerror(-fd);
  return fd;
}

void RawSend(int fd, const std::string& bytes) {
  ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

// Reads until EOF; true if the server closed the connection (rather than the guard firing).
bool ReadsEof(int fd, std::string* received = nullptr) {
  char buffer[4096];
  while (true) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n == 0) return true;
    if (n < 0) return errno == ECONNRESET;
    if (received != nullptr) received->append(buffer, static_cast<size_t>(n));
  }
}

// Sends `bytes` on a fresh raw connection; expects the transport to close it and count it.
void ExpectRefused(TcpTransport& transport, const std::string& bytes, int64_t refused_before) {
  const int fd = RawConnect(transport.endpoint());
  RawSend(fd, bytes);
  std::string reply;
  EXPECT_TRUE(ReadsEof(fd, &reply));
  EXPECT_EQ(reply, "") << "a refused client must not get our hello";
  close(fd);
  EXPECT_EQ(transport.refused_connections(), refused_before + 1);
}

TEST(TcpFrameHeaderTest, RoundTripsAndDetectsCorruption) {
  char bytes[kFrameHeaderBytes];
  EncodeFrameHeader({Rank(3), Rank(1), 42, 1234, 0xDEADBEEF}, bytes);
  absl::StatusOr<FrameHeader> header = DecodeFrameHeader(absl::string_view(bytes, kFrameHeaderBytes));
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->from, Rank(3));
  EXPECT_EQ(header->to, Rank(1));
  EXPECT_EQ(header->sequence, 42u);
  EXPECT_EQ(header->payload_bytes, 1234u);
  EXPECT_EQ(header->payload_checksum, 0xDEADBEEFu);
  bytes[25] ^= 1;  // inside the length field
  EXPECT_EQ(DecodeFrameHeader(absl::string_view(bytes, kFrameHeaderBytes)).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(TcpTransportTest, TwoRanksDeliverInOrderIncludingLargeAndEmptyPayloads) {
  Inbox inbox[2];  // declared first: outlives the transports that call it
  auto world = ListenAll(2);
  ASSERT_EQ(world.size(), 2u);
  for (int r = 0; r < 2; ++r) world[r]->SetReceiver(inbox[r].Receiver());
  ConnectAll(world);
  constexpr int kMessages = 24;
  const int64_t payload_bytes = testing_util::ExpectTwoRanksDeliverInOrder(Raw(world), inbox, kMessages);
  // Wire bytes: one header per frame plus the payloads, counted on both ends.
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(world[r]->bytes_received(), kMessages * static_cast<int64_t>(kFrameHeaderBytes) + payload_bytes);
  }
  EXPECT_EQ(world[0]->bytes_sent(), world[1]->bytes_received());
}

TEST(TcpTransportTest, FourRanksAllToAllKeepPerEdgeOrder) {
  Inbox inbox[4];
  auto world = ListenAll(4);
  ASSERT_EQ(world.size(), 4u);
  for (int r = 0; r < 4; ++r) world[r]->SetReceiver(inbox[r].Receiver());
  ConnectAll(world);
  ExpectAllToAllKeepsPerEdgeOrder(Raw(world), inbox);
}

TEST(TcpTransportTest, SimultaneousLargeSendsInBothDirectionsDoNotDeadlock) {
  Inbox inbox[2];  // declared first: outlives the transports that call it
  auto world = ListenAll(2);
  ASSERT_EQ(world.size(), 2u);
  for (int r = 0; r < 2; ++r) world[r]->SetReceiver(inbox[r].Receiver());
  ConnectAll(world);
  ExpectLargeSendsBothWaysDoNotDeadlock(Raw(world), inbox, 12 * 1024 * 1024, 6);  // far beyond the socket buffers
}

// SendOwned (queued, written by the I/O thread) mixed with Send on the same edges, both ways at
// once, large payloads far beyond the socket buffers: every message arrives intact and in order,
// and SendOwned returns without waiting for the peer to read (the peers read only afterwards).
TEST(TcpTransportTest, SendOwnedInterleavedWithSendKeepsOrderAndNeverWaits) {
  Inbox inbox[2];  // declared first: outlives the transports that call it
  auto world = ListenAll(2);
  ASSERT_EQ(world.size(), 2u);
  ConnectAll(world);
  ExpectSendOwnedInterleavedWithSendKeepsOrder(Raw(world), inbox);
}

// SendRegistered writes the payload from where it lies (no copy) after the prefix; once
// UnregisterMemory returns, what was still queued was copied, so the memory may change (or go)
// and the peer still receives the bytes as they were at the send.
TEST(TcpTransportTest, SendRegisteredIsZeroCopyAndUnregisterDetachesQueuedBytes) {
  Inbox inbox[2];
  auto world = ListenAll(2);
  ASSERT_EQ(world.size(), 2u);
  ConnectAll(world);  // no receiver yet on rank 1: its I/O thread still reads and holds frames
  ExpectSendRegisteredSurvivesUnregister(Raw(world), &inbox[1], 64 << 20);  // far more than the socket takes
}

TEST(SparePayloadsTest, ReusesLargeBuffersWithinBounds) {
  SparePayloads spares;
  std::string a = spares.Take(3 << 20);
  EXPECT_GE(a.capacity(), size_t{3} << 20);
  EXPECT_TRUE(a.empty());
  a.assign(3 << 20, 'a');
  const char* a_bytes = a.data();
  spares.Put(std::move(a));
  std::string again = spares.Take(2 << 20);  // fits (capacity <= 2 x bytes): the same buffer, emptied
  EXPECT_EQ(again.data(), a_bytes);
  EXPECT_TRUE(again.empty());
  spares.Put(std::move(again));
  EXPECT_NE(spares.Take(1 << 20).data(), a_bytes);  // 3 MiB is more than 2 x 1 MiB: not handed out
  std::string small = spares.Take(100);
  small.assign(100, 's');
  spares.Put(std::move(small));                     // too small to keep
  EXPECT_GE(spares.Take(100).capacity(), 100u);
  SparePayloads bounded;  // at most kMaxBuffers kept, told apart from fresh ones by capacity
  const size_t base = size_t{2} << 20;
  for (int i = 1; i <= 6; ++i) {
    std::string buffer;
    buffer.reserve(base + 4096 * i);
    buffer.assign(base, 'x');
    bounded.Put(std::move(buffer));
  }
  int reused = 0;
  for (int i = 0; i < 6; ++i) reused += bounded.Take(base).capacity() > base ? 1 : 0;
  EXPECT_EQ(reused, static_cast<int>(SparePayloads::kMaxBuffers));
}

TEST(TcpTransportTest, SelfSendAndMessagesBeforeTheReceiverAreDeliveredInOrder) {
  Inbox inbox;
  auto world = ListenAll(2);
  ASSERT_EQ(world.size(), 2u);
  ConnectAll(world);
  // No receivers yet: everything must be held, not dropped.
  ASSERT_TRUE(world[0]->Send(Rank(1), "early one").ok());
  ASSERT_TRUE(world[0]->Send(Rank(1), "").ok());
  ASSERT_TRUE(world[0]->Send(Rank(1), "early two").ok());
  ASSERT_TRUE(world[1]->Send(Rank(1), "to myself").ok());
  // Wait until rank 1 has read all three frames off the wire before it gets a receiver.
  const int64_t expected = 3 * static_cast<int64_t>(kFrameHeaderBytes) + 18;
  for (auto start = std::chrono::steady_clock::now();
       world[1]->bytes_received() < expected && std::chrono::steady_clock::now() - start < kHangGuard;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  world[1]->SetReceiver(inbox.Receiver());
  ASSERT_TRUE(world[0]->Send(Rank(1), "late").ok());
  ASSERT_TRUE(inbox.WaitFor(5));
  std::vector<std::string> from0;
  std::vector<std::string> from1;
  for (const auto& [from, payload] : inbox.messages) (from == 0 ? from0 : from1).push_back(payload);
  EXPECT_EQ(from0, (std::vector<std::string>{"early one", "", "early two", "late"}));
  EXPECT_EQ(from1, (std::vector<std::string>{"to myself"}));
}

TEST(TcpTransportTest, SendsBeforeConnectWaitForTheLink) {
  Inbox inbox[2];
  auto world = ListenAll(2);
  ASSERT_EQ(world.size(), 2u);
  for (int r = 0; r < 2; ++r) world[r]->SetReceiver(inbox[r].Receiver());
  ASSERT_TRUE(world[1]->Send(Rank(0), "queued from the acceptor").ok());
  ASSERT_TRUE(world[0]->Send(Rank(1), Pattern(0, 1, 0, 2 * 1024 * 1024)).ok());
  EXPECT_EQ(world[0]->bytes_sent(), 0) << "nothing can be written before the link is up";
  ConnectAll(world);
  ASSERT_TRUE(inbox[0].WaitFor(1));
  ASSERT_TRUE(inbox[1].WaitFor(1));
  EXPECT_EQ(inbox[0].messages[0].second, "queued from the acceptor");
  EXPECT_TRUE(inbox[1].messages[0].second == Pattern(0, 1, 0, 2 * 1024 * 1024));
}

TEST(TcpTransportTest, BadHellosAreRefusedAndTheJobKeepsWorking) {
  Inbox inbox;
  auto world = ListenAll(2);
  ASSERT_EQ(world.size(), 2u);
  TcpTransport& rank1 = *world[1];
  ExpectRefused(rank1, EncodeHello({2, 0, "wrong-token"}), 0);
  ExpectRefused(rank1, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 1);
  std::string oversized = EncodeHello({2, 0, kToken}).substr(0, kHelloFixedBytes - 4);
  oversized += std::string("\xff\xff\xff\x7f", 4);  // a 2 GiB token length
  ExpectRefused(rank1, oversized, 2);
  ExpectRefused(rank1, EncodeHello({3, 0, kToken}), 3);   // wrong world size
  ExpectRefused(rank1, EncodeHello({2, 1, kToken}), 4);   // rank 1 must not dial rank 1
  ExpectRefused(rank1, EncodeHello({2, 7, kToken}), 5);   // outside the world
  EXPECT_EQ(world[0]->refused_connections(), 0);

  rank1.SetReceiver(inbox.Receiver());
  ConnectAll(world);
  ASSERT_TRUE(world[0]->Send(Rank(1), "still works").ok());
  ASSERT_TRUE(inbox.WaitFor(1));
  EXPECT_EQ(inbox.messages[0].second, "still works");
  // A second connection claiming rank 0 is a duplicate; the real link is unaffected.
  ExpectRefused(rank1, EncodeHello({2, 0, kToken}), 6);
  ASSERT_TRUE(world[0]->Send(Rank(1), "and still").ok());
  ASSERT_TRUE(inbox.WaitFor(2));
  EXPECT_EQ(inbox.messages[1].second, "and still");
}

// Plays rank 0 by hand against a real rank 1: a correct hello, then `after_hello`.
absl::Status LinkErrorAfterHello(const std::string& after_hello) {
  Errors errors;
  Inbox inbox;
  auto world = ListenAll(2, /*max_frame_bytes=*/1 << 20);
  if (world.size() != 2) return absl::InternalError("listen failed");
  world[1]->SetErrorHandler(errors.Handler());
  world[1]->SetReceiver(inbox.Receiver());
  const int fd = RawConnect(world[1]->endpoint());
  RawSend(fd, EncodeHello({2, 0, kToken}));
  char reply[kHelloFixedBytes + sizeof(kToken) - 1];
  EXPECT_EQ(recv(fd, reply, sizeof(reply), MSG_WAITALL), static_cast<ssize_t>(sizeof(reply)));
  absl::StatusOr<Hello> hello = DecodeHello(absl::string_view(reply, sizeof(reply)));
  EXPECT_TRUE(hello.ok() && hello->rank == 1 && hello->token == kToken);
  RawSend(fd, after_hello);
  const absl::Status status = errors.WaitForFirst();
  EXPECT_TRUE(ReadsEof(fd)) << "the link must be closed";
  close(fd);
  EXPECT_TRUE(inbox.messages.empty()) << "nothing corrupt may be delivered";
  EXPECT_EQ(world[1]->Send(Rank(0), "x").code(), absl::StatusCode::kUnavailable);
  return status;
}

std::string FrameBytes(uint64_t sequence, const std::string& payload, uint64_t declared_bytes, uint32_t checksum) {
  std::string bytes(kFrameHeaderBytes, '\0');
  EncodeFrameHeader({Rank(0), Rank(1), sequence, declared_bytes, checksum}, &bytes[0]);
  return bytes + payload;
}

TEST(TcpTransportTest, GarbageAfterTheHelloIsDataLossNamingThePeer) {
  const absl::Status garbage = LinkErrorAfterHello(std::string(64, 'G'));
  EXPECT_EQ(garbage.code(), absl::StatusCode::kDataLoss) << garbage;
  EXPECT_THAT(std::string(garbage.message()), HasSubstr("rank 0"));
  EXPECT_THAT(std::string(garbage.message()), HasSubstr("not a transport frame"));
}

TEST(TcpTransportTest, OversizedLengthIsRefusedBeforeAllocating) {
  const absl::Status oversized = LinkErrorAfterHello(FrameBytes(0, "", uint64_t{1} << 40, 0));
  EXPECT_EQ(oversized.code(), absl::StatusCode::kDataLoss) << oversized;
  EXPECT_THAT(std::string(oversized.message()), HasSubstr("rank 0"));
  EXPECT_THAT(std::string(oversized.message()), HasSubstr("exceeds max_frame_bytes"));
}

TEST(TcpTransportTest, ChecksumAndSequenceErrorsAreDataLoss) {
  const std::string payload = "payload";
  const uint32_t good = Crc32c(payload.data(), payload.size());
  const absl::Status corrupt = LinkErrorAfterHello(FrameBytes(0, payload, payload.size(), good ^ 1));
  EXPECT_EQ(corrupt.code(), absl::StatusCode::kDataLoss) << corrupt;
  EXPECT_THAT(std::string(corrupt.message()), HasSubstr("payload checksum mismatch"));
  const absl::Status gap = LinkErrorAfterHello(FrameBytes(1, payload, payload.size(), good));
  EXPECT_EQ(gap.code(), absl::StatusCode::kDataLoss) << gap;
  EXPECT_THAT(std::string(gap.message()), HasSubstr("sequence 1 arrived, expected 0"));
}

TEST(TcpTransportTest, DestroyedPeerFiresTheErrorHandlerOnceWithUnavailable) {
  Errors errors;
  Inbox inbox;
  auto world = ListenAll(3);
  ASSERT_EQ(world.size(), 3u);
  world[1]->SetErrorHandler(errors.Handler());
  ConnectAll(world);
  world[2].reset();
  const absl::Status status = errors.WaitForFirst();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("rank 2"));
  const absl::Status send = world[1]->Send(Rank(2), "x");
  EXPECT_EQ(send.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(send.message()), HasSubstr("rank 2"));
  // The other link still works.
  world[0]->SetReceiver(inbox.Receiver());
  ASSERT_TRUE(world[1]->Send(Rank(0), "alive").ok());
  ASSERT_TRUE(inbox.WaitFor(1));
  std::lock_guard<std::mutex> lock(errors.mu);
  EXPECT_EQ(errors.statuses.size(), 1u);
}

TEST(TcpTransportTest, ConnectTimeoutNamesTheMissingRanks) {
  // Rank 1 of 2 waits for rank 0, which never dials.
  TcpTransportOptions options = Options(1, 2);
  options.connect_timeout_ms = 300;
  auto alone = TcpTransport::Listen(options);
  ASSERT_TRUE(alone.ok()) << alone.status();
  absl::Status status = (*alone)->Connect({"127.0.0.1:1", (*alone)->endpoint()});
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("no link to rank(s) 0"));

  // Rank 0 of 3 dials ranks 1 and 2 at a port where nobody listens (refused until the deadline).
  int32_t closed_port = 0;
  { auto probe = ListenTcp("127.0.0.1", 0, &closed_port); ASSERT_TRUE(probe.ok()); }
  options = Options(0, 3);
  options.connect_timeout_ms = 300;
  auto first = TcpTransport::Listen(options);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string nowhere = "127.0.0.1:" + std::to_string(closed_port);
  status = (*first)->Connect({(*first)->endpoint(), nowhere, nowhere});
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("no link to rank(s) 1, 2"));
}

TEST(TcpTransportTest, BadArgumentsAreClearErrors) {
  TcpTransportOptions options = Options(0, 2);
  options.job_token = "";
  EXPECT_EQ(TcpTransport::Listen(options).status().code(), absl::StatusCode::kInvalidArgument);
  options = Options(2, 2);
  EXPECT_THAT(std::string(TcpTransport::Listen(options).status().message()), HasSubstr("rank 2 with world size 2"));
  options = Options(0, 2);
  options.bind_address = "localhost:80";
  EXPECT_EQ(TcpTransport::Listen(options).status().code(), absl::StatusCode::kInvalidArgument);
  auto world = ListenAll(2, /*max_frame_bytes=*/1000);
  ASSERT_EQ(world.size(), 2u);
  EXPECT_EQ(world[0]->Send(Rank(5), "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(world[0]->Send(Rank(1), std::string(1001, 'x')).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(world[0]->Connect({"127.0.0.1:1"}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(world[0]->Connect({"127.0.0.1:1", "127.0.0.1:2"}).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like
