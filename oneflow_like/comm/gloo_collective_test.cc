// The collective interface through gloo: every collective on 2, 3 and 4 ranks (threads of this
// process, an InMemoryStore as rendezvous) against a reference computed here from the members'
// inputs, uneven counts included, every dtype the ops use; bad calls; a dead peer.
#include "oneflow_like/comm/gloo_collective.h"

#include <cstring>
#include <functional>
#include <future>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oneflow_like {
namespace comm {
namespace {

using ::testing::HasSubstr;

// Runs body(rank, communicator) on `n` threads, one communicator each over group [0, n).
void OnRanks(const GlooOptions& options, int n, const std::function<void(int, Communicator*)>& body) {
  InMemoryStore store;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      absl::StatusOr<std::unique_ptr<CollectiveBackend>> backend =
          CreateGlooBackend(&store, r, n, options);
      ASSERT_TRUE(backend.ok()) << backend.status();
      std::vector<int32_t> group(n);
      std::iota(group.begin(), group.end(), 0);
      absl::StatusOr<std::unique_ptr<Communicator>> comm = (*backend)->Connect(group, "test");
      ASSERT_TRUE(comm.ok()) << comm.status();
      body(r, comm->get());
    });
  }
  for (auto& t : threads) t.join();
}

// Issues one call and waits for its callback.
absl::Status Wait(const std::function<void(CollectiveDone)>& call) {
  std::promise<absl::Status> result;
  call([&](const absl::Status& s) { result.set_value(s); });
  return result.get_future().get();
}

// Member r's input value i (distinct per member and position, exact in every dtype used).
double Value(int r, int64_t i) { return static_cast<double>((r + 1) * 10 + (i % 7)) - 3.0; }

template <typename T>
std::vector<T> Input(int r, int64_t n) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<T>(Value(r, i));
  return v;
}

template <typename T>
DataType TypeOf();
template <> DataType TypeOf<float>() { return DataType::kFloat32; }
template <> DataType TypeOf<double>() { return DataType::kFloat64; }
template <> DataType TypeOf<int32_t>() { return DataType::kInt32; }
template <> DataType TypeOf<int64_t>() { return DataType::kInt64; }

template <typename T>
void CheckAllReduce(const GlooOptions& options, int n, int64_t count) {
  OnRanks(options, n, [&](int r, Communicator* comm) {
    std::vector<T> in = Input<T>(r, count), out(count);
    const absl::Status reduced =
        Wait([&](CollectiveDone d) { comm->AllReduce(in.data(), out.data(), count, TypeOf<T>(), d); });
    ASSERT_TRUE(reduced.ok()) << reduced;
    for (int64_t i = 0; i < count; ++i) {
      double expect = 0;
      for (int k = 0; k < n; ++k) expect += Value(k, i);
      ASSERT_EQ(out[i], static_cast<T>(expect)) << "rank " << r << " element " << i;
    }
    // in place
    ASSERT_TRUE(Wait([&](CollectiveDone d) { comm->AllReduce(in.data(), in.data(), count, TypeOf<T>(), d); }).ok());
    EXPECT_EQ(in, out);
  });
}

// Every test runs over both transports under gloo: ours (token-checked) and gloo's TCP.
class GlooCollective : public ::testing::TestWithParam<GlooTransport> {
 protected:
  GlooOptions Options(int64_t timeout_ms = 20000) const {
    GlooOptions options;
    options.timeout_ms = timeout_ms;
    options.transport = GetParam();
    return options;
  }
};

INSTANTIATE_TEST_SUITE_P(Transports, GlooCollective, ::testing::Values(GlooTransport::kOl, GlooTransport::kGlooTcp),
                         [](const ::testing::TestParamInfo<GlooTransport>& info) {
                           return std::string(GlooTransportName(info.param));
                         });

TEST_P(GlooCollective, AllReduceEveryDtypeAndGroupSize) {
  for (int n : {2, 3, 4}) {
    CheckAllReduce<float>(Options(), n, 1001);
    CheckAllReduce<double>(Options(), n, 5);
    CheckAllReduce<int32_t>(Options(), n, 17);
    CheckAllReduce<int64_t>(Options(), n, 3);
  }
}

