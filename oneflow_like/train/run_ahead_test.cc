// Run-ahead (Trainer::RunStep(start_next), RunOptions::run_ahead): starting step n + 1 before
// step n's loss is fetched changes no number. Losses equal the step-by-step run's bit for bit
// on the MLP and on tiny GPT layouts (dp, dp x tp, pp with micro-batches, ZeRO-1 over
// collectives); RunTraining with checkpoints in between writes the same checkpoints and prints
// the same losses either way.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/train/run_training.h"
#include "oneflow_like/train/trainer.h"

namespace oneflow_like {
namespace train {
namespace {

namespace fs = std::filesystem;

const models::GptConfig kTiny{.vocab = 64, .seq_len = 16, .n_layer = 2, .n_embd = 32, .n_head = 2, .batch = 4};

TrainerOptions TinyGpt(models::ParallelLayout layout) {
  TrainerOptions o;
  o.model = Workload::kGpt;
  o.gpt = kTiny;
  o.batch = kTiny.batch;
  o.layout = layout;
  o.watchdog_ms = 20000;
  return o;
}

// Losses of `steps` steps; with `run_ahead`, every step but the last starts the next one.
std::vector<double> Train(const TrainerOptions& options, int steps, bool run_ahead, const OpRegistry* registry) {
  absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(options, registry);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return {};
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) {
    absl::StatusOr<StepResult> r = (*trainer)->RunStep(run_ahead && step + 1 < steps);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return losses;
    EXPECT_EQ(r->step, step);
    EXPECT_GT(r->seconds, 0);
    // Run-ahead really runs ahead: the next step is started when this one's loss is back.
    const actor::Session* session = (*trainer)->session();
    EXPECT_EQ(session->steps_started(), session->steps_finished() + (run_ahead && step + 1 < steps ? 1 : 0));
    losses.push_back(r->loss);
  }
  EXPECT_TRUE((*trainer)->executor()->Close().ok());
  return losses;
}

class RunAheadTest : public ::testing::Test {
 protected:
  std::unique_ptr<OpRegistry> registry_ = compiler::testing::BuiltinRegistry();
};

TEST_F(RunAheadTest, LossesEqualStepByStepOnEveryLayout) {
  TrainerOptions mlp;
  mlp.mlp = models::MlpConfig{.width = 16, .depth = 3};
  mlp.batch = 8;
  mlp.learning_rate = 0.3;
  TrainerOptions pipeline = TinyGpt({.pp = 2});
  pipeline.micro_batches = 2;
  TrainerOptions zero = TinyGpt({.dp = 2});
  zero.zero_stage = 1;
  zero.boxing = compiler::BoxingStyle::kCollective;
  const std::map<std::string, TrainerOptions> cases = {
      {"mlp", mlp}, {"gpt dp2", TinyGpt({.dp = 2})}, {"gpt dp2 x tp2", TinyGpt({.dp = 2, .tp = 2})},
      {"gpt pp2, 2 micro-batches", pipeline}, {"gpt dp2 ZeRO-1, collectives", zero}};
  for (const auto& [name, options] : cases) {
    SCOPED_TRACE(name);
    const std::vector<double> step_by_step = Train(options, 4, false, registry_.get());
    const std::vector<double> ahead = Train(options, 4, true, registry_.get());
    ASSERT_EQ(step_by_step.size(), 4u);
    EXPECT_EQ(ahead, step_by_step);
    EXPECT_NE(step_by_step[3], step_by_step[0]);  // it trains
  }
}

// The last step started ahead anyway: Close finishes it before the drain (no watchdog hang),
// and reading variables while it runs is refused rather than racing the in-place updates.
TEST_F(RunAheadTest, CloseFinishesAStepStartedAhead) {
  TrainerOptions o = TinyGpt({.dp = 2});
  o.watchdog_ms = 5000;
  absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(o, registry_.get());
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_TRUE((*trainer)->RunStep(/*start_next=*/true).ok());
  actor::Session* session = (*trainer)->session();
  ASSERT_EQ(session->steps_started(), 2);
  absl::Status closed = (*trainer)->executor()->Close();
  EXPECT_TRUE(closed.ok()) << closed;
  EXPECT_EQ(session->steps_finished(), 2);
}

// Every file under `dir`, relative path -> bytes.
std::map<std::string, std::string> Files(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    files[fs::relative(entry.path(), dir).string()] = std::string(std::istreambuf_iterator<char>(in), {});
  }
  return files;
}

// The "step N loss L" lines of RunTraining's output (times differ between runs).
std::string LossLines(const std::string& out) {
  std::istringstream in(out);
  std::string line, losses;
  while (std::getline(in, line)) {
    if (line.rfind("step ", 0) == 0) losses += line.substr(0, line.find(" time ")) + "\n";
  }
  return losses;
}

// Checkpoints after steps 1, 3 and 4 (the last): run-ahead must not start the step after a
// checkpoint before it is saved, or the saved variables would be a step ahead.
TEST_F(RunAheadTest, CheckpointsBetweenStepsAreTheSame) {
  const std::string root = ::testing::TempDir() + "/run_ahead_test";
  fs::remove_all(root);
  std::map<bool, std::map<std::string, std::string>> checkpoints;
  std::map<bool, std::string> losses;
  for (bool run_ahead : {false, true}) {
    RunOptions run;
    run.steps = 5;
    run.warmup_steps = 0;
    run.checkpoint_dir = root + (run_ahead ? "/ahead" : "/step_by_step");
    run.checkpoint_every = 2;
    run.run_ahead = run_ahead;
    std::ostringstream out;
    absl::Status status = RunTraining(TinyGpt({.dp = 2}), run, registry_.get(), out);
    ASSERT_TRUE(status.ok()) << status;
    checkpoints[run_ahead] = Files(run.checkpoint_dir);
    losses[run_ahead] = LossLines(out.str());
  }
  EXPECT_EQ(losses[true], losses[false]);
  EXPECT_NE(losses[true].find("step 4 loss"), std::string::npos) << losses[true];
  ASSERT_FALSE(checkpoints[false].empty());
  ASSERT_EQ(checkpoints[true].size(), checkpoints[false].size());
  for (const auto& [path, bytes] : checkpoints[false]) {
    auto it = checkpoints[true].find(path);
    ASSERT_NE(it, checkpoints[true].end()) << path;
    EXPECT_TRUE(it->second == bytes) << path << " differs";
  }
  // Three checkpoints: after steps 1, 3 and 4.
  int dirs = 0;
  for (const auto& entry : fs::directory_iterator(root + "/ahead")) dirs += entry.is_directory();
  EXPECT_EQ(dirs, 3);
}

// The stream threads' loads (actor::Runtime::ThreadLoads, RunTraining's "host threads" line):
// every step of a plan fires the same acts, so two steps count the same; busy time grows.
TEST_F(RunAheadTest, StreamThreadLoadsCountEveryAct) {
  absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(TinyGpt({.dp = 2}), registry_.get());
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  auto acts_and_busy = [&] {
    std::map<std::string, std::pair<int64_t, int64_t>> out;
    for (const actor::Runtime* runtime : (*trainer)->executor()->local_runtimes()) {
      for (const actor::Runtime::ThreadLoad& load : runtime->ThreadLoads()) {
        out[absl::StrCat(runtime->rank().value(), " ", load.name)] = {load.acts, load.busy_micros};
      }
    }
    return out;
  };
  auto steps = [&](int n) {
    for (int i = 0; i < n; ++i) ASSERT_TRUE((*trainer)->RunStep(false).ok());
  };
  steps(1);
  const auto a = acts_and_busy();
  steps(2);
  const auto b = acts_and_busy();
  steps(2);
  const auto c = acts_and_busy();
  int acting = 0;
  for (const auto& [thread, load] : c) {
    const int64_t first = b.at(thread).first - a.at(thread).first, second = load.first - b.at(thread).first;
    EXPECT_EQ(first, second) << thread << ": two steps, the same acts";
    if (first == 0) continue;
    ++acting;
    EXPECT_GT(load.second, b.at(thread).second) << thread << ": busy time grows";
  }
  EXPECT_GE(acting, 2) << "each rank's compute thread acts";
  EXPECT_TRUE((*trainer)->executor()->Close().ok());
  RunOptions run;
  run.steps = 3;
  run.warmup_steps = 1;
  std::ostringstream out;
  ASSERT_TRUE(RunTraining(TinyGpt({.dp = 2}), run, registry_.get(), out).ok());
  EXPECT_NE(out.str().find("host threads over the timed steps: r0 cpu:0/stream 0 busy "), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("r1 cpu:0/stream 0 busy "), std::string::npos) << out.str();
}

// Registers that share bytes (memory reuse) wake each other's producers only when one waits
// (actor.h ByteConflict): the messages a step handles stay near the count without reuse. (Every
// write and return used to wake every producer of every register sharing its bytes: 8803
// messages a step on this model against 1899 without reuse.)
TEST_F(RunAheadTest, MemoryReuseAddsFewWakeUps) {
  std::map<bool, int64_t> messages;
  for (bool reuse : {false, true}) {
    TrainerOptions o = TinyGpt({});
    o.gpt.n_layer = 4;
    o.reuse_memory = reuse;
    absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(o, registry_.get());
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    auto total = [&] {
      int64_t n = 0;
      for (const actor::Runtime* runtime : (*trainer)->executor()->local_runtimes()) {
        for (const actor::Runtime::ThreadLoad& load : runtime->ThreadLoads()) n += load.messages;
      }
      return n;
    };
    ASSERT_TRUE((*trainer)->RunStep(false).ok());
    const int64_t before = total();
    for (int i = 0; i < 3; ++i) ASSERT_TRUE((*trainer)->RunStep(false).ok());
    messages[reuse] = (total() - before) / 3;
    EXPECT_TRUE((*trainer)->executor()->Close().ok());
  }
  EXPECT_GT(messages[false], 0);
  EXPECT_LT(messages[true], messages[false] * 3 / 2) << "with reuse " << messages[true] << " messages a step, without "
                                                      << messages[false];
}

}  // namespace
}  // namespace train
}  // namespace oneflow_like
