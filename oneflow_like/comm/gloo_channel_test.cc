// gloo channels (CollectiveBackend::ConnectChannel): the channels of one group share one gloo
// context, run concurrently in tag spaces of their own (issued in different orders on different
// members), fall back to a context of their own when their tag spaces collide (the same choice on
// every member), and fail together, without hanging, when a peer goes away. Ranks are threads of
// this process meeting in an InMemoryStore; every wait is bounded.
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oneflow_like/comm/gloo_collective.h"

namespace oneflow_like {
namespace comm {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kTimeoutMs = 20000;

std::vector<int32_t> Group(int n) {
  std::vector<int32_t> group(n);
  std::iota(group.begin(), group.end(), 0);
  return group;
}

// Runs body(rank, backend) on `n` threads, one gloo backend each.
void OnRanks(int n, const GlooOptions& options, const std::function<void(int, CollectiveBackend*)>& body) {
  InMemoryStore store;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      absl::StatusOr<std::unique_ptr<CollectiveBackend>> backend = CreateGlooBackend(&store, r, n, options);
      ASSERT_TRUE(backend.ok()) << backend.status();
      body(r, backend->get());
    });
  }
  for (auto& t : threads) t.join();
}

GlooOptions Options(GlooTransport transport, int channel_bits = 16, int64_t timeout_ms = kTimeoutMs) {
  GlooOptions options;
  options.transport = transport;
  options.timeout_ms = timeout_ms;
  options.channel_bits = channel_bits;
  return options;
}

// Connects `channels` of group [0, n) at once, each from a thread of its own (as the runtime's
// collective bodies do), in the order given.
std::vector<std::unique_ptr<Communicator>> ConnectAll(CollectiveBackend* backend, int n,
                                                      const std::vector<uint64_t>& channels) {
  std::vector<std::future<absl::StatusOr<std::unique_ptr<Communicator>>>> pending;
  for (uint64_t c : channels) {
    pending.push_back(std::async(std::launch::async, [backend, n, c] {
      return backend->ConnectChannel(Group(n), c, "collective/" + std::to_string(c));
    }));
  }
  std::vector<std::unique_ptr<Communicator>> comms;
  for (auto& p : pending) {
    if (p.wait_for(std::chrono::milliseconds(3 * kTimeoutMs)) != std::future_status::ready) {
      ADD_FAILURE() << "ConnectChannel did not return";
      std::abort();  // a hang: nothing better to do than end the test binary
    }
    absl::StatusOr<std::unique_ptr<Communicator>> comm = p.get();
    EXPECT_TRUE(comm.ok()) << comm.status();
    comms.push_back(comm.ok() ? std::move(*comm) : nullptr);
  }
  return comms;
}

// Issues one call and waits (bounded) for its callback.
absl::Status Wait(const std::function<void(CollectiveDone)>& call) {
  auto result = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> done = result->get_future();
  call([result](const absl::Status& s) { result->set_value(s); });
  if (done.wait_for(std::chrono::milliseconds(3 * kTimeoutMs)) != std::future_status::ready) {
    return absl::DeadlineExceededError("test: the call's callback did not come");
  }
  return done.get();
}

// Member r's value i on channel c (exact in float: small integers).
float Value(int r, uint64_t c, int64_t i) {
  return static_cast<float>((r + 1) * 100 + static_cast<int64_t>(c % 50) + i % 13);
}

// The calls one channel runs in a round: an all-reduce (large enough to stay in flight while
// the other channels run), an all-gather, a reduce-scatter, a broadcast and a send / recv ring,
// all issued without waiting; checked against plain loops once the channel is flushed.
struct ChannelRound {
  static constexpr int64_t kBig = 1 << 17;
  int n = 0, r = 0;
  uint64_t c = 0;
  std::vector<float> reduced, gathered, scattered, broadcast, ring_in, ring_out, input;
  std::vector<int> done_order;
  std::mutex mu;

