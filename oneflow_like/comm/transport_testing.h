// Test helpers shared by the transport tests (tcp_transport_test, shm_transport_test,
// hybrid_transport_test): a recording receiver and error handler with hang guards,
// deterministic payloads, and the scenarios of the Transport contract (transport.h) that every
// process-per-rank transport must pass, run over an already connected world.
//
//   Inbox inbox[2];                      // declared before the transports: outlives them
//   ... create and connect world[0], world[1] ...
//   ExpectLargeSendsBothWaysDoNotDeadlock({world[0].get(), world[1].get()}, inbox, 12 << 20, 6);
#ifndef ONEFLOW_LIKE_COMM_TRANSPORT_TESTING_H_
#define ONEFLOW_LIKE_COMM_TRANSPORT_TESTING_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/comm/transport.h"

namespace oneflow_like {
namespace comm {
namespace testing_util {

constexpr auto kHangGuard = std::chrono::seconds(30);  // generous: only catches hangs

// Records deliveries; waits (with a hang guard) for a count.
struct Inbox {
  std::mutex mu;
  std::condition_variable changed;
  std::vector<std::pair<int, std::string>> messages;  // (from, payload)
  Transport::Receiver Receiver() {
    return [this](Rank from, absl::string_view payload) {
      std::lock_guard<std::mutex> lock(mu);
      messages.emplace_back(from.value(), std::string(payload));
      changed.notify_all();
    };
  }
  bool WaitFor(size_t count) {
    std::unique_lock<std::mutex> lock(mu);
    return changed.wait_for(lock, kHangGuard, [&] { return messages.size() >= count; });
  }
};

// Records error-handler calls.
struct Errors {
  std::mutex mu;
  std::condition_variable changed;
  std::vector<absl::Status> statuses;
  std::function<void(const absl::Status&)> Handler() {
    return [this](const absl::Status& status) {
      std::lock_guard<std::mutex> lock(mu);
      statuses.push_back(status);
      changed.notify_all();
    };
  }
  // The first error, or OK if none came within the hang guard.
  absl::Status WaitForFirst() {
    std::unique_lock<std::mutex> lock(mu);
    if (!changed.wait_for(lock, kHangGuard, [&] { return !statuses.empty(); })) return absl::OkStatus();
    return statuses.front();
  }
  size_t Count() {
    std::lock_guard<std::mutex> lock(mu);
    return statuses.size();
  }
};

// The endpoints of a world of some transport, as the scenarios below take them.
template <typename T>
std::vector<Transport*> Raw(const std::vector<std::unique_ptr<T>>& world) {
  std::vector<Transport*> raw;
  for (const std::unique_ptr<T>& t : world) raw.push_back(t.get());
  return raw;
}

// Deterministic bytes of message `index` (depends on every argument).
inline std::string Pattern(int from, int to, int index, size_t size) {
  std::string bytes(size, '\0');
  uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(from * 1000003 + to * 1009 + index + 1);
  for (size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    bytes[i] = static_cast<char>(x);
  }
  return bytes;
}

// Sizes cycling through empty, tiny, medium and one large (5 MiB) payload.
inline size_t MessageSize(int index) {
  const size_t sizes[] = {0, 1, 100, 0, 70000, 5 * 1024 * 1024 + 3, 40, 0};
  return sizes[index % 8];
}

// Ranks 0 and 1 Send `messages` messages of MessageSize(i) bytes to each other (empty, small
// and 5 MiB payloads); each receives them in order. Returns the payload bytes each received.
// REQUIRES: receivers installed (inboxes[0], inboxes[1]).
inline int64_t ExpectTwoRanksDeliverInOrder(const std::vector<Transport*>& world, Inbox* inboxes, int messages = 24) {
  for (int i = 0; i < messages; ++i) {
    for (int r = 0; r < 2; ++r) EXPECT_TRUE(world[r]->Send(Rank(1 - r), Pattern(r, 1 - r, i, MessageSize(i))).ok());
  }
  int64_t payload_bytes = 0;
  for (int i = 0; i < messages; ++i) payload_bytes += static_cast<int64_t>(MessageSize(i));
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(inboxes[r].WaitFor(static_cast<size_t>(messages)));
    std::lock_guard<std::mutex> lock(inboxes[r].mu);
    EXPECT_EQ(inboxes[r].messages.size(), static_cast<size_t>(messages));
    for (int i = 0; i < messages && i < static_cast<int>(inboxes[r].messages.size()); ++i) {
      EXPECT_EQ(inboxes[r].messages[i].first, 1 - r);
      EXPECT_TRUE(inboxes[r].messages[i].second == Pattern(1 - r, r, i, MessageSize(i))) << "message " << i;
    }
  }
  return payload_bytes;
}

// Every rank sends `messages` messages to every rank (itself included) from its own thread at
// once; each edge keeps its order. REQUIRES: inboxes[r] is rank r's receiver.
inline void ExpectAllToAllKeepsPerEdgeOrder(const std::vector<Transport*>& world, Inbox* inboxes, int messages = 40) {
  const int n = static_cast<int>(world.size());
  auto size_of = [](int i) -> size_t { return i == 7 ? 3 * 1024 * 1024 : (i % 5 == 0 ? 0 : 16 + i); };
  std::vector<std::thread> senders;
  for (int r = 0; r < n; ++r) {
    senders.emplace_back([&, r] {
      for (int i = 0; i < messages; ++i) {
        for (int to = 0; to < n; ++to) ASSERT_TRUE(world[r]->Send(Rank(to), Pattern(r, to, i, size_of(i))).ok());
      }
    });
  }
  for (std::thread& t : senders) t.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(inboxes[r].WaitFor(static_cast<size_t>(n * messages)));
    std::vector<int> next(n, 0);
    for (const auto& [from, payload] : inboxes[r].messages) {
      const int i = next[from]++;
      EXPECT_TRUE(payload == Pattern(from, r, i, size_of(i))) << "edge " << from << " -> " << r << " message " << i;
    }
    EXPECT_EQ(next, std::vector<int>(n, messages)) << "rank " << r;
  }
}

// Two ranks Send `messages` messages of `size` bytes (far beyond any buffer) to each other at
// once: neither stalls. REQUIRES: receivers installed (inboxes[0], inboxes[1]).
inline void ExpectLargeSendsBothWaysDoNotDeadlock(const std::vector<Transport*>& world, Inbox* inboxes, size_t size,
                                                  int messages) {
  std::vector<std::thread> senders;
  for (int r = 0; r < 2; ++r) {
    senders.emplace_back([&, r] {
      for (int i = 0; i < messages; ++i) ASSERT_TRUE(world[r]->Send(Rank(1 - r), Pattern(r, 1 - r, i, size)).ok());
    });
  }
  for (std::thread& t : senders) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(inboxes[r].WaitFor(static_cast<size_t>(messages))) << "rank " << r << " stalled";
    for (int i = 0; i < messages; ++i) EXPECT_TRUE(inboxes[r].messages[i].second == Pattern(1 - r, r, i, size));
  }
}

