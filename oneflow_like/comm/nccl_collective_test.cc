// The collective interface through NCCL. Every test that needs a GPU skips, naming the reason,
// where none is visible (this file builds and links everywhere the CUDA toolkit is).
// With one GPU: every collective on one-member groups, every dtype; bad calls; order of
// callbacks; Connect's timeouts. With two or more GPUs also: every collective on 2 .. 4 ranks
// (threads of this process, one GPU each, an InMemoryStore as rendezvous) against a reference
// computed here, uneven counts included, every dtype; send / recv; a silent peer times out.
// Channels (ConnectChannel): the channels of a group share one communicator (connected in
// different orders by the members, calls interleaved in one agreed order; with the fake also the
// count of ncclCommInitRankConfig), concurrent connects share one failed creation, a failure
// fails every channel, channel ids are not reused, channels go in any order.
#include "oneflow_like/comm/nccl_collective.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oneflow_like {
namespace comm {
namespace nccl_fake {
// Defined by nccl_fake.cc (nccl_fake.h) where the fake is linked in (nccl_collective_fake_test);
// a null address against real NCCL.
int64_t CommInits() __attribute__((weak));
}  // namespace nccl_fake
namespace {

using ::testing::HasSubstr;

struct Gpus {
  int count = 0;
  std::string why_none;  // when count == 0
};

const Gpus& VisibleGpus() {
  static const Gpus gpus = [] {
    Gpus g;
    const cudaError_t e = cudaGetDeviceCount(&g.count);
    if (e != cudaSuccess) {
      g.count = 0;
      g.why_none = absl::StrCat("no CUDA device: cudaGetDeviceCount: ", cudaGetErrorName(e), ": ",
                                cudaGetErrorString(e));
      cudaGetLastError();
    } else if (g.count == 0) {
      g.why_none = "no CUDA device: cudaGetDeviceCount found none";
    }
    return g;
  }();
  return gpus;
}

// Skips the test unless `n` GPUs are visible.
#define REQUIRE_GPUS(n)                                                                              \
  do {                                                                                               \
    const Gpus& gpus = VisibleGpus();                                                                \
    if (gpus.count == 0) GTEST_SKIP() << gpus.why_none;                                              \
    if (gpus.count < (n)) GTEST_SKIP() << "needs " << (n) << " CUDA devices, " << gpus.count << " visible"; \
  } while (0)

const std::vector<DataType> kDtypes = {DataType::kFloat32, DataType::kFloat64,  DataType::kInt32,
                                       DataType::kInt64,   DataType::kFloat16, DataType::kBFloat16};

// Host values <-> element bytes of `dtype` (the test values are small integers, exact in all).
std::string Encode(DataType dtype, const std::vector<double>& values) {
  std::string bytes(values.size() * SizeOf(dtype), '\0');
  char* p = &bytes[0];
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    switch (dtype) {
      case DataType::kFloat32: { float x = static_cast<float>(v); std::memcpy(p + 4 * i, &x, 4); break; }
      case DataType::kFloat64: { std::memcpy(p + 8 * i, &v, 8); break; }
      case DataType::kInt32: { int32_t x = static_cast<int32_t>(v); std::memcpy(p + 4 * i, &x, 4); break; }
      case DataType::kInt64: { int64_t x = static_cast<int64_t>(v); std::memcpy(p + 8 * i, &x, 8); break; }
      case DataType::kFloat16: { uint16_t x = FloatToHalf(static_cast<float>(v)); std::memcpy(p + 2 * i, &x, 2); break; }
      case DataType::kBFloat16: { uint16_t x = FloatToBFloat16(static_cast<float>(v)); std::memcpy(p + 2 * i, &x, 2); break; }
      default: ADD_FAILURE() << "dtype " << DataTypeName(dtype);
    }
  }
  return bytes;
}

std::vector<double> Decode(DataType dtype, const std::string& bytes) {
  const int64_t n = static_cast<int64_t>(bytes.size()) / SizeOf(dtype);
  std::vector<double> values(n);
  const char* p = bytes.data();
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DataType::kFloat32: { float x; std::memcpy(&x, p + 4 * i, 4); values[i] = x; break; }
      case DataType::kFloat64: { std::memcpy(&values[i], p + 8 * i, 8); break; }
      case DataType::kInt32: { int32_t x; std::memcpy(&x, p + 4 * i, 4); values[i] = x; break; }
      case DataType::kInt64: { int64_t x; std::memcpy(&x, p + 8 * i, 8); values[i] = static_cast<double>(x); break; }
      case DataType::kFloat16: { uint16_t x; std::memcpy(&x, p + 2 * i, 2); values[i] = HalfToFloat(x); break; }
      case DataType::kBFloat16: { uint16_t x; std::memcpy(&x, p + 2 * i, 2); values[i] = BFloat16ToFloat(x); break; }
      default: ADD_FAILURE() << "dtype " << DataTypeName(dtype);
    }
  }
  return values;
}