  void Issue(Communicator* comm) {
    input.resize(kBig);
    for (int64_t i = 0; i < kBig; ++i) input[i] = Value(r, c, i);
    reduced.assign(kBig, -1);
    gathered.assign(3 * n, -1);
    scattered.assign(2, -1);
    broadcast.assign(5, static_cast<float>(r));
    ring_in.assign(4, -1);
    ring_out.assign(4, static_cast<float>(r * 10 + static_cast<int>(c % 7)));
    auto note = [this](int k) {
      return [this, k](const absl::Status& s) {
        EXPECT_TRUE(s.ok()) << s;
        std::lock_guard<std::mutex> lock(mu);
        done_order.push_back(k);
      };
    };
    comm->AllReduce(input.data(), reduced.data(), kBig, DataType::kFloat32, note(0));
    comm->AllGather(input.data(), gathered.data(), std::vector<int64_t>(n, 3), DataType::kFloat32, note(1));
    comm->ReduceScatter(input.data(), scattered.data(), std::vector<int64_t>(n, 2), DataType::kFloat32, note(2));
    comm->Broadcast(broadcast.data(), 5, DataType::kFloat32, static_cast<int32_t>(c % n), note(3));
    // A ring: member 0 sends first, the others receive first (a send waits for its receive).
    if (r == 0) comm->Send(ring_out.data(), 4, DataType::kFloat32, (r + 1) % n, note(4));
    comm->Recv(ring_in.data(), 4, DataType::kFloat32, (r + n - 1) % n, note(5));
    if (r != 0) comm->Send(ring_out.data(), 4, DataType::kFloat32, (r + 1) % n, note(4));
  }

  void Check() {
    const std::vector<int> issued = r == 0 ? std::vector<int>{0, 1, 2, 3, 4, 5} : std::vector<int>{0, 1, 2, 3, 5, 4};
    EXPECT_EQ(done_order, issued) << "channel " << c << " rank " << r;
    for (int64_t i = 0; i < kBig; ++i) {
      float expect = 0;
      for (int k = 0; k < n; ++k) expect += Value(k, c, i);
      ASSERT_EQ(reduced[i], expect) << "all_reduce, channel " << c << " rank " << r << " element " << i;
    }
    for (int k = 0; k < n; ++k) {
      for (int64_t i = 0; i < 3; ++i) ASSERT_EQ(gathered[3 * k + i], Value(k, c, i)) << "all_gather, channel " << c;
    }
    for (int64_t i = 0; i < 2; ++i) {
      float expect = 0;
      for (int k = 0; k < n; ++k) expect += Value(k, c, 2 * r + i);
      EXPECT_EQ(scattered[i], expect) << "reduce_scatter, channel " << c << " rank " << r;
    }
    EXPECT_EQ(broadcast, std::vector<float>(5, static_cast<float>(c % n))) << "broadcast, channel " << c;
    const int from = (r + n - 1) % n;
    EXPECT_EQ(ring_in, std::vector<float>(4, static_cast<float>(from * 10 + static_cast<int>(c % 7))))
        << "send / recv, channel " << c << " rank " << r;
  }
};

void ConcurrentChannels(GlooTransport transport, int n, int channel_bits, const std::vector<uint64_t>& channels,
                        int64_t expect_contexts, int64_t expect_fallbacks) {
  OnRanks(n, Options(transport, channel_bits), [&](int r, CollectiveBackend* backend) {
    // Every member connects and issues the channels in a different order (rotated by its rank).
    std::vector<uint64_t> order;
    for (size_t k = 0; k < channels.size(); ++k) order.push_back(channels[(k + r) % channels.size()]);
    std::vector<std::unique_ptr<Communicator>> comms = ConnectAll(backend, n, order);
    for (const auto& comm : comms) ASSERT_NE(comm, nullptr);
    for (int round = 0; round < 3; ++round) {
      std::vector<std::unique_ptr<ChannelRound>> rounds;
      for (size_t k = 0; k < comms.size(); ++k) {
        rounds.push_back(std::make_unique<ChannelRound>());
        rounds.back()->n = n;
        rounds.back()->r = r;
        rounds.back()->c = order[k] + static_cast<uint64_t>(round);
        rounds.back()->Issue(comms[k].get());
      }
      std::vector<absl::Status> flushed;  // every channel idle before any buffer goes away
      for (const auto& comm : comms) flushed.push_back(comm->Flush());
      for (size_t k = 0; k < comms.size(); ++k) {
        ASSERT_TRUE(flushed[k].ok()) << comms[k]->description() << ": " << flushed[k];
        rounds[k]->Check();
      }
    }
    const CollectiveBackendStats stats = backend->stats();
    EXPECT_EQ(stats.contexts, expect_contexts) << "rank " << r;
    EXPECT_EQ(stats.channels, static_cast<int64_t>(channels.size())) << "rank " << r;
    EXPECT_EQ(stats.fallbacks, expect_fallbacks) << "rank " << r;
  });
}

// Every test runs over both transports under gloo: ours (token-checked) and gloo's TCP.
class GlooChannel : public ::testing::TestWithParam<GlooTransport> {};

INSTANTIATE_TEST_SUITE_P(Transports, GlooChannel, ::testing::Values(GlooTransport::kOl, GlooTransport::kGlooTcp),
                         [](const ::testing::TestParamInfo<GlooTransport>& info) {
                           return std::string(GlooTransportName(info.param));
                         });

