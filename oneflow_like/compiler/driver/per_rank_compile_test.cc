// Each process lowers only its own rank (CompileOptions::only_rank): on GPT jobs of every
// layout kind (dp, tp, pp, 2-D, 3-D) with ZeRO-1, recompute, micro-batches and uneven splits,
// point-to-point, collective boxing with gradient buckets and kAuto, every rank's per-rank plan
// equals its rank plan in the whole plan byte for byte, passes VerifyRankPlan, carries the same
// agreement as every other rank's, and the parts merged and sealed give the whole plan's hash.
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/driver/agreement.h"
#include "oneflow_like/compiler/driver/compile.h"
#include "oneflow_like/compiler/driver/gpt_test_case.h"
#include "oneflow_like/compiler/plan/plan_hash.h"
#include "oneflow_like/compiler/plan/plan_verifier.h"
#include "oneflow_like/compiler/plan/rank_plans.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/models/gpt.h"

namespace oneflow_like {
namespace compiler {
namespace {

using Case = GptTestCase;


class PerRankCompileTest : public ::testing::TestWithParam<Case> {
 protected:
  std::unique_ptr<OpRegistry> registry_ = testing::BuiltinRegistry();
};

TEST_P(PerRankCompileTest, EveryRankPlanEqualsTheWholePlans) {
  const Case& c = GetParam();
  CompileOptions options = GptTestOptions(c);
  absl::StatusOr<GlobalDecisions> decisions = GptTestDecisions(c, *registry_);
  ASSERT_TRUE(decisions.ok()) << decisions.status();
  absl::StatusOr<PlanProto> whole = LowerDecisions(*decisions, options);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(whole->world_size(), c.layout.world());
  if (c.boxing == BoxingStyle::kCollective && c.layout.dp > 1) {  // several gradient buckets
    std::set<std::string> buckets;
    for (const RankPlanProto& rank : whole->rank_plans()) {
      for (const TaskProto& t : rank.tasks()) {
        if (t.name().rfind("grad_bucket", 0) == 0) buckets.insert(t.name().substr(0, t.name().find('@')));
      }
    }
    EXPECT_GE(buckets.size(), 2u);
  }
  std::vector<PlanProto> parts;
  for (int32_t r = 0; r < whole->world_size(); ++r) {
    options.only_rank = r;
    absl::StatusOr<PlanProto> part = LowerDecisions(*decisions, options);
    ASSERT_TRUE(part.ok()) << "rank " << r << ": " << part.status();
    ASSERT_EQ(part->rank_plans_size(), 1) << "rank " << r;
    ASSERT_EQ(whole->ranks(r), r);
    EXPECT_TRUE(DeterministicBytes(part->rank_plans(0)) == DeterministicBytes(whole->rank_plans(r))) << "rank " << r << "'s plan differs";
    EXPECT_TRUE(DeterministicBytes(part->memory(0)) == DeterministicBytes(whole->memory(r))) << "rank " << r;
    EXPECT_TRUE(VerifyRankPlan(*part).ok()) << VerifyRankPlan(*part);
    EXPECT_FALSE(VerifyPlan(*part).ok()) << "a per-rank plan is not a whole plan";
    EXPECT_EQ(CheckPlanHash(*part), absl::OkStatus());
    if (r > 0) {
      EXPECT_EQ(AgreementDifference(part->per_rank().agreement(), parts[0].per_rank().agreement()), "");
    }
    parts.push_back(*std::move(part));
  }
  absl::StatusOr<PlanProto> merged = MergeRankPlans(std::move(parts));
  ASSERT_TRUE(merged.ok()) << merged.status();
  SealPlan(&*merged);
  EXPECT_EQ(merged->content_hash(), whole->content_hash());
}

std::string Name(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(
    Layouts, PerRankCompileTest,
    ::testing::Values(
        Case{"dp4_zero1_p2p", {.dp = 4}, 1, 1},
        Case{"dp4_zero1_buckets", {.dp = 4}, 2, 1, false, BoxingStyle::kCollective},
        Case{"tp4", {.tp = 4}},
        Case{"tp4_collective", {.tp = 4}, 0, 0, false, BoxingStyle::kCollective},
        Case{"pp4_micro4_recompute", {.pp = 4}, 4, 0, true, BoxingStyle::kPointToPoint, 4},
        Case{"dp2_tp2_zero1_buckets", {.dp = 2, .tp = 2}, 2, 1, false, BoxingStyle::kCollective},
        Case{"dp2_tp2_pp2_zero1_recompute", {.dp = 2, .tp = 2, .pp = 2}, 4, 1, true},
        Case{"dp2_tp2_pp2_zero1_buckets", {.dp = 2, .tp = 2, .pp = 2}, 4, 1, false, BoxingStyle::kCollective},
        Case{"dp2_tp2_pp2_zero2_recompute", {.dp = 2, .tp = 2, .pp = 2}, 4, 2, true},
        Case{"dp4_zero2_buckets", {.dp = 4}, 2, 2, false, BoxingStyle::kCollective},
        Case{"dp2_tp2_pp2_auto", {.dp = 2, .tp = 2, .pp = 2}, 2, 0, true, BoxingStyle::kAuto},
        // Uneven: 5 sequences over 3 data-parallel ranks, 3 layers over 2 stages.
        Case{"dp3_pp2_uneven", {.dp = 3, .pp = 2}, 1, 1, false, BoxingStyle::kPointToPoint, 3, 5},
        Case{"dp3_pp2_uneven_buckets", {.dp = 3, .pp = 2}, 1, 1, false, BoxingStyle::kCollective, 3, 5},
        Case{"dp3_pp2_uneven_zero2", {.dp = 3, .pp = 2}, 1, 2, false, BoxingStyle::kPointToPoint, 3, 5},
        Case{"dp2_tp2_pp2_two_compute_streams", {.dp = 2, .tp = 2, .pp = 2}, 2, 1, false, BoxingStyle::kPointToPoint, 2, 0,
             2}),
    Name);

// A rank given another job is refused naming what differs: the agreement of a job with another
// layer count, another micro-batch count, another world.
TEST(AgreementTest, NamesWhatDiffers) {
  std::unique_ptr<OpRegistry> registry = testing::BuiltinRegistry();
  auto agreement = [&](int64_t n_layer, int32_t micro_batches, models::ParallelLayout layout) {
    models::GptConfig config{.vocab = 64, .seq_len = 8, .n_layer = n_layer, .n_embd = 16, .n_head = 2, .batch = 4};
    models::TrainOptions train;
    train.micro_batches = micro_batches;
    absl::StatusOr<Graph> graph = models::BuildGptJob(*registry, config, layout, train);
    EXPECT_TRUE(graph.ok()) << graph.status();
    CompileOptions options;
    options.only_rank = 0;
    absl::StatusOr<PlanProto> plan = Compile(*std::move(graph), options);
    EXPECT_TRUE(plan.ok()) << plan.status();
    return plan.ok() ? plan->per_rank().agreement() : JobAgreementProto();
  };
  const JobAgreementProto base = agreement(2, 2, {.dp = 2});
  EXPECT_EQ(base.world_size(), 2);
  EXPECT_EQ(base.pieces_per_step(), 2);
  EXPECT_EQ(AgreementDifference(base, agreement(2, 2, {.dp = 2})), "");
  const std::string layers = AgreementDifference(agreement(3, 2, {.dp = 2}), base);
  EXPECT_NE(layers.find("ops "), std::string::npos) << layers;
  EXPECT_NE(layers.find("variables "), std::string::npos) << layers;
  EXPECT_EQ(layers.find("pieces_per_step"), std::string::npos) << layers;
  EXPECT_EQ(AgreementDifference(agreement(2, 4, {.dp = 2}), base).rfind("pieces_per_step 4 vs 2", 0), 0u);
  EXPECT_NE(AgreementDifference(agreement(2, 2, {.tp = 2}), base), "");  // same world, other decisions
  const std::string world = AgreementDifference(agreement(2, 2, {.dp = 4}), base);
  EXPECT_NE(world.find("world_size 4 vs 2"), std::string::npos) << world;
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