// Device memory holding `count` elements of `dtype` on the current device.
class DeviceBuffer {
 public:
  DeviceBuffer(DataType dtype, int64_t count) : dtype_(dtype), count_(count) {
    const cudaError_t e = cudaMalloc(&ptr_, std::max<int64_t>(1, count * SizeOf(dtype)));
    EXPECT_EQ(e, cudaSuccess) << cudaGetErrorString(e);
  }
  DeviceBuffer(DataType dtype, const std::vector<double>& values) : DeviceBuffer(dtype, values.size()) {
    Upload(values);
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  void* at(int64_t element) const { return static_cast<char*>(ptr_) + element * SizeOf(dtype_); }
  void Upload(const std::vector<double>& values) {
    const std::string bytes = Encode(dtype_, values);
    EXPECT_EQ(cudaMemcpy(ptr_, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<double> Download() const {
    std::string bytes(count_ * SizeOf(dtype_), '\0');
    EXPECT_EQ(cudaMemcpy(&bytes[0], ptr_, bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    return Decode(dtype_, bytes);
  }

 private:
  DataType dtype_;
  int64_t count_;
  void* ptr_ = nullptr;
};

// Issues one call and waits for its callback.
absl::Status Wait(const std::function<void(CollectiveDone)>& call) {
  std::promise<absl::Status> result;
  call([&](const absl::Status& s) { result.set_value(s); });
  return result.get_future().get();
}

NcclOptions Options(int device, int64_t timeout_ms = 60000) {
  NcclOptions options;
  options.device = device;
  options.timeout_ms = timeout_ms;
  return options;
}

// Runs body(rank, communicator) on `n` threads, rank r on GPU r, one communicator each over
// group [0, n).
void OnRanks(int n, const std::function<void(int, Communicator*)>& body, int64_t timeout_ms = 60000) {
  InMemoryStore store;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
      auto backend = CreateNcclBackend(&store, r, n, Options(r, timeout_ms));
      ASSERT_TRUE(backend.ok()) << backend.status();
      std::vector<int32_t> group(n);
      std::iota(group.begin(), group.end(), 0);
      auto comm = (*backend)->Connect(group, "test");
      ASSERT_TRUE(comm.ok()) << comm.status();
      body(r, comm->get());
    });
  }
  for (auto& t : threads) t.join();
}

// Member r's input value i: small integers, distinct per member and position, exact in every
// dtype (sums over 4 members stay below 256: exact in bfloat16).
double Value(int r, int64_t i) { return static_cast<double>((r + 1) * 10 + (i % 7)) - 3.0; }

std::vector<double> Input(int r, int64_t n, int64_t first = 0) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = Value(r, first + i);
  return v;
}

int64_t Sum(const std::vector<int64_t>& counts) { return std::accumulate(counts.begin(), counts.end(), int64_t{0}); }

// Every collective on the group [0, n) (n threads, one GPU each), every dtype, against the
// reference, even and uneven counts (with a zero), in place where the interface allows it.
void CheckEveryCollective(int n) {
  OnRanks(n, [&](int r, Communicator* comm) {
    ASSERT_EQ(comm->rank(), r);
    ASSERT_EQ(comm->size(), n);
    for (DataType t : kDtypes) {
      SCOPED_TRACE(absl::StrCat("rank ", r, " of ", n, ", ", DataTypeName(t)));
      // AllReduce, out of place then in place
      {
        const int64_t count = 37;
        std::vector<double> expect(count, 0.0);
        for (int k = 0; k < n; ++k)
          for (int64_t i = 0; i < count; ++i) expect[i] += Value(k, i);
        DeviceBuffer in(t, Input(r, count)), out(t, count);
        ASSERT_TRUE(Wait([&](CollectiveDone d) { comm->AllReduce(in.get(), out.get(), count, t, d); }).ok());
        EXPECT_EQ(out.Download(), expect);
        ASSERT_TRUE(Wait([&](CollectiveDone d) { comm->AllReduce(in.get(), in.get(), count, t, d); }).ok());
        EXPECT_EQ(in.Download(), expect);
      }
      // AllGather: even counts (ncclAllGather), in place; uneven with a zero (broadcasts)
      for (bool even : {true, false}) {
        std::vector<int64_t> counts(n);
        for (int k = 0; k < n; ++k) counts[k] = even ? 6 : (k == 1 ? 0 : 3 + 2 * k);
        std::vector<double> expect;
        for (int k = 0; k < n; ++k) {
          const std::vector<double> part = Input(k, counts[k]);
          expect.insert(expect.end(), part.begin(), part.end());
        }
        int64_t offset = 0;
        for (int k = 0; k < r; ++k) offset += counts[k];
        DeviceBuffer in(t, Input(r, counts[r])), out(t, Sum(counts));
        ASSERT_TRUE(Wait([&](CollectiveDone d) { comm->AllGather(in.get(), out.get(), counts, t, d); }).ok());
        EXPECT_EQ(out.Download(), expect) << (even ? "even" : "uneven");
        DeviceBuffer inplace(t, Sum(counts));
        ASSERT_EQ(cudaMemcpy(inplace.at(offset), in.get(), counts[r] * SizeOf(t), cudaMemcpyDeviceToDevice),
                  cudaSuccess);
        ASSERT_TRUE(
            Wait([&](CollectiveDone d) { comm->AllGather(inplace.at(offset), inplace.get(), counts, t, d); }).ok());
        EXPECT_EQ(inplace.Download(), expect) << (even ? "even" : "uneven") << ", in place";
      }
      // ReduceScatter: even (ncclReduceScatter) and uneven with a zero (reduces)
      for (bool even : {true, false}) {
        std::vector<int64_t> counts(n);
        for (int k = 0; k < n; ++k) counts[k] = even ? 5 : (k == 0 && n > 1 ? 0 : 2 + 3 * k);
        const int64_t total = Sum(counts);
        int64_t offset = 0;
        for (int k = 0; k < r; ++k) offset += counts[k];
        std::vector<double> expect(counts[r], 0.0);
        for (int k = 0; k < n; ++k)
          for (int64_t i = 0; i < counts[r]; ++i) expect[i] += Value(k, offset + i);
        DeviceBuffer in(t, Input(r, total)), out(t, counts[r]);
        ASSERT_TRUE(Wait([&](CollectiveDone d) { comm->ReduceScatter(in.get(), out.get(), counts, t, d); }).ok());
        EXPECT_EQ(out.Download(), expect) << (even ? "even" : "uneven");
      }
      // Broadcast from every root
      for (int root = 0; root < n; ++root) {
        DeviceBuffer buffer(t, Input(r, 11));
        ASSERT_TRUE(Wait([&](CollectiveDone d) { comm->Broadcast(buffer.get(), 11, t, root, d); }).ok());
        EXPECT_EQ(buffer.Download(), Input(root, 11)) << "root " << root;
      }
      // AllToAll, uneven: member k sends sends(k, j) elements to member j, values 40 j + 10 k + i
      {
        auto sends = [](int k, int j) -> int64_t { return (k + 2 * j) % 3 + (j == k ? 1 : 0); };
        std::vector<int64_t> send_counts(n), recv_counts(n);
        std::vector<double> in_values, expect;
        for (int j = 0; j < n; ++j) {
          send_counts[j] = sends(r, j);
          for (int64_t i = 0; i < send_counts[j]; ++i) in_values.push_back(40 * j + 10 * r + i);
        }
        for (int k = 0; k < n; ++k) {
          recv_counts[k] = sends(k, r);
          for (int64_t i = 0; i < recv_counts[k]; ++i) expect.push_back(40 * r + 10 * k + i);
        }
        DeviceBuffer in(t, in_values), out(t, Sum(recv_counts));
        ASSERT_TRUE(Wait([&](CollectiveDone d) {
                      comm->AllToAll(in.get(), send_counts, out.get(), recv_counts, t, d);
                    }).ok());
        EXPECT_EQ(out.Download(), expect);
      }
      // Send / Recv between members 0 and 1, both directions (0 sends first, 1 receives first)
      if (n >= 2 && r < 2) {
        const int peer = 1 - r;
        DeviceBuffer mine(t, Input(r, 9)), theirs(t, 9);
        auto send = [&] {
          ASSERT_TRUE(Wait([&](CollectiveDone d) { comm->Send(mine.get(), 9, t, peer, d); }).ok());
        };
        auto recv = [&] {
          ASSERT_TRUE(Wait([&](CollectiveDone d) { comm->Recv(theirs.get(), 9, t, peer, d); }).ok());
        };
        if (r == 0) {
          send();
          recv();
        } else {
          recv();
          send();
        }
        EXPECT_EQ(theirs.Download(), Input(peer, 9));
      }
    }
    EXPECT_TRUE(comm->Flush().ok());
  });
}

TEST(NcclCollective, EveryCollectiveOnOneMemberGroups) {
  REQUIRE_GPUS(1);
  CheckEveryCollective(1);
}

TEST(NcclCollective, EveryCollectiveOnTwoRanks) {
  REQUIRE_GPUS(2);
  CheckEveryCollective(2);
}

TEST(NcclCollective, EveryCollectiveOnThreeAndFourRanks) {
  REQUIRE_GPUS(3);
  CheckEveryCollective(3);
  if (VisibleGpus().count >= 4) CheckEveryCollective(4);
}

TEST(NcclCollective, LargeAllReduceOnEveryGpu) {
  REQUIRE_GPUS(1);
  const int n = std::min(VisibleGpus().count, 4);
  const int64_t count = 4 << 20;  // 16 MiB of float32: many NCCL chunks
  OnRanks(n, [&](int r, Communicator* comm) {
    std::vector<double> values(count);
    for (int64_t i = 0; i < count; ++i) values[i] = static_cast<double>((i * 7 + r) % 1000);
    DeviceBuffer buffer(DataType::kFloat32, values);
    ASSERT_TRUE(Wait([&](CollectiveDone d) { comm->AllReduce(buffer.get(), buffer.get(), count, DataType::kFloat32, d); }).ok());
    const std::vector<double> out = buffer.Download();
    for (int64_t i = 0; i < count; i += 9973) {
      double expect = 0;
      for (int k = 0; k < n; ++k) expect += static_cast<double>((i * 7 + k) % 1000);
      ASSERT_EQ(out[i], expect) << "element " << i;
    }
  });
}

TEST(NcclCollective, CallsCompleteInIssueOrderOnTheCommunicatorThread) {
  REQUIRE_GPUS(1);
  const int n = std::min(VisibleGpus().count, 2);
  OnRanks(n, [&](int r, Communicator* comm) {
    constexpr int kCalls = 300;  // more than the communicator keeps in flight at once
    std::vector<std::unique_ptr<DeviceBuffer>> buffers;
    for (int i = 0; i < kCalls; ++i) {
      buffers.push_back(std::make_unique<DeviceBuffer>(DataType::kFloat32, std::vector<double>(1000, i + r)));
    }
    std::vector<int> order;
    std::mutex mu;
    const std::thread::id caller = std::this_thread::get_id();
    for (int i = 0; i < kCalls; ++i) {
      comm->AllReduce(buffers[i]->get(), buffers[i]->get(), 1000, DataType::kFloat32,
                      [&, i](const absl::Status& s) {
                        EXPECT_TRUE(s.ok()) << s;
                        EXPECT_NE(std::this_thread::get_id(), caller);
                        EXPECT_FALSE(comm->Flush().ok());  // from a callback: refused, not a deadlock
                        std::lock_guard<std::mutex> lock(mu);
                        order.push_back(i);
                      });
    }
    ASSERT_TRUE(comm->Flush().ok());
    std::vector<int> expect(kCalls);
    std::iota(expect.begin(), expect.end(), 0);
    EXPECT_EQ(order, expect);
    for (int i = 0; i < kCalls; i += 37) {
      EXPECT_EQ(buffers[i]->Download()[999], n * i + n * (n - 1) / 2) << "call " << i;
    }
  });
}

TEST(NcclCollective, BadCallsAreRefusedNamingTheGroupAndTheCommunicatorStillWorks) {
  REQUIRE_GPUS(1);
  OnRanks(1, [&](int r, Communicator* comm) {
    DeviceBuffer x(DataType::kFloat32, std::vector<double>{1, 2, 3, 4});
    absl::Status s = Wait([&](CollectiveDone d) { comm->AllGather(x.get(), x.get(), {1, 2}, DataType::kFloat32, d); });
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr("2 counts for a group of 1"));
    EXPECT_THAT(std::string(s.message()), HasSubstr("nccl group [0] 'test'"));
    s = Wait([&](CollectiveDone d) { comm->AllReduce(x.get(), x.get(), 4, DataType::kBool, d); });
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr("dtype bool"));
    s = Wait([&](CollectiveDone d) { comm->Broadcast(x.get(), 4, DataType::kFloat32, 5, d); });
    EXPECT_THAT(std::string(s.message()), HasSubstr("root 5"));
    s = Wait([&](CollectiveDone d) { comm->Send(x.get(), 4, DataType::kFloat32, r, d); });
    EXPECT_THAT(std::string(s.message()), HasSubstr("not another member"));
    s = Wait([&](CollectiveDone d) { comm->AllToAll(x.get(), {2}, x.get(), {3}, DataType::kFloat32, d); });
    EXPECT_THAT(std::string(s.message()), HasSubstr("sends itself 2 elements but receives 3"));
    float host[4] = {1, 2, 3, 4};
    s = Wait([&](CollectiveDone d) { comm->AllReduce(host, host, 4, DataType::kFloat32, d); });
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr("host memory"));
    // nothing was enqueued: the communicator still works; Flush reports the first failure
    ASSERT_TRUE(Wait([&](CollectiveDone d) { comm->AllReduce(x.get(), x.get(), 4, DataType::kFloat32, d); }).ok());
    EXPECT_EQ(x.Download(), (std::vector<double>{1, 2, 3, 4}));
    EXPECT_THAT(std::string(comm->Flush().message()), HasSubstr("2 counts for a group of 1"));
  });
}

