// Stream-ordered hand-offs across the streams of one device (actor/stream_ordered.h): on the
// fake device (actor/fake_device_backend.h), a consumer on another stream of the device gets a
// register when its producer is enqueued, with an event its stream waits for, instead of when
// the producer finished. With a stream stopped, the host queues the work behind the event waits
// of the other streams; on a device whose streams lag at random, the losses equal the CPU run's
// (one compute stream, two compute streams with micro-batches, host-fed data through copy
// streams). The fake without events (set_stream_events(false)) is the finish semantics.
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/actor/fake_device_backend.h"
#include "oneflow_like/compiler/driver/compile.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/train/trainer.h"
#include "oneflow_like/train/trainer_test_util.h"

namespace oneflow_like {
namespace train {
namespace {

using actor::FakeDeviceBackend;

constexpr int32_t kComputeStream = 0, kHostToDeviceStream = 2, kSideComputeStream = 4;  // compiler/lower/registers.h

const models::GptConfig kTiny{.vocab = 64, .seq_len = 16, .n_layer = 1, .n_embd = 32, .n_head = 2, .batch = 2};

TrainerOptions TinyGpt(int micro_batches = 1) { return testing::GptOptions(kTiny, micro_batches, 20000); }

std::vector<double> Train(TrainerOptions options, int steps, const OpRegistry* registry,
                          FakeDeviceBackend* device = nullptr) {
  if (device != nullptr) {
    options.layout.device = DeviceType::kCuda;
    options.device_backend = device;
  }
  absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(options, registry);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return {};
  std::vector<double> losses = testing::RunSteps(trainer->get(), steps);
  EXPECT_TRUE((*trainer)->session()->Close().ok());
  return losses;
}

// x and the labels fed on the host reach a model on `model_device` through host -> device COPY
// tasks (stream 2), the loss comes back through a device -> host COPY (stream 3).
std::vector<float> HostDataLosses(const std::string& model_device, const OpRegistry& registry,
                                  actor::DeviceBackend* backend, int steps = 3) {
  const std::string text =
      "config(name=\"host_data\", seed=5)\n"
      "x = input(shape=[8,16]) placement=cpu:[0]\n"
      "label = input(shape=[8], dtype=int64) placement=cpu:[0]\n"
      "w1 = variable(shape=[16,32], init=normal(0.02)) placement=" + model_device + ":[0]\n"
      "w2 = variable(shape=[32,10], init=normal(0.02)) placement=" + model_device + ":[0]\n"
      "h = matmul(x, w1) placement=" + model_device + ":[0]\n"
      "a = relu(h)\n"
      "logits = matmul(a, w2)\n"
      "loss = sparse_softmax_cross_entropy(logits, label)\n"
      "output(loss)\n"
      "train(loss, optimizer=adamw(lr=0.01, weight_decay=0.01))\n";
  absl::StatusOr<PlanProto> plan = compiler::Compile(compiler::testing::ParseOrDie(text, registry));
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return {};
  actor::SessionOptions options;
  options.device_backend = backend;
  absl::StatusOr<std::unique_ptr<actor::Session>> session = actor::Session::Create(*plan, &registry, options);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return {};
  std::vector<float> losses;
  for (int step = 0; step < steps; ++step) {
    std::vector<float> x(8 * 16);
    std::vector<int64_t> label(8);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7 + step * 3) % 11) / 5.0f - 1.0f;
    for (size_t i = 0; i < label.size(); ++i) label[i] = static_cast<int64_t>((i * 3 + step) % 10);
    EXPECT_TRUE((*session)->Feed("x", Tensor::FromVector(Shape{8, 16}, x)).ok());
    EXPECT_TRUE((*session)->Feed("label", Tensor::FromVector(Shape{8}, label)).ok());
    absl::Status ran = (*session)->RunStep();
    EXPECT_TRUE(ran.ok()) << ran;
    if (!ran.ok()) break;
    absl::StatusOr<Tensor> loss = (*session)->Fetch("loss");
    EXPECT_TRUE(loss.ok()) << loss.status();
    if (loss.ok()) losses.push_back(loss->ToVector<float>().at(0));
  }
  EXPECT_TRUE((*session)->Close().ok());
  return losses;
}

// What the host queued while stream `paused` was stopped: `job` runs in a thread, and once the
// host stopped starting bodies and stream `measured` stopped running items (300 ms without a
// change) its queue is read; then the stopped stream runs and the job ends.
struct Queued {
  int64_t now = 0;     // items (kernels and event waits) on `measured` when the host stopped
  int64_t depth = 0;   // the most it ever had
  int64_t bodies = 0;  // bodies started by the host
};
Queued WhileStopped(FakeDeviceBackend* device, int32_t paused, int32_t measured, const std::function<void()>& job) {
  device->set_paused_stream(paused);
  std::thread run(job);
  for (int i = 0; i < 1000 && device->bodies_started() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::pair<int64_t, int64_t> seen{-1, -1};  // bodies started, items on `measured`
  for (int quiet = 0, i = 0; quiet < 6 && i < 400; ++i) {
    const std::pair<int64_t, int64_t> now{device->bodies_started(), device->queued_items(0, measured)};
    quiet = now == seen ? quiet + 1 : 0;
    seen = now;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  Queued q{device->queued_items(0, measured), device->max_stream_depth(measured), device->bodies_started()};
  device->set_paused_stream(FakeDeviceBackend::kNoStream);
  run.join();
  return q;
}

class DeviceStreamEventsTest : public ::testing::Test {
 protected:
  std::unique_ptr<OpRegistry> registry_ = compiler::testing::BuiltinRegistry();
};

// Two compute streams: the weight gradients (stream 4) read what backward computes on stream 0,
// the optimizers (stream 0) read the gradients. With stream 4 stopped, stream 0 runs what does
// not depend on it; with events the host has also queued the optimizers' kernels there, behind
// waits for stream 4's events (without, it waits for stream 4's acts to finish first).
TEST_F(DeviceStreamEventsTest, AStoppedComputeStreamDoesNotStopTheHostQueuingTheOther) {
  TrainerOptions o = TinyGpt();
  o.compute_streams = 2;
  FakeDeviceBackend at_finish, with_events;
  at_finish.set_stream_events(false);
  const Queued without =
      WhileStopped(&at_finish, kSideComputeStream, kComputeStream, [&] { Train(o, 1, registry_.get(), &at_finish); });
  const Queued with = WhileStopped(&with_events, kSideComputeStream, kComputeStream,
                                   [&] { Train(o, 1, registry_.get(), &with_events); });
  // (The most it ever had, and the bodies started, are not compared: with events stream 0
  // stops at its first wait, so it runs less of what it got before; without, it runs all of it.)
  EXPECT_EQ(without.now, 0) << "stream 0 ran all it had";
  EXPECT_GE(with.now, 4) << "without events: " << without.now;
  EXPECT_GT(with_events.event_waits(), 0);
  EXPECT_EQ(at_finish.event_waits(), 0);
}

// Host-fed data: the host -> device copies (stream 2) stopped, the host still queues the model's
// kernels on the compute stream behind waits for the copies' events.
TEST_F(DeviceStreamEventsTest, AStoppedCopyStreamDoesNotStopTheHostQueuingTheModel) {
  FakeDeviceBackend at_finish, with_events;
  at_finish.set_stream_events(false);
  const Queued without = WhileStopped(&at_finish, kHostToDeviceStream, kComputeStream,
                                      [&] { HostDataLosses("cuda", *registry_, &at_finish, 1); });
  const Queued with = WhileStopped(&with_events, kHostToDeviceStream, kComputeStream,
                                   [&] { HostDataLosses("cuda", *registry_, &with_events, 1); });
  EXPECT_EQ(without.now, 0);
  EXPECT_GE(with.now, 4) << "without events: " << without.now;
  EXPECT_GT(with.depth, without.depth);
  EXPECT_GT(with.bodies, without.bodies);
  EXPECT_GT(with_events.event_waits(), 0);
}

// Streams that lag at random (each item waits 0..2x the delay, differently per stream): the host
// hands registers across streams long before the producers ran; the losses equal the CPU run's.
TEST_F(DeviceStreamEventsTest, OnADeviceWhoseStreamsLagAtRandomTheLossesAreTheCpuLosses) {
  const std::vector<double> cpu = Train(TinyGpt(), 3, registry_.get());
  ASSERT_EQ(cpu.size(), 3u);
  FakeDeviceBackend device;
  device.set_stream_delay_us(200, /*random=*/true);
  EXPECT_EQ(Train(TinyGpt(), 3, registry_.get(), &device), cpu);

  TrainerOptions streams = TinyGpt(/*micro_batches=*/2);
  streams.compute_streams = 2;
  const std::vector<double> cpu_streams = Train(streams, 3, registry_.get());
  ASSERT_EQ(cpu_streams.size(), 3u);
  const int64_t waits = device.event_waits();
  EXPECT_EQ(Train(streams, 3, registry_.get(), &device), cpu_streams);
  EXPECT_GT(device.event_waits(), waits) << "no register crossed the streams with an event";

  const std::vector<float> host_cpu = HostDataLosses("cpu", *registry_, nullptr);
  ASSERT_EQ(host_cpu.size(), 3u);
  device.set_stream_delay_us(500, /*random=*/true);
  const int64_t host_waits = device.event_waits();
  EXPECT_EQ(HostDataLosses("cuda", *registry_, &device), host_cpu);
  EXPECT_GT(device.event_waits(), host_waits) << "no copy handed over with an event";
}

}  // namespace
}  // namespace train
}  // namespace oneflow_like
