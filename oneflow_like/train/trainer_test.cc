// The trainer end to end (compile -> Session) on a tiny GPT against the graph evaluator
// (models/reference_eval.h) and against torch's numbers, one layout check (dp=2 = dp=1), the
// MLP workload against a hand-derived property, and the flag parser's errors.
#include "oneflow_like/train/trainer.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/autograd/training_test_util.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/models/reference_eval.h"
#include "oneflow_like/train/trainer_flags.h"

namespace oneflow_like {
namespace train {
namespace {

// torch_gpt.py at this config, portable init, AdamW (models/gpt_reference_test.cc has the
// command): the first three float32 losses.
const models::GptConfig kTiny{.vocab = 64, .seq_len = 16, .n_layer = 1, .n_embd = 32, .n_head = 2, .batch = 2};
const std::vector<double> kTorchLosses = {4.181033134460449, 4.166847229003906, 4.1452789306640625};

TrainerOptions TinyGpt() {
  TrainerOptions o;
  o.model = Workload::kGpt;
  o.gpt = kTiny;
  o.batch = kTiny.batch;
  o.watchdog_ms = 20000;
  return o;
}

std::vector<double> Train(const TrainerOptions& options, int steps, const OpRegistry* registry) {
  absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(options, registry);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return {};
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) {
    absl::StatusOr<StepResult> r = (*trainer)->RunStep();
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return losses;
    EXPECT_EQ(r->step, step);
    EXPECT_GT(r->seconds, 0);
    losses.push_back(r->loss);
  }
  EXPECT_TRUE((*trainer)->session()->Close().ok());
  return losses;
}

class TrainerTest : public ::testing::Test {
 protected:
  std::unique_ptr<OpRegistry> registry_ = compiler::testing::BuiltinRegistry();
};

TEST_F(TrainerTest, OneRankGptLossesEqualTheGraphEvaluatorAndTorch) {
  absl::StatusOr<compiler::Graph> g = models::BuildGptJob(*registry_, kTiny, models::ParallelLayout{});
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(compiler::testing::RunTrainingPasses(&*g, /*with_optimizer=*/true).ok());
  absl::StatusOr<std::vector<double>> reference = models::EvaluateGptLosses(*g, kTiny, 3);
  ASSERT_TRUE(reference.ok()) << reference.status();
  const std::vector<double> losses = Train(TinyGpt(), 3, registry_.get());
  ASSERT_EQ(losses.size(), 3u);
  for (int step = 0; step < 3; ++step) {
    EXPECT_NEAR(losses[step], (*reference)[step], 1e-5 * (*reference)[step]) << "step " << step;
    EXPECT_NEAR(losses[step], kTorchLosses[step], 1e-5 * kTorchLosses[step]) << "step " << step;
  }
  EXPECT_NE(losses[0], losses[1]);  // the updates reached the next step
}

// The one layout check here (tests/e2e covers the others): the batch split over two ranks,
// gradients all-reduced, gives the one-rank losses.
TEST_F(TrainerTest, DataParallelGptEqualsOneRank) {
  TrainerOptions dp2 = TinyGpt();
  dp2.layout.dp = 2;
  const std::vector<double> one = Train(TinyGpt(), 3, registry_.get());
  const std::vector<double> two = Train(dp2, 3, registry_.get());
  ASSERT_EQ(one.size(), 3u);
  ASSERT_EQ(two.size(), 3u);
  for (int step = 0; step < 3; ++step) EXPECT_NEAR(two[step], one[step], 1e-5 * one[step]) << "step " << step;
}

// The optimizers of the standard models write their variables in place (actor/inplace_updates.h):
// every parameter for SGD (the MLP); every parameter and both Adam moments for AdamW (the GPT),
// all but the step counter, whose next value the Adam ops read too; on every data-parallel
// rank. The losses equal those of copying updates exactly.
TEST_F(TrainerTest, StandardModelsUpdateInPlaceWithTheSameLosses) {
  TrainerOptions mlp;
  mlp.mlp = models::MlpConfig{.width = 16, .depth = 3};
  mlp.batch = 8;
  TrainerOptions gpt = TinyGpt();
  gpt.layout.dp = 2;
  for (const TrainerOptions& base : {mlp, gpt}) {
    absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(base, registry_.get());
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    const bool is_gpt = base.model == Workload::kGpt;
    const int64_t variables = is_gpt ? (*trainer)->session()->runtime(0)->VariableNames().size() : 6;
    for (int rank = 0; rank < base.layout.dp; ++rank) {
      const int64_t updates = (*trainer)->session()->runtime(rank)->num_inplace_updates();
      if (is_gpt) {
        EXPECT_EQ(updates + 1, variables) << "rank " << rank;
      } else {
        EXPECT_EQ(updates, variables) << "rank " << rank;  // 3 weights + 3 biases
      }
    }
    TrainerOptions copying = base;
    copying.inplace_updates = false;
    EXPECT_EQ(Train(base, 3, registry_.get()), Train(copying, 3, registry_.get()));
  }
}

// Recomputing the blocks in backward changes memory, not math; text data trains from bytes.
TEST_F(TrainerTest, RecomputeAndTextDataKeepTheLosses) {
  TrainerOptions plain = TinyGpt();
  plain.gpt.vocab = 256;
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/corpus.txt";
  {
    std::ofstream file(path);
    for (int i = 0; i < 200; ++i) file << "the quick brown fox jumps over the lazy dog " << i << "\n";
  }
  plain.text_path = path;
  TrainerOptions recompute = plain;
  recompute.recompute = true;
  const std::vector<double> a = Train(plain, 3, registry_.get());
  const std::vector<double> b = Train(recompute, 3, registry_.get());
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_NEAR(a[0], std::log(256.0), 0.3) << "the first loss of a fresh byte-level model is about ln(256)";
  for (int step = 0; step < 3; ++step) EXPECT_NEAR(b[step], a[step], 1e-5 * a[step]) << "step " << step;
  // Recompute really re-runs the blocks' forward ops: the plan has more compute tasks.
  auto compute_tasks = [&](const TrainerOptions& o) {
    absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(o, registry_.get());
    EXPECT_TRUE(t.ok()) << t.status();
    int n = 0;
    if (t.ok()) {
      for (const TaskProto& task : (*t)->plan().rank_plans(0).tasks()) n += task.type() == TaskProto::COMPUTE;
    }
    return n;
  };
  EXPECT_GT(compute_tasks(recompute), compute_tasks(plain));
  TrainerOptions wrong_vocab = plain;
  wrong_vocab.gpt.vocab = 64;
  absl::StatusOr<std::unique_ptr<Trainer>> bad = Trainer::Create(wrong_vocab, registry_.get());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("vocab must be 256"), std::string::npos) << bad.status();
}

// Intra-op threads (the rank's kernels split over a pool, GEMMs on single-threaded OpenBLAS):
// every kernel but matmul is bit-identical to one thread, a split matmul differs in the last
// bits, so the losses of a GPT whose tensors are above the pool's threshold agree with one
// thread to float32 precision, and a run repeats to the bit. Then the budget's environment.
TEST_F(TrainerTest, IntraOpThreadsKeepTheLosses) {
  TrainerOptions o = TinyGpt();
  o.gpt = models::GptConfig{.vocab = 256, .seq_len = 64, .n_layer = 1, .n_embd = 128, .n_head = 2, .batch = 8};
  o.batch = 8;
  o.intra_op_threads = 1;
  const std::vector<double> one = Train(o, 3, registry_.get());
  ASSERT_EQ(one.size(), 3u);
  for (int threads : {2, 3}) {
    o.intra_op_threads = threads;
    const std::vector<double> split = Train(o, 3, registry_.get());
    ASSERT_EQ(split.size(), 3u);
    for (int step = 0; step < 3; ++step) {
      EXPECT_NEAR(split[step], one[step], 1e-5 * one[step]) << threads << " threads, step " << step;
    }
    EXPECT_EQ(Train(o, 3, registry_.get()), split) << threads << " threads";
  }

  unsetenv("OL_INTRA_OP_THREADS");
  unsetenv("OPENBLAS_NUM_THREADS");
  unsetenv("OMP_NUM_THREADS");
  EXPECT_EQ(IntraOpThreadsFromEnv(), 1);
  setenv("OMP_NUM_THREADS", "4", 1);
  EXPECT_EQ(IntraOpThreadsFromEnv(), 4);
  setenv("OPENBLAS_NUM_THREADS", "2", 1);
  EXPECT_EQ(IntraOpThreadsFromEnv(), 2);
  setenv("OL_INTRA_OP_THREADS", "3", 1);
  EXPECT_EQ(IntraOpThreadsFromEnv(), 3);
  setenv("OL_INTRA_OP_THREADS", "zero", 1);  // not a count: the next setting decides
  EXPECT_EQ(IntraOpThreadsFromEnv(), 2);
  unsetenv("OL_INTRA_OP_THREADS");
  unsetenv("OPENBLAS_NUM_THREADS");
  unsetenv("OMP_NUM_THREADS");
}

// Two compute streams (the optimizer's gradients on a second one) change when tasks run, not what
// they compute: the losses are bit-identical, on 2 data-parallel x 2 pipeline ranks with 2
// micro-batches (gradients accumulated across pieces).
TEST_F(TrainerTest, TwoComputeStreamsKeepTheLosses) {
  TrainerOptions o = TinyGpt();
  o.layout = {.dp = 2, .pp = 2};
  o.micro_batches = 2;
  o.gpt.n_layer = 2;
  o.gpt.batch = o.batch = 8;  // 2 sequences per micro-batch and rank
  o.intra_op_threads = 1;
  const std::vector<double> one = Train(o, 3, registry_.get());
  ASSERT_EQ(one.size(), 3u);
  o.compute_streams = 2;
  EXPECT_EQ(Train(o, 3, registry_.get()), one);
}

// One rank, one piece: the registers the second stream touches share bytes with stream 0's
// when a chain of dependencies orders them (compiler/lower/stream_lifetimes.h), and the losses
// stay bit-identical.
TEST_F(TrainerTest, TwoComputeStreamsShareBytesAcrossStreamsAndKeepTheLosses) {
  TrainerOptions o = TinyGpt();
  o.gpt.n_layer = 2;
  o.intra_op_threads = 1;
  absl::StatusOr<std::unique_ptr<Trainer>> one = Trainer::Create(o, registry_.get());
  ASSERT_TRUE(one.ok()) << one.status();
  const int64_t one_planned = (*one)->plan().memory(0).planned_bytes();
  const std::vector<double> losses = Train(o, 3, registry_.get());
  ASSERT_EQ(losses.size(), 3u);
  o.compute_streams = 2;
  absl::StatusOr<std::unique_ptr<Trainer>> two = Trainer::Create(o, registry_.get());
  ASSERT_TRUE(two.ok()) << two.status();
  const PlanProto& plan = (*two)->plan();
  // Some register used on stream 4 shares bytes with one used only on stream 0.
  std::map<int64_t, int32_t> stream_of;
  for (const TaskProto& t : plan.rank_plans(0).tasks()) stream_of[t.id()] = t.stream_id();
  auto on_side = [&](const RegisterProto& r) {
    bool side = stream_of[r.producer().task_id()] == 4;
    for (const TaskRefProto& c : r.consumers()) side = side || stream_of[c.task_id()] == 4;
    return side;
  };
  int shared = 0;
  for (const RegisterProto& a : plan.rank_plans(0).registers()) {
    if (!on_side(a) || a.memory().block_id() != 1) continue;
    for (const RegisterProto& b : plan.rank_plans(0).registers()) {
      const MemoryLocationProto &ma = a.memory(), &mb = b.memory();
      if (on_side(b) || mb.block_id() != 1 || mb.buffer_bytes() == 0) continue;
      if (ma.offset() < mb.offset() + mb.buffer_bytes() && mb.offset() < ma.offset() + ma.buffer_bytes()) ++shared;
    }
  }
  EXPECT_GT(shared, 0);
  // 887 KiB with one stream, 977 KiB with two (1.04 MiB, +20%, when the registers stream 4
  // touches were live the whole step).
  EXPECT_LE(plan.memory(0).planned_bytes(), one_planned * 115 / 100)
      << "one stream " << one_planned << " bytes, two " << plan.memory(0).planned_bytes();
  EXPECT_EQ(Train(o, 3, registry_.get()), losses);
}

// MLP on a fixed batch: at lr 0 -> tiny the loss stays, the first loss is the MSE of the
// initial model whatever the lr, and the summary names the ranks and the biggest op.
TEST_F(TrainerTest, MlpTrainsAndSummarizesThePlan) {
  TrainerOptions o;
  o.mlp = models::MlpConfig{.width = 16, .depth = 2};
  o.batch = 8;
  o.micro_batches = 2;
  o.learning_rate = 0.5;
  o.record_timeline = true;
  absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(o, registry_.get());
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  EXPECT_EQ((*trainer)->session()->pieces_per_step(), 2);
  const std::string summary = (*trainer)->PlanSummary();
  EXPECT_NE(summary.find("world 1 ranks"), std::string::npos) << summary;
  EXPECT_NE(summary.find("2 piece(s) x 4"), std::string::npos) << summary;
  EXPECT_NE(summary.find("matmul"), std::string::npos) << summary;
  std::vector<double> losses;
  for (int step = 0; step < 5; ++step) {
    absl::StatusOr<StepResult> r = (*trainer)->RunStep();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_NEAR(r->items_per_second * r->seconds, 8, 1e-6);
    losses.push_back(r->loss);
  }
  // Gradient descent on one fixed batch: the loss goes down.
  EXPECT_LT(losses[4], losses[0] * 0.95) << losses[0] << " -> " << losses[4];
  const std::string dir = ::testing::TempDir() + "/trainer_timeline";
  ASSERT_TRUE((*trainer)->WriteTimeline(dir).ok());
  EXPECT_GT(std::filesystem::file_size(dir + "/timeline.json"), 100u);
  // The first MSE of the same initial model does not depend on the learning rate.
  o.learning_rate = 1e-9;
  o.record_timeline = false;
  std::vector<double> slow = Train(o, 2, registry_.get());
  ASSERT_EQ(slow.size(), 2u);
  EXPECT_NEAR(slow[0], losses[0], 1e-6 * losses[0]);
  EXPECT_NEAR(slow[1], losses[0], 1e-5 * losses[0]);
}

// On a [2, 2] mesh the loss comes out as (B, P), which Session::Fetch cannot assemble yet; the
// trainer sums the P shards itself (FetchScalarByShards) and must get the one-rank loss.
TEST_F(TrainerTest, TwoDimensionalMeshLossIsAssembledFromShards) {
  TrainerOptions o;
  o.mlp = models::MlpConfig{.width = 16, .depth = 2};
  o.batch = 8;
  o.learning_rate = 0.5;
  const std::vector<double> one = Train(o, 2, registry_.get());
  o.layout = models::ParallelLayout{.dp = 2, .tp = 2};
  const std::vector<double> mesh = Train(o, 2, registry_.get());
  ASSERT_EQ(one.size(), 2u);
  ASSERT_EQ(mesh.size(), 2u);
  for (int step = 0; step < 2; ++step) EXPECT_NEAR(mesh[step], one[step], 1e-5 * one[step]) << "step " << step;
}

TEST_F(TrainerTest, BadOptionsNameTheField) {
  TrainerOptions o = TinyGpt();
  o.batch = 3;
  o.micro_batches = 2;
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(o, registry_.get());
  ASSERT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("micro_batches"), std::string::npos) << t.status();
  o = TinyGpt();
  o.gpt.n_head = 5;
  t = Trainer::Create(o, registry_.get());
  EXPECT_NE(t.status().message().find("n_head"), std::string::npos) << t.status();
  o = TinyGpt();  // cuda placements plan (olplan) but do not run on this build
  o.layout.device = DeviceType::kCuda;
  t = Trainer::Create(o, registry_.get());
  ASSERT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(t.status().message().find("--device=cuda"), std::string::npos) << t.status();
  EXPECT_NE(t.status().message().find("olplan"), std::string::npos) << t.status();
}

