// End to end: a job that gives only stage placements compiles, through the stage balance pass
// and the compiler driver, into a verified plan whose stages run on their own ranks.
#include <set>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/driver/compile.h"
#include "oneflow_like/compiler/pipeline/stage_balance_pass.h"
#include "oneflow_like/compiler/pipeline/test_jobs.h"
#include "oneflow_like/compiler/test_util.h"

namespace oneflow_like {
namespace compiler {
namespace {

// The ranks that run COMPUTE tasks of op `op`.
std::set<int> RanksOf(const PlanProto& plan, const std::string& op) {
  std::set<int> ranks;
  for (const RankPlanProto& rank : plan.rank_plans()) {
    for (const TaskProto& t : rank.tasks()) {
      if (t.type() == TaskProto::COMPUTE && t.op_name() == op) ranks.insert(rank.rank());
    }
  }
  return ranks;
}

TEST(StageBalanceCompileTest, StagePlacementsAloneCompileToAPipelinedPlan) {
  std::unique_ptr<OpRegistry> registry = testing::BuiltinRegistry();
  Graph g = testing::ParseOrDie(testing::kTwoStageMlpText, *registry);
  StageBalancePass balance;
  absl::StatusOr<bool> balanced = balance.Run(&g);
  ASSERT_TRUE(balanced.ok()) << balanced.status();
  ASSERT_EQ(balance.report().stages.size(), 2u);

  CompileOptions options;
  options.verify_each_pass = true;
  absl::StatusOr<PlanProto> plan = Compile(std::move(g), options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->world_size(), 2);
  EXPECT_EQ(plan->pieces_per_step(), 2);
  EXPECT_EQ(RanksOf(*plan, "h1"), std::set<int>{0});
  EXPECT_EQ(RanksOf(*plan, "loss"), std::set<int>{1});
  // A transfer carries the activations from stage 0 to stage 1.
  int transfers_on_1 = 0;
  for (const RankPlanProto& rank : plan->rank_plans()) {
    for (const TaskProto& t : rank.tasks()) transfers_on_1 += rank.rank() == 1 && t.type() == TaskProto::TRANSFER;
  }
  EXPECT_GT(transfers_on_1, 0);
}

TEST(StageBalanceCompileTest, WithoutStagePlacementsTheJobHasNoPlacement) {
  std::unique_ptr<OpRegistry> registry = testing::BuiltinRegistry();
  Graph graph = testing::ParseOrDie(testing::kTwoStageMlpText, *registry);
  graph.mutable_config()->clear_stage_placements();  // the driver's stage pass then does nothing
  absl::StatusOr<PlanProto> plan = Compile(std::move(graph));
  testing::ExpectError(plan.status(), absl::StatusCode::kInvalidArgument, {"no placement"});
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
