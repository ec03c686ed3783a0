// The actor runtime's core promise: for the same model, seed and data, training under a
// parallel layout (data, tensor, pipeline parallel, ZeRO-1, 2-D and 3-D meshes) gives the loss
// curve and the final parameters of the single-device run, to float tolerance.
//
// Every run compiles the job with compiler::Compile (the whole compiler) and executes it with
// actor::Session (all ranks of the plan in this process over the loopback transport, one
// thread per stream). The reference is the same job on cpu:[0] with the same seed, the same
// per-piece shapes (job shapes are per piece: a layout with micro-batches is compared with a
// 1-rank job with the same micro_batches, fed the same pieces) and the same feeds. The 1-rank
// GPT is itself checked against the graph evaluator (models/reference_eval.h), an independent
// implementation that runs whole tensors through eager kernels without the runtime.
//
// Tolerance: float32 with other reduction orders (partial sums added across ranks, gradients
// accumulated in other orders) differs in the last bits; losses and parameters compare with
// |a - b| <= atol + rtol * |b|, rtol = kRelativeTolerance = 1e-4 and atol = kAbsoluteTolerance
// = 1e-5 (values near zero), except parameters under AdamW, which normalizes a gradient element
// near zero: atol = 1e-5 + lr * 1e-3 for the MLP and 1e-5 + lr * 1e-2 for the GPT (see
// kGptParameterTolerance: its key bias has a gradient that is exactly zero in real arithmetic,
// i.e. pure rounding noise). Initial parameters must be bit-identical in every layout. A 0.1%
// change of the learning rate fails these checks (tried once by hand).
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "oneflow_like/actor/session.h"
#include "oneflow_like/compiler/autograd/training_test_util.h"
#include "oneflow_like/compiler/driver/compile.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/compiler/text_format.h"
#include "oneflow_like/models/gpt.h"
#include "oneflow_like/models/reference_eval.h"
#include "oneflow_like/models/synthetic_data.h"

