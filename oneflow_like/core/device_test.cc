#include "oneflow_like/core/device.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/core/tensor.h"

namespace oneflow_like {
namespace {

TEST(DeviceTest, NameTypeAndIndex) {
  CpuDevice device(DeviceId(3));
  EXPECT_EQ(device.type(), DeviceType::kCpu);
  EXPECT_EQ(device.index(), DeviceId(3));
  EXPECT_EQ(device.name(), "cpu:3");
  EXPECT_EQ(device.allocator()->name(), "cpu");
}

TEST(StreamTest, WorkRunsInEnqueueOrder) {
  CpuDevice device(DeviceId(0));
  std::unique_ptr<Stream> stream = device.CreateStream(StreamKind::kCompute);
  std::vector<int> order;
  for (int i = 0; i < 5; ++i) {
    stream->Enqueue([&order, i] { order.push_back(i); });
    // The CPU stream runs work inline: item i is done when Enqueue returns.
    EXPECT_EQ(order.size(), static_cast<size_t>(i + 1));
  }
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(stream->Synchronize().ok());
}

TEST(StreamTest, AcceptsStdFunctionsOfBothKinds) {
  CpuDevice device(DeviceId(0));
  auto stream = device.CreateStream(StreamKind::kCompute);
  int runs = 0;
  std::function<void()> plain = [&runs] { ++runs; };
  std::function<absl::Status()> fallible = [&runs] {
    ++runs;
    return absl::OkStatus();
  };
  stream->Enqueue(plain);
  stream->Enqueue(fallible);
  stream->EnqueueFallible(fallible);
  EXPECT_EQ(runs, 3);
  EXPECT_TRUE(stream->Synchronize().ok());
}

TEST(StreamTest, FirstErrorIsStickyAndSkipsLaterWork) {
  CpuDevice device(DeviceId(0));
  auto stream = device.CreateStream(StreamKind::kCompute);
  std::vector<std::string> ran;
  stream->Enqueue([&ran] { ran.push_back("a"); });
  stream->Enqueue([&ran] {
    ran.push_back("b");
    return absl::InvalidArgumentError("kernel matmul_0 failed: shape [2,3] x [4,5]");
  });
  stream->Enqueue([&ran] { ran.push_back("c"); });
  stream->Enqueue([&ran] {
    ran.push_back("d");
    return absl::InternalError("second error must not replace the first");
  });
  EXPECT_EQ(ran, (std::vector<std::string>{"a", "b"}));

  absl::Status status = stream->Synchronize();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("matmul_0"), absl::string_view::npos) << status;
  EXPECT_NE(status.message().find("cpu:0/compute#0"), absl::string_view::npos) << status;