TEST(NcclCollective, DestroyingACommunicatorFinishesItsCalls) {
  REQUIRE_GPUS(1);
  InMemoryStore store;
  auto backend = CreateNcclBackend(&store, 0, 1, Options(0));
  ASSERT_TRUE(backend.ok()) << backend.status();
  DeviceBuffer x(DataType::kFloat64, std::vector<double>(1 << 16, 2.0));
  int completed = 0;
  {
    auto comm = (*backend)->Connect({0}, "short-lived");
    ASSERT_TRUE(comm.ok()) << comm.status();
    for (int i = 0; i < 20; ++i) {
      (*comm)->AllReduce(x.get(), x.get(), 1 << 16, DataType::kFloat64, [&](const absl::Status& s) {
        EXPECT_TRUE(s.ok()) << s;
        ++completed;  // the communicator's thread only
      });
    }
  }
  EXPECT_EQ(completed, 20);
  // the same group and tag again: a fresh unique id (the second Connect of this tag)
  auto again = (*backend)->Connect({0}, "short-lived");
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_TRUE(Wait([&](CollectiveDone d) { (*again)->AllReduce(x.get(), x.get(), 1, DataType::kFloat64, d); }).ok());
}

TEST(NcclCollective, ConnectRefusesBadGroups) {
  REQUIRE_GPUS(1);
  InMemoryStore store;
  auto backend = CreateNcclBackend(&store, 2, 4, Options(0));
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->name(), "nccl");
  auto comm = (*backend)->Connect({0, 1}, "x");
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(comm.status().message()), HasSubstr("rank 2 is not in group [0,1]"));
  EXPECT_EQ((*backend)->Connect({0, 7}, "x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*backend)->Connect({2, 2}, "x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(CreateNcclBackend(&store, 4, 4, Options(0)).ok());
  EXPECT_FALSE(CreateNcclBackend(nullptr, 0, 1, Options(0)).ok());
  auto no_such_device = CreateNcclBackend(&store, 0, 1, Options(VisibleGpus().count));
  EXPECT_EQ(no_such_device.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(no_such_device.status().message()), HasSubstr("does not exist"));
}

TEST(NcclCollective, AMemberThatNeverJoinsIsATimeoutNotAHang) {
  REQUIRE_GPUS(1);
  InMemoryStore store;
  // member 0 publishes the unique id, then waits in ncclCommInitRank for member 1
  auto first = CreateNcclBackend(&store, 0, 2, Options(0, 1500));
  ASSERT_TRUE(first.ok()) << first.status();
  auto comm = (*first)->Connect({0, 1}, "lonely");
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(comm.status().message()), HasSubstr("nccl group [0,1] 'lonely'"));
  EXPECT_THAT(std::string(comm.status().message()), HasSubstr("not every member joined"));
  // member 1 of a group whose member 0 never publishes the id
  auto second = CreateNcclBackend(&store, 1, 2, Options(0, 500));
  ASSERT_TRUE(second.ok()) << second.status();
  auto orphan = (*second)->Connect({0, 1}, "nobody");
  EXPECT_EQ(orphan.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(orphan.status().message()), HasSubstr("unique id of member 0 (rank 0) did not arrive"));
}

