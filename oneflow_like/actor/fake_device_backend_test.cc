// FakeDeviceBackend's streams and events (fake_device_backend.h): work after WaitEvent on one
// stream does not run before the recorded point of another stream completed, and the wait is
// for the record as of the WaitEvent call (cudaStreamWaitEvent's semantics).
#include "oneflow_like/actor/fake_device_backend.h"

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "gtest/gtest.h"

namespace oneflow_like {
namespace actor {
namespace {

using std::chrono::milliseconds;

// Queues an item on (0, stream) that blocks until the returned promise is set (a long kernel).
std::promise<void> Gate(FakeDeviceBackend* device, int32_t stream) {
  std::promise<void> open;
  device->Enqueue(0, stream, [f = open.get_future().share()] { f.wait(); });
  return open;
}

TEST(FakeDeviceEventsTest, WorkAfterAWaitRunsOnlyOnceTheRecordedPointCompleted) {
  FakeDeviceBackend device;
  std::promise<void> gate = Gate(&device, 0);
  std::atomic<int> written{0}, read{-1};
  device.Enqueue(0, 0, [&] { written.store(7); });
  absl::StatusOr<std::unique_ptr<Event>> event = device.CreateEvent(0);
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_TRUE((*event)->Query()) << "never recorded: nothing to wait for";
  ASSERT_TRUE(device.RecordEvent(0, 0, event->get()).ok());
  ASSERT_TRUE(device.WaitEvent(0, 4, **event).ok());
  device.Enqueue(0, 4, [&] { read.store(written.load()); });
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_FALSE((*event)->Query());
  EXPECT_EQ(read.load(), -1) << "stream 4 ran past its wait before stream 0 reached the event";
  EXPECT_EQ(device.completed_items(0, 4), 0);
  gate.set_value();
  ASSERT_TRUE(device.Drain().ok());
  EXPECT_EQ(read.load(), 7);
  EXPECT_TRUE((*event)->Query());
  EXPECT_TRUE((*event)->Synchronize().ok());
  EXPECT_EQ(device.event_waits(), 1);
}

// Recorded again after the wait was queued: the wait is for the earlier record only.
TEST(FakeDeviceEventsTest, AWaitIsForTheRecordAsOfTheCall) {
  FakeDeviceBackend device;
  std::promise<void> first = Gate(&device, 0);
  absl::StatusOr<std::unique_ptr<Event>> event = device.CreateEvent(0);
  ASSERT_TRUE(event.ok());
  ASSERT_TRUE(device.RecordEvent(0, 0, event->get()).ok());
  ASSERT_TRUE(device.WaitEvent(0, 4, **event).ok());
  std::atomic<bool> ran{false};
  device.Enqueue(0, 4, [&] { ran.store(true); });
  std::promise<void> second = Gate(&device, 0);
  ASSERT_TRUE(device.RecordEvent(0, 0, event->get()).ok());
  first.set_value();
  for (int i = 0; i < 2000 && !ran.load(); ++i) std::this_thread::sleep_for(milliseconds(1));
  EXPECT_TRUE(ran.load()) << "the wait took the later record";
  EXPECT_FALSE((*event)->Query());
  second.set_value();
  ASSERT_TRUE(device.Drain().ok());
}

TEST(FakeDeviceEventsTest, ABackendWithoutEventsSaysSo) {
  FakeDeviceBackend device;
  EXPECT_TRUE(device.HasStreamEvents());
  device.set_stream_events(false);
  EXPECT_FALSE(device.HasStreamEvents());
  EXPECT_EQ(device.CreateEvent(0).status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace actor
}  // namespace oneflow_like
