// Per-rank plans executed: every rank of a GPT job (pipeline x data parallel, micro-batches,
// point-to-point and collective boxing) builds its runtime from its own per-rank plan
// (CompileOptions::only_rank), all in this process over a loopback hub as olrun's processes
// would; the losses of three steps equal bit for bit those of the whole plan's Session, and
// every local task fires as often per step as in the whole plan (the rates of mirrors come
// from PlanProto.per_rank).
#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/actor/plan_rates.h"
#include "oneflow_like/actor/runtime.h"
#include "oneflow_like/actor/session.h"
#include "oneflow_like/comm/gloo_collective.h"
#include "oneflow_like/comm/loopback_transport.h"
#include "oneflow_like/compiler/driver/compile.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/models/gpt.h"
#include "oneflow_like/models/synthetic_data.h"

namespace oneflow_like {
namespace {

struct Job {
  compiler::GlobalDecisions decisions;
  compiler::CompileOptions options;
};

void ExpectPerRankRunsLikeTheWholePlan(const models::ParallelLayout& layout, compiler::BoxingStyle boxing) {
  std::unique_ptr<OpRegistry> registry = compiler::testing::BuiltinRegistry();
  models::GptConfig config{.vocab = 32, .seq_len = 8, .n_layer = 2, .n_embd = 16, .n_head = 2, .batch = 4};
  models::TrainOptions train;
  train.micro_batches = 2;
  absl::StatusOr<compiler::Graph> graph = models::BuildGptJob(*registry, config, layout, train);
  ASSERT_TRUE(graph.ok()) << graph.status();
  compiler::CompileOptions options;
  options.boxing = boxing;
  options.bucket_bytes = 1024;
  absl::StatusOr<compiler::GlobalDecisions> decisions = compiler::RunGlobalPasses(*std::move(graph), options);
  ASSERT_TRUE(decisions.ok()) << decisions.status();
  absl::StatusOr<PlanProto> whole = compiler::LowerDecisions(*decisions, options);
  ASSERT_TRUE(whole.ok()) << whole.status();
  const int32_t world = whole->world_size();
  std::vector<PlanProto> parts;
  for (int32_t r = 0; r < world; ++r) {
    options.only_rank = r;
    absl::StatusOr<PlanProto> part = compiler::LowerDecisions(*decisions, options);
    ASSERT_TRUE(part.ok()) << part.status();
    parts.push_back(*std::move(part));
  }

  // Rates: a per-rank plan gives its tasks the whole plan's firings per step.
  absl::StatusOr<absl::flat_hash_map<int64_t, int64_t>> whole_rates = actor::FiringsPerStep(*whole);
  ASSERT_TRUE(whole_rates.ok()) << whole_rates.status();
  int step_rate_mirrors = 0;
  for (const PlanProto& part : parts) {
    step_rate_mirrors += part.per_rank().step_rate_mirrors_size();
    absl::StatusOr<absl::flat_hash_map<int64_t, int64_t>> rates = actor::FiringsPerStep(part);
    ASSERT_TRUE(rates.ok()) << rates.status();
    for (const TaskProto& task : part.rank_plans(0).tasks()) {
      EXPECT_EQ(rates->at(task.id()), whole_rates->at(task.id())) << task.name();
    }
  }
  if (boxing == compiler::BoxingStyle::kPointToPoint) {
    EXPECT_GT(step_rate_mirrors, 0) << "the layout should send step-rate values (gradients) between ranks";
  }

  // The whole plan in one Session.
  actor::SessionOptions session_options;
  absl::StatusOr<std::unique_ptr<actor::Session>> session = actor::Session::Create(*whole, registry.get(), session_options);
  ASSERT_TRUE(session.ok()) << session.status();
  // The per-rank plans, one runtime each, over a loopback hub (and gloo for collectives).
  std::unique_ptr<comm::LoopbackHub> hub = comm::LoopbackHub::Create(world);
  comm::InMemoryStore store;
  std::vector<std::unique_ptr<comm::CollectiveBackend>> backends;
  std::vector<std::unique_ptr<CpuAllocator>> allocators;
  std::vector<std::unique_ptr<actor::Runtime>> runtimes;
  for (int32_t r = 0; r < world; ++r) {
    allocators.push_back(std::make_unique<CpuAllocator>());
    actor::RuntimeEnv env;
    env.transport = hub->endpoint(Rank(r));
    env.allocator = allocators.back().get();
    env.registry = registry.get();  // threaded, as in a process of its own
    if (boxing == compiler::BoxingStyle::kCollective) {
      absl::StatusOr<std::unique_ptr<comm::CollectiveBackend>> backend = comm::CreateGlooBackend(&store, r, world);
      ASSERT_TRUE(backend.ok()) << backend.status();
      backends.push_back(*std::move(backend));
      env.collectives = backends.back().get();
    }
    absl::StatusOr<std::unique_ptr<actor::Runtime>> runtime = actor::Runtime::Create(parts[r], r, std::move(env));
    ASSERT_TRUE(runtime.ok()) << "rank " << r << ": " << runtime.status();
    runtimes.push_back(*std::move(runtime));
  }
  const int64_t pieces = whole->pieces_per_step();
  for (int64_t step = 0; step < 3; ++step) {
    models::TokenBatch batch = models::SyntheticBatch(step, config.batch, config);
    for (int64_t piece = 0; piece < pieces; ++piece) {
      ASSERT_TRUE((*session)->Feed("idx", batch.inputs).ok());
      ASSERT_TRUE((*session)->Feed("targets", batch.targets).ok());
      for (auto& runtime : runtimes) {
        for (const char* name : {"idx", "targets"}) {
          if (runtime->FindBinding(name) == nullptr) continue;
          ASSERT_TRUE(runtime->FeedLogical(name, std::string(name) == "idx" ? batch.inputs : batch.targets).ok());
        }
      }
    }
    const absl::Status ran = (*session)->RunStep();
    ASSERT_TRUE(ran.ok()) << ran;
    for (auto& runtime : runtimes) ASSERT_TRUE(runtime->StartStep().ok());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (auto& runtime : runtimes) {
      while (!runtime->StepDone() && runtime->status().ok() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      ASSERT_TRUE(runtime->status().ok()) << runtime->status();
      ASSERT_TRUE(runtime->StepDone()) << "rank " << runtime->rank().value() << " did not finish step " << step;
    }
    int shards = 0;
    for (auto& runtime : runtimes) {
      if (runtime->FindBinding("loss") == nullptr) continue;
      absl::StatusOr<std::vector<Tensor>> fetched = runtime->TakeFetched("loss");
      ASSERT_TRUE(fetched.ok()) << fetched.status();
      ASSERT_EQ(static_cast<int64_t>(fetched->size()), pieces);
      for (int64_t piece = 0; piece < pieces; ++piece) {
        absl::StatusOr<Tensor> want = (*session)->FetchShard("loss", runtime->rank().value(), piece);
        ASSERT_TRUE(want.ok()) << want.status();
        EXPECT_EQ((*fetched)[piece].GetAsDouble(0), want->GetAsDouble(0))
            << "step " << step << " piece " << piece << " rank " << runtime->rank().value();
        ++shards;
      }
    }
    EXPECT_GT(shards, 0);
  }
  for (auto& runtime : runtimes) runtime->Stop();
}

TEST(PerRankRuntimeTest, PipelineTimesDataParallelPointToPoint) {
  ExpectPerRankRunsLikeTheWholePlan({.dp = 2, .pp = 2}, compiler::BoxingStyle::kPointToPoint);
}

TEST(PerRankRuntimeTest, PipelineTimesDataParallelCollectivesWithBuckets) {
  ExpectPerRankRunsLikeTheWholePlan({.dp = 2, .pp = 2}, compiler::BoxingStyle::kCollective);
}

}  // namespace
}  // namespace oneflow_like