namespace oneflow_like {
namespace {

constexpr double kRelativeTolerance = 1e-4;
constexpr double kAbsoluteTolerance = 1e-5;
constexpr int kSteps = 5;

// What a run produced: the loss of every piece of every step and the final variables.
struct Trace {
  std::vector<float> losses;  // step-major, then piece
  std::map<std::string, std::vector<float>> variables;
  std::map<std::string, std::vector<float>> initial_variables;  // before the first step
  int64_t reusable_bytes = 0;  // planned bytes of the non-persistent blocks, all ranks
  int ranks = 0;               // ranks with work in the plan
  int split_variables = 0;     // variables (parameters and optimizer state) split on some axis
  int split_parameters = 0;    // of those, the trained parameters (`variables` of Train)
};

// Feeds piece `piece` of step `step` (whole logical tensors).
using FeedFunction = std::function<absl::Status(actor::Session*, int step, int piece)>;

// The loss of piece `piece` (Session::Fetch assembles it: splits, B copies, P contributors).
absl::StatusOr<float> FetchLoss(const actor::Session& session, int piece) {
  ASSIGN_OR_RETURN(Tensor loss, session.Fetch("loss", piece));
  return loss.ToVector<float>().at(0);
}

absl::StatusOr<Trace> Train(compiler::Graph graph, const OpRegistry* registry, const std::vector<std::string>& variables,
                            const FeedFunction& feed,
                            bool reuse_memory = true,
                            compiler::BoxingStyle boxing = compiler::BoxingStyle::kPointToPoint,
                            int64_t bucket_bytes = compiler::CompileOptions().bucket_bytes) {
  compiler::CompileOptions options;
  options.reuse_memory = reuse_memory;
  options.boxing = boxing;
  options.bucket_bytes = bucket_bytes;
  ASSIGN_OR_RETURN(PlanProto plan, compiler::Compile(std::move(graph), options));
  actor::SessionOptions session_options;
  session_options.watchdog_timeout_ms = 20000;  // a loaded 2-core machine runs up to 8 ranks
  ASSIGN_OR_RETURN(std::unique_ptr<actor::Session> session, actor::Session::Create(plan, registry, session_options));
  Trace trace;
  trace.ranks = plan.ranks_size();
  for (const TensorBindingProto& binding : plan.rank_plans(0).bindings()) {
    if (binding.kind() != TensorBindingProto::VARIABLE) continue;
    for (const SbpProto& sbp : binding.shard().nd_sbp().sbp()) {
      if (sbp.kind() == SbpProto::SPLIT) {
        ++trace.split_variables;
        const bool parameter = std::find(variables.begin(), variables.end(), binding.tensor_name()) != variables.end();
        trace.split_parameters += parameter ? 1 : 0;
        break;
      }
    }
  }
  for (const RankPlanProto& rank : plan.rank_plans()) {
    for (const MemoryBlockProto& block : rank.memory_blocks()) {
      if (!block.persistent()) trace.reusable_bytes += block.size_bytes();
    }
  }
  for (const std::string& name : variables) {
    ASSIGN_OR_RETURN(Tensor value, session->ReadVariable(name));
    trace.initial_variables[name] = value.ToVector<float>();
  }
  for (int step = 0; step < kSteps; ++step) {
    for (int piece = 0; piece < session->pieces_per_step(); ++piece) RETURN_IF_ERROR(feed(session.get(), step, piece));
    RETURN_IF_ERROR(session->RunStep());
    if (session->FetchCount("loss") != session->pieces_per_step()) {
      return absl::InternalError(absl::StrCat("loss fired ", session->FetchCount("loss"), " times, expected ",
                                              session->pieces_per_step()));
    }
    for (int piece = 0; piece < session->pieces_per_step(); ++piece) {
      ASSIGN_OR_RETURN(float loss, FetchLoss(*session, piece));
      trace.losses.push_back(loss);
    }
  }
  for (const std::string& name : variables) {
    ASSIGN_OR_RETURN(Tensor value, session->ReadVariable(name));
    trace.variables[name] = value.ToVector<float>();
  }
  RETURN_IF_ERROR(session->Close());
  return trace;
}

bool Near(double got, double want, double atol) {
  return std::abs(got - want) <= atol + kRelativeTolerance * std::abs(want);
}

// `got` equals `want` to tolerance; the parameters moved during training (so the comparison
// says something about the updates, not only the initialization).
void ExpectSameTraining(const Trace& got, const Trace& want, double parameter_atol) {
  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t i = 0; i < want.losses.size(); ++i) {
    EXPECT_TRUE(Near(got.losses[i], want.losses[i], kAbsoluteTolerance))
        << "loss " << i << ": " << got.losses[i] << " vs 1-rank " << want.losses[i];
  }
  // Training made progress: the last step's mean loss is below the first's.
  const size_t pieces = want.losses.size() / kSteps;
  double first = 0, last = 0;
  for (size_t p = 0; p < pieces; ++p) {
    first += want.losses[p];
    last += want.losses[want.losses.size() - pieces + p];
  }
  EXPECT_LT(last, first);
  for (const auto& [name, values] : want.variables) {
    auto it = got.variables.find(name);
    ASSERT_NE(it, got.variables.end()) << name;
    ASSERT_EQ(it->second.size(), values.size()) << name;
    int mismatches = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      if (!Near(it->second[i], values[i], parameter_atol) && ++mismatches <= 3) {
        ADD_FAILURE() << name << "[" << i << "] = " << it->second[i] << " vs 1-rank " << values[i];
      }
    }
    EXPECT_EQ(mismatches, 0) << name;
    double moved = 0;
    const std::vector<float>& before = want.initial_variables.at(name);
    for (size_t i = 0; i < values.size(); ++i) moved += std::abs(values[i] - before[i]);
    EXPECT_GT(moved, 1e-4) << name << " did not change";
    EXPECT_EQ(it->second.size(), got.initial_variables.at(name).size());
    EXPECT_EQ(got.initial_variables.at(name), before) << name << ": initialization differs from the 1-rank run";
  }
}

// ---------------------------------------------------------------------------------------------
// MLP: x[16,8] -> matmul w1[8,16] -> bias_add b1 -> relu -> matmul w2[16,4] -> sparse softmax
// cross entropy with label[16].

