// How SimulatePlanTime prices COLLECTIVE firings: a ring over n ranks on the bytes the call
// moves. A bucket (CollectiveParams.parts) moves its parts (ALL_REDUCE) or its staging slot
// (REDUCE_SCATTER), never the staging slot and the shards copied out of it.
#include "tools/plan/plan_sim.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/plan/plan_test_util.h"

namespace oneflow_like {
namespace plan_tool {
namespace {

using compiler::F32;
using compiler::TestPlanBuilder;

RegionProto Region(std::vector<int64_t> begin, std::vector<int64_t> end) {
  RegionProto r;
  for (int64_t b : begin) r.add_begin(b);
  for (int64_t e : end) r.add_end(e);
  return r;
}

// A part over 2 ranks of `whole` (inputs all of it), outputs all of it or split on axis 0.
CollectiveParams Part(std::vector<int64_t> dims, bool split) {
  CollectiveParams p;
  for (int64_t d : dims) p.add_logical_dims(d);
  *p.mutable_group_region() = Region(std::vector<int64_t>(dims.size(), 0), dims);
  for (int m = 0; m < 2; ++m) {
    *p.add_input_regions() = p.group_region();
    RegionProto out = p.group_region();
    if (split) {
      out.set_begin(0, m * dims[0] / 2);
      out.set_end(0, (m + 1) * dims[0] / 2);
    }
    *p.add_output_regions() = out;
  }
  return p;
}

// 2 ranks, each: inputs float32[4,4] and float32[6] -> one bucket -> a sink. Both kinds move
// 64 + 24 = 88 bytes; the REDUCE_SCATTER's register holds 44 bytes of shards besides.
PlanProto BucketPlan(CollectiveParams::Kind kind) {
  const bool scatter = kind == CollectiveParams::REDUCE_SCATTER;
  const std::vector<std::vector<int64_t>> dims = {{4, 4}, {6}};
  TestPlanBuilder b(2, 1);
  for (int32_t r = 0; r < 2; ++r) {
    const int64_t task = b.AddCollective(r, "bucket", {0, 1}, 0, kind);
    std::vector<TensorDescProto> slots;
    for (size_t k = 0; k < dims.size(); ++k) {
      *b.task(task)->mutable_collective()->add_parts() = Part(dims[k], scatter);
      auto [source, g] = b.AddInput(r, "g" + std::to_string(k), 1, F32(dims[k]));
      b.Connect(g, task);
      std::vector<int64_t> out = dims[k];
      if (scatter) out[0] /= 2;
      slots.push_back(F32(out));
    }
    if (scatter) slots.push_back(F32({22}));
    b.AddSink(b.AddRegister(task, "bucket", 1, slots), "y");
  }
  return b.Build();
}

// Seconds of the first firing of rank 0's task `name`.
double FiringSeconds(const Simulation& sim, const std::string& name) {
  for (const Firing& f : sim.trace) {
    if (sim.task_names[f.task] == std::make_pair(0, name)) return f.end - f.start;
  }
  ADD_FAILURE() << "no firing of " << name;
  return -1;
}

TEST(PlanSimTest, ABucketIsPricedOnTheBytesItsCallMoves) {
  SimOptions options;
  options.steps = 1;
  const auto& link = options.cost.link(compiler::LinkClass::kSameNode);
  const double expected = 2.0 * (2 - 1) * (link.alpha_seconds + 88.0 / 2 * link.beta_seconds_per_byte);
  for (auto kind : {CollectiveParams::ALL_REDUCE, CollectiveParams::REDUCE_SCATTER}) {
    absl::StatusOr<Simulation> sim = SimulatePlanTime(BucketPlan(kind), options);
    ASSERT_TRUE(sim.ok()) << sim.status();
    EXPECT_DOUBLE_EQ(FiringSeconds(*sim, "bucket"), expected) << CollectiveParams::Kind_Name(kind);
  }
}

}  // namespace
}  // namespace plan_tool
}  // namespace oneflow_like