TEST_P(GlooCollective, AllReduceLargeTensorRing) {
  CheckAllReduce<float>(Options(), 3, 1 << 20);
}

TEST_P(GlooCollective, HalfPrecisionSumsGoThroughFloat) {
  // bfloat16 / float16 bit patterns of small integers: exact sums.
  auto bf16 = [](float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return static_cast<uint16_t>(b >> 16);
  };
  OnRanks(Options(), 3, [&](int r, Communicator* comm) {
    std::vector<uint16_t> x(9, bf16(static_cast<float>(r + 1)));
    ASSERT_TRUE(Wait([&](CollectiveDone d) { comm->AllReduce(x.data(), x.data(), 9, DataType::kBFloat16, d); }).ok());
    for (uint16_t v : x) EXPECT_EQ(v, bf16(6.0f));
    const uint16_t half_one = 0x3c00, half_three = 0x4200;  // 1.0, 3.0 in IEEE half
    std::vector<uint16_t> h(4, half_one);
    ASSERT_TRUE(Wait([&](CollectiveDone d) { comm->AllReduce(h.data(), h.data(), 4, DataType::kFloat16, d); }).ok());
    for (uint16_t v : h) EXPECT_EQ(v, half_three);
  });
}

TEST_P(GlooCollective, AllGatherUnevenCounts) {
  for (int n : {2, 3, 4}) {
    std::vector<int64_t> counts;
    for (int k = 0; k < n; ++k) counts.push_back(k == 1 ? 0 : 3 + 2 * k);  // one member gives nothing
    const int64_t total = SumCounts(counts);
    OnRanks(Options(), n, [&](int r, Communicator* comm) {
      std::vector<float> in = Input<float>(r, counts[r]), out(total, -1);
      ASSERT_TRUE(Wait([&](CollectiveDone d) { comm->AllGather(in.data(), out.data(), counts, DataType::kFloat32, d); }).ok());
      int64_t offset = 0;
      for (int k = 0; k < n; ++k) {
        for (int64_t i = 0; i < counts[k]; ++i) ASSERT_EQ(out[offset + i], static_cast<float>(Value(k, i)));
        offset += counts[k];
      }
    });
  }
}

TEST_P(GlooCollective, ReduceScatterUnevenCounts) {
  for (int n : {2, 3, 4}) {
    std::vector<int64_t> counts;
    for (int k = 0; k < n; ++k) counts.push_back(2 + k);
    const int64_t total = SumCounts(counts);
    OnRanks(Options(), n, [&](int r, Communicator* comm) {
      std::vector<double> in = Input<double>(r, total), out(counts[r], -1);
      ASSERT_TRUE(
          Wait([&](CollectiveDone d) { comm->ReduceScatter(in.data(), out.data(), counts, DataType::kFloat64, d); }).ok());
      const int64_t offset = std::accumulate(counts.begin(), counts.begin() + r, int64_t{0});
      for (int64_t i = 0; i < counts[r]; ++i) {
        double expect = 0;
        for (int k = 0; k < n; ++k) expect += Value(k, offset + i);
        ASSERT_EQ(out[i], expect) << "rank " << r << " element " << i;
      }
    });
  }
}

TEST_P(GlooCollective, BroadcastFromEveryRoot) {
  OnRanks(Options(), 3, [&](int r, Communicator* comm) {
    for (int root = 0; root < 3; ++root) {
      std::vector<int64_t> x = Input<int64_t>(r, 11);
      ASSERT_TRUE(Wait([&](CollectiveDone d) { comm->Broadcast(x.data(), 11, DataType::kInt64, root, d); }).ok());
      EXPECT_EQ(x, Input<int64_t>(root, 11)) << "root " << root << " at rank " << r;
    }
  });
}