struct MlpLayout {
  std::string name;
  std::string placement = "cpu:[0]";
  std::string data_sbp;  // x and label; empty = free
  std::string w1_sbp, b1_sbp, w2_sbp;
  std::vector<int64_t> mesh = {1};  // the placement's hierarchy
  std::string stage1_placement;  // non-empty: w2's matmul and the loss form stage 1 there
  int micro_batches = 0;
  int zero_stage = 0;
  int accumulation_steps = 0;  // gradient_accumulation_steps
};

std::string MlpText(const MlpLayout& layout, const std::string& optimizer) {
  auto pin = [](const std::string& sbp) { return sbp.empty() ? std::string() : " sbp=[" + sbp + "]"; };
  const std::string stage1 =
      layout.stage1_placement.empty() ? "" : " placement=" + layout.stage1_placement + " stage=1";
  const std::string label_placement =
      layout.stage1_placement.empty() ? layout.placement : layout.stage1_placement;
  return absl::StrCat("config(name=\"mlp\", seed=3, micro_batches=", layout.micro_batches,
                      ", zero_stage=", layout.zero_stage,
                      ", gradient_accumulation_steps=", layout.accumulation_steps, ")\n",
                      "x = input(shape=[16,8]) placement=", layout.placement, pin(layout.data_sbp), "\n",
                      "label = input(shape=[16], dtype=int64) placement=", label_placement, pin(layout.data_sbp), "\n",
                      "w1 = variable(shape=[8,16], init=normal(0.3))", pin(layout.w1_sbp), "\n",
                      "b1 = variable(shape=[16], init=uniform(-0.1, 0.1))", pin(layout.b1_sbp), "\n",
                      "w2 = variable(shape=[16,4], init=normal(0.3))", pin(layout.w2_sbp), "\n",
                      "h = matmul(x, w1)\n"
                      "hb = bias_add(h, b1)\n"
                      "a = relu(hb)\n"
                      "logits = matmul(a, w2)", stage1, "\n",
                      "loss = sparse_softmax_cross_entropy(logits, label)", stage1, "\n"
                      "output(loss)\n"
                      "train(loss, optimizer=", optimizer, ")\n");
}

Tensor MlpFeature(int step, int piece) {
  std::vector<float> values(16 * 8);
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t k = static_cast<int64_t>(i) * 7 + step * 131 + piece * 37;
    values[i] = static_cast<float>((k * 2654435761LL) % 17 - 8) / 8.0f;
  }
  return Tensor::FromVector(Shape{16, 8}, values);
}

Tensor MlpLabel(int step, int piece) {
  std::vector<int64_t> values(16);
  for (size_t i = 0; i < values.size(); ++i) values[i] = (static_cast<int64_t>(i) * 3 + step + 2 * piece) % 4;
  return Tensor::FromVector(Shape{16}, values);
}

absl::Status FeedMlp(actor::Session* session, int step, int piece) {
  RETURN_IF_ERROR(session->Feed("x", MlpFeature(step, piece)));
  return session->Feed("label", MlpLabel(step, piece));
}

absl::StatusOr<Trace> TrainMlp(const MlpLayout& layout, const std::string& optimizer, bool reuse_memory = true,
                               compiler::BoxingStyle boxing = compiler::BoxingStyle::kPointToPoint) {
  const std::unique_ptr<OpRegistry> registry = compiler::testing::BuiltinRegistry();  // outlives graph and session
  ASSIGN_OR_RETURN(compiler::Graph graph, compiler::ParseGraph(MlpText(layout, optimizer), *registry));
  return Train(std::move(graph), registry.get(), {"w1", "b1", "w2"}, FeedMlp, reuse_memory, boxing);
}

const char kSgd[] = "sgd(0.1, momentum=0.9)";
const char kAdamW[] = "adamw(0.01, weight_decay=0.1)";
// Parameters under AdamW: atol + lr * 1e-3 (Adam normalizes a gradient element near zero).
constexpr double kMlpAdamTolerance = kAbsoluteTolerance + 0.01 * 1e-3;

