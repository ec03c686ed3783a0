// The stage balance pass in a training job: backward and optimizer ops inherit the balanced
// forward stages, and (stage_balance_compile_test) the compiler driver turns the result into a
// verified pipelined plan.
#include <map>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "oneflow_like/compiler/autograd/autograd_pass.h"
#include "oneflow_like/compiler/autograd/optimizer_pass.h"
#include "oneflow_like/compiler/infer_pass.h"
#include "oneflow_like/compiler/pipeline/stage_balance_pass.h"
#include "oneflow_like/compiler/pipeline/test_jobs.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/compiler/verifier.h"

namespace oneflow_like {
namespace compiler {
namespace {

TEST(StageBalanceTrainingTest, BackwardAndUpdatesInheritTheForwardStages) {
  std::unique_ptr<OpRegistry> registry = testing::BuiltinRegistry();
  Graph g = testing::ParseOrDie(testing::kTwoStageMlpText, *registry);
  StageBalancePass balance;
  ASSERT_TRUE(balance.Run(&g).ok());
  std::map<std::string, int> forward_stage;
  for (const OpNode& op : g.ops()) forward_stage[op.name] = op.stage;
  EXPECT_EQ(forward_stage["h1"], 0);
  EXPECT_EQ(forward_stage["loss"], 1);

  PassPipeline pipeline(PassPipelineOptions{/*verify_after_each_pass=*/true, {}});
  pipeline.Add<AutogradPass>();
  pipeline.Add<OptimizerPass>();
  pipeline.Add<InferPass>();
  absl::StatusOr<bool> changed = pipeline.Run(&g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  ASSERT_TRUE(VerifyGraph(g).ok());

  // "<op>/gradN" ops come from op <op>; each sits on its forward op's stage and placement.
  int backward_ops = 0, per_stage[2] = {0, 0};
  for (const OpNode& op : g.ops()) {
    const size_t slash = op.name.find("/grad");
    if (forward_stage.count(op.name) || slash == std::string::npos) continue;
    const std::string forward = op.name.substr(0, slash);
    if (!forward_stage.count(forward)) continue;
    ++backward_ops;
    ++per_stage[op.stage];
    EXPECT_EQ(op.stage, forward_stage[forward]) << op.name;
    EXPECT_EQ(op.placement, g.op(g.FindOp(forward)).placement) << op.name;
  }
  EXPECT_GE(backward_ops, 7);
  EXPECT_GT(per_stage[0], 0);
  EXPECT_GT(per_stage[1], 0);
  // The optimizer updates each variable where the variable lives (its forward consumer's stage).
  for (const VariableUpdate& u : g.variable_updates()) {
    const TensorNode& variable = g.tensor(u.variable);
    const OpNode& update = g.op(g.tensor(u.new_value).producer);
    EXPECT_EQ(update.placement, variable.placement) << update.name;
  }
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