  absl::Status seen = absl::OkStatus();
  stream->AddCallback([&seen](absl::Status s) { seen = s; });
  EXPECT_EQ(seen, status);
}

TEST(StreamTest, CallbackSeesAllEarlierWorkAndOkStatus) {
  CpuDevice device(DeviceId(0));
  auto stream = device.CreateStream(StreamKind::kCopy);
  std::vector<int> values;
  stream->Enqueue([&values] { values.push_back(1); });
  stream->Enqueue([&values] { values.push_back(2); });
  int calls = 0;
  size_t seen_size = 0;
  absl::Status seen = absl::UnknownError("not called");
  stream->AddCallback([&](absl::Status s) {
    ++calls;
    seen_size = values.size();
    seen = s;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen_size, 2u);
  EXPECT_TRUE(seen.ok()) << seen;
}

TEST(EventTest, UnrecordedEventIsCompleteAndOk) {
  CpuDevice device(DeviceId(0));
  auto event = device.CreateEvent();
  EXPECT_TRUE(event->Query());
  EXPECT_TRUE(event->Synchronize().ok());
  EXPECT_EQ(static_cast<CpuEvent*>(event.get())->record_count(), 0);
}

TEST(EventTest, RecordCapturesStreamStatusAtThatPoint) {
  CpuDevice device(DeviceId(0));
  auto stream = device.CreateStream(StreamKind::kCompute);
  auto before = device.CreateEvent();
  auto after = device.CreateEvent();
  int result = 0;
  stream->Enqueue([&result] { result = 42; });
  ASSERT_TRUE(stream->RecordEvent(before.get()).ok());
  EXPECT_TRUE(before->Query());
  EXPECT_EQ(result, 42);  // the work before the record is complete when the event is

  stream->Enqueue([] { return absl::ResourceExhaustedError("out of memory"); });
  ASSERT_TRUE(stream->RecordEvent(after.get()).ok());
  EXPECT_TRUE(before->Synchronize().ok());
  EXPECT_EQ(after->Synchronize().code(), absl::StatusCode::kResourceExhausted);

  // Re-recording replaces the earlier record.
  ASSERT_TRUE(stream->RecordEvent(before.get()).ok());
  EXPECT_EQ(before->Synchronize().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(static_cast<CpuEvent*>(before.get())->record_count(), 2);
}

TEST(EventTest, WaitOrdersAcrossStreamsAndPropagatesErrors) {
  CpuDevice device(DeviceId(0));
  auto producer = device.CreateStream(StreamKind::kCompute);
  auto consumer = device.CreateStream(StreamKind::kComm);
  auto ok_event = device.CreateEvent();
  auto bad_event = device.CreateEvent();

  std::vector<float> buffer;
  producer->Enqueue([&buffer] { buffer = {1.f, 2.f, 3.f}; });
  ASSERT_TRUE(producer->RecordEvent(ok_event.get()).ok());
  ASSERT_TRUE(consumer->WaitEvent(*ok_event).ok());
  float sum = 0;
  consumer->Enqueue([&] {
    for (float v : buffer) sum += v;
  });
  EXPECT_EQ(sum, 6.f);
  EXPECT_TRUE(consumer->Synchronize().ok());

  producer->Enqueue([] { return absl::DataLossError("corrupt shard"); });
  ASSERT_TRUE(producer->RecordEvent(bad_event.get()).ok());
  ASSERT_TRUE(consumer->WaitEvent(*bad_event).ok());
  bool consumer_ran = false;
  consumer->Enqueue([&consumer_ran] { consumer_ran = true; });
  EXPECT_FALSE(consumer_ran);
  EXPECT_EQ(consumer->Synchronize().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(consumer->Synchronize().message().find("corrupt shard"), absl::string_view::npos);
}

// An event from some other (fake) device type.
class ForeignEvent final : public Event {
 public:
  bool Query() const override { return true; }
  absl::Status Synchronize() override { return absl::OkStatus(); }
};

TEST(EventTest, RejectsEventsOfAnotherDeviceType) {
  CpuDevice device(DeviceId(0));
  auto stream = device.CreateStream(StreamKind::kCompute);
  ForeignEvent foreign;
  EXPECT_EQ(stream->RecordEvent(&foreign).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(stream->WaitEvent(foreign).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(stream->Synchronize().ok());  // a rejected call does not poison the stream
}

TEST(StreamTest, MultipleStreamsOnOneDevice) {
  CpuDevice device(DeviceId(1));
  auto compute = device.CreateStream(StreamKind::kCompute);
  auto copy = device.CreateStream(StreamKind::kCopy);
  auto comm = device.CreateStream(StreamKind::kComm);
  EXPECT_EQ(compute->id(), StreamId(0));
  EXPECT_EQ(copy->id(), StreamId(1));
  EXPECT_EQ(comm->id(), StreamId(2));
  EXPECT_EQ(compute->kind(), StreamKind::kCompute);
  EXPECT_EQ(copy->kind(), StreamKind::kCopy);
  EXPECT_EQ(comm->kind(), StreamKind::kComm);
  EXPECT_EQ(compute->device(), &device);
  EXPECT_EQ(comm->device(), &device);
  EXPECT_EQ(copy->name(), "cpu:1/copy#1");
  EXPECT_EQ(comm->name(), "cpu:1/comm#2");

  // An error on one stream does not affect the others unless they wait on it.
  compute->Enqueue([] { return absl::InternalError("boom"); });
  int copies = 0;
  copy->Enqueue([&copies] { ++copies; });
  EXPECT_EQ(copies, 1);
  EXPECT_FALSE(compute->Synchronize().ok());
  EXPECT_TRUE(copy->Synchronize().ok());
  EXPECT_TRUE(comm->Synchronize().ok());
}

TEST(DeviceAllocatorTest, TracksCurrentAndPeakPerDevice) {
  CpuDevice device0(DeviceId(0));
  CpuDevice device1(DeviceId(1));
  Allocator* alloc = device0.allocator();
  EXPECT_EQ(alloc, device0.allocator());  // stable
  EXPECT_EQ(alloc->current_bytes(), 0);
  {
    Tensor a(DataType::kFloat32, Shape{4, 8}, alloc);   // 128 bytes
    Tensor b(DataType::kFloat64, Shape{10}, alloc);     // 80 bytes
    EXPECT_EQ(alloc->current_bytes(), 128 + 80);
    {
      Tensor c(DataType::kInt32, Shape{25}, alloc);     // 100 bytes
      EXPECT_EQ(alloc->current_bytes(), 308);
    }
    EXPECT_EQ(alloc->current_bytes(), 208);
    EXPECT_EQ(alloc->peak_bytes(), 308);
    EXPECT_EQ(device1.allocator()->current_bytes(), 0);  // devices do not share accounting
    EXPECT_EQ(device1.allocator()->peak_bytes(), 0);
  }
  EXPECT_EQ(alloc->current_bytes(), 0);
  EXPECT_EQ(alloc->peak_bytes(), 308);
  alloc->ResetPeak();
  EXPECT_EQ(alloc->peak_bytes(), 0);
}

TEST(DeviceAllocatorTest, StreamsShareTheirDevicesAllocator) {
  CpuDevice device(DeviceId(0));
  auto s0 = device.CreateStream(StreamKind::kCompute);
  auto s1 = device.CreateStream(StreamKind::kCopy);
  Tensor t0, t1;
  s0->Enqueue([&] { t0 = Tensor(DataType::kFloat32, Shape{16}, s0->device()->allocator()); });
  s1->Enqueue([&] { t1 = Tensor(DataType::kFloat32, Shape{8}, s1->device()->allocator()); });
  EXPECT_EQ(device.allocator()->current_bytes(), 64 + 32);
  t0 = Tensor();
  EXPECT_EQ(device.allocator()->current_bytes(), 32);
  EXPECT_EQ(device.allocator()->peak_bytes(), 96);
}

}  // namespace
}  // namespace oneflow_like