void CheckMlpLayout(const MlpLayout& layout, const std::string& optimizer, double parameter_atol,
                    compiler::BoxingStyle boxing = compiler::BoxingStyle::kPointToPoint) {
  SCOPED_TRACE(layout.name + " " + optimizer + (boxing == compiler::BoxingStyle::kCollective ? " collectives" : ""));
  MlpLayout single;
  single.micro_batches = layout.micro_batches;
  single.accumulation_steps = layout.accumulation_steps;
  absl::StatusOr<Trace> want = TrainMlp(single, optimizer);
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<Trace> got = TrainMlp(layout, optimizer, /*reuse_memory=*/true, boxing);
  ASSERT_TRUE(got.ok()) << got.status();
  int64_t devices = 1;
  for (int64_t size : layout.mesh) devices *= size;
  EXPECT_EQ(got->ranks, layout.stage1_placement.empty() ? devices : 2);
  // ZeRO-1 shards the optimizer state (plain data parallelism splits no variable).
  if (layout.zero_stage == 1) {
    EXPECT_GT(got->split_variables, 0);
  }
  ExpectSameTraining(*got, *want, parameter_atol);
}

const MlpLayout kMlpDp2{"dp2", "cpu:[0,1]", "S(0)", "", "", "", {2}};
const MlpLayout kMlpDp4{"dp4", "cpu:[0,1,2,3]", "S(0)", "", "", "", {4}};
// Megatron: w1 column-parallel (and its bias), w2 row-parallel; the data is replicated.
const MlpLayout kMlpTp2{"tp2", "cpu:[0,1]", "B", "S(1)", "S(0)", "S(0)", {2}};
const MlpLayout kMlpDp2Tp2{"dp2xtp2", "cpu:[[0,1],[2,3]]", "S(0), B", "B, S(1)", "B, S(0)", "B, S(0)", {2, 2}};

// Two pipeline stages: the first layer on rank 0, the second and the loss on rank 1.
const MlpLayout kMlpPp2{"pp2", "cpu:[0]", "", "", "", "", {1}, "cpu:[1]"};

MlpLayout WithZero(MlpLayout layout) {
  layout.name += " zero1";
  layout.zero_stage = 1;
  return layout;
}
MlpLayout WithMicroBatches(MlpLayout layout, int micro_batches) {
  layout.name += absl::StrCat(" micro_batches=", micro_batches);
  layout.micro_batches = micro_batches;
  return layout;
}

TEST(ParallelTrainingMlpTest, DataParallelMatchesOneDevice) {
  CheckMlpLayout(kMlpDp2, kSgd, kAbsoluteTolerance);
  CheckMlpLayout(kMlpDp2, kAdamW, kMlpAdamTolerance);
  CheckMlpLayout(kMlpDp4, kSgd, kAbsoluteTolerance);
  CheckMlpLayout(kMlpDp4, kAdamW, kMlpAdamTolerance);
}

TEST(ParallelTrainingMlpTest, DataParallelWithMicroBatchesMatchesOneDevice) {
  CheckMlpLayout(WithMicroBatches(kMlpDp2, 2), kSgd, kAbsoluteTolerance);
  // Gradient accumulation (2 fed batches per update) on top of 2 micro-batches: 4 pieces a step.
  MlpLayout accumulated = WithMicroBatches(kMlpDp2, 2);
  accumulated.name += " accumulation=2";
  accumulated.accumulation_steps = 2;
  CheckMlpLayout(accumulated, kAdamW, kMlpAdamTolerance);
}

TEST(ParallelTrainingMlpTest, TensorParallelMatchesOneDevice) {
  CheckMlpLayout(kMlpTp2, kSgd, kAbsoluteTolerance);
  CheckMlpLayout(kMlpTp2, kAdamW, kMlpAdamTolerance);
}

TEST(ParallelTrainingMlpTest, PipelineMatchesOneDevice) {
  CheckMlpLayout(WithMicroBatches(kMlpPp2, 2), kSgd, kAbsoluteTolerance);
  CheckMlpLayout(WithMicroBatches(kMlpPp2, 4), kAdamW, kMlpAdamTolerance);
}

