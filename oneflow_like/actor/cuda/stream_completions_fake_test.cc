// StreamCompletions and CudaEvent over comm's in-process fake of the CUDA runtime (nccl_fake.cc:
// a stream is a thread running its work in order, host functions and event waits included, as
// CUDA does).
#include "oneflow_like/actor/cuda/stream_completions.h"
#include "oneflow_like/actor/cuda/stream_events.h"

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/comm/nccl_fake.h"

namespace oneflow_like {
namespace actor {
namespace {

using std::chrono::milliseconds;

class StreamCompletionsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess); }
  void TearDown() override { cudaStreamDestroy(stream_); }

  // The stream's next work waits until the returned promise is set (a slow kernel).
  std::promise<void> Gate() {
    std::promise<void> open;
    auto* wait = new std::shared_future<void>(open.get_future().share());
    cudaLaunchHostFunc(
        stream_,
        [](void* p) {
          std::unique_ptr<std::shared_future<void>> f(static_cast<std::shared_future<void>*>(p));
          f->wait();
        },
        wait);
    return open;
  }

  cudaStream_t stream_ = nullptr;
};

TEST_F(StreamCompletionsTest, CallsBackInOrderOnlyOnceTheWorkBeforeEachEventRan) {
  std::promise<void> gate = Gate();
  StreamCompletions done(0);
  std::mutex mu;
  std::vector<int> order;
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(done.Add(stream_, [&, i](const absl::Status& s) {
                      EXPECT_TRUE(s.ok()) << s;
                      std::lock_guard<std::mutex> lock(mu);
                      order.push_back(i);
                    }).ok());
  }
  std::this_thread::sleep_for(milliseconds(30));
  EXPECT_EQ(done.completed(), 0) << "a callback ran before the work ahead of its event";
  gate.set_value();
  done.WaitIdle();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  // Events are reused: many more completions than the pool ever held at once.
  const int64_t created = comm::nccl_fake::EventsCreated();
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(done.Add(stream_, [](const absl::Status&) {}).ok());
    if (i % 2 == 1) done.WaitIdle();
  }
  done.WaitIdle();
  EXPECT_EQ(done.completed(), 205);
  EXPECT_LE(comm::nccl_fake::EventsCreated() - created, 2) << "a new event per completion";
}

// A callback that waits for later work of its own stream: with a host function per act the
// stream would wait for the host (a deadlock until the callback gives up); with an event the
// stream runs on.
TEST_F(StreamCompletionsTest, TheStreamNeverWaitsForACallback) {
  std::atomic<bool> later_ran{false};
  StreamCompletions done(0);
  ASSERT_TRUE(done.Add(stream_, [&](const absl::Status&) {
                    for (int i = 0; i < 1000 && !later_ran.load(); ++i) std::this_thread::sleep_for(milliseconds(1));
                    EXPECT_TRUE(later_ran.load()) << "the stream waited for the host";
                  }).ok());
  cudaLaunchHostFunc(stream_, [](void* p) { static_cast<std::atomic<bool>*>(p)->store(true); }, &later_ran);
  done.WaitIdle();
  EXPECT_TRUE(later_ran.load());
}

// A fault inside a kernel (CUDA reports it at the next synchronization, sticky): every act
// waiting behind it gets the error, named by the call, instead of staying in flight.
TEST_F(StreamCompletionsTest, AFaultReachesTheCallbacksWaitingBehindIt) {
  StreamCompletions done(0);
  std::mutex mu;
  std::vector<std::string> errors;
  comm::nccl_fake::InjectEventSyncError(cudaErrorIllegalAddress);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(done.Add(stream_, [&](const absl::Status& s) {
                      std::lock_guard<std::mutex> lock(mu);
                      errors.push_back(std::string(s.message()));
                    }).ok());
  }
  done.WaitIdle();
  comm::nccl_fake::InjectEventSyncError(cudaSuccess);
  ASSERT_EQ(errors.size(), 3u);
  for (const std::string& e : errors) EXPECT_NE(e.find("cudaEventSynchronize"), std::string::npos) << e;
}

TEST_F(StreamCompletionsTest, DestructionWaitsForThePendingCallbacks) {
  std::atomic<int> ran{0};
  std::promise<void> gate = Gate();
  std::thread opener;
  {
    StreamCompletions done(0);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(done.Add(stream_, [&](const absl::Status&) { ran.fetch_add(1); }).ok());
    opener = std::thread([&] {
      std::this_thread::sleep_for(milliseconds(20));
      gate.set_value();
    });
  }  // ~StreamCompletions: every callback added has run
  EXPECT_EQ(ran.load(), 3);
  opener.join();
}

// CudaEvent (stream_events.h) between two streams: the second stream's work after StreamWait
// runs only once the first stream's work before Record ran; a later Record does not move the
// wait; an event never recorded orders nothing.
TEST_F(StreamCompletionsTest, AnEventOrdersAnotherStreamsLaterWorkAfterTheRecordedPoint) {
  cudaStream_t other = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  absl::StatusOr<std::unique_ptr<CudaEvent>> event = CudaEvent::Create();
  ASSERT_TRUE(event.ok()) << event.status();
  ASSERT_TRUE((*event)->StreamWait(other).ok());  // never recorded: no wait
  std::atomic<bool> unordered{false}, ordered{false};
  auto set = [](void* p) { static_cast<std::atomic<bool>*>(p)->store(true); };
  cudaLaunchHostFunc(other, set, &unordered);
  std::promise<void> gate = Gate();  // the "producer's kernel" on stream_
  ASSERT_TRUE((*event)->Record(stream_).ok());
  ASSERT_TRUE((*event)->StreamWait(other).ok());
  cudaLaunchHostFunc(other, set, &ordered);
  std::promise<void> later = Gate();
  ASSERT_TRUE((*event)->Record(stream_).ok());  // recorded again, after the wait was queued
  std::this_thread::sleep_for(milliseconds(30));
  EXPECT_TRUE(unordered.load()) << "a wait for an event never recorded held the stream";
  EXPECT_FALSE(ordered.load()) << "the other stream ran past its wait before the recorded point";
  EXPECT_FALSE((*event)->Query());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "Query left NotReady as the thread's last error";
  gate.set_value();
  for (int i = 0; i < 1000 && !ordered.load(); ++i) std::this_thread::sleep_for(milliseconds(1));
  EXPECT_TRUE(ordered.load()) << "the wait took the later record";
  later.set_value();
  EXPECT_TRUE((*event)->Synchronize().ok());
  EXPECT_TRUE((*event)->Query());
  cudaStreamDestroy(other);
}

}  // namespace
}  // namespace actor
}  // namespace oneflow_like