TEST_P(GlooCollective, AllToAllUneven) {
  const int n = 4;
  // member j sends (j + k) % 3 + 1 elements to member k: value = 100 * j + 10 * k + i
  auto sends = [&](int j, int k) { return static_cast<int64_t>((j + k) % 3 + 1); };
  OnRanks(Options(), n, [&](int r, Communicator* comm) {
    std::vector<int64_t> sc, rc;
    std::vector<int32_t> in, out;
    for (int k = 0; k < n; ++k) {
      sc.push_back(sends(r, k));
      rc.push_back(sends(k, r));
      for (int64_t i = 0; i < sends(r, k); ++i) in.push_back(100 * r + 10 * k + static_cast<int32_t>(i));
    }
    out.assign(SumCounts(rc), -1);
    ASSERT_TRUE(Wait([&](CollectiveDone d) { comm->AllToAll(in.data(), sc, out.data(), rc, DataType::kInt32, d); }).ok());
    size_t pos = 0;
    for (int k = 0; k < n; ++k) {
      for (int64_t i = 0; i < sends(k, r); ++i) ASSERT_EQ(out[pos++], 100 * k + 10 * r + i);
    }
  });
}

TEST_P(GlooCollective, SendRecvMatchInIssueOrder) {
  OnRanks(Options(), 2, [&](int r, Communicator* comm) {
    std::vector<float> a(5), b(7);
    if (r == 0) {
      a = Input<float>(0, 5);
      b = Input<float>(1, 7);
      ASSERT_TRUE(Wait([&](CollectiveDone d) { comm->Send(a.data(), 5, DataType::kFloat32, 1, d); }).ok());
      ASSERT_TRUE(Wait([&](CollectiveDone d) { comm->Send(b.data(), 7, DataType::kFloat32, 1, d); }).ok());
    } else {
      ASSERT_TRUE(Wait([&](CollectiveDone d) { comm->Recv(a.data(), 5, DataType::kFloat32, 0, d); }).ok());
      ASSERT_TRUE(Wait([&](CollectiveDone d) { comm->Recv(b.data(), 7, DataType::kFloat32, 0, d); }).ok());
      EXPECT_EQ(a, Input<float>(0, 5));
      EXPECT_EQ(b, Input<float>(1, 7));
    }
  });
}

TEST_P(GlooCollective, CallsRunInIssueOrderWithoutBlockingTheCaller) {
  OnRanks(Options(), 2, [&](int r, Communicator* comm) {
    std::vector<std::vector<float>> bufs;
    for (int i = 0; i < 8; ++i) bufs.push_back(std::vector<float>(1000, static_cast<float>(i + r)));
    std::vector<int> order;
    std::mutex mu;
    for (int i = 0; i < 8; ++i) {
      comm->AllReduce(bufs[i].data(), bufs[i].data(), 1000, DataType::kFloat32, [&, i](const absl::Status& s) {
        EXPECT_TRUE(s.ok()) << s;
        std::lock_guard<std::mutex> lock(mu);
        order.push_back(i);
      });
    }
    ASSERT_TRUE(comm->Flush().ok());
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
    for (int i = 0; i < 8; ++i) EXPECT_EQ(bufs[i][999], static_cast<float>(2 * i + 1));
  });
}

TEST_P(GlooCollective, BadCallsAreRefusedNamingTheGroup) {
  OnRanks(Options(), 2, [&](int r, Communicator* comm) {
    float x[4] = {0};
    absl::Status s = Wait([&](CollectiveDone d) { comm->AllGather(x, x, {1, 2, 3}, DataType::kFloat32, d); });
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr("3 counts for a group of 2"));
    EXPECT_THAT(std::string(s.message()), HasSubstr("gloo group [0,1]"));
    s = Wait([&](CollectiveDone d) { comm->AllReduce(x, x, 4, DataType::kBool, d); });
    EXPECT_THAT(std::string(s.message()), HasSubstr("dtype bool"));
    s = Wait([&](CollectiveDone d) { comm->Broadcast(x, 4, DataType::kFloat32, 5, d); });
    EXPECT_THAT(std::string(s.message()), HasSubstr("root 5"));
    s = Wait([&](CollectiveDone d) { comm->Send(x, 4, DataType::kFloat32, r, d); });
    EXPECT_THAT(std::string(s.message()), HasSubstr("not another member"));
    // the communicator still works after refused calls (nothing was sent)
    ASSERT_TRUE(Wait([&](CollectiveDone d) { comm->AllReduce(x, x, 4, DataType::kFloat32, d); }).ok());
  });
}

