// In-place variable updates (inplace_updates.h): which updates qualify, and that writing the
// variable in place gives exactly the results of the copying holder, even when a reader of the
// variable comes after the optimizer in stream order (the optimizer must wait for it).
#include "oneflow_like/actor/inplace_updates.h"

#include <chrono>
#include <thread>

#include "gtest/gtest.h"
#include "oneflow_like/actor/runtime.h"
#include "oneflow_like/actor/session.h"
#include "oneflow_like/actor/test_plan_builder.h"
#include "oneflow_like/actor/test_util.h"
#include "oneflow_like/core/random.h"

namespace oneflow_like {
namespace actor {
namespace {

// A copy that sleeps first: a slow reader of the variable.
absl::Status RegisterSlowCopy(OpRegistry* registry) {
  OpDef def;
  def.name = "slow_copy";
  def.inputs = {"x"};
  def.outputs = {"y"};
  def.infer = [](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> { return ctx.inputs; };
  def.sbp = [](const AttrMap&, const std::vector<TensorDesc>&) { return std::vector<SbpSignature>{}; };
  def.cpu_kernel = [](const KernelContext& ctx) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::copy_n(ctx.inputs[0]->data<float>(), ctx.inputs[0]->elem_count(), ctx.outputs[0]->data<float>());
    return absl::OkStatus();
  };
  return registry->Register(std::move(def));
}

// (w, buf) = sgd_update(w, dw, buf), dw = x^T dy, written back through one update register
// whose two slots the two holders absorb. A late reader of w on another thread: seen = w +
// slow_copy(z) (z fed zeros; the copy sleeps 20 ms), so an optimizer that did not wait for it
// would update w before it is read.
PlanProto SgdPlan(const std::string& update_op = "sgd_update", bool reader_waits_for_optimizer = false) {
  TestPlanBuilder b(1, 1);
  const int64_t w = b.AddRegister(0, "w", 1, {F32(Shape{3, 2})}, true);
  const int64_t buf = b.AddRegister(0, "buf", 1, {F32(Shape{3, 2})}, true);
  const int64_t update = b.AddRegister(0, "sgd.out", 1, {F32(Shape{3, 2}), F32(Shape{3, 2})});
  const int64_t x = b.AddRegister(0, "x", 1, {F32(Shape{4, 3})});
  const int64_t dy = b.AddRegister(0, "dy", 1, {F32(Shape{4, 2})});
  const int64_t dw = b.AddRegister(0, "dw", 1, {F32(Shape{3, 2})});
  const int64_t seen = b.AddRegister(0, "seen", 1, {F32(Shape{3, 2})});
  const int64_t z = b.AddRegister(0, "z", 1, {F32(Shape{3, 2})});
  const int64_t gate = b.AddRegister(0, "gate", 1, {F32(Shape{3, 2})});
  InitializerProto uniform;
  uniform.set_kind(InitializerProto::UNIFORM);
  uniform.set_low(-1);
  uniform.set_high(1);
  uniform.set_seed(7);
  InitializerProto zeros;
  zeros.set_kind(InitializerProto::ZEROS);
  TaskProto* w_holder = b.AddSource(0, "w.source", "w", w, {update});
  w_holder->clear_inputs();
  w_holder->add_inputs()->set_register_id(update);
  b.BindVariable(0, "w", w, Shape{3, 2}, uniform);
  TaskProto* buf_holder = b.AddSource(0, "buf.source", "buf", buf, {update});
  buf_holder->clear_inputs();
  buf_holder->add_inputs()->set_register_id(update);
  buf_holder->mutable_inputs(0)->set_slot(1);
  b.BindVariable(0, "buf", buf, Shape{3, 2}, zeros);
  b.AddSource(0, "x.source", "x", x);
  b.BindInput(0, "x", x, Shape{4, 3});
  b.AddSource(0, "dy.source", "dy", dy);
  b.BindInput(0, "dy", dy, Shape{4, 2});
  b.AddCompute(0, "dw.matmul", "matmul", {{"transpose_a", true}}, {x, dy}, {dw});
  // Optionally the optimizer also emits a control register that the late reader waits for: the
  // reader then depends on the optimizer, so writing w in place would deadlock.
  const int64_t after = reader_waits_for_optimizer ? b.AddRegister(0, "after_update", 1, {}) : -1;
  b.AddCompute(0, "w.sgd_update", update_op, {{"lr", 0.1}, {"momentum", 0.9}}, {w, dw, buf},
               reader_waits_for_optimizer ? std::vector<int64_t>{update, after} : std::vector<int64_t>{update});
  b.AddSource(0, "z.source", "z", z);
  b.BindInput(0, "z", z, Shape{3, 2});
  b.AddCompute(0, "gate", "slow_copy", {}, {z}, {gate}, /*stream=*/1);
  if (reader_waits_for_optimizer) {
    b.AddCompute(0, "w.late_read", "add", {}, {w, gate, after}, {seen}, /*stream=*/1);
  } else {
    b.AddCompute(0, "w.late_read", "add", {}, {w, gate}, {seen}, /*stream=*/1);
  }
  b.AddSink(0, "seen.sink", "seen", seen);
  b.BindOutput(0, "seen", seen, Shape{3, 2});
  return b.Build();
}

std::map<int64_t, const RegisterProto*> Registers(const RankPlanProto& rank) {
  std::map<int64_t, const RegisterProto*> out;
  for (const RegisterProto& r : rank.registers()) out[r.id()] = &r;
  return out;
}

const TaskProto& TaskNamed(const RankPlanProto& rank, const std::string& name) {
  for (const TaskProto& t : rank.tasks()) {
    if (t.name() == name) return t;
  }
  ADD_FAILURE() << "no task " << name;
  return rank.tasks(0);
}

TEST(InPlaceUpdatesTest, FindsTheOptimizerUpdateOfBothHolders) {
  std::unique_ptr<OpRegistry> registry = MakeBuiltinRegistry();
  const PlanProto plan = SgdPlan();
  const RankPlanProto& rank = plan.rank_plans(0);
  const std::vector<InPlaceUpdate> found = FindInPlaceUpdates(rank, Registers(rank), *registry);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].optimizer_task, TaskNamed(rank, "w.sgd_update").id());
  ASSERT_EQ(found[0].targets.size(), 2u);
  EXPECT_EQ(found[0].targets[0].holder_task, TaskNamed(rank, "w.source").id());
  EXPECT_EQ(found[0].targets[0].update_slot, 0);
  EXPECT_EQ(found[0].targets[1].holder_task, TaskNamed(rank, "buf.source").id());
  EXPECT_EQ(found[0].targets[1].update_slot, 1);
}

TEST(InPlaceUpdatesTest, RejectsUpdatesTheRulesDoNotAllow) {
  std::unique_ptr<OpRegistry> registry = MakeBuiltinRegistry();
  {  // An unknown op (no in-place pairs known): nothing.
    const PlanProto plan = SgdPlan("no_such_op");
    EXPECT_TRUE(FindInPlaceUpdates(plan.rank_plans(0), Registers(plan.rank_plans(0)), *registry).empty());
  }
  {  // The optimizer on another stream (thread) than the holders: nothing.
    PlanProto plan = SgdPlan();
    for (TaskProto& t : *plan.mutable_rank_plans(0)->mutable_tasks()) {
      if (t.name() == "w.sgd_update") t.set_stream_id(1);
    }
    EXPECT_TRUE(FindInPlaceUpdates(plan.rank_plans(0), Registers(plan.rank_plans(0)), *registry).empty());
  }
  {  // The update register also read by another task: nothing.
    PlanProto plan = SgdPlan();
    RankPlanProto* rank = plan.mutable_rank_plans(0);
    for (RegisterProto& r : *rank->mutable_registers()) {
      if (r.name() == "sgd.out") {
        TaskRefProto* extra = r.add_consumers();
        extra->set_rank(0);
        extra->set_task_id(TaskNamed(*rank, "w.late_read").id());
      }
    }
    EXPECT_TRUE(FindInPlaceUpdates(*rank, Registers(*rank), *registry).empty());
  }
  {  // The optimizer consumes the variable's register twice: nothing (it could never be the
     // only holder).
    PlanProto plan = SgdPlan();
    RankPlanProto* rank = plan.mutable_rank_plans(0);
    int64_t w = 0;
    for (const RegisterProto& r : rank->registers()) {
      if (r.name() == "w") w = r.id();
    }
    for (TaskProto& t : *rank->mutable_tasks()) {
      if (t.name() == "w.sgd_update") t.add_consumed_register_ids(w);
    }
    EXPECT_TRUE(FindInPlaceUpdates(*rank, Registers(*rank), *registry).empty());
  }
  {  // The optimizer reads a different register than the variable's: nothing.
    PlanProto plan = SgdPlan();
    RankPlanProto* rank = plan.mutable_rank_plans(0);
    int64_t dw = 0;
    for (const RegisterProto& r : rank->registers()) {
      if (r.name() == "dw") dw = r.id();
    }
    for (TaskProto& t : *rank->mutable_tasks()) {
      if (t.name() == "w.sgd_update") t.mutable_inputs(0)->set_register_id(dw);
    }
    const std::vector<InPlaceUpdate> found = FindInPlaceUpdates(*rank, Registers(*rank), *registry);
    EXPECT_TRUE(found.empty());
  }
}

// Three steps with and without in-place updates: identical variables and identical reads by
// the late reader, which must see each step's variable before its update. Also when the late
// reader depends on the optimizer (a control input): then the update must stay a copy, or the
// two would wait for each other.
class InPlaceRunTest : public ::testing::TestWithParam<bool> {};

TEST_P(InPlaceRunTest, InPlaceGivesTheCopyingResultsAndWaitsForLateReaders) {
  std::unique_ptr<OpRegistry> registry = MakeBuiltinRegistry();
  ASSERT_TRUE(RegisterSlowCopy(registry.get()).ok());
  const bool reader_waits = GetParam();
  const PlanProto plan = SgdPlan("sgd_update", reader_waits);
  std::vector<std::vector<float>> seen[2], w_after[2], buf_after[2];
  for (int inplace = 0; inplace < 2; ++inplace) {
    SessionOptions options;
    options.inplace_variable_updates = inplace == 1;
    options.watchdog_timeout_ms = 5000;  // a deadlock fails the step with the watchdog's report
    absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(plan, registry.get(), options);
    ASSERT_TRUE(session.ok()) << session.status();
    EXPECT_EQ((*session)->runtime(0)->num_inplace_updates(), reader_waits ? 0 : inplace);
    for (int step = 0; step < 3; ++step) {
      ASSERT_TRUE((*session)->Feed("x", Iota(Shape{4, 3}, 0.5f - step, 0.25f)).ok());
      ASSERT_TRUE((*session)->Feed("dy", Iota(Shape{4, 2}, 1.0f, -0.3f + 0.1f * step)).ok());
      ASSERT_TRUE((*session)->Feed("z", Tensor(DataType::kFloat32, Shape{3, 2})).ok());
      const std::vector<float> w_before = (*session)->ReadVariable("w")->ToVector<float>();
      absl::Status status = (*session)->RunStep();
      ASSERT_TRUE(status.ok()) << status;
      absl::StatusOr<Tensor> s = (*session)->Fetch("seen");
      ASSERT_TRUE(s.ok()) << s.status();
      EXPECT_EQ(s->ToVector<float>(), w_before) << "step " << step << ": the late reader saw an updated w";
      seen[inplace].push_back(s->ToVector<float>());
      w_after[inplace].push_back((*session)->ReadVariable("w")->ToVector<float>());
      buf_after[inplace].push_back((*session)->ReadVariable("buf")->ToVector<float>());
      EXPECT_NE(w_after[inplace].back(), w_before) << "step " << step << ": w did not change";
    }
    EXPECT_TRUE((*session)->Close().ok());
  }
  EXPECT_EQ(seen[0], seen[1]);
  EXPECT_EQ(w_after[0], w_after[1]);
  EXPECT_EQ(buf_after[0], buf_after[1]);
}

INSTANTIATE_TEST_SUITE_P(ReaderIndependentOrDependent, InPlaceRunTest, ::testing::Bool());

}  // namespace
}  // namespace actor
}  // namespace oneflow_like
