// CompileOptions::compute_streams = 2: the producers of what the optimizers read (weight and bias
// gradients) run on a second compute stream (4); everything else keeps its stream; the plan
// verifies (stream order, deadlock simulation, bytes shared across streams only where a chain of
// dependencies orders them), its memory does not shrink, and the agreement names the option. Reference: the optimizer ops' inputs in the graph.
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/driver/agreement.h"
#include "oneflow_like/compiler/driver/compile.h"
#include "oneflow_like/compiler/plan/plan_verifier.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/models/gpt.h"

namespace oneflow_like {
namespace compiler {
namespace {

constexpr int32_t kSideStream = 4;

TEST(ComputeStreamsTest, GradientsForTheOptimizerRunOnTheSecondStream) {
  std::unique_ptr<OpRegistry> registry = testing::BuiltinRegistry();
  const models::GptConfig config{.vocab = 64, .seq_len = 8, .n_layer = 2, .n_embd = 16, .n_head = 2, .batch = 4};
  models::TrainOptions train;
  train.micro_batches = 2;
  absl::StatusOr<Graph> graph = models::BuildGptJob(*registry, config, {.dp = 2, .tp = 2}, train);
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<GlobalDecisions> decisions = RunGlobalPasses(*std::move(graph), CompileOptions{});
  ASSERT_TRUE(decisions.ok()) << decisions.status();
  // The reference: the producers of a non-source optimizer input whose every output only
  // optimizers read (a layer norm's backward also gives the input gradient: it stays).
  const Graph& g = decisions->graph;
  std::set<std::string> expected, kept;
  for (OpId id : g.op_order()) {
    if (!g.op(id).def->is_optimizer) continue;
    for (TensorId input : g.op(id).inputs) {
      const OpId producer = g.tensor(input).producer;
      if (!producer.valid() || g.op(producer).def->is_optimizer) continue;
      bool only = true;
      for (TensorId out : g.op(producer).outputs) {
        for (const TensorUse& use : g.tensor(out).consumers) only = only && g.op(use.op).def->is_optimizer;
      }
      (only ? expected : kept).insert(g.op(producer).name);
    }
  }
  ASSERT_GE(expected.size(), 8u);  // weights and biases of 2 blocks at least
  ASSERT_GE(kept.size(), 1u);      // the layer norms' backward

  CompileOptions one, two;
  two.compute_streams = 2;
  absl::StatusOr<PlanProto> plan1 = LowerDecisions(*decisions, one);
  absl::StatusOr<PlanProto> plan2 = LowerDecisions(*decisions, two);  // verified inside
  ASSERT_TRUE(plan1.ok()) << plan1.status();
  ASSERT_TRUE(plan2.ok()) << plan2.status();
  EXPECT_TRUE(VerifyPlan(*plan2).ok()) << VerifyPlan(*plan2);
  EXPECT_NE(plan1->content_hash(), plan2->content_hash());
  ASSERT_EQ(plan1->rank_plans_size(), plan2->rank_plans_size());
  for (int r = 0; r < plan2->rank_plans_size(); ++r) {
    const RankPlanProto& rp = plan2->rank_plans(r);
    std::set<std::string> side;
    for (const TaskProto& t : rp.tasks()) {
      if (t.stream_id() != kSideStream) continue;
      EXPECT_EQ(t.type(), TaskProto::COMPUTE) << t.name();
      EXPECT_EQ(t.stream_kind(), STREAM_COMPUTE) << t.name();
      side.insert(t.op_name());
    }
    EXPECT_EQ(side, expected) << "rank " << rp.rank();
    // The same tasks, only the streams of those moved.
    ASSERT_EQ(rp.tasks_size(), plan1->rank_plans(r).tasks_size());
    for (int k = 0; k < rp.tasks_size(); ++k) {
      const TaskProto& a = plan1->rank_plans(r).tasks(k);
      const TaskProto& b = rp.tasks(k);
      EXPECT_EQ(a.name(), b.name());
      if (b.stream_id() != kSideStream) EXPECT_EQ(a.stream_id(), b.stream_id()) << b.name();
    }
    // Registers a side task touches live until stream 0 knows their users are done
    // (stream_lifetimes.h), never shorter than with one stream: the plan does not shrink.
    EXPECT_GE(plan2->memory(r).planned_bytes(), plan1->memory(r).planned_bytes()) << "rank " << rp.rank();
  }
  // A rank compiled with the other setting is refused, naming it.
  one.only_rank = two.only_rank = 0;
  absl::StatusOr<PlanProto> part1 = LowerDecisions(*decisions, one);
  absl::StatusOr<PlanProto> part2 = LowerDecisions(*decisions, two);
  ASSERT_TRUE(part1.ok() && part2.ok());
  EXPECT_EQ(AgreementDifference(part2->per_rank().agreement(), part1->per_rank().agreement()).rfind(
                "compute_streams 2 vs 1", 0),
            0u)
      << AgreementDifference(part2->per_rank().agreement(), part1->per_rank().agreement());
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
