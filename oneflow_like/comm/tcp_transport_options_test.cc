// TcpTransport's options for users that want less than the runtime's data plane keeps: closing
// the listener once connected, a cap on connections still in their hello, and no spare payload
// pool; and that detached SendRegistered tails reuse the pool instead of piling up in it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/comm/tcp_transport.h"
#include "oneflow_like/comm/transport_testing.h"

namespace oneflow_like {
namespace comm {
namespace {

using testing_util::TryConnect;

constexpr auto kHangGuard = std::chrono::seconds(60);

TcpTransportOptions Options(int32_t rank) {
  TcpTransportOptions options;
  options.rank = rank;
  options.world_size = 2;
  options.job_token = "options-test-token";
  options.connect_timeout_ms = 20000;
  return options;
}

std::vector<std::unique_ptr<TcpTransport>> ConnectedPair(const TcpTransportOptions& base) {
  std::vector<std::unique_ptr<TcpTransport>> world;
  for (int32_t r = 0; r < 2; ++r) {
    TcpTransportOptions options = base;
    options.rank = r;
    absl::StatusOr<std::unique_ptr<TcpTransport>> t = TcpTransport::Listen(options);
    EXPECT_TRUE(t.ok()) << t.status();
    if (!t.ok()) return {};
    world.push_back(std::move(*t));
  }
  const std::vector<std::string> endpoints = {world[0]->endpoint(), world[1]->endpoint()};
  std::future<absl::Status> zero = std::async(std::launch::async, [&] { return world[0]->Connect(endpoints); });
  const absl::Status one = world[1]->Connect(endpoints);
  EXPECT_TRUE(one.ok()) << one;
  const absl::Status z = zero.get();
  EXPECT_TRUE(z.ok()) << z;
  return world;
}


// True if the server closes `fd` (EOF or reset) before the hang guard.
bool ReadsEof(int fd) {
  char buffer[256];
  while (true) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n == 0) return true;
    if (n < 0) return errno == ECONNRESET;
  }
}

TEST(TcpTransportOptionsTest, CloseListenerAfterConnectRefusesLaterConnectionsAndDropsStrangers) {
  TcpTransportOptions options = Options(0);
  options.close_listener_after_connect = true;
  std::vector<std::unique_ptr<TcpTransport>> world;
  for (int32_t r = 0; r < 2; ++r) {
    options.rank = r;
    world.push_back(*TcpTransport::Listen(options));
  }
  // A stranger that says nothing, connected before the mesh: pending in its hello.
  const int silent = TryConnect(world[1]->endpoint());
  ASSERT_GE(silent, 0) << std::strerror(-silent);
  const std::vector<std::string> endpoints = {world[0]->endpoint(), world[1]->endpoint()};
  std::future<absl::Status> zero = std::async(std::launch::async, [&] { return world[0]->Connect(endpoints); });
  ASSERT_TRUE(world[1]->Connect(endpoints).ok());
  ASSERT_TRUE(zero.get().ok());
  // Connect returned: the listener is gone (both ranks), the pending stranger was dropped.
  EXPECT_EQ(TryConnect(world[1]->endpoint()), -ECONNREFUSED) << "rank 1 still listens after Connect";
  EXPECT_EQ(TryConnect(world[0]->endpoint()), -ECONNREFUSED) << "rank 0 still listens after Connect";
  // Dropped (or reset from the backlog if not yet accepted), not left to its 20 s deadline.
  timeval soon{5, 0};
  setsockopt(silent, SOL_SOCKET, SO_RCVTIMEO, &soon, sizeof(soon));
  EXPECT_TRUE(ReadsEof(silent)) << "the silent stranger was kept after Connect";
  close(silent);
  // The links work.
  std::mutex mu;
  std::condition_variable changed;
  std::string got;
  world[1]->SetReceiver([&](Rank, absl::string_view payload) {
    std::lock_guard<std::mutex> lock(mu);
    got = std::string(payload);
    changed.notify_all();
  });
  ASSERT_TRUE(world[0]->Send(Rank(1), "still works").ok());
  std::unique_lock<std::mutex> lock(mu);
  EXPECT_TRUE(changed.wait_for(lock, kHangGuard, [&] { return got == "still works"; }));
}

TEST(TcpTransportOptionsTest, ByDefaultTheListenerStaysOpen) {
  std::vector<std::unique_ptr<TcpTransport>> world = ConnectedPair(Options(0));
  ASSERT_EQ(world.size(), 2u);
  const int fd = TryConnect(world[1]->endpoint());
  EXPECT_GE(fd, 0) << "the runtime's transport refuses strangers at the hello, not the kernel";
  if (fd >= 0) close(fd);
}

TEST(TcpTransportOptionsTest, ConnectionsPastMaxPendingAreClosedAtOnce) {
  TcpTransportOptions options = Options(1);
  options.max_pending_connections = 2;
  std::unique_ptr<TcpTransport> rank1 = *TcpTransport::Listen(options);
  std::vector<int> pending;
  for (int i = 0; i < 2; ++i) {
    pending.push_back(TryConnect(rank1->endpoint()));
    ASSERT_GE(pending.back(), 0);
  }
  // The kernel completes connects before accept: wait until both are taken as strangers, which
  // a third one past the cap shows by being closed (the first two stay, silent, in their hello).
  const int third = TryConnect(rank1->endpoint());
  ASSERT_GE(third, 0);
  EXPECT_TRUE(ReadsEof(third)) << "a third pending connection was kept";
  EXPECT_EQ(rank1->refused_connections(), 1);
  close(third);
  for (int fd : pending) close(fd);
}

// Rank 0 sends `count` messages of `size` bytes with SendRegistered + UnregisterMemory (the
// gloo transport's large sends), each while rank 1 does not read (its I/O thread held in the
// receiver of a small message before it: test only, receivers must not block), so that the
// socket takes only a part and UnregisterMemory copies the rest; each after the previous one
// arrived and its copy went back to the pool. Returns rank 0's spare payload bytes afterwards.
size_t SpareBytesAfterRegisteredSends(bool keep_spare_payloads, size_t size, int count) {
  TcpTransportOptions options = Options(0);
  options.keep_spare_payloads = keep_spare_payloads;
  std::vector<std::unique_ptr<TcpTransport>> world = ConnectedPair(options);
  if (world.size() != 2) return 0;
  std::mutex mu;
  std::condition_variable changed;
  int received = 0;
  bool holding = false, release = false, sizes_ok = true;
  world[1]->SetReceiver([&](Rank, absl::string_view payload) {
    std::unique_lock<std::mutex> lock(mu);
    if (payload == "hold") {
      holding = true;
      changed.notify_all();
      changed.wait_for(lock, kHangGuard, [&] { return release; });
      holding = release = false;
      return;
    }
    sizes_ok = sizes_ok && payload.size() == 8 + size;
    ++received;
    changed.notify_all();
  });
  std::string data(size, 'x');
  for (int i = 0; i < count; ++i) {
    EXPECT_TRUE(world[0]->Send(Rank(1), "hold").ok());
    {
      std::unique_lock<std::mutex> lock(mu);
      EXPECT_TRUE(changed.wait_for(lock, kHangGuard, [&] { return holding; }));
    }
    const int64_t sent_before = world[0]->bytes_sent();
    EXPECT_TRUE(world[0]->SendRegistered(Rank(1), "prefix__", data).ok());
    EXPECT_LT(world[0]->bytes_sent() - sent_before, static_cast<int64_t>(size)) << "the socket took it all";
    world[0]->UnregisterMemory(data.data(), data.size());  // the unsent tail is copied
    {
      std::unique_lock<std::mutex> lock(mu);
      release = true;
      changed.notify_all();
      EXPECT_TRUE(changed.wait_for(lock, kHangGuard, [&] { return received == i + 1; }));
    }
    if (!keep_spare_payloads) continue;
    // The written copy goes to the pool right after its last write (on rank 0's I/O thread,
    // maybe after rank 1 got it): wait for it, so that the next send may take it.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (world[0]->spare_payload_bytes() == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_GT(world[0]->spare_payload_bytes(), 0u) << "send " << i << ": no copy went to the pool";
  }
  EXPECT_TRUE(sizes_ok);
  return world[0]->spare_payload_bytes();
}

// 48 MiB: more than loopback's socket buffers hold (at most 4 + 32 MiB here), so every send
// leaves a tail to copy.
constexpr size_t kLarge = size_t{48} << 20;

TEST(TcpTransportOptionsTest, DetachedTailsReuseTheSparePoolInsteadOfFillingIt) {
  const size_t spare = SpareBytesAfterRegisteredSends(/*keep_spare_payloads=*/true, kLarge, 5);
  // One string goes round (taken by the next copy, put back once written); without the reuse
  // every copy stays in the pool, unused: 4 x 48 MiB (SparePayloads::kMaxBuffers).
  EXPECT_LT(spare, 2 * kLarge) << "copied tails leave dead strings in the pool";
}

TEST(TcpTransportOptionsTest, NoSparePayloadsWhenAsked) {
  EXPECT_EQ(SpareBytesAfterRegisteredSends(/*keep_spare_payloads=*/false, kLarge, 4), 0u);
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like
