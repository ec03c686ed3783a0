#include "oneflow_like/compiler/driver/compile.h"

#include <map>
#include <set>

#include "gmock/gmock.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/compiler/text_format.h"
#include "oneflow_like/models/gpt.h"

namespace oneflow_like {
namespace compiler {
namespace {

using ::testing::HasSubstr;
using testing::ExpectError;

class CompileTest : public ::testing::Test {
 protected:
  PlanProto CompileText(const std::string& text, CompileOptions options = {}) {
    options.verify_each_pass = true;
    absl::StatusOr<PlanProto> plan = Compile(testing::ParseOrDie(text, *registry_), options);
    EXPECT_TRUE(plan.ok()) << plan.status();
    return plan.ok() ? *plan : PlanProto();
  }
  std::unique_ptr<OpRegistry> registry_ = testing::BuiltinRegistry();
};

std::map<TaskProto::Type, int> TaskTypes(const RankPlanProto& rank) {
  std::map<TaskProto::Type, int> n;
  for (const TaskProto& t : rank.tasks()) ++n[t.type()];
  return n;
}

std::string DeterministicBytes(const PlanProto& plan) {
  std::string bytes;
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  plan.SerializeToCodedStream(&coded);
  coded.Trim();
  return bytes;
}

const OpSbpDecisionProto* Decision(const PlanProto& plan, const std::string& op) {
  for (const OpSbpDecisionProto& d : plan.sbp_decisions()) {
    if (d.op_name() == op) return &d;
  }
  return nullptr;
}

TEST_F(CompileTest, DataParallelMlpCompilesToASealedVerifiedPlan) {
  PlanProto plan = CompileText(testing::kMlpText);
  EXPECT_EQ(plan.world_size(), 4);
  ASSERT_EQ(plan.rank_plans_size(), 4);
  EXPECT_THAT(plan.content_hash(), HasSubstr("fnv1a64:"));
  EXPECT_EQ(plan.pieces_per_step(), 1);
  // Every rank runs the same program: forward, backward and the AdamW updates of 3 params.
  for (const RankPlanProto& rank : plan.rank_plans()) {
    std::map<TaskProto::Type, int> n = TaskTypes(rank);
    EXPECT_EQ(n, TaskTypes(plan.rank_plans(0))) << "rank " << rank.rank();
    int updates = 0;
    for (const TaskProto& t : rank.tasks()) {
      if (t.type() == TaskProto::COMPUTE && t.compute().op_type() == "adam_update") ++updates;
    }
    EXPECT_EQ(updates, 3);
    // Gradients of broadcast weights are partial sums: data parallelism all-reduces them,
    // which on CPU is transfers plus local adds.
    EXPECT_GT(n[TaskProto::TRANSFER], 0);
    EXPECT_GT(n[TaskProto::BOXING_ADD], 0);
  }
  // The recorded decision explains the data-parallel choice for the first matmul.
  const OpSbpDecisionProto* fc1 = Decision(plan, "h");
  ASSERT_NE(fc1, nullptr);
  ASSERT_GT(fc1->candidates_size(), 1);
  const SbpCandidateProto& won = fc1->candidates(fc1->chosen());
  EXPECT_EQ(won.inputs(0).sbp(0).kind(), SbpProto::SPLIT);  // x: S(0)
  EXPECT_EQ(won.inputs(1).sbp(0).kind(), SbpProto::BROADCAST);  // w1: B
  // The record adds up: total = compute + the boxing into each input. (A losing candidate may
  // show a lower local total: the boxing of an op's outputs is charged to its consumers.)
  EXPECT_NEAR(won.total_seconds(), won.compute_seconds() + won.comm_seconds(), 1e-12);
  EXPECT_GT(won.compute_seconds(), 0);
  const RankMemoryProto& mem = plan.memory(0);
  EXPECT_GT(mem.planned_bytes(), 0);
  EXPECT_LT(mem.planned_bytes(), mem.naive_bytes());  // lifetimes let registers share bytes
  CompileOptions own_bytes;
  own_bytes.reuse_memory = false;
  PlanProto unshared = CompileText(testing::kMlpText, own_bytes);
  EXPECT_EQ(unshared.memory(0).planned_bytes(), unshared.memory(0).naive_bytes());
}

TEST_F(CompileTest, CompilationIsDeterministic) {
  PlanProto a = CompileText(testing::kGptBlockText);
  PlanProto b = CompileText(testing::kGptBlockText);
  // Byte-identical in the deterministic serialization (map entries sorted), which the content
  // hash covers; plain SerializeToString may order map entries differently.
  const std::string sa = DeterministicBytes(a), sb = DeterministicBytes(b);
  EXPECT_GT(sa.size(), 1000u);
  if (sa != sb) {
    std::string diff;
    google::protobuf::util::MessageDifferencer differencer;
    differencer.ReportDifferencesToString(&diff);
    differencer.Compare(a, b);
    ADD_FAILURE() << "two compilations differ: " << diff.substr(0, 3000);
  }
  EXPECT_EQ(a.content_hash(), b.content_hash());
  EXPECT_EQ(a.pieces_per_step(), 2);  // micro_batches=2
}

TEST_F(CompileTest, PipelinedTensorParallelGptCompiles) {
  models::GptConfig c{.vocab = 64, .seq_len = 8, .n_layer = 2, .n_embd = 16, .n_head = 2, .batch = 4};
  models::TrainOptions train;
  train.micro_batches = 4;
  absl::StatusOr<Graph> g = models::BuildGptJob(*registry_, c, models::ParallelLayout{.dp = 2, .tp = 2, .pp = 2}, train);
  ASSERT_TRUE(g.ok()) << g.status();
  CompileOptions options;
  options.verify_each_pass = true;
  CompileReport report;
  absl::StatusOr<PlanProto> plan = Compile(*std::move(g), options, &report);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->world_size(), 8);
  EXPECT_EQ(plan->pieces_per_step(), 4);
  std::set<std::string> phases;
  for (const auto& [phase, seconds] : report.phase_seconds) phases.insert(phase);
  EXPECT_TRUE(phases.count("sbp_selection") && phases.count("lower") && phases.count("verify_plan"));
  // Gradients are accumulated over the 4 micro-batches before the optimizer.
  int accumulate = 0;
  for (const TaskProto& t : plan->rank_plans(0).tasks()) accumulate += t.type() == TaskProto::ACCUMULATE;
  EXPECT_GT(accumulate, 0);
}

TEST_F(CompileTest, UserErrorsPassThroughUnchanged) {
  absl::StatusOr<Graph> g = ParseGraph(R"(
x = input(shape=[8,4]) placement=cpu:[0,1]
w = variable(shape=[5,3])
y = matmul(x, w)
loss = reduce_mean(y)
train(loss, optimizer=sgd(lr=0.1))
)", *registry_);
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<PlanProto> plan = Compile(*std::move(g));
  ExpectError(plan.status(), absl::StatusCode::kInvalidArgument, {"matmul 'y'", "float32[8,4]", "float32[5,3]"});
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
