// VerifyPlan on bucketed COLLECTIVE tasks (CollectiveParams.parts, docs/plan_format.md
// "Buckets"): good ALL_REDUCE and REDUCE_SCATTER buckets pass; each broken rule is reported
// naming the task and, for a part's geometry, the part.
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/plan/plan_test_util.h"
#include "oneflow_like/compiler/plan/plan_verifier.h"

namespace oneflow_like {
namespace compiler {
namespace {

void ExpectFails(const PlanProto& plan, std::initializer_list<std::string> parts) {
  const absl::Status status = VerifyPlan(plan);
  ASSERT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  for (const std::string& part : parts) {
    EXPECT_NE(status.message().find(part), std::string::npos)
        << "missing \"" << part << "\" in: " << status.message();
  }
}

RegionProto Region(std::vector<int64_t> begin, std::vector<int64_t> end) {
  RegionProto r;
  for (int64_t b : begin) r.add_begin(b);
  for (int64_t e : end) r.add_end(e);
  return r;
}

std::vector<int64_t> Dims(const RegionProto& r) {
  std::vector<int64_t> d;
  for (int a = 0; a < r.begin_size() && a < r.end_size(); ++a) d.push_back(r.end(a) - r.begin(a));
  return d;
}

// A part over 3 members: inputs all of `whole`; outputs all of it, or `outputs`.
CollectiveParams Part(const RegionProto& whole, std::vector<RegionProto> outputs = {}) {
  CollectiveParams p;
  for (int64_t d : whole.end()) p.add_logical_dims(d);
  *p.mutable_group_region() = whole;
  for (int m = 0; m < 3; ++m) {
    *p.add_input_regions() = whole;
    *p.add_output_regions() = outputs.empty() ? whole : outputs[m];
  }
  return p;
}

using Edit = std::function<void(TestPlanBuilder&, const std::vector<int64_t>&)>;

// One bucket over ranks {0, 1, 2}: float32[7,4], float32[5] and float32[3,6]; a REDUCE_SCATTER
// splits them on rows 3/2/2, 2/2/1 and columns 2/2/2. Per rank: one input per part, the bucket
// task, its register (slot k = part k, then the staging slot), a sink of slot 0. `edit` breaks
// something before the slots are sized from each task's parts, `after` once the plan is built.
PlanProto Bucket(CollectiveParams::Kind kind, const Edit& edit = nullptr,
                 const std::function<void(PlanProto*)>& after = nullptr) {
  const bool scatter = kind == CollectiveParams::REDUCE_SCATTER;
  const RegionProto a = Region({0, 0}, {7, 4}), b = Region({0}, {5}), c = Region({0, 0}, {3, 6});
  std::vector<CollectiveParams> parts = {Part(a), Part(b), Part(c)};
  if (scatter) {
    parts = {Part(a, {Region({0, 0}, {3, 4}), Region({3, 0}, {5, 4}), Region({5, 0}, {7, 4})}),
             Part(b, {Region({0}, {2}), Region({2}, {4}), Region({4}, {5})}),
             Part(c, {Region({0, 0}, {3, 2}), Region({0, 2}, {3, 4}), Region({0, 4}, {3, 6})})};
  }
  TestPlanBuilder builder(3, 1);
  std::vector<int64_t> tasks;
  for (int32_t r = 0; r < 3; ++r) {
    tasks.push_back(builder.AddCollective(r, "bucket", {0, 1, 2}, 0, kind));
    CollectiveParams* params = builder.task(tasks.back())->mutable_collective();
    params->clear_logical_dims();
    params->clear_group_region();
    params->clear_input_regions();
    params->clear_output_regions();
    for (const CollectiveParams& part : parts) *params->add_parts() = part;
  }
  if (edit) edit(builder, tasks);
  for (int32_t r = 0; r < 3; ++r) {
    const CollectiveParams params = builder.task(tasks[r])->collective();
    std::vector<TensorDescProto> slots;
    int64_t staged = 0;
    for (int k = 0; k < params.parts_size(); ++k) {
      const CollectiveParams& part = params.parts(k);
      auto [source, g] = builder.AddInput(r, "g" + std::to_string(k), 1, F32(Dims(part.group_region())));
      builder.Connect(g, tasks[r]);
      slots.push_back(F32(Dims(part.output_regions(r))));
      int64_t volume = 1;
      for (int64_t d : Dims(part.group_region())) volume *= d;
      staged += volume;
    }
    if (scatter) slots.push_back(F32({staged}));
    builder.AddSink(builder.AddRegister(tasks[r], "bucket", 1, slots), "y");
  }
  PlanProto plan = builder.Build();
  if (after) after(&plan);
  return plan;
}

TEST(PlanVerifierBucketTest, GoodBucketsPass) {
  for (auto kind : {CollectiveParams::ALL_REDUCE, CollectiveParams::REDUCE_SCATTER}) {
    const absl::Status status = VerifyPlan(Bucket(kind));
    EXPECT_TRUE(status.ok()) << CollectiveParams::Kind_Name(kind) << ": " << status;
  }
}

TEST(PlanVerifierBucketTest, OnlyAllReduceAndReduceScatterAreBucketed) {
  ExpectFails(Bucket(CollectiveParams::ALL_GATHER),
              {"rank 0 task 1 'bucket' (COLLECTIVE) is a bucket of 3 part(s) but its kind is ALL_GATHER; "
               "only ALL_REDUCE and REDUCE_SCATTER calls are bucketed"});
}

TEST(PlanVerifierBucketTest, OneInputPerPartAndOneRegisterOfOutputs) {
  auto task = [](PlanProto* plan) { return FindTask(plan, 1); };  // rank 0's bucket
  ExpectFails(Bucket(CollectiveParams::REDUCE_SCATTER, nullptr,
                     [&](PlanProto* plan) { task(plan)->mutable_inputs()->RemoveLast(); }),
              {"rank 0 task 1 'bucket' (COLLECTIVE): a bucket of 3 part(s) has 2 payload input(s) and 4 "
               "output(s); it needs 3 and 4 (one per part, and the staging slot)"});
  ExpectFails(Bucket(CollectiveParams::REDUCE_SCATTER, nullptr,
                     [&](PlanProto* plan) { task(plan)->mutable_outputs()->RemoveLast(); }),
              {"has 3 payload input(s) and 3 output(s); it needs 3 and 4"});
  ExpectFails(Bucket(CollectiveParams::ALL_REDUCE, nullptr,
                     [&](PlanProto* plan) {
                       task(plan)->mutable_outputs(0)->set_slot(1);
                       task(plan)->mutable_outputs(1)->set_slot(0);
                     }),
              {"rank 0 task 1 'bucket' (COLLECTIVE): output 0 is slot 1 of register",
               "a bucket's outputs are the slots of one register in part order"});
}

TEST(PlanVerifierBucketTest, TheStagingSlotHoldsEveryPart) {
  // 28 + 5 + 18 = 51 elements, declared as 50.
  ExpectFails(Bucket(CollectiveParams::REDUCE_SCATTER, nullptr,
                     [](PlanProto* plan) {
                       const SlotRefProto staging = FindTask(plan, 1)->outputs(3);
                       FindEntry(plan, 0, staging.register_id())->mutable_slots(3)->set_dims(0, 50);
                     }),
              {"rank 0 task 1 'bucket' (COLLECTIVE): its staging slot (output 3) is float32[50]; it must be "
               "1-D with the 51 elements"});
}

TEST(PlanVerifierBucketTest, EveryPartIsCheckedAsAGeometry) {
  // Part 1's outputs overlap (a REDUCE_SCATTER's must tile).
  ExpectFails(Bucket(CollectiveParams::REDUCE_SCATTER,
                     [](TestPlanBuilder& b, const std::vector<int64_t>& tasks) {
                       for (int64_t t : tasks) {
                         CollectiveParams* part = b.task(t)->mutable_collective()->mutable_parts(1);
                         part->mutable_output_regions(1)->set_begin(0, 1);
                       }
                     }),
              {"rank 0 task 1 'bucket' (COLLECTIVE), part 1 (REDUCE_SCATTER): output regions of member 0 "
               "(rank 0) [0:2] and member 1 (rank 1) [1:4] overlap"});
  // Part 2 lacks a region.
  ExpectFails(Bucket(CollectiveParams::ALL_REDUCE,
                     [](TestPlanBuilder& b, const std::vector<int64_t>& tasks) {
                       for (int64_t t : tasks) {
                         b.task(t)->mutable_collective()->mutable_parts(2)->mutable_input_regions()->RemoveLast();
                       }
                     }),
              {"rank 0 task 1 'bucket' (COLLECTIVE), part 2 has 2 input and 3 output region(s)"});
  // Rank 1's slot of part 0 does not have its output region's shape.
  ExpectFails(Bucket(CollectiveParams::REDUCE_SCATTER, nullptr,
                     [](PlanProto* plan) {
                       const SlotRefProto out = FindTask(plan, 2)->outputs(0);
                       FindEntry(plan, 1, out.register_id())->mutable_slots(0)->set_dims(0, 1);
                     }),
              {"rank 1 task 2 'bucket' (COLLECTIVE), part 0: its output slot is float32[1,4] but member 1's "
               "output region [3:5,0:4] has another shape"});
}

TEST(PlanVerifierBucketTest, EverySlotHasOneDtype) {
  ExpectFails(Bucket(CollectiveParams::ALL_REDUCE, nullptr,
                     [](PlanProto* plan) {
                       const SlotRefProto in = FindTask(plan, 1)->inputs(1);
                       FindEntry(plan, 0, in.register_id())->mutable_slots(0)->set_dtype(DT_INT32);
                     }),
              {"rank 0 task 1 'bucket' (COLLECTIVE), part 1: its input slot is int32[5] but part 0's input is "
               "float32[7,4]; every slot of a bucket has one dtype"});
}

TEST(PlanVerifierBucketTest, MembersMustAgreeOnTheParts) {
  // Rank 2 splits part 1 as 2/1/2: consistent on its own, not with ranks 0 and 1.
  ExpectFails(Bucket(CollectiveParams::REDUCE_SCATTER,
                     [](TestPlanBuilder& b, const std::vector<int64_t>& tasks) {
                       CollectiveParams* part = b.task(tasks[2])->mutable_collective()->mutable_parts(1);
                       part->mutable_output_regions(1)->set_end(0, 3);
                       part->mutable_output_regions(2)->set_begin(0, 3);
                     }),
              {"rank 2 task 3 'bucket' (COLLECTIVE) and rank 0 task 1 'bucket' (COLLECTIVE) are members of the "
               "collective with global_order 0 but disagree on part 1"});
  // Rank 2 leaves the last part out.
  ExpectFails(Bucket(CollectiveParams::ALL_REDUCE,
                     [](TestPlanBuilder& b, const std::vector<int64_t>& tasks) {
                       b.task(tasks[2])->mutable_collective()->mutable_parts()->RemoveLast();
                     }),
              {"but disagree on its number of parts (3 and 2)"});
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
