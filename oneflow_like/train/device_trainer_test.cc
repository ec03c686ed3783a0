// `--device=cuda` jobs through the runtime's device paths (actor/device_backend.h) on the fake
// device (actor/fake_device_backend.h): memory the host cannot touch, stream threads, the CPU
// kernels. The same job's losses must equal the CPU run's bit for bit (the kernels are the
// same), with micro-batches (ACCUMULATE on the device) and data parallelism in one process;
// checkpoints move between cpu and cuda runs both ways. The real CUDA backend runs the same
// paths with CUDA kernels (actor/cuda, GPU machines only).
#include <chrono>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "oneflow_like/actor/fake_device_backend.h"
#include "oneflow_like/actor/fake_device_collectives.h"
#include "oneflow_like/comm/gloo_collective.h"
#include "oneflow_like/compiler/driver/compile.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/train/checkpoint.h"
#include "oneflow_like/train/run_training.h"
#include "oneflow_like/train/trainer.h"
#include "oneflow_like/train/trainer_test_util.h"

namespace oneflow_like {
namespace train {
namespace {

const models::GptConfig kTiny{.vocab = 64, .seq_len = 16, .n_layer = 1, .n_embd = 32, .n_head = 2, .batch = 2};

TrainerOptions TinyGpt(int micro_batches = 1) { return testing::GptOptions(kTiny, micro_batches, 20000); }

using testing::RunSteps;

std::vector<double> Train(const TrainerOptions& options, int steps, const OpRegistry* registry) {
  absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(options, registry);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return {};
  std::vector<double> losses = RunSteps(trainer->get(), steps);
  EXPECT_TRUE((*trainer)->session()->Close().ok());
  return losses;
}

class DeviceTrainerTest : public ::testing::Test {
 protected:
  TrainerOptions OnFakeCuda(TrainerOptions o) {
    o.layout.device = DeviceType::kCuda;
    o.device_backend = &device_;
    return o;
  }
  std::unique_ptr<OpRegistry> registry_ = compiler::testing::BuiltinRegistry();
  actor::FakeDeviceBackend device_;
};

TEST_F(DeviceTrainerTest, CudaPlacementsGiveTheCpuLossesBitForBit) {
  const std::vector<double> cpu = Train(TinyGpt(), 3, registry_.get());
  const std::vector<double> cuda = Train(OnFakeCuda(TinyGpt()), 3, registry_.get());
  ASSERT_EQ(cpu.size(), 3u);
  EXPECT_EQ(cuda, cpu);
  EXPECT_GT(device_.bodies_started(), 0);   // kernels ran as device bodies
  EXPECT_GT(device_.bytes_to_device(), 0);  // variables initialized and inputs fed through copies
  EXPECT_EQ(device_.live_allocations(), 0) << "the runtime frees its device blocks";
}

// A second compute stream on the device (its own backend stream), and recomputed activations.
TEST_F(DeviceTrainerTest, TwoComputeStreamsAndRecomputeOnTheDevice) {
  TrainerOptions o = TinyGpt(/*micro_batches=*/2);
  o.compute_streams = 2;
  o.recompute = true;
  const std::vector<double> cpu = Train(o, 3, registry_.get());
  ASSERT_EQ(cpu.size(), 3u);
  EXPECT_EQ(Train(OnFakeCuda(o), 3, registry_.get()), cpu);
}

TEST_F(DeviceTrainerTest, MicroBatchesAccumulateOnTheDevice) {
  const std::vector<double> cpu = Train(TinyGpt(/*micro_batches=*/2), 3, registry_.get());
  const std::vector<double> cuda = Train(OnFakeCuda(TinyGpt(/*micro_batches=*/2)), 3, registry_.get());
  ASSERT_EQ(cpu.size(), 3u);
  EXPECT_EQ(cuda, cpu);
}

TEST_F(DeviceTrainerTest, CheckpointsMoveBetweenCpuAndCuda) {
  const std::string root = ::testing::TempDir() + "/device_trainer_ck";
  std::filesystem::remove_all(root);
  const std::vector<double> straight = Train(TinyGpt(), 4, registry_.get());
  ASSERT_EQ(straight.size(), 4u);
  for (bool save_on_cuda : {true, false}) {
    SCOPED_TRACE(save_on_cuda ? "cuda -> cpu" : "cpu -> cuda");
    const std::string dir = CheckpointDirName(root + (save_on_cuda ? "/a" : "/b"), 2);
    {
      absl::StatusOr<std::unique_ptr<Trainer>> first =
          Trainer::Create(save_on_cuda ? OnFakeCuda(TinyGpt()) : TinyGpt(), registry_.get());
      ASSERT_TRUE(first.ok()) << first.status();
      EXPECT_EQ(RunSteps(first->get(), 2), std::vector<double>(straight.begin(), straight.begin() + 2));
      ASSERT_TRUE(SaveSession(*(*first)->session(), CheckpointMeta{.step = 1}, dir).ok());
      ASSERT_TRUE((*first)->session()->Close().ok());
    }
    absl::StatusOr<std::unique_ptr<Trainer>> second =
        Trainer::Create(save_on_cuda ? TinyGpt() : OnFakeCuda(TinyGpt()), registry_.get());
    ASSERT_TRUE(second.ok()) << second.status();
    absl::StatusOr<CheckpointMeta> meta = LoadSession((*second)->session(), dir);
    ASSERT_TRUE(meta.ok()) << meta.status();
    (*second)->set_next_step(meta->step + 1);
    EXPECT_EQ(RunSteps(second->get(), 2), std::vector<double>(straight.begin() + 2, straight.end()));
    ASSERT_TRUE((*second)->session()->Close().ok());
  }
  EXPECT_GT(device_.bytes_to_host(), 0);  // the cuda run's variables were read back for saving
}

// Host data feeding a cuda model: x and the labels reach the device through host -> device
// COPY tasks, the loss comes back through a device -> host COPY (compiler/driver's
// device_copy_compile_test checks the plan); the losses equal the all-cpu job's.
std::vector<float> HostDataLosses(const std::string& model_device, const OpRegistry& registry,
                                  actor::DeviceBackend* backend) {
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
  for (int step = 0; step < 3; ++step) {
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

// Resharding across devices and layouts: saved by a cuda dp2 run (point-to-point boxing), loaded
// by a cpu tp2 run and continued; the losses follow the uninterrupted cpu dp1 run (to the last
// bits, as the layouts sum in other orders).
TEST_F(DeviceTrainerTest, ACudaDataParallelCheckpointReshardsIntoACpuTensorParallelRun) {
  const std::string dir = CheckpointDirName(::testing::TempDir() + "/device_reshard_ck", 1);
  std::filesystem::remove_all(::testing::TempDir() + "/device_reshard_ck");
  const std::vector<double> straight = Train(TinyGpt(), 4, registry_.get());
  ASSERT_EQ(straight.size(), 4u);
  {
    TrainerOptions dp2 = OnFakeCuda(TinyGpt());
    dp2.layout.dp = 2;
    absl::StatusOr<std::unique_ptr<Trainer>> first = Trainer::Create(dp2, registry_.get());
    ASSERT_TRUE(first.ok()) << first.status();
    RunSteps(first->get(), 2);
    ASSERT_TRUE(SaveSession(*(*first)->session(), CheckpointMeta{.step = 1}, dir).ok());
    ASSERT_TRUE((*first)->session()->Close().ok());
  }
  TrainerOptions tp2 = TinyGpt();
  tp2.layout.tp = 2;
  absl::StatusOr<std::unique_ptr<Trainer>> second = Trainer::Create(tp2, registry_.get());
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(LoadSession((*second)->session(), dir).ok());
  (*second)->set_next_step(2);
  const std::vector<double> resumed = RunSteps(second->get(), 2);
  ASSERT_TRUE((*second)->session()->Close().ok());
  ASSERT_EQ(resumed.size(), 2u);
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(resumed[i], straight[2 + i], 1e-5 * std::abs(straight[2 + i])) << i;
}

TEST_F(DeviceTrainerTest, HostDataReachesACudaModelThroughCopyTasks) {
  const std::vector<float> cpu = HostDataLosses("cpu", *registry_, nullptr);
  const int64_t copies_before = device_.bodies_started();
  const std::vector<float> cuda = HostDataLosses("cuda", *registry_, &device_);
  ASSERT_EQ(cpu.size(), 3u);
  EXPECT_EQ(cuda, cpu);
  EXPECT_GT(device_.bodies_started(), copies_before);
}

// How many items the host queues on the compute stream (0) of the device while that stream is
// stopped, before it has to wait for one to finish: one training step is started, and the depth
// is read once the host stopped queuing (no new body for 300 ms); then the stream runs the step.
// (The copy streams run, so the step's inputs reach the device.)
int64_t QueuedOnAStoppedStream(TrainerOptions o, const OpRegistry* registry, actor::FakeDeviceBackend* device) {
  device->set_paused_stream(0);
  o.device_backend = device;
  std::vector<double> losses;
  std::thread run([&] { losses = Train(o, 1, registry); });
  for (int i = 0; i < 1000 && device->bodies_started() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  int64_t seen = -1;
  for (int quiet = 0, i = 0; quiet < 6 && i < 400; ++i) {
    const int64_t now = device->bodies_started();
    quiet = now == seen ? quiet + 1 : 0;
    seen = now;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const int64_t depth = device->max_stream_depth();
  device->set_paused_stream(actor::FakeDeviceBackend::kNoStream);
  run.join();
  EXPECT_EQ(losses.size(), 1u);
  return depth;
}

// RunTraining reports the device memory in use (the backend's free bytes before the blocks and
// now): at least the planned blocks (the fake device rounds each allocation up to pages), and
// no more than the blocks plus a page each and the accumulators' sums.
TEST_F(DeviceTrainerTest, RunTrainingReportsTheDeviceMemoryInUse) {
  RunOptions run;
  run.steps = 2;
  run.warmup_steps = 0;
  std::ostringstream out;
  ASSERT_TRUE(RunTraining(OnFakeCuda(TinyGpt()), run, registry_.get(), out).ok());
  const std::string text = out.str();
  const std::string key = "device memory in use at the end: ";
  const size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos) << text;
  double used = 0, planned = 0;
  ASSERT_EQ(sscanf(text.c_str() + at + key.size(), "%lf MiB (planned peak %lf MiB", &used, &planned), 2) << text;
  EXPECT_GT(planned, 0);
  EXPECT_GE(used, planned) << text;
  EXPECT_LT(used, planned + 4.0) << text;
  // CPU ranks have no such line.
  std::ostringstream cpu_out;
  ASSERT_TRUE(RunTraining(TinyGpt(), run, registry_.get(), cpu_out).ok());
  EXPECT_EQ(cpu_out.str().find(key), std::string::npos) << cpu_out.str();
}

// Stream-ordered hand-offs (actor/stream_ordered.h): on a stopped stream the host queues a whole
// chain of kernels with them, and only the few independent heads without them.
TEST_F(DeviceTrainerTest, StreamOrderedHandOffsQueueAChainAheadOfTheDevice) {
  actor::FakeDeviceBackend at_finish;
  TrainerOptions finish = TinyGpt();
  finish.layout.device = DeviceType::kCuda;
  finish.stream_ordered_handoffs = false;
  const int64_t without = QueuedOnAStoppedStream(finish, registry_.get(), &at_finish);
  const int64_t with = QueuedOnAStoppedStream(OnFakeCuda(TinyGpt()), registry_.get(), &device_);
  EXPECT_GE(with, 20) << "without: " << without;
  EXPECT_GT(with, 3 * without) << "the host queued chains of kernels ahead of the device";
}

// On a slow device (every stream item waits before it runs) the losses equal the cpu run's with
// the hand-offs at enqueue, with one compute stream and with two (whose edges across streams
// go at enqueue too, ordered by the fake's events) and micro-batches (accumulation and repeats
// keep the finish semantics). Equal losses at one delay do not prove the absence of a race, but
// an early hand-off to the host, or across streams without the events' waits, fails these
// (checked by making them so); device_stream_events_test checks the events with random delays.
TEST_F(DeviceTrainerTest, StreamOrderedHandOffsOnASlowDeviceGiveTheCpuLosses) {
  const std::vector<double> cpu = Train(TinyGpt(), 3, registry_.get());
  ASSERT_EQ(cpu.size(), 3u);
  device_.set_stream_delay_us(200);
  EXPECT_EQ(Train(OnFakeCuda(TinyGpt()), 3, registry_.get()), cpu);
  TrainerOptions streams = OnFakeCuda(TinyGpt(2));
  streams.compute_streams = 2;
  EXPECT_EQ(Train(streams, 3, registry_.get()), Train(TinyGpt(2), 3, registry_.get()));
}

TEST_F(DeviceTrainerTest, HostFedDataStaysIntactWhileTheDeviceLags) {
  const std::vector<float> cpu = HostDataLosses("cpu", *registry_, nullptr);
  device_.set_stream_delay_us(500);
  EXPECT_EQ(HostDataLosses("cuda", *registry_, &device_), cpu);
}

TEST_F(DeviceTrainerTest, ACpuTaskOnDeviceMemoryIsRefusedBeforeItRuns) {
  absl::StatusOr<TrainerJob> job = BuildTrainerJob(OnFakeCuda(TinyGpt()), *registry_);
  ASSERT_TRUE(job.ok()) << job.status();
  compiler::CompileOptions compile = CompileOptionsFor(OnFakeCuda(TinyGpt()));
  absl::StatusOr<PlanProto> plan = compiler::Compile(std::move(*job->graph), compile);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::string moved;
  for (TaskProto& task : *plan->mutable_rank_plans(0)->mutable_tasks()) {
    if (task.type() == TaskProto::COMPUTE && task.compute().op_type() == "matmul" && moved.empty()) {
      task.mutable_device()->set_type("cpu");  // the host would read device memory
      moved = task.name();
    }
  }
  ASSERT_FALSE(moved.empty());
  actor::SessionOptions options;
  options.device_backend = &device_;
  absl::StatusOr<std::unique_ptr<actor::Session>> session =
      actor::Session::Create(*plan, registry_.get(), std::move(options));
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find(moved), std::string::npos) << session.status();
  EXPECT_NE(session.status().message().find("is in device 0 memory, but the task reads host memory"),
            std::string::npos)
      << session.status();
}

// Point-to-point boxing between "GPUs" (dp2, the CPU default): transfers staged through the host,
// slices, concats and sums of the boxing on the device; losses as on the CPU.
TEST_F(DeviceTrainerTest, DataParallelPointToPointBoxingOnDevices) {
  TrainerOptions cpu = TinyGpt();
  cpu.layout.dp = 2;
  const std::vector<double> want = Train(cpu, 3, registry_.get());
  ASSERT_EQ(want.size(), 3u);
  EXPECT_EQ(Train(OnFakeCuda(cpu), 3, registry_.get()), want);
}

// Data parallelism across "GPUs" with collective boxing: gradients all-reduced on device memory
// (per tensor, and in buckets packed by the device) through a collective backend of device
// memory (the fake's gloo-on-shadow-bytes standing in for NCCL); the losses equal the CPU run's
// with the same boxing (gloo on host memory) bit for bit.
TEST_F(DeviceTrainerTest, DataParallelOnDeviceMemoryThroughDeviceCollectives) {
  std::vector<actor::FakeDeviceCollectives*> made;
  for (double bucket_mb : {0.0, 4.0}) {
    SCOPED_TRACE(bucket_mb);
    TrainerOptions cpu = TinyGpt();
    cpu.layout.dp = 2;
    cpu.boxing = compiler::BoxingStyle::kCollective;
    cpu.bucket_mb = bucket_mb;
    const std::vector<double> want = Train(cpu, 3, registry_.get());
    ASSERT_EQ(want.size(), 3u);
    TrainerOptions cuda = OnFakeCuda(cpu);
    cuda.collective_factory = [this, &made](comm::RendezvousStore* store, int32_t rank, int32_t world)
        -> absl::StatusOr<std::unique_ptr<comm::CollectiveBackend>> {
      ASSIGN_OR_RETURN(std::unique_ptr<comm::CollectiveBackend> gloo, comm::CreateGlooBackend(store, rank, world));
      auto fake = std::make_unique<actor::FakeDeviceCollectives>(std::move(gloo), &device_);
      made.push_back(fake.get());
      return std::unique_ptr<comm::CollectiveBackend>(std::move(fake));
    };
    made.clear();
    absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(cuda, registry_.get());
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(RunSteps(t->get(), 3), want);
    ASSERT_EQ(made.size(), 2u);
    EXPECT_GT(made[0]->calls(), 0);  // the gradients went through the device collectives
    ASSERT_TRUE((*t)->session()->Close().ok());
  }
}

// Tensor parallelism and ZeRO on device memory with collective boxing (tp2, dp2 x tp2, dp2 with
// ZeRO-1 and ZeRO-2): all-gathers and reduce-scatters of column blocks and reduce-scatter buckets
// (boxes cut and pasted by the device), local slices and concats on the device, parameters stored
// as device shards (ZeRO-2); the losses equal the CPU run's bit for bit.
TEST_F(DeviceTrainerTest, TensorParallelOnDeviceMemory) {
  struct Layout {
    int dp, tp, zero;
  };
  for (Layout l : {Layout{1, 2, 0}, Layout{2, 2, 0}, Layout{2, 1, 1}, Layout{2, 1, 2}}) {
    SCOPED_TRACE(absl::StrCat("dp", l.dp, " tp", l.tp, " zero", l.zero));
    TrainerOptions cpu = TinyGpt();
    cpu.layout.dp = l.dp;
    cpu.layout.tp = l.tp;
    cpu.zero_stage = l.zero;  // reduce-scatter buckets; all-gathered updates (1) or parameters (2)
    cpu.boxing = compiler::BoxingStyle::kCollective;
    const std::vector<double> want = Train(cpu, 3, registry_.get());
    ASSERT_EQ(want.size(), 3u);
    TrainerOptions cuda = OnFakeCuda(cpu);
    cuda.collective_factory = [this](comm::RendezvousStore* store, int32_t rank, int32_t world)
        -> absl::StatusOr<std::unique_ptr<comm::CollectiveBackend>> {
      ASSIGN_OR_RETURN(std::unique_ptr<comm::CollectiveBackend> gloo, comm::CreateGlooBackend(store, rank, world));
      return std::unique_ptr<comm::CollectiveBackend>(
          std::make_unique<actor::FakeDeviceCollectives>(std::move(gloo), &device_));
    };
    EXPECT_EQ(Train(cuda, 3, registry_.get()), want);
  }
}

// Pipeline stages on devices (pp2, and pp2 x dp2 with collectives): activations and gradients
// cross ranks as TRANSFERs: the producer's device register comes to the host before it is sent,
// the consumer's TRANSFER copies the received bytes to its device. Losses as on the CPU.
TEST_F(DeviceTrainerTest, PipelineStagesOnDevices) {
  for (int dp : {1, 2}) {
    SCOPED_TRACE(absl::StrCat("pp2 dp", dp));
    TrainerOptions cpu = TinyGpt(/*micro_batches=*/2);
    cpu.batch = 2 * dp;  // a piece of one row per data-parallel rank
    cpu.gpt.n_layer = 2;
    cpu.layout.pp = 2;
    cpu.layout.dp = dp;
    if (dp > 1) cpu.boxing = compiler::BoxingStyle::kCollective;
    const std::vector<double> want = Train(cpu, 3, registry_.get());
    ASSERT_EQ(want.size(), 3u);
    TrainerOptions cuda = OnFakeCuda(cpu);
    cuda.collective_factory = [this](comm::RendezvousStore* store, int32_t rank, int32_t world)
        -> absl::StatusOr<std::unique_ptr<comm::CollectiveBackend>> {
      ASSIGN_OR_RETURN(std::unique_ptr<comm::CollectiveBackend> gloo, comm::CreateGlooBackend(store, rank, world));
      return std::unique_ptr<comm::CollectiveBackend>(
          std::make_unique<actor::FakeDeviceCollectives>(std::move(gloo), &device_));
    };
    const int64_t to_host = device_.bytes_to_host();
    EXPECT_EQ(Train(cuda, 3, registry_.get()), want);
    EXPECT_GT(device_.bytes_to_host(), to_host);  // device registers staged for sending
  }
}

TEST_F(DeviceTrainerTest, ACudaCollectiveWithAHostBackendIsRefused) {
  TrainerOptions o = OnFakeCuda(TinyGpt());
  o.layout.dp = 2;
  o.boxing = compiler::BoxingStyle::kCollective;  // gloo (host memory) by default
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(o, registry_.get());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("collective backend 'gloo' works on cpu memory"), std::string::npos)
      << t.status();
}

TEST_F(DeviceTrainerTest, APlanLargerThanTheDeviceFailsBeforeAllocatingNamingBoth) {
  device_.set_memory_bytes(4096);  // far below the tiny GPT's planned blocks
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(OnFakeCuda(TinyGpt()), registry_.get());
  ASSERT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted) << t.status();
  EXPECT_NE(t.status().message().find("on cuda:0, which has 4096 bytes"), std::string::npos) << t.status();
  EXPECT_NE(t.status().message().find("olplan memory --device-memory"), std::string::npos) << t.status();
  EXPECT_EQ(device_.live_allocations(), 0);
}

TEST(FakeDeviceBackendTest, TheHostCannotTouchDeviceMemory) {
  actor::FakeDeviceBackend device;
  absl::StatusOr<char*> p = device.Allocate(0, 64);
  ASSERT_TRUE(p.ok()) << p.status();
  const float host[2] = {1.5f, -2.0f};
  ASSERT_TRUE(device.CopyToDevice(0, host, *p + 8, sizeof(host)).ok());
  float back[2] = {0, 0};
  ASSERT_TRUE(device.CopyToHost(0, *p + 8, back, sizeof(back)).ok());
  EXPECT_EQ(back[1], -2.0f);
  EXPECT_FALSE(device.CopyToHost(0, *p + 60, back, sizeof(back) * 4096).ok());  // past the allocation
  EXPECT_DEATH({ volatile char c = **p; (void)c; }, "");                      // a host read faults
  device.Free(0, *p);
  EXPECT_EQ(device.live_allocations(), 0);
}

TEST_F(DeviceTrainerTest, WithoutABackendCudaIsRefusedNamingTheDevice) {
  TrainerOptions o = TinyGpt();
  o.layout.device = DeviceType::kCuda;
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(o, registry_.get());
  ASSERT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(t.status().message().find("--device=cuda"), std::string::npos) << t.status();
}

}  // namespace
}  // namespace train
}  // namespace oneflow_like