TEST(NcclCollective, GarbageUniqueIdIsRefused) {
  REQUIRE_GPUS(1);
  InMemoryStore store;
  // the key: "nccl/" + hex(tag) + "/" + group + "/" + how many Connects of it came before
  ASSERT_TRUE(store.Set("nccl/" + std::string("6a756e6b") + "/0,1/0", "not hex at all").ok());
  auto backend = CreateNcclBackend(&store, 1, 2, Options(0, 1000));
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto comm = (*backend)->Connect({0, 1}, "junk");
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(comm.status().message()), HasSubstr("garbage NCCL unique id"));
}

TEST(NcclCollective, ASilentPeerFailsTheCallAndEveryLaterOne) {
  REQUIRE_GPUS(2);
  InMemoryStore store;
  std::promise<void> failed;
  std::shared_future<void> rank0_failed = failed.get_future().share();
  std::thread silent([&] {
    ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
    auto backend = CreateNcclBackend(&store, 1, 2, Options(1, 2000));
    ASSERT_TRUE(backend.ok()) << backend.status();
    auto comm = (*backend)->Connect({0, 1}, "silent");
    ASSERT_TRUE(comm.ok()) << comm.status();
    rank0_failed.wait();  // never calls the all-reduce member 0 waits in
  });
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  auto backend = CreateNcclBackend(&store, 0, 2, Options(0, 2000));
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto comm = (*backend)->Connect({0, 1}, "silent");
  ASSERT_TRUE(comm.ok()) << comm.status();
  DeviceBuffer x(DataType::kFloat32, std::vector<double>(1024, 1.0));
  absl::Status s = Wait([&](CollectiveDone d) { (*comm)->AllReduce(x.get(), x.get(), 1024, DataType::kFloat32, d); });
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("AllReduce of 1024 float32"));
  absl::Status after = Wait([&](CollectiveDone d) { (*comm)->AllReduce(x.get(), x.get(), 4, DataType::kFloat32, d); });
  EXPECT_EQ(after.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(after.message()), HasSubstr("an earlier call failed"));
  EXPECT_FALSE((*comm)->Flush().ok());
  failed.set_value();
  silent.join();
}