TEST_P(GlooChannel, TwoChannelsOfOneGroupShareOneContext) {
  OnRanks(2, Options(GetParam()), [&](int r, CollectiveBackend* backend) {
    std::vector<std::unique_ptr<Communicator>> comms = ConnectAll(backend, 2, {7, 8});
    ASSERT_NE(comms[0], nullptr);
    ASSERT_NE(comms[1], nullptr);
    EXPECT_EQ(backend->stats().contexts, 1);
    EXPECT_EQ(backend->stats().channels, 2);
    EXPECT_THAT(comms[0]->description(), HasSubstr("tag space 7 of the group's shared context"));
    EXPECT_THAT(comms[1]->description(), HasSubstr("tag space 8 of the group's shared context"));
    float x[3] = {1, 2, 3};
    ASSERT_TRUE(Wait([&](CollectiveDone d) { comms[1]->AllReduce(x, x, 3, DataType::kFloat32, d); }).ok());
    ASSERT_TRUE(Wait([&](CollectiveDone d) { comms[0]->AllReduce(x, x, 3, DataType::kFloat32, d); }).ok());
    EXPECT_EQ(x[2], 12.0f);
    // Connect still gives a context of its own; so does ConnectChannel on another group.
    absl::StatusOr<std::unique_ptr<Communicator>> own = backend->Connect({0, 1}, "own");
    ASSERT_TRUE(own.ok()) << own.status();
    EXPECT_EQ(backend->stats().contexts, 2);
    absl::StatusOr<std::unique_ptr<Communicator>> reversed = backend->ConnectChannel({1, 0}, 7, "reversed");
    ASSERT_TRUE(reversed.ok()) << reversed.status();
    EXPECT_EQ(backend->stats().contexts, 3);
    EXPECT_EQ(backend->stats().fallbacks, 0);
    EXPECT_EQ((*reversed)->rank(), 1 - r);
  });
}

TEST_P(GlooChannel, WithoutSharingEveryChannelHasItsOwnContext) {
  GlooOptions options = Options(GetParam());
  options.share_group_contexts = false;
  OnRanks(2, options, [&](int, CollectiveBackend* backend) {
    std::vector<std::unique_ptr<Communicator>> comms = ConnectAll(backend, 2, {1, 2, 3});
    EXPECT_EQ(backend->stats().contexts, 3);
    EXPECT_EQ(backend->stats().fallbacks, 0);
  });
}

TEST_P(GlooChannel, ConcurrentChannelsOnASharedContextOnTwoRanks) {
  ConcurrentChannels(GetParam(), 2, 16, {3, 10, 17, 40}, /*contexts=*/1, /*fallbacks=*/0);
}

TEST_P(GlooChannel, ConcurrentChannelsOnASharedContextOnThreeRanks) {
  ConcurrentChannels(GetParam(), 3, 16, {3, 10, 17, 40}, /*contexts=*/1, /*fallbacks=*/0);
}

TEST_P(GlooChannel, CollidingTagSpacesFallBackToAContextOfTheirOwn) {
  // 2 bits: channels 1, 5 and 9 all have tag space 1; member 0 gives it to whichever connects
  // first on member 0, the two others get contexts of their own on every member. They still run
  // concurrently with channel 2 (tag space 2, shared) and give correct results.
  ConcurrentChannels(GetParam(), 2, 2, {1, 5, 2, 9}, /*contexts=*/3, /*fallbacks=*/2);
  ConcurrentChannels(GetParam(), 3, 2, {1, 5, 2, 9}, /*contexts=*/3, /*fallbacks=*/2);
}

TEST_P(GlooChannel, TheFallbackIsTheSameChannelOnEveryMember) {
  // Connected one after the other, in opposite orders on the two members: member 0 connects 1
  // first, so 1 shares and 5 falls back, on member 1 too.
  OnRanks(2, Options(GetParam(), /*channel_bits=*/2), [&](int r, CollectiveBackend* backend) {
    const std::vector<uint64_t> order = r == 0 ? std::vector<uint64_t>{1, 5} : std::vector<uint64_t>{5, 1};
    std::vector<std::unique_ptr<Communicator>> comms;
    for (uint64_t c : order) {
      absl::StatusOr<std::unique_ptr<Communicator>> comm = backend->ConnectChannel({0, 1}, c, "c" + std::to_string(c));
      ASSERT_TRUE(comm.ok()) << comm.status();
      comms.push_back(std::move(*comm));
    }
    Communicator* one = comms[r == 0 ? 0 : 1].get();
    Communicator* five = comms[r == 0 ? 1 : 0].get();
    EXPECT_THAT(one->description(), HasSubstr("shared context"));
    EXPECT_THAT(five->description(), ::testing::Not(HasSubstr("shared context")));
    EXPECT_EQ(backend->stats().fallbacks, 1);
    float x[2] = {1, 1}, y[2] = {2, 2};
    ASSERT_TRUE(Wait([&](CollectiveDone d) { five->AllReduce(y, y, 2, DataType::kFloat32, d); }).ok());
    ASSERT_TRUE(Wait([&](CollectiveDone d) { one->AllReduce(x, x, 2, DataType::kFloat32, d); }).ok());
    EXPECT_EQ(x[0], 2.0f);
    EXPECT_EQ(y[1], 4.0f);
  });
}

