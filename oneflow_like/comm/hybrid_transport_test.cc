// HybridTransport: ranks 0 and 1 share a "node" (shared memory), rank 2 is elsewhere (TCP).
#include "oneflow_like/comm/hybrid_transport.h"

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/comm/tcp_transport.h"

namespace oneflow_like {
namespace comm {
namespace {

constexpr char kToken[] = "hybrid-token";

struct Inbox {
  std::mutex mu;
  std::condition_variable changed;
  std::vector<std::pair<int, std::string>> messages;
  int concurrent = 0, max_concurrent = 0;
  Transport::Receiver Receiver() {
    return [this](Rank from, absl::string_view payload) {
      {
        std::lock_guard<std::mutex> lock(mu);
        max_concurrent = std::max(max_concurrent, ++concurrent);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));  // widen any overlap
      std::lock_guard<std::mutex> lock(mu);
      --concurrent;
      messages.emplace_back(from.value(), std::string(payload));
      changed.notify_all();
    };
  }
  bool WaitFor(size_t count) {
    std::unique_lock<std::mutex> lock(mu);
    return changed.wait_for(lock, std::chrono::seconds(30), [&] { return messages.size() >= count; });
  }
};

TEST(HybridTransportTest, SameNodeRanksGoThroughSharedMemoryOthersThroughTcp) {
  constexpr int kWorld = 3;
  Inbox inbox[kWorld];
  std::vector<std::unique_ptr<TcpTransport>> tcp;
  std::vector<std::unique_ptr<ShmTransport>> shm;
  std::vector<std::string> tcp_endpoints, shm_endpoints;
  for (int r = 0; r < kWorld; ++r) {
    TcpTransportOptions t;
    t.rank = r, t.world_size = kWorld, t.job_token = kToken;
    tcp.push_back(*TcpTransport::Listen(t));
    ShmTransportOptions s;
    s.rank = r, s.world_size = kWorld, s.job_token = kToken, s.ring_bytes = 1 << 20;
    if (r < 2) s.peers = {1 - r};
    shm.push_back(*ShmTransport::Listen(s));
    tcp_endpoints.push_back(tcp.back()->endpoint());
    shm_endpoints.push_back(shm.back()->endpoint());
  }
  std::vector<std::future<absl::Status>> connected;
  for (int r = 0; r < kWorld; ++r) {
    connected.push_back(std::async(std::launch::async, [&, r] {
      RETURN_IF_ERROR(tcp[r]->Connect(tcp_endpoints));
      return shm[r]->Connect(shm_endpoints);
    }));
  }
  for (auto& c : connected) ASSERT_TRUE(c.get().ok());
  std::vector<TcpTransport*> tcp_of;
  std::vector<ShmTransport*> shm_of;
  std::vector<std::unique_ptr<HybridTransport>> world;
  for (int r = 0; r < kWorld; ++r) {
    tcp_of.push_back(tcp[r].get());
    shm_of.push_back(shm[r].get());
    world.push_back(std::make_unique<HybridTransport>(std::move(shm[r]), std::move(tcp[r])));
    world[r]->SetReceiver(inbox[r].Receiver());
  }
  constexpr int kMessages = 50;
  for (int i = 0; i < kMessages; ++i) {
    for (int from = 0; from < kWorld; ++from) {
      for (int to = 0; to < kWorld; ++to) {
        const std::string payload = std::to_string(from) + ">" + std::to_string(to) + "#" + std::to_string(i) +
                                    std::string(i == 7 ? 3 << 20 : 10, 'p');
        ASSERT_TRUE((i % 2 ? world[from]->SendOwned(Rank(to), payload) : world[from]->Send(Rank(to), payload)).ok());
      }
    }
  }
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(inbox[r].WaitFor(kWorld * kMessages)) << "rank " << r;
    std::vector<int> next(kWorld, 0);
    for (const auto& [from, payload] : inbox[r].messages) {
      const int i = next[from]++;
      EXPECT_EQ(payload.substr(0, payload.find('p')),
                std::to_string(from) + ">" + std::to_string(r) + "#" + std::to_string(i));
    }
    EXPECT_EQ(inbox[r].max_concurrent, 1) << "rank " << r << ": the receiver ran concurrently with itself";
  }
  // Which wire each edge took: 0 <-> 1 shared memory only, everything with rank 2 over TCP.
  EXPECT_GT(shm_of[0]->bytes_received(), 3 << 20);
  EXPECT_GT(shm_of[1]->bytes_received(), 3 << 20);
  EXPECT_EQ(shm_of[2]->bytes_received(), 0);
  // Rank 2 sends to 0 and 1 alike (compared on the receiving side: a sender counts its bytes
  // after the socket took them, which may trail the delivery).
  EXPECT_EQ(tcp_of[0]->bytes_received(), tcp_of[1]->bytes_received());
  EXPECT_GT(tcp_of[2]->bytes_received(), 6 << 20);
}

// A stand-in for the remote transport whose deliveries the test makes, on its own thread.
// Its SetReceiver swaps without waiting for a delivery in progress.
class FakeRemote : public Transport {
 public:
  Rank rank() const override { return Rank(0); }
  int32_t world_size() const override { return 2; }
  void SetReceiver(Receiver receiver) override {
    std::lock_guard<std::mutex> lock(mu_);
    receiver_ = std::make_shared<Receiver>(std::move(receiver));
  }
  absl::Status Send(Rank, absl::string_view) override { return absl::OkStatus(); }
  void Deliver(Rank from, absl::string_view payload) {
    std::shared_ptr<Receiver> receiver;
    {
      std::lock_guard<std::mutex> lock(mu_);
      receiver = receiver_;
    }
    if (receiver != nullptr) (*receiver)(from, payload);
  }

