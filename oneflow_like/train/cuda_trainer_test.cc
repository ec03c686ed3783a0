// `--device=cuda` training on a real GPU (actor/cuda/cuda_backend.h) against the CPU run of the
// same job: losses within a float32 tolerance (the CUDA kernels sum in other orders), with
// micro-batches (ACCUMULATE on the device), two compute streams (events between them), two
// ranks sharing the GPU (dp2 and pp2: transfers staged through the host, boxing on the GPU) and
// a checkpoint saved on the GPU and loaded on the CPU. Skips, naming CUDA's reason, where no GPU is visible (built manual, run by
// tools/gpu/run_checks.sh on a GPU machine).
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/actor/cuda/cuda_backend.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/train/checkpoint.h"
#include "oneflow_like/train/trainer.h"
#include "oneflow_like/train/trainer_test_util.h"

namespace oneflow_like {
namespace train {
namespace {

const models::GptConfig kSmall{.vocab = 128, .seq_len = 32, .n_layer = 2, .n_embd = 64, .n_head = 4, .batch = 4};

TrainerOptions SmallGpt(int micro_batches) { return testing::GptOptions(kSmall, micro_batches, 60000); }

using testing::RunSteps;

class CudaTrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<actor::CudaBackend>> cuda = actor::CudaBackend::Create();
    if (!cuda.ok()) GTEST_SKIP() << "no CUDA device: " << cuda.status().message();
    cuda_ = *std::move(cuda);
  }
  std::vector<double> Train(TrainerOptions o, bool on_cuda, int steps) {
    if (on_cuda) {
      o.layout.device = DeviceType::kCuda;
      o.device_backend = cuda_.get();
    }
    absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(o, registry_.get());
    EXPECT_TRUE(t.ok()) << t.status();
    if (!t.ok()) return {};
    std::vector<double> losses = RunSteps(t->get(), steps);
    EXPECT_TRUE((*t)->session()->Close().ok());
    return losses;
  }
  static void ExpectClose(const std::vector<double>& cuda, const std::vector<double>& cpu) {
    ASSERT_EQ(cuda.size(), cpu.size());
    for (size_t i = 0; i < cpu.size(); ++i) {
      EXPECT_NEAR(cuda[i], cpu[i], 1e-4 * std::max(1.0, std::abs(cpu[i]))) << "step " << i;
    }
  }
  std::unique_ptr<OpRegistry> registry_ = compiler::testing::BuiltinRegistry();
  std::unique_ptr<actor::CudaBackend> cuda_;
};

TEST_F(CudaTrainerTest, GptLossesMatchTheCpuRun) {
  const std::vector<double> cpu = Train(SmallGpt(1), false, 5);
  ASSERT_EQ(cpu.size(), 5u);
  ExpectClose(Train(SmallGpt(1), true, 5), cpu);
}

TEST_F(CudaTrainerTest, MicroBatchesMatchTheCpuRun) {
  const std::vector<double> cpu = Train(SmallGpt(2), false, 4);
  ASSERT_EQ(cpu.size(), 4u);
  ExpectClose(Train(SmallGpt(2), true, 4), cpu);
}

// Two compute streams (the weight gradients on the second): registers cross the streams at
// enqueue with CUDA events (cudaEventRecord / cudaStreamWaitEvent, actor/stream_ordered.h).
TEST_F(CudaTrainerTest, TwoComputeStreamsMatchTheCpuRun) {
  TrainerOptions o = SmallGpt(2);
  o.compute_streams = 2;
  const std::vector<double> cpu = Train(o, false, 4);
  ASSERT_EQ(cpu.size(), 4u);
  ExpectClose(Train(o, true, 4), cpu);
}

// Two ranks on the one GPU (in process), point-to-point boxing: gradients cross ranks as
// TRANSFERs staged through the host, the boxing's slices and sums run on the GPU; pipeline
// stages likewise. Against the CPU runs of the same layouts.
TEST_F(CudaTrainerTest, TwoRanksOnOneGpuMatchTheCpuRuns) {
  for (bool pipeline : {false, true}) {
    SCOPED_TRACE(pipeline ? "pp2" : "dp2");
    TrainerOptions o = SmallGpt(2);
    if (pipeline) {
      o.layout.pp = 2;
    } else {
      o.layout.dp = 2;
    }
    const std::vector<double> cpu = Train(o, false, 3);
    ASSERT_EQ(cpu.size(), 3u);
    ExpectClose(Train(o, true, 3), cpu);
  }
}

// With TF32 matmuls (about 1e-3 relative error per product) the losses stay near the CPU run's.
TEST_F(CudaTrainerTest, Tf32MatmulsStayNearTheCpuRun) {
  absl::StatusOr<std::unique_ptr<actor::CudaBackend>> tf32 = actor::CudaBackend::Create(0, /*allow_tf32=*/true);
  ASSERT_TRUE(tf32.ok()) << tf32.status();
  ASSERT_TRUE((*tf32)->allow_tf32());
  const std::vector<double> cpu = Train(SmallGpt(1), false, 3);
  TrainerOptions o = SmallGpt(1);
  o.layout.device = DeviceType::kCuda;
  o.device_backend = tf32->get();
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(o, registry_.get());
  ASSERT_TRUE(t.ok()) << t.status();
  const std::vector<double> got = RunSteps(t->get(), 3);
  ASSERT_TRUE((*t)->session()->Close().ok());
  ASSERT_EQ(got.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_NEAR(got[i], cpu[i], 1e-2 * std::abs(cpu[i])) << "step " << i;
}

TEST_F(CudaTrainerTest, ACheckpointSavedOnTheGpuResumesOnTheCpu) {
  const std::vector<double> straight = Train(SmallGpt(1), false, 4);
  const std::string dir = CheckpointDirName(::testing::TempDir() + "/cuda_trainer_ck", 1);
  std::filesystem::remove_all(::testing::TempDir() + "/cuda_trainer_ck");
  {
    TrainerOptions o = SmallGpt(1);
    o.layout.device = DeviceType::kCuda;
    o.device_backend = cuda_.get();
    absl::StatusOr<std::unique_ptr<Trainer>> gpu = Trainer::Create(o, registry_.get());
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    RunSteps(gpu->get(), 2);
    ASSERT_TRUE(SaveSession(*(*gpu)->session(), CheckpointMeta{.step = 1}, dir).ok());
    ASSERT_TRUE((*gpu)->session()->Close().ok());
  }
  absl::StatusOr<std::unique_ptr<Trainer>> cpu = Trainer::Create(SmallGpt(1), registry_.get());
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_TRUE(LoadSession((*cpu)->session(), dir).ok());
  (*cpu)->set_next_step(2);
  ExpectClose(RunSteps(cpu->get(), 2), std::vector<double>(straight.begin() + 2, straight.end()));
  ASSERT_TRUE((*cpu)->session()->Close().ok());
}

}  // namespace
}  // namespace train
}  // namespace oneflow_like
