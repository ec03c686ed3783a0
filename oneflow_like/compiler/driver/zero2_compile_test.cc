// ZeRO-2 (config zero_stage = 2, optimizer_pass.h) in the compiled plan of the data-parallel MLP
// (4 ranks): each sharded parameter's variable is stored as its S(0) shard; ONE all-gather per
// parameter per step reads the variable and feeds every consumer (forward and backward; under
// micro-batches through REPEAT, so still once per step); the optimizer's new value goes straight
// back into the variable, with no all-gather after the update (which is what ZeRO-1 does).
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/driver/compile.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/compiler/text_format.h"

namespace oneflow_like {
namespace compiler {
namespace {

struct RankIndex {
  std::map<int64_t, const TaskProto*> producer;                // register id -> producing task
  std::map<int64_t, std::vector<const TaskProto*>> consumers;  // register id -> consuming tasks
  const TaskProto* Task(const std::string& op_name) const {
    for (const auto& [reg, task] : producer) {
      if (task->type() == TaskProto::COMPUTE && task->op_name() == op_name) return task;
    }
    return nullptr;
  }
  const TaskProto* VariableSource(const std::string& name) const {
    for (const auto& [reg, task] : producer) {
      if (task->type() == TaskProto::SOURCE && task->io().tensor_name() == name) return task;
    }
    return nullptr;
  }
};

RankIndex Index(const RankPlanProto& rank) {
  RankIndex index;
  for (const TaskProto& t : rank.tasks()) {
    for (int64_t r : t.produced_register_ids()) index.producer[r] = &t;
    for (int64_t r : t.consumed_register_ids()) index.consumers[r].push_back(&t);
  }
  return index;
}

bool IsAllGather(const TaskProto* t) {
  return t != nullptr && t->type() == TaskProto::COLLECTIVE && t->collective().kind() == CollectiveParams::ALL_GATHER;
}

PlanProto CompileMlp(int zero_stage, int micro_batches = 0) {
  auto registry = testing::BuiltinRegistry();
  Graph g = testing::ParseOrDie(testing::kMlpText, *registry);
  g.mutable_config()->set_zero_stage(zero_stage);
  g.mutable_config()->set_micro_batches(micro_batches);
  CompileOptions options;
  options.boxing = BoxingStyle::kCollective;
  options.bucket_bytes = 0;  // one call per transition: the all-gathers are easy to count
  options.verify_each_pass = true;
  absl::StatusOr<PlanProto> plan = Compile(std::move(g), options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : PlanProto();
}

const TensorBindingProto* Binding(const RankPlanProto& rank, const std::string& name) {
  for (const TensorBindingProto& b : rank.bindings()) {
    if (b.tensor_name() == name) return &b;
  }
  return nullptr;
}

TEST(Zero2CompileTest, OneAllGatherPerParameterFeedsForwardAndBackwardAndNoneFollowsTheUpdate) {
  const PlanProto plan = CompileMlp(2);
  ASSERT_EQ(plan.rank_plans_size(), 4);
  for (const RankPlanProto& rank : plan.rank_plans()) {
    SCOPED_TRACE(rank.rank());
    const RankIndex index = Index(rank);
    int all_gathers = 0;
    for (const TaskProto& t : rank.tasks()) all_gathers += IsAllGather(&t) ? 1 : 0;
    EXPECT_EQ(all_gathers, 3) << "one per parameter (w1, b1, w2), nothing else";
    // The variable is stored as its shard: [128,256] in 4 parts of 32 rows.
    const TensorBindingProto* w1 = Binding(rank, "w1");
    ASSERT_NE(w1, nullptr);
    EXPECT_EQ(w1->shard().offset(0), 32 * rank.rank());
    EXPECT_EQ(w1->shard().nd_sbp().sbp(0).kind(), SbpProto::SPLIT);
    // {parameter, its forward consumer, the input index, a backward consumer reading it}
    struct Use {
      std::string parameter, forward, backward;
    };
    for (const Use& u : {Use{"w1", "h", ""}, Use{"b1", "hb", ""}, Use{"w2", "logits", "logits/grad0"}}) {
      SCOPED_TRACE(u.parameter);
      const TaskProto* source = index.VariableSource(u.parameter);
      ASSERT_NE(source, nullptr);
      const int64_t stored = source->produced_register_ids(0);
      // The stored shard feeds the all-gather and the optimizer (Z = Z: no boxing) only.
      const TaskProto* gather = nullptr;
      std::set<std::string> readers;
      for (const TaskProto* t : index.consumers.at(stored)) {
        if (IsAllGather(t)) {
          EXPECT_EQ(gather, nullptr) << "gathered twice";
          gather = t;
        } else {
          readers.insert(t->op_name());
        }
      }
      ASSERT_NE(gather, nullptr);
      EXPECT_EQ(readers, std::set<std::string>{u.parameter + "/adam_update"});
      // The forward consumer (and the backward one) read the gathered register.
      const int64_t gathered = gather->produced_register_ids(0);
      std::set<std::string> gathered_readers;
      for (const TaskProto* t : index.consumers.at(gathered)) gathered_readers.insert(t->op_name());
      EXPECT_EQ(gathered_readers.count(u.forward), 1u);
      if (!u.backward.empty()) EXPECT_EQ(gathered_readers.count(u.backward), 1u);
      // The update "<w>/new" goes back to the variable's holder with no boxing in between.
      const TaskProto* update = index.Task(u.parameter + "/adam_update");
      ASSERT_NE(update, nullptr);
      const int64_t new_value = update->outputs(0).register_id();
      for (const TaskProto* t : index.consumers.at(new_value)) {
        EXPECT_EQ(t->type(), TaskProto::SOURCE) << t->name() << " reads " << u.parameter << "/new";
      }
    }
  }
}

TEST(Zero2CompileTest, ZeroOneGathersAfterTheUpdateInstead) {
  // The contrast the test above relies on: under ZeRO-1 w2 (whose layout the SBP selection picks:
  // B) stays whole and its update is all-gathered before it reaches the variable.
  const PlanProto plan = CompileMlp(1);
  const RankIndex index = Index(plan.rank_plans(0));
  const TaskProto* update = index.Task("w2/adam_update");
  ASSERT_NE(update, nullptr);
  bool gathered = false;
  for (const TaskProto* t : index.consumers.at(update->outputs(0).register_id())) gathered |= IsAllGather(t);
  EXPECT_TRUE(gathered);
  EXPECT_EQ(Binding(plan.rank_plans(0), "w2")->shard().nd_sbp().sbp(0).kind(), SbpProto::BROADCAST);
}

TEST(Zero2CompileTest, MicroBatchesStillGatherOncePerStep) {
  const PlanProto plan = CompileMlp(2, /*micro_batches=*/2);
  EXPECT_EQ(plan.pieces_per_step(), 2);
  const RankPlanProto& rank = plan.rank_plans(0);
  const RankIndex index = Index(rank);
  int all_gathers = 0;
  for (const TaskProto& t : rank.tasks()) {
    if (!IsAllGather(&t)) continue;
    ++all_gathers;
    // Step rate: the gather reads the variable (once per step) and REPEAT re-emits its result
    // per micro-batch.
    EXPECT_EQ(index.producer.at(t.consumed_register_ids(0))->type(), TaskProto::SOURCE) << t.name();
    for (const TaskProto* c : index.consumers.at(t.produced_register_ids(0))) {
      EXPECT_EQ(c->type(), TaskProto::REPEAT) << t.name() << " -> " << c->name();
    }
  }
  EXPECT_EQ(all_gathers, 3);
}

TEST(Zero2CompileTest, StagesAboveTwoAreRefused) {
  auto registry = testing::BuiltinRegistry();
  std::string text = testing::kMlpText;
  text.replace(text.find("seed=1)"), 7, "seed=1, zero_stage=3)");
  absl::StatusOr<Graph> g = ParseGraph(text, *registry);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("zero_stage 3 is not supported (0, 1 or 2)"), std::string::npos) << g.status();
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