 private:
  std::mutex mu_;
  std::shared_ptr<Receiver> receiver_;
};

// While the old receiver runs on the remote transport's thread, SetReceiver installs a new one
// and shared memory delivers to it: the new receiver waits for the old (one mutex for every
// receiver SetReceiver installed, not one per call).
TEST(HybridTransportTest, ANewReceiverNeverRunsAlongsideTheOldOne) {
  std::mutex mu;  // before the transports: outlives their threads
  std::condition_variable changed;
  bool old_inside = false, release = false, new_ran = false, new_saw_old_inside = false;
  ShmTransportOptions options;
  options.rank = 0, options.world_size = 2;  // rank 0 alone on its node; rank 1 is remote
  auto remote = std::make_unique<FakeRemote>();
  FakeRemote* fake = remote.get();
  HybridTransport hybrid(*ShmTransport::Listen(options), std::move(remote));
  hybrid.SetReceiver([&](Rank, absl::string_view) {
    std::unique_lock<std::mutex> lock(mu);
    old_inside = true;
    changed.notify_all();
    changed.wait_for(lock, std::chrono::seconds(10), [&] { return release; });
    old_inside = false;
  });
  std::thread remote_thread([&] { fake->Deliver(Rank(1), "over the remote transport"); });
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(changed.wait_for(lock, std::chrono::seconds(10), [&] { return old_inside; }));
  }
  hybrid.SetReceiver([&](Rank, absl::string_view) {
    std::lock_guard<std::mutex> lock(mu);
    new_saw_old_inside = old_inside;
    new_ran = true;
    changed.notify_all();
  });
  ASSERT_TRUE(hybrid.Send(Rank(0), "through shared memory").ok());  // delivered on the shm thread
  std::this_thread::sleep_for(std::chrono::milliseconds(200));      // time for an overlap to show
  {
    std::unique_lock<std::mutex> lock(mu);
    release = true;
    changed.notify_all();
    ASSERT_TRUE(changed.wait_for(lock, std::chrono::seconds(10), [&] { return new_ran; }));
  }
  remote_thread.join();
  EXPECT_FALSE(new_saw_old_inside) << "the new receiver ran while the old one was still running";
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like
