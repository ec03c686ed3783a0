// Collective-style lowering (BoxingStyle::kCollective): the geometry every COLLECTIVE task
// carries (CollectiveParams.logical_dims, group_region, input_regions, output_regions), against
// regions written out by hand for uneven splits on 3 ranks and on a 2x2 mesh, and the verifier
// accepting the lowered plans (and rejecting one whose regions were tampered with).
#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/lower/lower_test_util.h"
#include "oneflow_like/compiler/plan/plan_verifier.h"

namespace oneflow_like {
namespace compiler {
namespace testing {
namespace {

// "[0:3,0:5]".
std::string Text(const RegionProto& region) {
  std::string out = "[";
  for (int a = 0; a < region.begin_size(); ++a) {
    out += (a > 0 ? "," : "") + std::to_string(region.begin(a)) + ":" + std::to_string(region.end(a));
  }
  return out + "]";
}

// One collective call as seen from its first member task.
struct Call {
  CollectiveParams::Kind kind;
  std::vector<int32_t> ranks;
  std::string group_region;
  std::vector<std::string> inputs, outputs;
};

// The calls of the plan in global_order, after checking that every member task of a call (one
// per group rank) carries identical params, and that its slots have its regions' shapes.
std::vector<Call> Calls(const PlanProto& plan) {
  std::vector<const TaskProto*> tasks = TasksOfType(plan, TaskProto::COLLECTIVE);
  std::stable_sort(tasks.begin(), tasks.end(), [](const TaskProto* a, const TaskProto* b) {
    return a->collective().global_order() < b->collective().global_order();
  });
  std::vector<Call> calls;
  for (size_t i = 0; i < tasks.size();) {
    const CollectiveParams& p = tasks[i]->collective();
    size_t j = i;
    for (; j < tasks.size() && tasks[j]->collective().global_order() == p.global_order(); ++j) {
      EXPECT_EQ(tasks[j]->collective().SerializeAsString(), p.SerializeAsString()) << tasks[j]->name();
      const int m = static_cast<int>(std::find(p.ranks().begin(), p.ranks().end(), tasks[j]->rank()) -
                                     p.ranks().begin());
      const RegisterProto* out = FindLocalRegister(plan, tasks[j]->rank(), tasks[j]->outputs(0).register_id());
      if (out == nullptr) {
        ADD_FAILURE() << tasks[j]->name() << " has no local output register";
        continue;
      }
      for (int a = 0; a < p.output_regions(m).begin_size(); ++a) {
        EXPECT_EQ(out->slots(0).dims(a), p.output_regions(m).end(a) - p.output_regions(m).begin(a)) << tasks[j]->name();
      }
    }
    EXPECT_EQ(static_cast<int>(j - i), p.ranks_size()) << "members of global_order " << p.global_order();
    Call call{p.kind(), std::vector<int32_t>(p.ranks().begin(), p.ranks().end()), Text(p.group_region()), {}, {}};
    for (const RegionProto& r : p.input_regions()) call.inputs.push_back(Text(r));
    for (const RegionProto& r : p.output_regions()) call.outputs.push_back(Text(r));
    calls.push_back(std::move(call));
    i = j;
  }
  return calls;
}

PlanProto Lower(const std::string& placement, const std::string& shape, const std::string& src_sbp,
                const std::string& dst_sbp, BoxingStyle boxing = BoxingStyle::kCollective) {
  LowerOptions options;
  options.boxing = boxing;
  const PlanProto plan = LowerTextOrDie("x = input(shape=" + shape + ") placement=" + placement + " sbp=[" + src_sbp +
                                            "]\ny = relu(x) in_sbp=[[" + dst_sbp + "]]\noutput(y)\n",
                                        options);
  const absl::Status verified = VerifyPlan(plan);
  EXPECT_TRUE(verified.ok()) << verified;
  return plan;
}

void ExpectCall(const Call& call, CollectiveParams::Kind kind, std::vector<int32_t> ranks, const std::string& group,
                std::vector<std::string> inputs, std::vector<std::string> outputs) {
  EXPECT_EQ(CollectiveParams::Kind_Name(call.kind), CollectiveParams::Kind_Name(kind));
  EXPECT_EQ(call.ranks, ranks);
  EXPECT_EQ(call.group_region, group);
  EXPECT_EQ(call.inputs, inputs);
  EXPECT_EQ(call.outputs, outputs);
}

const char kThree[] = "cpu:[0,1,2]";
const char kMesh[] = "cpu:[[0,1],[2,3]]";
const std::string kWhole = "[0:7,0:5]";
// float32[7,5] over 3 ranks: rows 3, 2, 2; columns 2, 2, 1.
const std::vector<std::string> kRows = {"[0:3,0:5]", "[3:5,0:5]", "[5:7,0:5]"};
const std::vector<std::string> kColumns = {"[0:7,0:2]", "[0:7,2:4]", "[0:7,4:5]"};

TEST(CollectiveLowerTest, OneDimensionalTransitionsCarryUnevenRegions) {
  const std::vector<std::string> whole(3, kWhole);
  {
    SCOPED_TRACE("S(0) -> B");
    const PlanProto plan = Lower(kThree, "[7,5]", "S(0)", "B");
    const std::vector<Call> calls = Calls(plan);
    ASSERT_EQ(calls.size(), 1u);
    ExpectCall(calls[0], CollectiveParams::ALL_GATHER, {0, 1, 2}, kWhole, kRows, whole);
    const CollectiveParams& p = TasksOfType(plan, TaskProto::COLLECTIVE)[0]->collective();
    EXPECT_EQ(std::vector<int64_t>(p.logical_dims().begin(), p.logical_dims().end()), (std::vector<int64_t>{7, 5}));
  }
  {
    SCOPED_TRACE("P -> B");
    const std::vector<Call> calls = Calls(Lower(kThree, "[7,5]", "P", "B"));
    ASSERT_EQ(calls.size(), 1u);
    ExpectCall(calls[0], CollectiveParams::ALL_REDUCE, {0, 1, 2}, kWhole, whole, whole);
  }
  {
    SCOPED_TRACE("P -> S(1)");
    const std::vector<Call> calls = Calls(Lower(kThree, "[7,5]", "P", "S(1)"));
    ASSERT_EQ(calls.size(), 1u);
    ExpectCall(calls[0], CollectiveParams::REDUCE_SCATTER, {0, 1, 2}, kWhole, whole, kColumns);
  }
  {
    SCOPED_TRACE("S(0) -> S(1)");
    const std::vector<Call> calls = Calls(Lower(kThree, "[7,5]", "S(0)", "S(1)"));
    ASSERT_EQ(calls.size(), 1u);
    ExpectCall(calls[0], CollectiveParams::ALL_TO_ALL, {0, 1, 2}, kWhole, kRows, kColumns);
  }
}

TEST(CollectiveLowerTest, MeshTransitionsWorkOnTheBoxOfEachGroup) {
  // [7,5] on the 2x2 mesh: rows split 4 / 3 along mesh axis 0, columns 3 / 2 along axis 1.
  {
    // Axis 0 first: groups {0,2} and {1,3} gather rows within their column block, then groups
    // {0,1} and {2,3} gather the column blocks.
    SCOPED_TRACE("S(0), S(1) -> B, B");
    const std::vector<Call> calls = Calls(Lower(kMesh, "[7,5]", "S(0), S(1)", "B, B"));
    ASSERT_EQ(calls.size(), 4u);
    ExpectCall(calls[0], CollectiveParams::ALL_GATHER, {0, 2}, "[0:7,0:3]", {"[0:4,0:3]", "[4:7,0:3]"},
               {"[0:7,0:3]", "[0:7,0:3]"});
    ExpectCall(calls[1], CollectiveParams::ALL_GATHER, {1, 3}, "[0:7,3:5]", {"[0:4,3:5]", "[4:7,3:5]"},
               {"[0:7,3:5]", "[0:7,3:5]"});
    ExpectCall(calls[2], CollectiveParams::ALL_GATHER, {0, 1}, kWhole, {"[0:7,0:3]", "[0:7,3:5]"}, {kWhole, kWhole});
    ExpectCall(calls[3], CollectiveParams::ALL_GATHER, {2, 3}, kWhole, {"[0:7,0:3]", "[0:7,3:5]"}, {kWhole, kWhole});
  }
  {
    // Partial sums along mesh axis 0, reduced within each column block.
    SCOPED_TRACE("P, S(1) -> B, S(1)");
    const std::vector<Call> calls = Calls(Lower(kMesh, "[7,5]", "P, S(1)", "B, S(1)"));
    ASSERT_EQ(calls.size(), 2u);
    ExpectCall(calls[0], CollectiveParams::ALL_REDUCE, {0, 2}, "[0:7,0:3]", {"[0:7,0:3]", "[0:7,0:3]"},
               {"[0:7,0:3]", "[0:7,0:3]"});
    ExpectCall(calls[1], CollectiveParams::ALL_REDUCE, {1, 3}, "[0:7,3:5]", {"[0:7,3:5]", "[0:7,3:5]"},
               {"[0:7,3:5]", "[0:7,3:5]"});
  }
  {
    // Axis 1 only: within each row block, partial sums become column blocks.
    SCOPED_TRACE("S(0), P -> S(0), S(1)");
    const std::vector<Call> calls = Calls(Lower(kMesh, "[7,5]", "S(0), P", "S(0), S(1)"));
    ASSERT_EQ(calls.size(), 2u);
    ExpectCall(calls[0], CollectiveParams::REDUCE_SCATTER, {0, 1}, "[0:4,0:5]", {"[0:4,0:5]", "[0:4,0:5]"},
               {"[0:4,0:3]", "[0:4,3:5]"});
    ExpectCall(calls[1], CollectiveParams::REDUCE_SCATTER, {2, 3}, "[4:7,0:5]", {"[4:7,0:5]", "[4:7,0:5]"},
               {"[4:7,0:3]", "[4:7,3:5]"});
  }
}

// kAuto: per transition the cheaper of the two forms by the cost model, recorded with both
// prices; a large all-reduce becomes one collective (its local adds and concats cost more than
// the collective's ring), a transition with no collective form stays point-to-point.
TEST(CollectiveLowerTest, AutoPicksTheCheaperFormAndRecordsWhy) {
  for (const char* shape : {"[7,5]", "[1024,1024]"}) {
    SCOPED_TRACE(shape);
    const PlanProto plan = Lower(kThree, shape, "P", "B", BoxingStyle::kAuto);
    ASSERT_EQ(plan.boxing_choices_size(), 1);
    const BoxingChoiceProto& choice = plan.boxing_choices(0);
    EXPECT_NE(choice.transition().find("(P) -> "), std::string::npos) << choice.transition();
    EXPECT_GT(choice.point_to_point_seconds(), 0);
    EXPECT_GT(choice.collective_seconds(), 0);
    EXPECT_EQ(choice.uses(), 1);
    const bool collective = choice.collective_seconds() < choice.point_to_point_seconds();
    EXPECT_EQ(choice.chosen(), collective ? "collective" : "point_to_point");
    EXPECT_EQ(TasksOfType(plan, TaskProto::COLLECTIVE).empty(), !collective);
    EXPECT_EQ(TasksOfType(plan, TaskProto::BOXING_ADD).empty(), collective);
  }
  EXPECT_EQ(Lower(kThree, "[1024,1024]", "P", "B", BoxingStyle::kAuto).boxing_choices(0).chosen(), "collective");
  // point-to-point and collective plans carry no choices
  EXPECT_EQ(Lower(kThree, "[7,5]", "P", "B", BoxingStyle::kPointToPoint).boxing_choices_size(), 0);
  EXPECT_EQ(Lower(kThree, "[7,5]", "P", "B").boxing_choices_size(), 0);
}

TEST(CollectiveLowerTest, TamperedRegionsAreRejectedByTheVerifier) {
  PlanProto plan = Lower(kThree, "[7,5]", "S(0)", "S(1)");
  ASSERT_TRUE(VerifyPlan(plan).ok());
  // Every member now claims rank 1 sends rows [3:6): consistent across members, not a tiling.
  for (RankPlanProto& rank_plan : *plan.mutable_rank_plans()) {
    for (TaskProto& task : *rank_plan.mutable_tasks()) {
      if (task.type() == TaskProto::COLLECTIVE) task.mutable_collective()->mutable_input_regions(1)->set_end(0, 6);
    }
  }
  const absl::Status status = VerifyPlan(plan);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(status.message().find("(ALL_TO_ALL): input regions of member 1 (rank 1) [3:6,0:5] and member 2 "
                                  "(rank 2) [5:7,0:5] overlap"),
            std::string::npos)
      << status;
}

}  // namespace
}  // namespace testing
}  // namespace compiler
}  // namespace oneflow_like