// --- channels (ConnectChannel): one communicator per group, shared by its channels ---

// A group of threads meets here.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t round = round_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return round_ != round; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int n_;
  int arrived_ = 0;
  int64_t round_ = 0;
};

// ncclCommInitRankConfig calls so far in this process where nccl_fake.cc is linked in (the fake
// test), -1 on real NCCL.
int64_t CommInitsSoFar() { return nccl_fake::CommInits != nullptr ? nccl_fake::CommInits() : -1; }

// Member p's (group position) input of step j, element i: small integers, distinct per member,
// step and position (exact in float32 and int32).
double StepValue(int p, int j, int64_t i) { return static_cast<double>((p + 1) * 10 + j + (i % 7)) - 3.0; }
std::vector<double> StepInput(int p, int j, int64_t n) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = StepValue(p, j, i);
  return v;
}

// Two groups' channels: group {0, 1} has channels 3, 5 and 9, connected in opposite orders by its
// two members; with 3 devices also group {1, 2} with channel 7. Every member then issues its
// part of one agreed sequence of calls (channels interleaved, without waiting), and every result
// matches the reference. The calls run in one queue per group: the members would disagree on a
// step (the fake counts it) if a channel's calls ran apart from the sequence.
TEST(NcclCollective, ChannelsOfAGroupShareOneCommunicatorAndRunInIssueOrder) {
  REQUIRE_GPUS(2);
  const int world = VisibleGpus().count >= 3 ? 3 : 2;
  const std::vector<int32_t> group_a = {0, 1}, group_b = {1, 2};
  struct Step {
    uint64_t channel;
    int kind;  // 0 AllReduce, 1 AllGather, 2 ReduceScatter
    std::vector<int64_t> counts;  // AllReduce: {count}; else one per member
    DataType dtype;
  };
  const std::vector<Step> steps = {
      {3, 0, {17}, DataType::kFloat32},      {9, 1, {5, 5}, DataType::kInt32},
      {7, 0, {11}, DataType::kFloat32},      {5, 2, {3, 6}, DataType::kFloat32},
      {3, 1, {4, 2}, DataType::kFloat32},    {7, 2, {4, 4}, DataType::kInt32},
      {9, 0, {29}, DataType::kInt32},        {5, 0, {8}, DataType::kFloat32},
      {3, 2, {6, 6}, DataType::kInt32},      {7, 1, {1, 3}, DataType::kFloat32},
      {5, 1, {0, 7}, DataType::kInt32},      {9, 2, {2, 5}, DataType::kFloat32},
  };
  auto group_of = [&](uint64_t channel) { return channel == 7 ? group_b : group_a; };
  const int64_t inits_before = CommInitsSoFar();
  InMemoryStore store;
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
      auto backend = CreateNcclBackend(&store, r, world, Options(r));
      ASSERT_TRUE(backend.ok()) << backend.status();
      EXPECT_TRUE((*backend)->NeedsIssueOrder());
      // the connect order: opposite on the members of group {0, 1}
      std::vector<uint64_t> order;
      if (r == 0) order = {3, 5, 9};
      if (r == 1) order = {9, 5, 3};
      if (world == 3 && r >= 1) order.push_back(7);
      std::map<uint64_t, std::unique_ptr<Communicator>> channels;
      for (uint64_t c : order) {
        auto channel = (*backend)->ConnectChannel(group_of(c), c, absl::StrCat("collective/", c));
        ASSERT_TRUE(channel.ok()) << "rank " << r << ": " << channel.status();
        const std::vector<int32_t> group = group_of(c);
        EXPECT_EQ((*channel)->rank(), std::find(group.begin(), group.end(), r) - group.begin());
        EXPECT_EQ((*channel)->size(), 2);
        EXPECT_THAT((*channel)->description(), HasSubstr(absl::StrCat("group [", group[0], ",", group[1], "]")));
        EXPECT_THAT((*channel)->description(), HasSubstr(absl::StrCat("channel ", c, " 'collective/", c, "'")));
        channels[c] = std::move(*channel);
      }
      const int64_t groups = r == 0 || world == 2 ? 1 : (r == 1 ? 2 : 1);
      EXPECT_EQ((*backend)->stats().contexts, groups) << "rank " << r;
      EXPECT_EQ((*backend)->stats().channels, static_cast<int64_t>(order.size())) << "rank " << r;
      EXPECT_EQ((*backend)->stats().fallbacks, 0);

      // this member's part of the agreed sequence, issued without waiting
      struct Issued {
        int step;
        std::unique_ptr<DeviceBuffer> in, out;
        std::vector<double> expect;
        std::promise<absl::Status> done;
      };
      std::vector<std::unique_ptr<Issued>> issued;
      for (int j = 0; j < static_cast<int>(steps.size()); ++j) {
        const Step& step = steps[j];
        if (channels.count(step.channel) == 0) continue;
        Communicator* comm = channels[step.channel].get();
        const int me = comm->rank(), n = comm->size();
        auto call = std::make_unique<Issued>();
        call->step = j;
        const DataType t = step.dtype;
        CollectiveDone done = [c = call.get()](const absl::Status& s) { c->done.set_value(s); };
        if (step.kind == 0) {
          const int64_t count = step.counts[0];
          call->expect.assign(count, 0.0);
          for (int p = 0; p < n; ++p)
            for (int64_t i = 0; i < count; ++i) call->expect[i] += StepValue(p, j, i);
          call->in = std::make_unique<DeviceBuffer>(t, StepInput(me, j, count));
          call->out = std::make_unique<DeviceBuffer>(t, count);
          comm->AllReduce(call->in->get(), call->out->get(), count, t, done);
        } else if (step.kind == 1) {
          for (int p = 0; p < n; ++p) {
            const std::vector<double> part = StepInput(p, j, step.counts[p]);
            call->expect.insert(call->expect.end(), part.begin(), part.end());
          }
          call->in = std::make_unique<DeviceBuffer>(t, StepInput(me, j, step.counts[me]));
          call->out = std::make_unique<DeviceBuffer>(t, Sum(step.counts));
          comm->AllGather(call->in->get(), call->out->get(), step.counts, t, done);
        } else {
          int64_t offset = 0;
          for (int p = 0; p < me; ++p) offset += step.counts[p];
          call->expect.assign(step.counts[me], 0.0);
          for (int p = 0; p < n; ++p)
            for (int64_t i = 0; i < step.counts[me]; ++i) call->expect[i] += StepValue(p, j, offset + i);
          call->in = std::make_unique<DeviceBuffer>(t, StepInput(me, j, Sum(step.counts)));
          call->out = std::make_unique<DeviceBuffer>(t, step.counts[me]);
          comm->ReduceScatter(call->in->get(), call->out->get(), step.counts, t, done);
        }
        issued.push_back(std::move(call));
      }
      for (auto& [c, channel] : channels) EXPECT_TRUE(channel->Flush().ok()) << "channel " << c;
      for (auto& call : issued) {
        const absl::Status s = call->done.get_future().get();
        EXPECT_TRUE(s.ok()) << "rank " << r << ", step " << call->step << ": " << s;
        EXPECT_EQ(call->out->Download(), call->expect) << "rank " << r << ", step " << call->step;
      }
    });
  }
  for (auto& t : threads) t.join();
  if (inits_before >= 0) {  // the fake: one ncclCommInitRankConfig per member of each group, not per channel
    EXPECT_EQ(CommInitsSoFar() - inits_before, world == 3 ? 4 : 2);
  }
}

