// The collective interface through NCCL. Every test that needs a GPU skips, naming the reason,
// where none is visible (this file builds and links everywhere the CUDA toolkit is).
// With one GPU: every collective on one-member groups, every dtype; bad calls; order of
// callbacks; Connect's timeouts. With two or more GPUs also: every collective on 2 .. 4 ranks
// (threads of this process, one GPU each, an InMemoryStore as rendezvous) against a reference
// computed here, uneven counts included, every dtype; send / recv; a silent peer times out.
#include "oneflow_like/comm/nccl_collective.h"

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
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