TEST(ParallelTrainingMlpTest, ZeroStage1MatchesOneDevice) {
  CheckMlpLayout(WithZero(kMlpDp2), kSgd, kAbsoluteTolerance);
  CheckMlpLayout(WithZero(kMlpDp2), kAdamW, kMlpAdamTolerance);
}

// Boxing as COLLECTIVE tasks (gloo all-reduce / all-gather / reduce-scatter / all-to-all)
// instead of transfers and local adds: the same training as one device.
TEST(ParallelTrainingMlpTest, CollectivesMatchOneDevice) {
  const auto collective = compiler::BoxingStyle::kCollective;
  CheckMlpLayout(kMlpDp2, kSgd, kAbsoluteTolerance, collective);
  CheckMlpLayout(WithMicroBatches(kMlpDp2, 2), kAdamW, kMlpAdamTolerance, collective);
  CheckMlpLayout(kMlpTp2, kSgd, kAbsoluteTolerance, collective);
  CheckMlpLayout(WithZero(kMlpDp2), kAdamW, kMlpAdamTolerance, collective);
  CheckMlpLayout(kMlpDp2Tp2, kSgd, kAbsoluteTolerance, collective);
}

TEST(ParallelTrainingMlpTest, TwoDimensionalMeshMatchesOneDevice) {
  CheckMlpLayout(kMlpDp2Tp2, kSgd, kAbsoluteTolerance);
  CheckMlpLayout(kMlpDp2Tp2, kAdamW, kMlpAdamTolerance);
}

// Lifetime-based byte sharing (CompileOptions.reuse_memory) must not change any value: the
// runtime writes registers that share bytes in task order.
TEST(ParallelTrainingMlpTest, MemoryReuseGivesIdenticalResults) {
  for (const MlpLayout& layout : {WithMicroBatches(kMlpDp2, 2), kMlpTp2}) {
    SCOPED_TRACE(layout.name);
    absl::StatusOr<Trace> plain = TrainMlp(layout, kAdamW, /*reuse_memory=*/false);
    ASSERT_TRUE(plain.ok()) << plain.status();
    absl::StatusOr<Trace> reused = TrainMlp(layout, kAdamW, /*reuse_memory=*/true);
    ASSERT_TRUE(reused.ok()) << reused.status();
    EXPECT_EQ(reused->losses, plain->losses);  // same plan up to addresses: bit-identical
    EXPECT_EQ(reused->variables, plain->variables);
    EXPECT_LT(reused->reusable_bytes, plain->reusable_bytes);  // bytes were shared
  }
}

// ---------------------------------------------------------------------------------------------
// A tiny GPT (models/gpt.h) with torch_gpt.py's portable initialization and synthetic data.

models::GptConfig TinyGpt() {
  models::GptConfig config;
  config.vocab = 32;
  config.seq_len = 8;
  config.n_layer = 2;
  config.n_embd = 16;
  config.n_head = 2;
  config.batch = 4;
  return config;
}

constexpr double kGptLearningRate = 1e-2;

models::TrainOptions GptTraining(int micro_batches = 0, int zero_stage = 0) {
  models::TrainOptions train;
  train.optimizer.set_kind(OptimizerProto::ADAMW);
  train.optimizer.set_learning_rate(kGptLearningRate);
  train.optimizer.set_weight_decay(0.01);
  train.micro_batches = micro_batches;
  train.zero_stage = zero_stage;
  train.seed = 5;
  return train;
}

absl::StatusOr<Trace> TrainGpt(const models::ParallelLayout& layout, const models::TrainOptions& train,
                               bool reuse_memory = true,
                               compiler::BoxingStyle boxing = compiler::BoxingStyle::kPointToPoint,
                               int64_t bucket_bytes = compiler::CompileOptions().bucket_bytes) {
  const models::GptConfig config = TinyGpt();
  const std::unique_ptr<OpRegistry> registry = compiler::testing::BuiltinRegistry();  // outlives graph and session
  ASSIGN_OR_RETURN(compiler::Graph graph, models::BuildGptJob(*registry, config, layout, train));
  std::vector<std::string> variables;
  for (const models::GptParameterName& name : models::GptParameterNames(config)) variables.push_back(name.job_name);
  const int pieces = std::max(1, train.micro_batches);
  FeedFunction feed = [config, pieces](actor::Session* session, int step, int piece) -> absl::Status {
    const models::TokenBatch batch = models::SyntheticBatch(step * pieces + piece, config.batch, config, /*seed=*/0);
    RETURN_IF_ERROR(session->Feed("idx", batch.inputs));
    return session->Feed("targets", batch.targets);
  };
  return Train(std::move(graph), registry.get(), variables, feed, reuse_memory, boxing, bucket_bytes);
}