// A member that never joins: the concurrent ConnectChannels of the group wait for the one
// creation and all get its status.
TEST(NcclCollective, ConcurrentChannelsOfAGroupShareOneFailedCreation) {
  REQUIRE_GPUS(1);
  InMemoryStore store;
  auto backend = CreateNcclBackend(&store, 0, 2, Options(0, 800));
  ASSERT_TRUE(backend.ok()) << backend.status();
  const int64_t inits_before = CommInitsSoFar();
  constexpr int kChannels = 3;
  Barrier start(kChannels);
  std::vector<absl::Status> results(kChannels);
  std::vector<std::thread> threads;
  for (int k = 0; k < kChannels; ++k) {
    threads.emplace_back([&, k] {
      start.Wait();
      auto channel = (*backend)->ConnectChannel({0, 1}, 10 + k, absl::StrCat("collective/", 10 + k));
      results[k] = channel.status();
    });
  }
  for (auto& t : threads) t.join();
  for (int k = 0; k < kChannels; ++k) {
    EXPECT_EQ(results[k].code(), absl::StatusCode::kDeadlineExceeded) << results[k];
    EXPECT_THAT(std::string(results[k].message()), HasSubstr("nccl group [0,1]"));
    EXPECT_THAT(std::string(results[k].message()), HasSubstr("not every member joined"));
    EXPECT_EQ(results[k], results[0]) << "channel " << 10 + k;  // one creation's status
  }
  EXPECT_EQ((*backend)->stats().contexts, 0);
  EXPECT_EQ((*backend)->stats().channels, 0);
  if (inits_before >= 0) {
    EXPECT_EQ(CommInitsSoFar() - inits_before, 1);
  }
}