TEST(TrainerFlagsTest, ParsesEveryFormAndNamesBadFlags) {
  absl::StatusOr<TrainerFlags> f =
      ParseTrainerFlags({"--model=gpt", "--dp", "2", "--steps=3", "--reuse_memory=false", "--timeline=/tmp/t", "--lr=0.1"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->options.model, Workload::kGpt);
  EXPECT_EQ(f->options.layout.dp, 2);
  EXPECT_EQ(f->steps, 3);
  EXPECT_FALSE(f->options.reuse_memory);
  EXPECT_TRUE(ParseTrainerFlags({"--reuse_memory"})->options.reuse_memory);
  EXPECT_EQ(f->timeline_dir, "/tmp/t");
  EXPECT_DOUBLE_EQ(f->options.learning_rate, 0.1);
  EXPECT_TRUE(ParseTrainerFlags({"--help"})->help);
  EXPECT_EQ(ParseTrainerFlags({"--device=cuda"})->options.layout.device, DeviceType::kCuda);
  EXPECT_EQ(ParseTrainerFlags({})->options.layout.device, DeviceType::kCpu);
  EXPECT_NE(TrainerUsage().find("threads"), std::string::npos);
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{{{"--dpp=2"}, "unknown flag '--dpp'"},
                                         {{"--steps=ten"}, "--steps: expected an integer, got 'ten'"},
                                         {{"--dp=0"}, "--dp: expected an integer >= 1"},
                                         {{"--model=cnn"}, "--model: expected mlp or gpt"},
                                         {{"--zero_stage=3"}, "--zero_stage"},
                                         {{"--device=tpu"}, "--device: expected cpu or cuda"},
                                         {{"--batch"}, "--batch: missing value"},
                                         {{"steps"}, "unexpected argument 'steps'"}}) {
    absl::StatusOr<TrainerFlags> bad = ParseTrainerFlags(c.args);
    ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << c.args[0];
    EXPECT_NE(bad.status().message().find(c.message), std::string::npos) << bad.status();
  }
}

}  // namespace
}  // namespace train
}  // namespace oneflow_like
