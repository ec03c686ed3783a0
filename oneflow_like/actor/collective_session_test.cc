// Bucketed COLLECTIVE tasks (CollectiveParams.parts) run by Session on 2 and 3 ranks: per rank,
// three gradients fed as inputs, one bucket task on the comm stream writing the slots of one
// register (laid out as the memory planner does, 64-byte aligned), one sink per slot; the
// fetched shards against a reference computed here.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/actor/session.h"
#include "oneflow_like/actor/test_plan_builder.h"
#include "oneflow_like/actor/test_util.h"

namespace oneflow_like {
namespace actor {
namespace {

const std::vector<Shape> kShapes = {Shape{3, 5}, Shape{7}, Shape{2, 2, 3}};

RegionProto Box(std::vector<int64_t> begin, std::vector<int64_t> end) {
  RegionProto r;
  for (int64_t b : begin) r.add_begin(b);
  for (int64_t e : end) r.add_end(e);
  return r;
}

// Part k: all of kShapes[k]; for REDUCE_SCATTER split on axis 0 into `members` row blocks
// (uneven: 3 rows over 2 members are 2 + 1, 7 over 3 are 3 + 2 + 2).
CollectiveParams Part(size_t k, int members, bool scatter) {
  const std::vector<int64_t>& dims = kShapes[k].dims();
  CollectiveParams p;
  for (int64_t d : dims) p.add_logical_dims(d);
  *p.mutable_group_region() = Box(std::vector<int64_t>(dims.size(), 0), dims);
  int64_t row = 0;
  for (int m = 0; m < members; ++m) {
    *p.add_input_regions() = p.group_region();
    RegionProto out = p.group_region();
    if (scatter) {
      const int64_t rows = dims[0] / members + (m < dims[0] % members ? 1 : 0);
      out.set_begin(0, row);
      out.set_end(0, row + rows);
      row += rows;
    }
    *p.add_output_regions() = out;
  }
  return p;
}

std::vector<int64_t> Dims(const RegionProto& r) {
  std::vector<int64_t> d;
  for (int a = 0; a < r.begin_size(); ++a) d.push_back(r.end(a) - r.begin(a));
  return d;
}

// Rank r's gradient k in step s.
Tensor Gradient(int s, int r, size_t k) {
  return Iota(kShapes[k], static_cast<float>(100 * s + 10 * r + static_cast<int>(k)), 1.0f);
}

PlanProto BucketPlan(int members, CollectiveParams::Kind kind) {
  const bool scatter = kind == CollectiveParams::REDUCE_SCATTER;
  TestPlanBuilder b(members, 1);
  for (int r = 0; r < members; ++r) {
    std::vector<int64_t> grads;
    CollectiveParams params;
    params.set_kind(kind);
    for (int m = 0; m < members; ++m) params.add_ranks(m);
    std::vector<TensorDesc> slots;
    int64_t staged = 0;
    for (size_t k = 0; k < kShapes.size(); ++k) {
      const std::string name = "g" + std::to_string(k);
      grads.push_back(b.AddRegister(r, name, 1, {F32(kShapes[k])}));
      b.AddSource(r, name + ".source", name, grads.back());
      b.BindInput(r, name, grads.back(), kShapes[k], {}, "P");
      *params.add_parts() = Part(k, members, scatter);
      slots.push_back(F32(Shape(Dims(params.parts(k).output_regions(r)))));
      staged += kShapes[k].elem_count();
    }
    if (scatter) slots.push_back(F32(Shape{staged}));
    const int64_t bucket = b.AddRegister(r, "bucket", 1, slots);
    TaskProto* task = b.AddTask(r, TaskProto::COLLECTIVE, "bucket", grads, {bucket}, /*stream=*/1);
    *task->mutable_collective() = params;
    for (size_t k = 0; k < kShapes.size(); ++k) {
      const std::string name = "y" + std::to_string(k);
      b.AddSink(r, name + ".sink", name, bucket);
      b.BindOutput(r, name, bucket, kShapes[k], {}, scatter ? "S(0)" : "B");
    }
  }
  PlanProto plan = b.Build();
  for (RankPlanProto& rank_plan : *plan.mutable_rank_plans()) {  // output y<k> is slot k
    for (TensorBindingProto& binding : *rank_plan.mutable_bindings()) {
      if (binding.tensor_name()[0] == 'y') binding.mutable_slot()->set_slot(binding.tensor_name()[1] - '0');
    }
  }
  return plan;
}

void RunBuckets(int members, CollectiveParams::Kind kind) {
  const bool scatter = kind == CollectiveParams::REDUCE_SCATTER;
  const PlanProto plan = BucketPlan(members, kind);
  std::unique_ptr<OpRegistry> registry = MakeBuiltinRegistry();
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(plan, registry.get());
  ASSERT_TRUE(session.ok()) << session.status();
  for (int step = 0; step < 2; ++step) {
    for (int r = 0; r < members; ++r) {
      for (size_t k = 0; k < kShapes.size(); ++k) {
        ASSERT_TRUE((*session)->FeedShard("g" + std::to_string(k), r, Gradient(step, r, k)).ok());
      }
    }
    const absl::Status status = (*session)->RunStep();
    ASSERT_TRUE(status.ok()) << status;
    for (size_t k = 0; k < kShapes.size(); ++k) {
      Tensor sum(DataType::kFloat32, kShapes[k]);
      for (int r = 0; r < members; ++r) {
        Tensor g = Gradient(step, r, k);
        for (int64_t i = 0; i < sum.elem_count(); ++i) sum.data<float>()[i] += g.data<float>()[i];
      }
      const CollectiveParams part = Part(k, members, scatter);
      for (int r = 0; r < members; ++r) {
        absl::StatusOr<Tensor> y = (*session)->FetchShard("y" + std::to_string(k), r);
        ASSERT_TRUE(y.ok()) << y.status();
        const RegionProto& box = part.output_regions(r);
        ASSERT_EQ(y->shape().dims(), Dims(box)) << "rank " << r << " y" << k;
        const int64_t first = box.begin(0) * (sum.elem_count() / kShapes[k].dim(0));  // row blocks
        for (int64_t i = 0; i < y->elem_count(); ++i) {
          ASSERT_EQ(y->data<float>()[i], sum.data<float>()[first + i]) << "rank " << r << " y" << k << " element " << i;
        }
      }
    }
  }
  ASSERT_TRUE((*session)->Close().ok());
}

TEST(CollectiveSessionTest, AllReduceBucketOnTwoAndThreeRanks) {
  RunBuckets(2, CollectiveParams::ALL_REDUCE);
  RunBuckets(3, CollectiveParams::ALL_REDUCE);
}

TEST(CollectiveSessionTest, ReduceScatterBucketOnTwoAndThreeRanks) {
  RunBuckets(2, CollectiveParams::REDUCE_SCATTER);
  RunBuckets(3, CollectiveParams::REDUCE_SCATTER);
}

TEST(CollectiveSessionTest, ABucketTaskNeedsOneInputPerPart) {
  PlanProto plan = BucketPlan(2, CollectiveParams::ALL_REDUCE);
  for (RankPlanProto& rank_plan : *plan.mutable_rank_plans()) {
    for (TaskProto& task : *rank_plan.mutable_tasks()) {
      if (task.type() == TaskProto::COLLECTIVE) task.mutable_collective()->mutable_parts()->RemoveLast();
    }
  }
  std::unique_ptr<OpRegistry> registry = MakeBuiltinRegistry();
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(plan, registry.get());
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find("a COLLECTIVE member of a bucket has 2 payload input(s) and 2 payload "
                                            "output(s), not 3 and 3"),
            std::string::npos)
      << session.status();
}

}  // namespace
}  // namespace actor
}  // namespace oneflow_like