// A silent peer: the call of channel 3 times out, and the shared communicator fails the calls of
// channel 5 too (the one issued before the failure and the one after it).
TEST(NcclCollective, AFailureOfTheGroupsCommunicatorFailsEveryChannel) {
  REQUIRE_GPUS(2);
  InMemoryStore store;
  std::promise<void> failed;
  std::shared_future<void> rank0_failed = failed.get_future().share();
  std::thread silent([&] {
    ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
    auto backend = CreateNcclBackend(&store, 1, 2, Options(1, 1500));
    ASSERT_TRUE(backend.ok()) << backend.status();
    auto five = (*backend)->ConnectChannel({0, 1}, 5, "c5");
    ASSERT_TRUE(five.ok()) << five.status();
    auto three = (*backend)->ConnectChannel({0, 1}, 3, "c3");
    ASSERT_TRUE(three.ok()) << three.status();
    rank0_failed.wait();  // never calls anything
  });
  [&] {  // a lambda: an ASSERT leaves it, and the silent member is still released and joined
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    auto backend = CreateNcclBackend(&store, 0, 2, Options(0, 1500));
    ASSERT_TRUE(backend.ok()) << backend.status();
    auto three = (*backend)->ConnectChannel({0, 1}, 3, "c3");
    ASSERT_TRUE(three.ok()) << three.status();
    auto five = (*backend)->ConnectChannel({0, 1}, 5, "c5");
    ASSERT_TRUE(five.ok()) << five.status();
    EXPECT_EQ((*backend)->stats().contexts, 1);
    DeviceBuffer x(DataType::kFloat32, std::vector<double>(1024, 1.0)), y(DataType::kFloat32, 16);
    std::promise<absl::Status> on_three, on_five;
    (*three)->AllReduce(x.get(), x.get(), 1024, DataType::kFloat32,
                        [&](const absl::Status& s) { on_three.set_value(s); });
    (*five)->AllReduce(y.get(), y.get(), 16, DataType::kFloat32, [&](const absl::Status& s) { on_five.set_value(s); });
    const absl::Status s3 = on_three.get_future().get();
    EXPECT_EQ(s3.code(), absl::StatusCode::kDeadlineExceeded) << s3;
    EXPECT_THAT(std::string(s3.message()), HasSubstr("nccl group [0,1]"));
    EXPECT_THAT(std::string(s3.message()), HasSubstr("channel 3 'c3': AllReduce of 1024 float32"));
    // channel 5's call, issued before the failure: failed by channel 3's (not a timeout of its own)
    const absl::Status s5 = on_five.get_future().get();
    EXPECT_EQ(s5.code(), absl::StatusCode::kDeadlineExceeded) << s5;
    EXPECT_THAT(std::string(s5.message()), HasSubstr("channel 5 'c5': AllReduce of 16 float32"));
    EXPECT_THAT(std::string(s5.message()), HasSubstr("channel 3 'c3': AllReduce of 1024 float32"));
    // and after it, on either channel
    for (Communicator* c : {three->get(), five->get()}) {
      const absl::Status after =
          Wait([&](CollectiveDone d) { c->AllReduce(y.get(), y.get(), 4, DataType::kFloat32, d); });
      EXPECT_EQ(after.code(), absl::StatusCode::kDeadlineExceeded) << c->description() << ": " << after;
      EXPECT_THAT(std::string(after.message()), HasSubstr("an earlier call failed")) << c->description();
    }
    // each channel's Flush reports its own first failure
    EXPECT_EQ((*three)->Flush(), s3);
    EXPECT_EQ((*five)->Flush(), s5);
  }();
  failed.set_value();
  silent.join();
}