// SendOwned (queued, never waiting) before any receiver exists, far more than the links
// buffer, then Send and SendOwned alternating from two threads at once: every message arrives
// intact and in order. REQUIRES: no receivers installed yet (this installs inboxes[0..1]).
inline void ExpectSendOwnedInterleavedWithSendKeepsOrder(const std::vector<Transport*>& world, Inbox* inboxes) {
  constexpr int kMessages = 12;
  auto size_of = [](int i) -> size_t { return i % 3 == 0 ? 6 * 1024 * 1024 : (i % 3 == 1 ? 0 : 100 + i); };
  for (int i = 0; i < kMessages; ++i) {
    for (int r = 0; r < 2; ++r) ASSERT_TRUE(world[r]->SendOwned(Rank(1 - r), Pattern(r, 1 - r, i, size_of(i))).ok());
  }
  for (int r = 0; r < 2; ++r) world[r]->SetReceiver(inboxes[r].Receiver());
  std::vector<std::thread> senders;
  for (int r = 0; r < 2; ++r) {
    senders.emplace_back([&, r] {
      for (int i = kMessages; i < 2 * kMessages; ++i) {
        const std::string payload = Pattern(r, 1 - r, i, size_of(i));
        ASSERT_TRUE((i % 2 ? world[r]->Send(Rank(1 - r), payload) : world[r]->SendOwned(Rank(1 - r), payload)).ok());
      }
    });
  }
  for (std::thread& t : senders) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(inboxes[r].WaitFor(2 * kMessages)) << "rank " << r << " stalled";
    for (int i = 0; i < 2 * kMessages; ++i) {
      EXPECT_TRUE(inboxes[r].messages[i].second == Pattern(1 - r, r, i, size_of(i))) << "rank " << r << " message " << i;
    }
  }
  EXPECT_EQ(world[0]->SendOwned(Rank(7), "x").code(), absl::StatusCode::kInvalidArgument);
}

// SendRegistered from `bytes` of registered memory (more than the link takes at once), then
// UnregisterMemory and the memory overwritten before the receiver exists: the peer gets the
// bytes as they were at the send. REQUIRES: rank 1 has no receiver yet (this installs inbox).
inline void ExpectSendRegisteredSurvivesUnregister(const std::vector<Transport*>& world, Inbox* inbox, size_t bytes) {
  std::string registers = Pattern(0, 1, 0, bytes);
  const std::string original = registers;
  ASSERT_TRUE(world[0]->RegisterMemory(registers.data(), registers.size()).ok());
  ASSERT_TRUE(world[0]->SendRegistered(Rank(1), "prefix-1:", absl::string_view(registers).substr(0, 100)).ok());
  ASSERT_TRUE(world[0]->SendRegistered(Rank(1), "prefix-2:", registers).ok());
  ASSERT_TRUE(world[0]->SendRegistered(Rank(1), "", absl::string_view(registers).substr(5, 0)).ok());
  world[0]->UnregisterMemory(registers.data(), registers.size());
  std::fill(registers.begin(), registers.end(), 'X');  // what was not yet written was copied
  world[1]->SetReceiver(inbox->Receiver());
  ASSERT_TRUE(inbox->WaitFor(3));
  EXPECT_TRUE(inbox->messages[0].second == "prefix-1:" + original.substr(0, 100));
  EXPECT_TRUE(inbox->messages[1].second == "prefix-2:" + original);
  EXPECT_EQ(inbox->messages[2].second, "");
  EXPECT_EQ(world[0]->SendRegistered(Rank(9), "x", "y").code(), absl::StatusCode::kInvalidArgument);
}

// A socket connected to `endpoint` (with a receive timeout as hang guard), or -errno.
inline int TryConnect(const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(endpoint.substr(colon + 1))));
  inet_pton(AF_INET, endpoint.substr(0, colon).c_str(), &addr.sin_addr);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval timeout{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int error = errno;
    close(fd);
    return -error;
  }
  return fd;
}

}  // namespace testing_util
}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_TRANSPORT_TESTING_H_