TEST_P(GlooChannel, BadChannelsAreRefused) {
  InMemoryStore store;
  GlooOptions options = Options(GetParam(), /*channel_bits=*/0);
  EXPECT_THAT(std::string(CreateGlooBackend(&store, 0, 1, options).status().message()), HasSubstr("channel_bits"));
  options.channel_bits = 25;
  EXPECT_FALSE(CreateGlooBackend(&store, 0, 1, options).ok());
  auto backend = CreateGlooBackend(&store, 0, 2, Options(GetParam()));
  ASSERT_TRUE(backend.ok());
  auto stranger = (*backend)->ConnectChannel({1}, 3, "x");
  EXPECT_THAT(std::string(stranger.status().message()), HasSubstr("rank 0 is not in group [1] (channel 3"));
  // a one-member group: connects alone; the same channel id twice is refused
  auto alone = (*backend)->ConnectChannel({0}, 3, "x");
  ASSERT_TRUE(alone.ok()) << alone.status();
  auto twice = (*backend)->ConnectChannel({0}, 3, "y");
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(twice.status().message()), HasSubstr("channel 3 of group [0] is already connected"));
}

TEST_P(GlooChannel, AMissingMemberTimesOutNamingTheGroup) {
  InMemoryStore store;
  auto backend = CreateGlooBackend(&store, 1, 2, Options(GetParam(), 16, /*timeout_ms=*/500));
  ASSERT_TRUE(backend.ok());
  const auto start = std::chrono::steady_clock::now();
  auto comm = (*backend)->ConnectChannel({0, 1}, 4, "lonely");  // member 0 never comes
  ASSERT_FALSE(comm.ok());
  EXPECT_THAT(std::string(comm.status().message()), HasSubstr("group [0,1]"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST_P(GlooChannel, APeerThatLeavesFailsEveryChannelOfTheSharedContext) {
  InMemoryStore store;
  const GlooOptions options = Options(GetParam(), 16, /*timeout_ms=*/1000);
  std::thread peer([&] {
    auto backend = CreateGlooBackend(&store, 1, 2, options);
    ASSERT_TRUE(backend.ok());
    std::vector<std::unique_ptr<Communicator>> comms = ConnectAll(backend->get(), 2, {1, 2});
    float x[3] = {1, 2, 3};
    for (auto& comm : comms) {
      ASSERT_TRUE(Wait([&](CollectiveDone d) { comm->AllReduce(x, x, 3, DataType::kFloat32, d); }).ok());
    }
    // leaves: its channels, then the backend and the shared context's connections close
  });
  auto backend = CreateGlooBackend(&store, 0, 2, options);
  ASSERT_TRUE(backend.ok());
  std::vector<std::unique_ptr<Communicator>> comms = ConnectAll(backend->get(), 2, {1, 2});
  float x[3] = {1, 2, 3};
  for (auto& comm : comms) {
    ASSERT_TRUE(Wait([&](CollectiveDone d) { comm->AllReduce(x, x, 3, DataType::kFloat32, d); }).ok());
  }
  peer.join();
  absl::Status first = Wait([&](CollectiveDone d) { comms[0]->AllReduce(x, x, 3, DataType::kFloat32, d); });
  EXPECT_FALSE(first.ok());
  EXPECT_THAT(std::string(first.message()), HasSubstr("all_reduce failed"));
  absl::Status other = Wait([&](CollectiveDone d) { comms[1]->AllReduce(x, x, 3, DataType::kFloat32, d); });
  EXPECT_FALSE(other.ok());
  EXPECT_THAT(std::string(other.message()), HasSubstr("an earlier call failed on the group's shared context"));
  absl::Status later = Wait([&](CollectiveDone d) { comms[0]->AllReduce(x, x, 3, DataType::kFloat32, d); });
  EXPECT_THAT(std::string(later.message()), HasSubstr("an earlier call failed"));
  EXPECT_FALSE(comms[1]->Flush().ok());
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like
