// The Transport contract (as tcp_transport_test checks it for TCP) over ShmTransport: ranks as
// objects of one process (threads), and two real processes (fork) for the cross-process paths:
// data both ways and a peer killed with SIGKILL.
#include "oneflow_like/comm/shm_transport.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>
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
#include "oneflow_like/comm/shm_ring.h"
#include "oneflow_like/comm/tcp_hello.h"
#include "oneflow_like/comm/transport_testing.h"
#include "oneflow_like/comm/unix_socket.h"

namespace oneflow_like {
namespace comm {
namespace {

using ::testing::HasSubstr;
constexpr char kToken[] = "test-job-token";
constexpr uint64_t kSmallRing = uint64_t{1} << 20;  // 1 MiB: large messages span records and wrap
using testing_util::Errors;
using testing_util::Inbox;
using testing_util::kHangGuard;
using testing_util::MessageSize;
using testing_util::Pattern;
using testing_util::Raw;

ShmTransportOptions Options(int32_t rank, int32_t world_size, uint64_t ring_bytes = kSmallRing) {
  ShmTransportOptions options;
  options.rank = rank;
  options.world_size = world_size;
  for (int32_t r = 0; r < world_size; ++r) {
    if (r != rank) options.peers.push_back(r);
  }
  options.job_token = kToken;
  options.ring_bytes = ring_bytes;
  options.connect_timeout_ms = 20000;
  return options;
}

std::vector<std::unique_ptr<ShmTransport>> ListenAll(int32_t world_size, uint64_t ring_bytes = kSmallRing) {
  std::vector<std::unique_ptr<ShmTransport>> world;
  for (int32_t r = 0; r < world_size; ++r) {
    absl::StatusOr<std::unique_ptr<ShmTransport>> transport = ShmTransport::Listen(Options(r, world_size, ring_bytes));
    EXPECT_TRUE(transport.ok()) << transport.status();
    if (transport.ok()) world.push_back(std::move(*transport));
  }
  return world;
}

void ConnectAll(const std::vector<std::unique_ptr<ShmTransport>>& world) {
  std::vector<std::string> endpoints;
  for (const auto& t : world) endpoints.push_back(t->endpoint());
  std::vector<std::future<absl::Status>> results;
  for (const auto& t : world) {
    results.push_back(std::async(std::launch::async, [&t, endpoints] { return t->Connect(endpoints); }));
  }
  for (auto& result : results) {
    const absl::Status status = result.get();
    EXPECT_TRUE(status.ok()) << status;
  }
}

TEST(ShmTransportTest, TwoRanksDeliverInOrderIncludingLargeAndEmptyPayloads) {
  Inbox inbox[2];  // declared first: outlives the transports that call it
  auto world = ListenAll(2);
  ASSERT_EQ(world.size(), 2u);
  for (int r = 0; r < 2; ++r) world[r]->SetReceiver(inbox[r].Receiver());
  ConnectAll(world);
  const int64_t payload_bytes = testing_util::ExpectTwoRanksDeliverInOrder(Raw(world), inbox);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(world[r]->bytes_received(), payload_bytes);  // payloads only: no frames
}

TEST(ShmTransportTest, FourRanksAllToAllKeepPerEdgeOrder) {
  Inbox inbox[4];
  auto world = ListenAll(4);
  ASSERT_EQ(world.size(), 4u);
  for (int r = 0; r < 4; ++r) world[r]->SetReceiver(inbox[r].Receiver());
  ConnectAll(world);
  testing_util::ExpectAllToAllKeepsPerEdgeOrder(Raw(world), inbox);
}

TEST(ShmTransportTest, SimultaneousLargeSendsInBothDirectionsDoNotDeadlock) {
  Inbox inbox[2];
  auto world = ListenAll(2);
  ASSERT_EQ(world.size(), 2u);
  for (int r = 0; r < 2; ++r) world[r]->SetReceiver(inbox[r].Receiver());
  ConnectAll(world);
  testing_util::ExpectLargeSendsBothWaysDoNotDeadlock(Raw(world), inbox, 12 * 1024 * 1024, 6);  // 12 x the ring
}

// Messages of several records, each smaller than the one before (the reassembly buffer keeps
// the capacity of the largest), then one that exactly fills a record.
TEST(ShmTransportTest, MessagesOfSeveralRecordsInDecreasingSizes) {
  Inbox inbox[2];
  auto world = ListenAll(2);
  ASSERT_EQ(world.size(), 2u);
  world[1]->SetReceiver(inbox[1].Receiver());
  ConnectAll(world);
  const size_t record = kSmallRing / 4 - kShmRecordHeaderBytes;
  const std::vector<size_t> sizes = {9 << 20, 6 << 20, 3 << 20, record + 1, 2 * record, record, record - 1};
  for (size_t i = 0; i < sizes.size(); ++i) {
    ASSERT_TRUE(world[0]->SendOwned(Rank(1), Pattern(0, 1, static_cast<int>(i), sizes[i])).ok());
  }
  ASSERT_TRUE(inbox[1].WaitFor(sizes.size()));
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_TRUE(inbox[1].messages[i].second == Pattern(0, 1, static_cast<int>(i), sizes[i])) << "message " << i;
  }
}

// 200,000 small messages each way at once: every wake-up race between a sleeping reader and a
// publishing writer would show as a stall (the hang guard) or a loss.
TEST(ShmTransportTest, ManySmallMessagesBothWays) {
  Inbox inbox[2];
  auto world = ListenAll(2, kShmMinCapacity);
  ASSERT_EQ(world.size(), 2u);
  for (int r = 0; r < 2; ++r) world[r]->SetReceiver(inbox[r].Receiver());
  ConnectAll(world);
  constexpr int kMessages = 200000;
  std::vector<std::thread> senders;
  for (int r = 0; r < 2; ++r) {
    senders.emplace_back([&world, r] {
      for (int i = 0; i < kMessages; ++i) {
        const std::string payload = std::to_string(i);
        ASSERT_TRUE((i % 2 ? world[r]->Send(Rank(1 - r), payload) : world[r]->SendOwned(Rank(1 - r), payload)).ok());
      }
    });
  }
  for (std::thread& t : senders) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(inbox[r].WaitFor(kMessages)) << "rank " << r << " stalled at " << inbox[r].messages.size();
    std::lock_guard<std::mutex> lock(inbox[r].mu);
    for (int i = 0; i < kMessages; ++i) ASSERT_EQ(inbox[r].messages[i].second, std::to_string(i));
  }
}

// SendOwned never waits, even with no receiver and far more than the ring holds; Send and
// SendOwned interleaved keep their order.
TEST(ShmTransportTest, SendOwnedInterleavedWithSendKeepsOrderAndNeverWaits) {
  Inbox inbox[2];
  auto world = ListenAll(2);
  ASSERT_EQ(world.size(), 2u);
  ConnectAll(world);
  testing_util::ExpectSendOwnedInterleavedWithSendKeepsOrder(Raw(world), inbox);
}

// SendRegistered queues a view of the caller's memory when the ring is full; UnregisterMemory
// copies what is still queued, so the memory may change and the peer gets the bytes as sent.
TEST(ShmTransportTest, SendRegisteredAndUnregisterDetachesQueuedBytes) {
  Inbox inbox[2];
  auto world = ListenAll(2);
  ASSERT_EQ(world.size(), 2u);
  ConnectAll(world);  // no receiver on rank 1 yet: the ring fills, the rest is queued
  testing_util::ExpectSendRegisteredSurvivesUnregister(Raw(world), &inbox[1], 16 << 20);
}

TEST(ShmTransportTest, SelfSendAndMessagesBeforeTheReceiverAreDeliveredInOrder) {
  Inbox inbox[2];
  auto world = ListenAll(2);
  ASSERT_EQ(world.size(), 2u);
  ASSERT_TRUE(world[0]->Send(Rank(0), "self-before-connect").ok());
  ASSERT_TRUE(world[1]->Send(Rank(0), "queued-before-connect").ok());
  ConnectAll(world);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(world[0]->Send(Rank(0), "self-" + std::to_string(i)).ok());
    ASSERT_TRUE(world[1]->Send(Rank(0), "peer-" + std::to_string(i)).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  world[0]->SetReceiver(inbox[0].Receiver());
  ASSERT_TRUE(inbox[0].WaitFor(12));
  std::vector<std::string> self, peer;
  for (const auto& [from, payload] : inbox[0].messages) (from == 0 ? self : peer).push_back(payload);
  EXPECT_EQ(self, (std::vector<std::string>{"self-before-connect", "self-0", "self-1", "self-2", "self-3", "self-4"}));
  EXPECT_EQ(peer, (std::vector<std::string>{"queued-before-connect", "peer-0", "peer-1", "peer-2", "peer-3", "peer-4"}));
}

// A corrupted record header in rank 0 -> rank 1's ring: rank 1's handler gets DataLoss naming
// rank 0; nothing is delivered from the bad record; rank 0 hears that rank 1 dropped the link
// (instead of filling a ring nobody reads).
TEST(ShmTransportTest, CorruptRingHeaderIsDataLossNamingThePeer) {
  Inbox inbox[2];
  Errors errors[2];
  auto world = ListenAll(2);
  ASSERT_EQ(world.size(), 2u);
  for (int r = 0; r < 2; ++r) world[r]->SetErrorHandler(errors[r].Handler());
  ConnectAll(world);
  ASSERT_TRUE(world[0]->Send(Rank(1), "good").ok());
  ASSERT_TRUE(world[0]->Send(Rank(1), std::string(1000, 'b')).ok());
  size_t bytes = 0;
  char* ring = world[1]->IncomingRingForTesting(Rank(0), &bytes);
  ASSERT_NE(ring, nullptr);
  ASSERT_EQ(bytes, kShmControlBytes + kSmallRing);
  // The second record starts at 128 (64-byte header + 4 bytes, padded); its length field is at
  // +24: an absurd length (the header checksum catches it first).
  uint64_t huge = uint64_t{1} << 40;
  std::memcpy(ring + kShmControlBytes + 128 + 24, &huge, sizeof(huge));
  world[1]->SetReceiver(inbox[1].Receiver());
  const absl::Status status = errors[1].WaitForFirst();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("shm transport rank 1: from rank 0"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("record 1 at offset 128"));
  ASSERT_TRUE(inbox[1].WaitFor(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(inbox[1].messages.size(), 1u);
  EXPECT_EQ(inbox[1].messages[0].second, "good");
  world[0]->SetReceiver([](Rank, absl::string_view) {});
  const absl::Status peer_view = errors[0].WaitForFirst();
  EXPECT_EQ(peer_view.code(), absl::StatusCode::kUnavailable) << peer_view;
  EXPECT_THAT(std::string(peer_view.message()), HasSubstr("rank 1 closed its shared-memory link"));
}

// The receiver's max_message_bytes bounds every message in its rings, a single record too (a
// record holds up to a quarter of the ring): the peer's sender may have a larger limit.
TEST(ShmTransportTest, AMessageOverTheReceiversLimitIsDataLossEvenInOneRecord) {
  Inbox inbox;
  Errors errors;
  absl::StatusOr<std::unique_ptr<ShmTransport>> sender = ShmTransport::Listen(Options(0, 2));
  ShmTransportOptions options = Options(1, 2);
  options.max_message_bytes = 100;
  absl::StatusOr<std::unique_ptr<ShmTransport>> receiver = ShmTransport::Listen(options);
  ASSERT_TRUE(sender.ok() && receiver.ok());
  std::vector<std::unique_ptr<ShmTransport>> world;
  world.push_back(*std::move(sender));
  world.push_back(*std::move(receiver));
  world[1]->SetErrorHandler(errors.Handler());
  world[1]->SetReceiver(inbox.Receiver());
  ConnectAll(world);
  ASSERT_TRUE(world[0]->Send(Rank(1), std::string(100, 'a')).ok());
  ASSERT_TRUE(world[0]->Send(Rank(1), std::string(500, 'b')).ok());  // one record of a 1 MiB ring
  const absl::Status status = errors.WaitForFirst();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("from rank 0: a message of 500 bytes exceeds max_message_bytes 100"));
  ASSERT_TRUE(inbox.WaitFor(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(inbox.messages.size(), 1u);
}

// A head counter beyond the ring: DataLoss naming the writer.
TEST(ShmTransportTest, AnImpossibleHeadIsDataLossNamingThePeer) {
  Errors errors;
  auto world = ListenAll(2);
  ASSERT_EQ(world.size(), 2u);
  world[0]->SetErrorHandler(errors.Handler());
  ConnectAll(world);
  size_t bytes = 0;
  char* ring = world[0]->IncomingRingForTesting(Rank(1), &bytes);
  ASSERT_NE(ring, nullptr);
  uint64_t head = uint64_t{1} << 50;
  std::memcpy(ring + 64, &head, sizeof(head));
  world[0]->SetReceiver([](Rank, absl::string_view) {});
  const absl::Status status = errors.WaitForFirst();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("from rank 1"));
}

TEST(ShmTransportTest, DestroyedPeerFiresTheErrorHandlerOnceWithUnavailable) {
  Errors errors;
  auto world = ListenAll(2);
  ASSERT_EQ(world.size(), 2u);
  world[0]->SetErrorHandler(errors.Handler());
  world[0]->SetReceiver([](Rank, absl::string_view) {});
  ConnectAll(world);
  world[1].reset();
  const absl::Status status = errors.WaitForFirst();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("rank 1 closed its shared-memory link"));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(errors.Count(), 1u);
  // Sends to it fail; while the ring had room they land there, so keep sending until one fails.
  absl::Status sent;
  for (int i = 0; i < 10000 && sent.ok(); ++i) sent = world[0]->Send(Rank(1), std::string(4096, 'x'));
  EXPECT_EQ(sent.code(), absl::StatusCode::kUnavailable) << sent;
}

TEST(ShmTransportTest, StrangersAndWrongTokensAreRefusedAndTheJobConnects) {
  Inbox inbox[2];
  auto world = ListenAll(2);
  ASSERT_EQ(world.size(), 2u);
  const std::string path = world[1]->endpoint();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  // Before rank 0 dials: a wrong token, garbage, and a hello claiming a higher rank.
  absl::StatusOr<ScopedFd> wrong = DialUnix(path, deadline);
  ASSERT_TRUE(wrong.ok());
  ASSERT_TRUE(SendMessageWithFds(wrong->get(), EncodeHello({2, 0, "wrong-token"}), {}, deadline, "test").ok());
  absl::StatusOr<ScopedFd> garbage = DialUnix(path, deadline);
  ASSERT_TRUE(SendMessageWithFds(garbage->get(), "GET / HTTP/1.1", {}, deadline, "test").ok());
  absl::StatusOr<ScopedFd> higher = DialUnix(path, deadline);
  ASSERT_TRUE(SendMessageWithFds(higher->get(), EncodeHello({2, 1, kToken}), {}, deadline, "test").ok());
  for (int r = 0; r < 2; ++r) world[r]->SetReceiver(inbox[r].Receiver());
  ConnectAll(world);
  EXPECT_EQ(world[1]->refused_connections(), 3);
  // The refused connections got no descriptors: they read EOF.
  absl::StatusOr<UnixMessage> answer = ReceiveMessageWithFds(wrong->get(), 4096, deadline, "rank 1");
  EXPECT_FALSE(answer.ok());
  ASSERT_TRUE(world[0]->Send(Rank(1), "after").ok());
  ASSERT_TRUE(inbox[1].WaitFor(1));
  EXPECT_EQ(inbox[1].messages[0].second, "after");
  EXPECT_TRUE(world[1]->endpoint().empty());  // the socket file is gone after Connect
}

// A fake rank 0 that dials rank 1, passes the hello and offers a proper ring segment (the ring
// rank 1 -> rank 0, mapped here) but the given descriptors as its "data" and "space" eventfds.
struct FakeLowerPeer {
  static constexpr size_t kBytes = kShmControlBytes + kSmallRing;
  ~FakeLowerPeer() {
    rank1.reset();
    if (ring != nullptr) munmap(ring, kBytes);
  }
  // Returns rank 1's Connect.
  absl::Status Connect(int data_fd, int space_fd) {
    absl::StatusOr<std::unique_ptr<ShmTransport>> listening = ShmTransport::Listen(Options(1, 2));
    if (!listening.ok()) return listening.status();
    rank1 = *std::move(listening);
    const std::string path = rank1->endpoint();
    std::future<absl::Status> connected =
        std::async(std::launch::async, [&] { return rank1->Connect({"unused", path}); });
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    absl::StatusOr<ScopedFd> dialed = DialUnix(path, deadline);
    EXPECT_TRUE(dialed.ok()) << dialed.status();
    socket = *std::move(dialed);
    EXPECT_TRUE(SendMessageWithFds(socket.get(), EncodeHello({2, 0, kToken}), {}, deadline, "test").ok());
    EXPECT_TRUE(ReceiveMessageWithFds(socket.get(), 4096, deadline, "rank 1").ok());  // its hello
    EXPECT_TRUE(ReceiveMessageWithFds(socket.get(), 4096, deadline, "rank 1").ok());  // its offer
    struct {  // shm_connect.cc's Offer
      uint32_t magic = 0x4f534c4f;
      int32_t from = 1, to = 0;
      uint32_t reserved = 0;
      uint64_t capacity = kSmallRing;
    } offer;
    ScopedFd memfd(memfd_create("fake-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    EXPECT_EQ(ftruncate(memfd.get(), kBytes), 0);
    EXPECT_EQ(fcntl(memfd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    void* base = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd.get(), 0);
    EXPECT_NE(base, MAP_FAILED);
    ring = static_cast<char*>(base);
    ShmRing::Create(ring, kSmallRing, Rank(1), Rank(0));
    EXPECT_TRUE(SendMessageWithFds(socket.get(), absl::string_view(reinterpret_cast<const char*>(&offer), sizeof(offer)),
                                   {memfd.get(), data_fd, space_fd}, deadline, "test")
                    .ok());
    return connected.get();
  }
  std::unique_ptr<ShmTransport> rank1;
  ScopedFd socket;
  char* ring = nullptr;  // rank 1 -> rank 0 (control block, then data)
};

absl::Status ConnectToAFakePeerOffering(int data_fd, int space_fd) {
  FakeLowerPeer peer;
  return peer.Connect(data_fd, space_fd);
}

// A peer that clears O_NONBLOCK on the (shared) file description of the data eventfd it passed
// after Connect checked it, saturates its counter and says it sleeps: a Send that must wake it
// still never waits (the write would block forever: EAGAIN is fine for a wake-up).
TEST(ShmTransportTest, ASendNeverBlocksOnThePeersSaturatedEventfd) {
  ScopedFd data(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)), space(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  FakeLowerPeer peer;
  ASSERT_TRUE(peer.Connect(data.get(), space.get()).ok());
  ASSERT_EQ(fcntl(data.get(), F_SETFL, 0), 0);
  const uint64_t saturated = ~uint64_t{0} - 1;
  ASSERT_EQ(write(data.get(), &saturated, sizeof(saturated)), 8);
  const uint32_t sleeping = 1;
  std::memcpy(peer.ring + 128, &sleeping, sizeof(sleeping));  // the control block's reader_waiting
  std::future<absl::Status> sent = std::async(std::launch::async, [&] { return peer.rank1->Send(Rank(0), "x"); });
  const bool returned = sent.wait_for(std::chrono::seconds(3)) == std::future_status::ready;
  if (!returned) {  // unstick the blocked write so the test ends
    uint64_t count;
    ASSERT_EQ(read(data.get(), &count, sizeof(count)), 8);
  }
  EXPECT_TRUE(returned) << "Send blocked writing the peer's eventfd";
  EXPECT_TRUE(sent.get().ok());
}

// The eventfds a peer passes are written and read by our threads: a peer handing anything but
// non-blocking eventfds (a pipe, a blocking eventfd) is refused at Connect, naming it.
TEST(ShmTransportTest, APeerOfferingABlockingPipeOrEventfdIsRefused) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  ScopedFd pipe_read(pipe_fds[0]), pipe_write(pipe_fds[1]);
  ScopedFd good(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)), blocking(eventfd(0, EFD_CLOEXEC));
  absl::Status status = ConnectToAFakePeerOffering(pipe_read.get(), good.get());
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr("rank 0"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("its data descriptor is not an eventfd"));
  status = ConnectToAFakePeerOffering(good.get(), blocking.get());
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr("rank 0"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("its space eventfd is blocking"));
  ScopedFd good2(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  EXPECT_TRUE(ConnectToAFakePeerOffering(good.get(), good2.get()).ok());
}

TEST(ShmTransportTest, ConnectTimeoutNamesTheMissingRanks) {
  auto world = ListenAll(3);
  ASSERT_EQ(world.size(), 3u);
  ShmTransportOptions options = Options(2, 3);
  options.connect_timeout_ms = 300;
  auto lonely = ShmTransport::Listen(options);
  ASSERT_TRUE(lonely.ok());
  std::vector<std::string> endpoints = {world[0]->endpoint(), world[1]->endpoint(), (*lonely)->endpoint()};
  const absl::Status status = (*lonely)->Connect(endpoints);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("no shared-memory link from rank(s) 0, 1"));
}

TEST(ShmTransportTest, BadArgumentsAreClearErrors) {
  ShmTransportOptions options = Options(0, 2);
  options.ring_bytes = 1000;
  EXPECT_THAT(std::string(ShmTransport::Listen(options).status().message()), HasSubstr("capacity 1000"));
  options = Options(0, 2);
  options.peers = {0};
  EXPECT_EQ(ShmTransport::Listen(options).status().code(), absl::StatusCode::kInvalidArgument);
  options = Options(0, 2);
  options.job_token.clear();
  EXPECT_THAT(std::string(ShmTransport::Listen(options).status().message()), HasSubstr("job_token"));
  options = Options(3, 2);
  EXPECT_EQ(ShmTransport::Listen(options).status().code(), absl::StatusCode::kInvalidArgument);
  options = Options(0, 3);
  options.peers = {1};  // rank 2 is elsewhere
  auto transport = ShmTransport::Listen(options);
  ASSERT_TRUE(transport.ok());
  EXPECT_TRUE((*transport)->Serves(Rank(0)));
  EXPECT_TRUE((*transport)->Serves(Rank(1)));
  EXPECT_FALSE((*transport)->Serves(Rank(2)));
  EXPECT_THAT(std::string((*transport)->Send(Rank(2), "x").message()), HasSubstr("rank 2 is not on this node"));
}

// ---- Two processes ----

// Runs `body` in a child process; returns its pid. The child exits 0 if body returns true.
template <typename Body>
pid_t Fork(Body body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body() ? 0 : 1);
  return pid;
}

int ExitCode(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string ReadLine(int fd) {
  std::string line;
  char c;
  while (read(fd, &c, 1) == 1 && c != '\n') line.push_back(c);
  return line;
}

// The child is rank 1: it listens, tells the parent its endpoint through a pipe, connects, and
// echoes each message back reversed; "die" makes it SIGKILL itself.
pid_t StartEchoChild(int to_parent, int from_parent) {
  return Fork([to_parent, from_parent] {
    auto transport = ShmTransport::Listen(Options(1, 2));
    if (!transport.ok()) return false;
    ShmTransport* t = transport->get();
    const std::string line = t->endpoint() + "\n";
    if (write(to_parent, line.data(), line.size()) != static_cast<ssize_t>(line.size())) return false;
    const std::string parent = ReadLine(from_parent);
    std::mutex mu;
    std::condition_variable cv;
    int done = 0;
    t->SetReceiver([&](Rank from, absl::string_view payload) {
      if (payload == "die") kill(getpid(), SIGKILL);
      if (payload == "bye") {
        std::lock_guard<std::mutex> lock(mu);
        done = 1;
        cv.notify_all();
        return;
      }
      std::string reversed(payload.rbegin(), payload.rend());
      if (!t->SendOwned(from, std::move(reversed)).ok()) _exit(3);
    });
    if (!t->Connect({parent, ""}).ok()) return false;
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, kHangGuard, [&] { return done == 1; });
  });
}

// Forks the echo child (rank 1) and connects `t` (rank 0) to it; the child's pid, or -1.
pid_t ConnectToEchoChild(ShmTransport* t) {
  int up[2], down[2];
  if (pipe(up) != 0 || pipe(down) != 0) return -1;
  const pid_t child = StartEchoChild(up[1], down[0]);
  close(up[1]);  // the child's ends: a child that dies early gives EOF instead of a hang
  close(down[0]);
  bool connected = false;
  if (child > 0) {
    const std::string child_endpoint = ReadLine(up[0]);
    const std::string line = t->endpoint() + "\n";
    connected = write(down[1], line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
                t->Connect({"", child_endpoint}).ok();
  }
  close(up[0]);
  close(down[1]);
  if (!connected && child > 0) kill(child, SIGKILL);
  return connected ? child : -1;
}

TEST(ShmTransportProcessTest, TwoProcessesExchangeDataAndAKilledPeerIsNamed) {
  Inbox inbox;
  Errors errors;
  pid_t child = -1;
  {
    auto transport = ShmTransport::Listen(Options(0, 2));
    ASSERT_TRUE(transport.ok());
    ShmTransport* t = transport->get();
    t->SetReceiver(inbox.Receiver());
    t->SetErrorHandler(errors.Handler());
    child = ConnectToEchoChild(t);
    ASSERT_GT(child, 0);
    constexpr int kMessages = 20;
    for (int i = 0; i < kMessages; ++i) {
      ASSERT_TRUE(t->Send(Rank(1), Pattern(0, 1, i, MessageSize(i))).ok());
    }
    ASSERT_TRUE(inbox.WaitFor(kMessages));
    for (int i = 0; i < kMessages; ++i) {
      const std::string sent = Pattern(0, 1, i, MessageSize(i));
      EXPECT_TRUE(inbox.messages[i].second == std::string(sent.rbegin(), sent.rend())) << "message " << i;
    }
    // The peer dies without a word: the error names it, and nothing spins or hangs.
    ASSERT_TRUE(t->Send(Rank(1), "die").ok());
    const absl::Status status = errors.WaitForFirst();
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr("rank 1 closed its shared-memory link"));
  }
  EXPECT_EQ(ExitCode(child), 128 + SIGKILL);
}

TEST(ShmTransportProcessTest, TwoProcessesFinishCleanly) {
  Inbox inbox;
  auto transport = ShmTransport::Listen(Options(0, 2, kShmMinCapacity));
  ASSERT_TRUE(transport.ok());
  ShmTransport* t = transport->get();
  t->SetReceiver(inbox.Receiver());
  const pid_t child = ConnectToEchoChild(t);
  ASSERT_GT(child, 0);
  constexpr int kMessages = 2000;  // far more than the 64 KiB ring holds
  for (int i = 0; i < kMessages; ++i) ASSERT_TRUE(t->SendOwned(Rank(1), Pattern(0, 1, i, 1000 + i % 77)).ok());
  ASSERT_TRUE(inbox.WaitFor(kMessages));
  for (int i = 0; i < kMessages; ++i) {
    const std::string sent = Pattern(0, 1, i, 1000 + i % 77);
    ASSERT_TRUE(inbox.messages[i].second == std::string(sent.rbegin(), sent.rend())) << "message " << i;
  }
  ASSERT_TRUE(t->Send(Rank(1), "bye").ok());
  EXPECT_EQ(ExitCode(child), 0);
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like