TEST(NcclCollective, AChannelIdIsConnectedOncePerGroup) {
  REQUIRE_GPUS(1);
  InMemoryStore store;
  auto backend = CreateNcclBackend(&store, 0, 2, Options(0));
  ASSERT_TRUE(backend.ok()) << backend.status();
  // the group is checked as Connect checks it
  auto stranger = (*backend)->ConnectChannel({1}, 3, "x");
  EXPECT_EQ(stranger.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(stranger.status().message()), HasSubstr("rank 0 is not in group [1]"));
  EXPECT_THAT(std::string(stranger.status().message()), HasSubstr("channel 3 'x'"));
  EXPECT_EQ((*backend)->ConnectChannel({0, 7}, 3, "x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*backend)->ConnectChannel({0, 0}, 3, "x").status().code(), absl::StatusCode::kInvalidArgument);
  // a one-member group: connects alone; channel 4 shares channel 3's communicator
  auto three = (*backend)->ConnectChannel({0}, 3, "x");
  ASSERT_TRUE(three.ok()) << three.status();
  auto twice = (*backend)->ConnectChannel({0}, 3, "y");
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(twice.status().message()),
              HasSubstr("nccl: channel 3 of group [0] is already connected on rank 0"));
  auto four = (*backend)->ConnectChannel({0}, 4, "z");
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ((*backend)->stats().contexts, 1);
  EXPECT_EQ((*backend)->stats().channels, 2);
  DeviceBuffer x(DataType::kFloat32, std::vector<double>{1, 2, 3});
  EXPECT_TRUE(Wait([&](CollectiveDone d) { (*four)->AllReduce(x.get(), x.get(), 3, DataType::kFloat32, d); }).ok());
  // ids are not reused, also once the channel is gone (as in the gloo backend)
  three->reset();
  EXPECT_EQ((*backend)->ConnectChannel({0}, 3, "x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Wait([&](CollectiveDone d) { (*four)->AllReduce(x.get(), x.get(), 3, DataType::kFloat32, d); }).ok());
  EXPECT_EQ(x.Download(), (std::vector<double>{1, 2, 3}));
}

// Channels connected concurrently (as the runtime's collective bodies do), calls in flight, then
// destroyed in different orders on the two members: destroying a channel waits for its own calls
// only; the last one takes the group's communicator along, and the next channel of the group
// gets a new one.
TEST(NcclCollective, ChannelsCanBeDestroyedInAnyOrder) {
  REQUIRE_GPUS(2);
  InMemoryStore store;
  Barrier all_destroyed(2);
  const std::vector<uint64_t> ids = {3, 5, 9};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
      auto backend = CreateNcclBackend(&store, r, 2, Options(r));
      ASSERT_TRUE(backend.ok()) << backend.status();
      std::vector<std::future<absl::StatusOr<std::unique_ptr<Communicator>>>> connecting;
      for (uint64_t c : ids) {
        connecting.push_back(std::async(std::launch::async, [&, c] {
          EXPECT_EQ(cudaSetDevice(r), cudaSuccess);
          return (*backend)->ConnectChannel({0, 1}, c, absl::StrCat("collective/", c));
        }));
      }
      std::map<uint64_t, std::unique_ptr<Communicator>> channels;
      for (size_t k = 0; k < ids.size(); ++k) {
        auto channel = connecting[k].get();
        ASSERT_TRUE(channel.ok()) << channel.status();
        channels[ids[k]] = std::move(*channel);
      }
      EXPECT_EQ((*backend)->stats().contexts, 1);
      constexpr int kRounds = 4;
      std::vector<std::unique_ptr<DeviceBuffer>> buffers;
      std::map<uint64_t, std::atomic<int>> completed;
      for (uint64_t c : ids) completed[c] = 0;
      for (int round = 0; round < kRounds; ++round) {
        for (uint64_t c : ids) {
          buffers.push_back(std::make_unique<DeviceBuffer>(DataType::kFloat32, std::vector<double>(1 << 12, 1.0)));
          channels[c]->AllReduce(buffers.back()->get(), buffers.back()->get(), 1 << 12, DataType::kFloat32,
                                 [&, c](const absl::Status& s) {
                                   EXPECT_TRUE(s.ok()) << s;
                                   ++completed[c];
                                 });
        }
      }
      const std::vector<uint64_t> destroy = r == 0 ? std::vector<uint64_t>{5, 9, 3} : std::vector<uint64_t>{9, 3, 5};
      for (uint64_t c : destroy) {
        channels[c].reset();
        EXPECT_EQ(completed[c].load(), kRounds)
            << "rank " << r << ": channel " << c << " destroyed before its calls finished";
      }
      for (const auto& buffer : buffers) EXPECT_EQ(buffer->Download()[7], 2.0);
      all_destroyed.Wait();
      // the group's communicator went with its last channel: a new channel gets a new one
      auto again = (*backend)->ConnectChannel({0, 1}, 11, "collective/11");
      ASSERT_TRUE(again.ok()) << again.status();
      EXPECT_EQ((*backend)->stats().contexts, 2);
      DeviceBuffer x(DataType::kFloat32, std::vector<double>{1.0 + r, 2.0});
      ASSERT_TRUE(
          Wait([&](CollectiveDone d) { (*again)->AllReduce(x.get(), x.get(), 2, DataType::kFloat32, d); }).ok());
      EXPECT_EQ(x.Download(), (std::vector<double>{3, 4}));
    });
  }
  for (auto& t : threads) t.join();
}

// Runs everywhere: without a GPU the backend says so instead of failing later.
TEST(NcclCollective, WithoutADeviceCreateSaysSo) {
  if (VisibleGpus().count > 0) GTEST_SKIP() << "a CUDA device is visible (this checks the message without one)";
  InMemoryStore store;
  auto backend = CreateNcclBackend(&store, 0, 1, Options(0));
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(backend.status().message()), HasSubstr("no CUDA device"));
}

TEST(NcclCollective, LocalRankPicksTheDevice) {
  const char* saved = std::getenv("LOCAL_RANK");
  const std::string saved_value = saved != nullptr ? saved : "";
  unsetenv("LOCAL_RANK");
  EXPECT_EQ(*NcclDeviceFromEnv(), 0);
  setenv("LOCAL_RANK", "3", 1);
  EXPECT_EQ(*NcclDeviceFromEnv(), 3);
  setenv("LOCAL_RANK", "x1", 1);
  EXPECT_EQ(NcclDeviceFromEnv().status().code(), absl::StatusCode::kInvalidArgument);
  if (saved != nullptr) {
    setenv("LOCAL_RANK", saved_value.c_str(), 1);
  } else {
    unsetenv("LOCAL_RANK");
  }
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like
