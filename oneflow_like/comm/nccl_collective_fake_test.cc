// The NCCL backend over nccl_fake.cc (an in-process fake of the CUDA runtime and NCCL calls it
// uses): this binary also runs every test of nccl_collective_test.cc with 4 fake devices, so the
// backend's worker, ordering, timeouts and the mapping of uneven collectives run without a GPU.
// Here: what only the fake can do (an asynchronous NCCL error on demand), and a check that no
// collective step ever found the members disagreeing.
#include <future>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oneflow_like/comm/nccl_collective.h"
#include "oneflow_like/comm/nccl_fake.h"

namespace oneflow_like {
namespace comm {
namespace {

using ::testing::HasSubstr;

class NoMismatches : public ::testing::Environment {
 public:
  void TearDown() override {
    EXPECT_EQ(nccl_fake::MismatchCount(), 0) << "members disagreed on a collective step: a mapping bug";
  }
};
::testing::Environment* const kNoMismatches = ::testing::AddGlobalTestEnvironment(new NoMismatches);

absl::Status WaitFor(const std::function<void(CollectiveDone)>& call) {
  std::promise<absl::Status> result;
  call([&](const absl::Status& s) { result.set_value(s); });
  return result.get_future().get();
}

TEST(NcclCollectiveFake, AnAsynchronousNcclErrorFailsTheCallInsteadOfAHang) {
  InMemoryStore store;
  std::promise<void> done;
  std::shared_future<void> finished = done.get_future().share();
  NcclOptions options;
  options.timeout_ms = 60000;  // the error, not the timeout, must end the call
  std::thread silent([&] {
    NcclOptions mine = options;
    mine.device = 1;
    auto backend = CreateNcclBackend(&store, 1, 2, mine);
    ASSERT_TRUE(backend.ok()) << backend.status();
    auto comm = (*backend)->Connect({0, 1}, "broken");
    ASSERT_TRUE(comm.ok()) << comm.status();
    finished.wait();
  });
  auto backend = CreateNcclBackend(&store, 0, 2, options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto comm = (*backend)->Connect({0, 1}, "broken");
  ASSERT_TRUE(comm.ok()) << comm.status();
  void* x = nullptr;
  ASSERT_EQ(cudaMalloc(&x, 64), cudaSuccess);
  std::promise<absl::Status> result;
  (*comm)->AllReduce(x, x, 16, DataType::kFloat32, [&](const absl::Status& s) { result.set_value(s); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // in flight, waiting for member 1
  nccl_fake::InjectAsyncError(ncclRemoteError);
  const absl::Status s = result.get_future().get();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("nccl group [0,1] 'broken'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("AllReduce of 16 float32"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("remote process exited"));
  const absl::Status after = WaitFor([&](CollectiveDone d) { (*comm)->AllReduce(x, x, 16, DataType::kFloat32, d); });
  EXPECT_EQ(after.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(after.message()), HasSubstr("an earlier call failed"));
  comm->reset();
  done.set_value();
  silent.join();
  nccl_fake::InjectAsyncError(ncclSuccess);
  cudaFree(x);
}

// The worker polls cudaEventQuery while a call is in flight; its cudaErrorNotReady stays as the
// thread's last error (the fake keeps one per thread as CUDA does). The done callbacks run on the
// worker thread and may launch kernels (the actor's collective body copies boxes), whose launch
// check reads cudaGetLastError: it must not find a stale "device not ready" there.
TEST(NcclCollectiveFake, DoneCallbacksFindNoStaleErrorFromTheWorkersPolling) {
  InMemoryStore store;
  NcclOptions options;
  options.poll_interval_ms = 1;
  void* y = nullptr;
  std::thread late([&] {
    NcclOptions mine = options;
    mine.device = 1;
    auto backend = CreateNcclBackend(&store, 1, 2, mine);
    ASSERT_TRUE(backend.ok()) << backend.status();
    auto comm = (*backend)->Connect({0, 1}, "stale");
    ASSERT_TRUE(comm.ok()) << comm.status();
    void* x = nullptr;
    ASSERT_EQ(cudaMalloc(&x, 64), cudaSuccess);
    for (int i = 0; i < 2; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // member 0 polls meanwhile
      EXPECT_TRUE(WaitFor([&](CollectiveDone d) { (*comm)->AllReduce(x, x, 16, DataType::kFloat32, d); }).ok());
    }
    cudaFree(x);
  });
  auto backend = CreateNcclBackend(&store, 0, 2, options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto comm = (*backend)->Connect({0, 1}, "stale");
  ASSERT_TRUE(comm.ok()) << comm.status();
  ASSERT_EQ(cudaMalloc(&y, 64), cudaSuccess);
  for (int i = 0; i < 2; ++i) {
    std::promise<std::pair<absl::Status, cudaError_t>> result;
    (*comm)->AllReduce(y, y, 16, DataType::kFloat32, [&](const absl::Status& s) {
      result.set_value({s, cudaGetLastError()});  // what a kernel launch check here would read
    });
    const auto [status, last] = result.get_future().get();
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_EQ(last, cudaSuccess) << "call " << i << ": the callback's thread has a stale last error "
                                 << cudaGetErrorName(last);
  }
  comm->reset();
  late.join();
  cudaFree(y);
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like