// The key bias (h*.qkv.bias[C, 2C)) has an exactly zero gradient (softmax is invariant to
// adding q.b_k to every score), so its computed gradient is rounding noise, which Adam
// normalizes into updates of ~1e-5 that differ between reduction orders (measured: up to 2.3e-5
// after 5 steps at lr 1e-2). Parameters move by ~lr per step, so atol = lr * 1e-2 still
// catches any wrong update.
constexpr double kGptParameterTolerance = kAbsoluteTolerance + kGptLearningRate * 1e-2;

void CheckGptLayout(const models::ParallelLayout& layout, int micro_batches = 0, int zero_stage = 0,
                    compiler::BoxingStyle boxing = compiler::BoxingStyle::kPointToPoint,
                    int64_t bucket_bytes = compiler::CompileOptions().bucket_bytes) {
  SCOPED_TRACE(absl::StrCat("dp=", layout.dp, " tp=", layout.tp, " pp=", layout.pp, " micro_batches=", micro_batches,
                            " zero_stage=", zero_stage, boxing == compiler::BoxingStyle::kCollective ? " collectives" : "",
                            " bucket_bytes=", bucket_bytes));
  absl::StatusOr<Trace> want = TrainGpt(models::ParallelLayout{}, GptTraining(micro_batches));
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<Trace> got =
      TrainGpt(layout, GptTraining(micro_batches, zero_stage), /*reuse_memory=*/true, boxing, bucket_bytes);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->ranks, layout.world());
  if (zero_stage >= 1) {
    EXPECT_GT(got->split_variables, 0);
  }
  if (zero_stage == 2 && layout.tp == 1) {  // ZeRO-2 stores the parameters sharded
    EXPECT_EQ(got->split_parameters, static_cast<int>(got->variables.size()));
  }
  ExpectSameTraining(*got, *want, kGptParameterTolerance);
}

// The 1-rank runtime run against the graph evaluator (no runtime, whole tensors).
TEST(ParallelTrainingGptTest, OneDeviceMatchesTheGraphEvaluator) {
  absl::StatusOr<Trace> run = TrainGpt(models::ParallelLayout{}, GptTraining());
  ASSERT_TRUE(run.ok()) << run.status();
  const std::unique_ptr<OpRegistry> registry = compiler::testing::BuiltinRegistry();
  absl::StatusOr<compiler::Graph> graph =
      models::BuildGptJob(*registry, TinyGpt(), models::ParallelLayout{}, GptTraining());
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_TRUE(compiler::testing::RunTrainingPasses(&*graph, /*with_optimizer=*/true).ok());
  absl::StatusOr<std::vector<double>> losses = models::EvaluateGptLosses(*graph, TinyGpt(), kSteps);
  ASSERT_TRUE(losses.ok()) << losses.status();
  ASSERT_EQ(run->losses.size(), losses->size());
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_TRUE(Near(run->losses[step], (*losses)[step], kAbsoluteTolerance))
        << "step " << step << ": runtime " << run->losses[step] << " evaluator " << (*losses)[step];
  }
  EXPECT_LT(run->losses.back(), run->losses.front());
}

