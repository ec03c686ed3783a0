// What per-rank compiles at scale rest on, against the whole plan as reference:
//   - the schedule choice (kAuto): the cheapest of direct, ring and staged, with direct costed
//     last and given up on once dearer than the best other (BoxingCostAccumulator::
//     set_give_up_above); reference: every policy costed in full on its own, the first cheapest;
//   - Shape: the counts of Expand's plan without its steps;
//   - ExpandPart: one rank's part of Expand's plan, value for value and step for step.
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "oneflow_like/compiler/boxing/boxing.h"
#include "oneflow_like/compiler/boxing/boxing_cost.h"
#include "oneflow_like/compiler/boxing/boxing_test_util.h"

namespace oneflow_like {
namespace compiler {
namespace {

using testing_util::MakeRequest;

TEST(BoxingGiveUpTest, GivesUpOnlyOnceTheCostExceedsTheBound) {
  CostConfig config;
  const double one = TransferSeconds(1000, LinkClass::kSameNode, config);
  BoxingCostAccumulator acc(&config);
  acc.set_give_up_above(2.5 * one);
  acc.Transfer(Rank(0), Rank(1), 1000);
  acc.Transfer(Rank(2), Rank(1), 1000);  // rank 1 receives 2 messages: 2 x one
  EXPECT_FALSE(acc.gave_up());
  acc.Transfer(Rank(0), Rank(2), 1000);  // spread: nobody over 2 x one
  EXPECT_FALSE(acc.gave_up());
  acc.Transfer(Rank(3), Rank(1), 1000);  // rank 1: 3 x one > 2.5 x one
  EXPECT_TRUE(acc.gave_up());
  EXPECT_GT(acc.Finish().seconds, 2.5 * one);

  BoxingCostAccumulator never(&config);  // the default bound: infinity
  for (int i = 0; i < 100; ++i) never.Local(StepKind::kAdd, Rank(0), 1 << 20, 4);
  EXPECT_FALSE(never.gave_up());
}

// Full cost of `policy` alone, or nullopt where it does not apply.
std::optional<BoxingEstimate> Alone(const BoxingRequest& r, SchedulePolicy policy) {
  BoxingOptions options;
  options.policy = policy;
  absl::StatusOr<BoxingEstimate> e = EstimateBoxing(r, options);
  if (!e.ok()) return std::nullopt;
  return *e;
}

std::string Ranks(int n) {
  std::vector<std::string> r;
  for (int i = 0; i < n; ++i) r.push_back(absl::StrCat(i));
  return absl::StrCat("cpu:[", absl::StrJoin(r, ","), "]");
}

std::string Mesh(int rows, int cols) {
  std::vector<std::string> out;
  for (int i = 0; i < rows; ++i) {
    std::vector<std::string> row;
    for (int j = 0; j < cols; ++j) row.push_back(absl::StrCat(i * cols + j));
    out.push_back(absl::StrCat("[", absl::StrJoin(row, ","), "]"));
  }
  return absl::StrCat("cpu:[", absl::StrJoin(out, ","), "]");
}

TEST(BoxingChoiceTest, AutoIsTheFirstCheapestOfThePoliciesCostedInFull) {
  const std::string r64 = Ranks(64), r5 = Ranks(5), m88 = Mesh(8, 8), m43 = Mesh(4, 3);
  const std::vector<BoxingRequest> requests = {
      MakeRequest("[4096,64]", r64, "P", r64, "B"),        // ring far cheaper: direct given up
      MakeRequest("[64,8]", r64, "P", r64, "S(0)"),
      MakeRequest("[64]", r64, "S(0)", r64, "B"),
      MakeRequest("[3,2]", r5, "P", r5, "B"),              // tiny: direct may win
      MakeRequest("[7,5]", r5, "S(1)", r5, "S(0)"),        // direct only
      MakeRequest("[256,128]", m88, "P, P", m88, "S(0), S(0)"),
      MakeRequest("[256,128]", m88, "P, S(1)", m88, "B, S(1)"),
      MakeRequest("[13,11]", m43, "P, P", m43, "B, S(0)"),  // uneven
      MakeRequest("[12,6]", m43, "S(0), P", m43, "B, B"),
  };
  absl::flat_hash_set<BoxingSchedule> winners;
  for (const BoxingRequest& r : requests) {
    SCOPED_TRACE(r.ToString());
    const BoxingEstimate chosen = EstimateBoxing(r).value();
    // The reference: direct, ring, staged in this order, each in full; the first cheapest wins.
    std::optional<BoxingEstimate> best;
    for (SchedulePolicy p : {SchedulePolicy::kDirect, SchedulePolicy::kRing, SchedulePolicy::kStaged}) {
      std::optional<BoxingEstimate> e = Alone(r, p);
      if (e.has_value() && (!best.has_value() || e->cost.seconds < best->cost.seconds)) best = e;
    }
    ASSERT_TRUE(best.has_value());
    EXPECT_EQ(chosen.schedule_detail, best->schedule_detail);
    EXPECT_EQ(chosen.cost.seconds, best->cost.seconds);
    EXPECT_EQ(chosen.cost.num_transfers, best->cost.num_transfers);
    // The plan built is the one costed.
    const BoxingPlan plan = PointToPointExpander(BoxingOptions{}).Expand(r).value();
    EXPECT_EQ(plan.schedule_detail, chosen.schedule_detail);
    EXPECT_EQ(static_cast<int64_t>(plan.steps.size()), chosen.cost.num_transfers + chosen.cost.num_local_steps);
    EXPECT_EQ(BoxingCost(plan, BoxingOptions{}.cost).seconds, chosen.cost.seconds);
    winners.insert(chosen.schedule);
  }
  // Both outcomes are covered: direct given up on (ring or staged won) and direct kept.
  EXPECT_TRUE(winners.contains(BoxingSchedule::kDirect));
  EXPECT_TRUE(winners.contains(BoxingSchedule::kRing));
  EXPECT_TRUE(winners.contains(BoxingSchedule::kStaged));
}

// Shape (what a per-rank lowering keeps of plans its rank takes no part in) equals the counts of
// the plan Expand builds, without building it for point-to-point.
TEST(BoxingShapeTest, EqualsTheCountsOfTheExpandedPlan) {
  const std::string r8 = Ranks(8), m42 = Mesh(4, 2), other = "cpu:[8,9,10,11,12,13,14,15]";
  const std::vector<BoxingRequest> requests = {
      MakeRequest("[64,16]", r8, "P", r8, "B"),
      MakeRequest("[13,11]", r8, "S(0)", r8, "S(1)"),
      MakeRequest("[13,5]", r8, "B", r8, "B"),  // identity
      MakeRequest("[13,5]", r8, "S(0)", other, "B"),
      MakeRequest("[16,6]", m42, "P, P", m42, "S(0), B"),
      MakeRequest("[9,7]", m42, "S(1), S(0)", "cpu:[[8,9],[10,11],[12,13],[14,15]]", "S(0), S(1)"),
  };
  const PointToPointExpander p2p;
  const CollectiveExpander collective;
  for (const BoxingRequest& r : requests) {
    for (const BoxingExpander* expander : {static_cast<const BoxingExpander*>(&p2p),
                                           static_cast<const BoxingExpander*>(&collective)}) {
      SCOPED_TRACE(absl::StrCat(expander->name(), " ", r.ToString()));
      const BoxingPlan plan = expander->Expand(r).value();
      const BoxingShape shape = expander->Shape(r).value();
      int64_t tasks = 0, collectives = 0;
      for (const BoxingStep& step : plan.steps) {
        tasks += step.kind == StepKind::kCollective ? static_cast<int64_t>(step.group.size()) : 1;
        collectives += step.kind == StepKind::kCollective ? 1 : 0;
      }
      EXPECT_EQ(shape.num_source_values, plan.num_source_values());
      EXPECT_EQ(shape.num_values, static_cast<int32_t>(plan.values.size()));
      EXPECT_EQ(shape.num_tasks, tasks);
      EXPECT_EQ(shape.num_collectives, collectives);
      EXPECT_EQ(shape.dst_values, plan.dst_values);
      // Point-to-point never builds the steps; the collective expander keeps the plans it built
      // (one placement: one step per group), not its point-to-point fallback between placements.
      EXPECT_EQ(shape.plan.has_value(), expander == &collective && r.src_placement == r.dst_placement);
    }
  }
  // A bad request: the same error as Expand's.
  const BoxingRequest bad = MakeRequest("[3,5]", r8, "S(0)", r8, "B");
  EXPECT_EQ(p2p.Shape(bad).status(), p2p.Expand(bad).status());
  EXPECT_EQ(p2p.Shape(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BoxingPartTest, IsTheWholePlansPartOfTheRankValueForValue) {
  const std::string r8 = Ranks(8), m42 = Mesh(4, 2), other = "cpu:[8,9,10,11,12,13,14,15]";
  const std::vector<BoxingRequest> requests = {
      MakeRequest("[64,16]", r8, "P", r8, "B"),
      MakeRequest("[13,11]", r8, "S(0)", r8, "S(1)"),
      MakeRequest("[13,5]", r8, "B", r8, "B"),
      MakeRequest("[13,5]", r8, "S(0)", other, "B"),
      MakeRequest("[16,6]", m42, "P, P", m42, "S(0), B"),
      MakeRequest("[9,7]", m42, "S(1), S(0)", "cpu:[[8,9],[10,11],[12,13],[14,15]]", "S(0), S(1)"),
  };
  const PointToPointExpander p2p;
  for (const BoxingRequest& r : requests) {
    const BoxingPlan whole = p2p.Expand(r).value();
    const int32_t ns = whole.num_source_values();
    for (int32_t me : {0, 5, 9, 15}) {
      SCOPED_TRACE(absl::StrCat("rank ", me, ": ", r.ToString()));
      const BoxingPart part = p2p.ExpandPart(r, Rank(me)).value();
      ASSERT_TRUE(part.reduced);
      EXPECT_EQ(part.num_steps, static_cast<int64_t>(whole.steps.size()));
      EXPECT_EQ(part.plan.schedule_detail, whole.schedule_detail);
      ASSERT_EQ(part.original_value.size(), part.plan.values.size());
      std::vector<int32_t> new_id(whole.values.size(), -1);
      for (size_t v = 0; v < part.plan.values.size(); ++v) {
        const int32_t o = part.original_value[v];
        ASSERT_TRUE(o >= 0 && o < static_cast<int32_t>(whole.values.size()));
        if (v > 0) EXPECT_LT(part.original_value[v - 1], o);  // in order
        new_id[o] = static_cast<int32_t>(v);
        EXPECT_EQ(part.plan.values[v].device, whole.values[o].device);
        EXPECT_EQ(part.plan.values[v].region, whole.values[o].region);
      }
      for (int32_t v = 0; v < ns; ++v) EXPECT_EQ(new_id[v], v);  // every source, same id
      ASSERT_EQ(part.plan.dst_values.size(), whole.dst_values.size());
      for (size_t d = 0; d < whole.dst_values.size(); ++d) EXPECT_EQ(part.plan.dst_values[d], new_id[whole.dst_values[d]]);
      // Step k of the part defines value ns + k; it is the whole plan's step defining that value.
      ASSERT_EQ(part.plan.steps.size(), part.plan.values.size() - ns);
      for (size_t k = 0; k < part.plan.steps.size(); ++k) {
        const BoxingStep& step = part.plan.steps[k];
        const BoxingStep& same = whole.steps[part.original_value[ns + k] - ns];
        EXPECT_EQ(step.output, static_cast<int32_t>(ns + k));
        EXPECT_EQ(step.kind, same.kind);
        EXPECT_EQ(step.rank, same.rank);
        EXPECT_EQ(step.peer, same.peer);
        EXPECT_EQ(step.bytes, same.bytes);
        ASSERT_EQ(step.inputs.size(), same.inputs.size());
        for (size_t i = 0; i < step.inputs.size(); ++i) EXPECT_EQ(step.inputs[i], new_id[same.inputs[i]]);
      }
      // Every step the rank runs or sends from is there, with its inputs.
      for (int32_t k : whole.StepsOfRank(Rank(me))) {
        ASSERT_GE(new_id[whole.steps[k].output], 0) << "step " << k;
        for (int32_t in : whole.steps[k].inputs) EXPECT_GE(new_id[in], 0) << "step " << k;
      }
      EXPECT_EQ(part.plan.StepsOfRank(Rank(me)).size(), whole.StepsOfRank(Rank(me)).size());
    }
  }
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