TEST_P(GlooCollective, ConnectRefusesAGroupWithoutThisRank) {
  InMemoryStore store;
  auto backend = CreateGlooBackend(&store, 2, 4, Options());
  ASSERT_TRUE(backend.ok());
  auto comm = (*backend)->Connect({0, 1}, "x");
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(comm.status().message()), HasSubstr("rank 2 is not in group [0,1]"));
  EXPECT_FALSE((*backend)->Connect({0, 7}, "x").ok());
  EXPECT_FALSE(CreateGlooBackend(&store, 4, 4).ok());
  EXPECT_FALSE(CreateGlooBackend(nullptr, 0, 1).ok());
}

TEST(GlooCollectiveOptions, TransportNamesAndOurTransportsAddressAreChecked) {
  EXPECT_EQ(*ParseGlooTransport("ol"), GlooTransport::kOl);
  EXPECT_EQ(*ParseGlooTransport("gloo_tcp"), GlooTransport::kGlooTcp);
  EXPECT_THAT(std::string(ParseGlooTransport("tls").status().message()), HasSubstr("'tls' is none of 'ol'"));
  EXPECT_EQ(GlooOptions().transport, GlooTransport::kOl);  // the default: measured (README)
  InMemoryStore store;
  GlooOptions options;
  options.hostname = "localhost";
  absl::StatusOr<std::unique_ptr<CollectiveBackend>> backend = CreateGlooBackend(&store, 0, 2, options);
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(backend.status().message()), HasSubstr("'localhost' is not a numeric IPv4 address"));
}

TEST(GlooCollectiveOptions, MembersWithAnotherJobTokenCannotConnect) {
  InMemoryStore store;
  std::vector<absl::Status> connected(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      GlooOptions options;
      options.timeout_ms = 1000;
      options.job_token = r == 0 ? "job-a" : "job-b";
      auto backend = CreateGlooBackend(&store, r, 2, options);
      ASSERT_TRUE(backend.ok()) << backend.status();
      connected[r] = (*backend)->Connect({0, 1}, "tokens").status();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(connected[r].ok()) << "rank " << r;
    EXPECT_THAT(std::string(connected[r].message()), HasSubstr("connecting group [0,1]"));
  }
}

TEST_P(GlooCollective, MissingPeerTimesOutInsteadOfHanging) {
  InMemoryStore store;
  auto backend = CreateGlooBackend(&store, 0, 2, Options(500));
  ASSERT_TRUE(backend.ok());
  auto comm = (*backend)->Connect({0, 1}, "lonely");  // rank 1 never comes
  ASSERT_FALSE(comm.ok());
  EXPECT_THAT(std::string(comm.status().message()), HasSubstr("group [0,1]"));
}

TEST_P(GlooCollective, APeerThatLeavesFailsLaterCallsWithAnError) {
  InMemoryStore store;
  std::promise<void> connected;
  std::shared_future<void> ready = connected.get_future().share();
  std::thread peer([&] {
    auto backend = CreateGlooBackend(&store, 1, 2, Options(1000));
    auto comm = (*backend)->Connect({0, 1}, "dies");
    ASSERT_TRUE(comm.ok());
    float x[3] = {1, 2, 3};
    ASSERT_TRUE(Wait([&](CollectiveDone d) { (*comm)->AllReduce(x, x, 3, DataType::kFloat32, d); }).ok());
    // leaves: the communicator and its connections close
  });
  auto backend = CreateGlooBackend(&store, 0, 2, Options(1000));
  auto comm = (*backend)->Connect({0, 1}, "dies");
  ASSERT_TRUE(comm.ok());
  float x[3] = {1, 2, 3};
  ASSERT_TRUE(Wait([&](CollectiveDone d) { (*comm)->AllReduce(x, x, 3, DataType::kFloat32, d); }).ok());
  peer.join();
  absl::Status s = Wait([&](CollectiveDone d) { (*comm)->AllReduce(x, x, 3, DataType::kFloat32, d); });
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("all_reduce failed"));
  absl::Status after = Wait([&](CollectiveDone d) { (*comm)->AllReduce(x, x, 3, DataType::kFloat32, d); });
  EXPECT_THAT(std::string(after.message()), HasSubstr("an earlier call failed"));
  EXPECT_FALSE((*comm)->Flush().ok());
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like