TEST(ParallelTrainingGptTest, DataParallel2MatchesOneDevice) { CheckGptLayout({2, 1, 1}); }
TEST(ParallelTrainingGptTest, DataParallel4MatchesOneDevice) { CheckGptLayout({4, 1, 1}); }
TEST(ParallelTrainingGptTest, TensorParallel2MatchesOneDevice) { CheckGptLayout({1, 2, 1}); }
TEST(ParallelTrainingGptTest, Pipeline2With2MicroBatchesMatchesOneDevice) { CheckGptLayout({1, 1, 2}, 2); }
TEST(ParallelTrainingGptTest, Pipeline2With4MicroBatchesMatchesOneDevice) { CheckGptLayout({1, 1, 2}, 4); }
TEST(ParallelTrainingGptTest, ZeroStage1DataParallel2MatchesOneDevice) { CheckGptLayout({2, 1, 1}, 0, 1); }
TEST(ParallelTrainingGptTest, DataParallel2TensorParallel2MatchesOneDevice) { CheckGptLayout({2, 2, 1}); }
TEST(ParallelTrainingGptTest, DataParallel2Pipeline2MatchesOneDevice) { CheckGptLayout({2, 1, 2}, 4); }
TEST(ParallelTrainingGptTest, TensorParallel2Pipeline2MatchesOneDevice) { CheckGptLayout({1, 2, 2}, 2); }
TEST(ParallelTrainingGptTest, ThreeDimensionalMatchesOneDevice) { CheckGptLayout({2, 2, 2}, 2); }
TEST(ParallelTrainingGptTest, CollectivesMatchOneDevice) {
  const auto collective = compiler::BoxingStyle::kCollective;
  CheckGptLayout({2, 1, 1}, 0, 0, collective);
  CheckGptLayout({1, 2, 1}, 0, 0, collective);
  CheckGptLayout({2, 1, 1}, 0, 1, collective);
  CheckGptLayout({2, 2, 1}, 0, 0, collective);
}
// ZeRO-2 (sharded parameters, gathered at their first use): data parallel and dp x tp with
// point-to-point boxing, and with collectives in 4 KiB reduce-scatter buckets over 2
// micro-batches (the gathers run once per step, REPEAT feeds each micro-batch).
TEST(ParallelTrainingGptTest, ZeroStage2MatchesOneDevice) {
  CheckGptLayout({2, 1, 1}, 0, 2);
  CheckGptLayout({2, 2, 1}, 0, 2);
  CheckGptLayout({2, 1, 1}, 2, 2, compiler::BoxingStyle::kCollective, 4 << 10);
}
// Gradient buckets of 4 KiB: the tiny GPT's gradients go in several calls, issued while
// backward still runs (the default 4 MiB puts them all in one): all-reduce buckets (dp, and
// dp x tp, where each bucket is per dp group), reduce-scatter buckets (ZeRO-1), and the
// accumulated gradients of 2 micro-batches.
TEST(ParallelTrainingGptTest, SmallGradientBucketsMatchOneDevice) {
  const auto collective = compiler::BoxingStyle::kCollective;
  CheckGptLayout({2, 1, 1}, 0, 0, collective, 4 << 10);
  CheckGptLayout({2, 1, 1}, 2, 1, collective, 4 << 10);
  CheckGptLayout({2, 2, 1}, 0, 0, collective, 4 << 10);
}

// Byte sharing under pipelining (several micro-batches in flight per stage) and tensor
// parallelism: bit-identical to the run without reuse.
TEST(ParallelTrainingGptTest, MemoryReuseGivesIdenticalResults) {
  for (const auto& [layout, micro_batches] :
       std::vector<std::pair<models::ParallelLayout, int>>{{{1, 1, 2}, 4}, {{1, 2, 1}, 0}}) {
    SCOPED_TRACE(absl::StrCat("tp=", layout.tp, " pp=", layout.pp));
    absl::StatusOr<Trace> plain = TrainGpt(layout, GptTraining(micro_batches), /*reuse_memory=*/false);
    ASSERT_TRUE(plain.ok()) << plain.status();
    absl::StatusOr<Trace> reused = TrainGpt(layout, GptTraining(micro_batches), /*reuse_memory=*/true);
    ASSERT_TRUE(reused.ok()) << reused.status();
    EXPECT_EQ(reused->losses, plain->losses);
    EXPECT_EQ(reused->variables, plain->variables);
    EXPECT_LT(reused->reusable_bytes, plain->reusable_bytes);  // bytes were shared
  }
}

}  // namespace
}  // namespace oneflow_like
