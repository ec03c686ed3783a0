// Flow control over steps: a variable updated through the plan's back edge, back-pressure by
// register counts, REPEAT/ACCUMULATE across pieces, and the watchdog's report.
#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oneflow_like/actor/session.h"
#include "oneflow_like/actor/test_plan_builder.h"
#include "oneflow_like/actor/test_util.h"
#include "oneflow_like/core/random.h"

namespace oneflow_like {
namespace actor {
namespace {

using ::testing::HasSubstr;

// y = x @ w; dw = x^T @ dy; (w, buf) = sgd_update(w, dw, buf) written back through the update
// register that both variable holders consume (the plan's back edge).
PlanProto MomentumPlan() {
  TestPlanBuilder b(1, 1);
  const int64_t w = b.AddRegister(0, "w", 1, {F32(Shape{3, 2})}, true);
  const int64_t buf = b.AddRegister(0, "buf", 1, {F32(Shape{3, 2})}, true);
  const int64_t update = b.AddRegister(0, "sgd.out", 1, {F32(Shape{3, 2}), F32(Shape{3, 2})});
  const int64_t x = b.AddRegister(0, "x", 1, {F32(Shape{4, 3})});
  const int64_t dy = b.AddRegister(0, "dy", 1, {F32(Shape{4, 2})});
  const int64_t y = b.AddRegister(0, "y", 1, {F32(Shape{4, 2})});
  const int64_t dw = b.AddRegister(0, "dw", 1, {F32(Shape{3, 2})});
  InitializerProto uniform;
  uniform.set_kind(InitializerProto::UNIFORM);
  uniform.set_low(-1);
  uniform.set_high(1);
  uniform.set_seed(42);
  InitializerProto zeros;
  zeros.set_kind(InitializerProto::ZEROS);
  TaskProto* w_holder = b.AddSource(0, "w.source", "w", w, {update});
  w_holder->clear_inputs();
  w_holder->add_inputs()->set_register_id(update);  // slot 0 = param_out
  b.BindVariable(0, "w", w, Shape{3, 2}, uniform);
  TaskProto* buf_holder = b.AddSource(0, "buf.source", "buf", buf, {update});
  buf_holder->clear_inputs();
  buf_holder->add_inputs()->set_register_id(update);
  buf_holder->mutable_inputs(0)->set_slot(1);  // momentum_buf_out
  b.BindVariable(0, "buf", buf, Shape{3, 2}, zeros);
  b.AddSource(0, "x.source", "x", x);
  b.BindInput(0, "x", x, Shape{4, 3});
  b.AddSource(0, "dy.source", "dy", dy);
  b.BindInput(0, "dy", dy, Shape{4, 2});
  b.AddCompute(0, "y.matmul", "matmul", {}, {x, w}, {y});
  b.AddSink(0, "y.sink", "y", y);
  b.BindOutput(0, "y", y, Shape{4, 2});
  b.AddCompute(0, "dw.matmul", "matmul", {{"transpose_a", true}}, {x, dy}, {dw});
  b.AddCompute(0, "w.sgd_update", "sgd_update", {{"lr", 0.1}, {"momentum", 0.9}}, {w, dw, buf}, {update});
  return b.Build();
}

Tensor MomentumX(int step) { return Iota(Shape{4, 3}, 0.5f - step, 0.25f); }
Tensor MomentumDy(int step) { return Iota(Shape{4, 2}, 1.0f, -0.3f + 0.1f * step); }

// The hand-computed reference in double: y of step `step` (with that step's w, before its
// update), then w and buf after the update.
struct MomentumReference {
  std::vector<double> w, buf = std::vector<double>(6, 0.0);
  MomentumReference() {
    Tensor w0(DataType::kFloat32, Shape{3, 2});
    FillUniform(&w0, Shape{3, 2}, {0, 0}, 42, -1, 1);
    const std::vector<float> values = w0.ToVector<float>();
    w.assign(values.begin(), values.end());
  }
  std::vector<double> Step(int step) {
    const Tensor xs = MomentumX(step), dys = MomentumDy(step);
    std::vector<double> y(8, 0.0);
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 2; ++j) {
        for (int k = 0; k < 3; ++k) y[i * 2 + j] += xs.data<float>()[i * 3 + k] * w[k * 2 + j];
      }
    }
    for (int k = 0; k < 3; ++k) {
      for (int j = 0; j < 2; ++j) {
        double grad = 0;
        for (int i = 0; i < 4; ++i) grad += xs.data<float>()[i * 3 + k] * dys.data<float>()[i * 2 + j];
        buf[k * 2 + j] = 0.9 * buf[k * 2 + j] + grad;
        w[k * 2 + j] -= 0.1 * buf[k * 2 + j];
      }
    }
    return y;
  }
};

void ExpectNear(const Tensor& actual, const std::vector<double>& expected, const std::string& what) {
  ASSERT_EQ(actual.elem_count(), static_cast<int64_t>(expected.size())) << what;
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(actual.data<float>()[i], expected[i], 1e-4) << what << "[" << i << "]";
}

TEST(FlowTest, VariableHolderAppliesSgdUpdatesAcrossSteps) {
  std::unique_ptr<OpRegistry> registry = MakeBuiltinRegistry();
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(MomentumPlan(), registry.get());
  ASSERT_TRUE(session.ok()) << session.status();
  MomentumReference ref;
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE((*session)->Feed("x", MomentumX(step)).ok());
    ASSERT_TRUE((*session)->Feed("dy", MomentumDy(step)).ok());
    absl::Status status = (*session)->RunStep();
    ASSERT_TRUE(status.ok()) << status;
    const std::vector<double> y = ref.Step(step);
    // y uses this step's (not yet updated) w.
    absl::StatusOr<Tensor> ys = (*session)->Fetch("y");
    ASSERT_TRUE(ys.ok()) << ys.status();
    ExpectNear(*ys, y, absl::StrCat("y of step ", step));
    absl::StatusOr<Tensor> wv = (*session)->ReadVariable("w");
    ASSERT_TRUE(wv.ok()) << wv.status();
    ExpectNear(*wv, ref.w, absl::StrCat("w after step ", step));
    ExpectNear(*(*session)->ReadVariable("buf"), ref.buf, absl::StrCat("buf after step ", step));
  }
  EXPECT_TRUE((*session)->Close().ok());
}

// Run-ahead: step s + 1 is fed and started before step s is finished, with threads, so step
// s + 1's sources may fire while step s computes. Every y still uses the w of its own step:
// step s + 1's w waits for step s's update (the variable's register comes back only then).
// A third step in flight is refused, and RunStep refuses while a step runs ahead.
TEST(FlowTest, RunAheadStepsUseTheUpdatedVariables) {
  std::unique_ptr<OpRegistry> registry = MakeBuiltinRegistry();
  for (bool deterministic : {false, true}) {
    SCOPED_TRACE(deterministic ? "deterministic" : "threads");
    SessionOptions options;
    options.deterministic = deterministic;
    absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(MomentumPlan(), registry.get(), options);
    ASSERT_TRUE(session.ok()) << session.status();
    Session& s = **session;
    MomentumReference ref;
    constexpr int kSteps = 6;
    auto start = [&](int step) {
      ASSERT_TRUE(s.Feed("x", MomentumX(step)).ok());
      ASSERT_TRUE(s.Feed("dy", MomentumDy(step)).ok());
      absl::Status status = s.StartStep();
      ASSERT_TRUE(status.ok()) << "step " << step << ": " << status;
    };
    auto finish = [&](int step) {
      absl::Status status = s.FinishStep();
      ASSERT_TRUE(status.ok()) << "step " << step << ": " << status;
      EXPECT_EQ(s.steps_finished(), step + 1);
      ExpectNear(*s.Fetch("y"), ref.Step(step), absl::StrCat("y of step ", step));
    };
    start(0);
    for (int step = 0; step < kSteps; ++step) {
      if (step + 1 < kSteps) start(step + 1);
      finish(step);
    }
    ExpectNear(*s.ReadVariable("w"), ref.w, "w after the run-ahead steps");
    // Two steps in flight: a third is refused even with its pieces fed, and so is RunStep;
    // the refused step starts once one of them finished.
    start(kSteps);
    start(kSteps + 1);
    ASSERT_TRUE(s.Feed("x", MomentumX(kSteps + 2)).ok());
    ASSERT_TRUE(s.Feed("dy", MomentumDy(kSteps + 2)).ok());
    absl::Status third = s.StartStep();
    EXPECT_EQ(third.code(), absl::StatusCode::kFailedPrecondition) << third;
    EXPECT_THAT(third.message(), HasSubstr("2 steps are still running"));
    EXPECT_EQ(s.RunStep().code(), absl::StatusCode::kFailedPrecondition);
    if (deterministic) {  // nothing ran yet: the steps are certainly in flight
      EXPECT_EQ(s.ReadVariable("w").status().code(), absl::StatusCode::kFailedPrecondition)
          << "a variable read while steps run (an in-place update may be writing it)";
    }
    finish(kSteps);
    ASSERT_TRUE(s.StartStep().ok());
    finish(kSteps + 1);
    finish(kSteps + 2);
    EXPECT_EQ(s.FinishStep().code(), absl::StatusCode::kFailedPrecondition);  // none started
    ExpectNear(*s.ReadVariable("w"), ref.w, "w at the end");
    // Close with a step in flight finishes it, then drains (no hang until the watchdog).
    start(kSteps + 3);
    absl::Status closed = s.Close();
    EXPECT_TRUE(closed.ok()) << closed;
    EXPECT_EQ(s.steps_finished(), kSteps + 4);
  }
}

// Registers a one-input, one-output test op with the given kernel.
absl::Status RegisterTestOp(OpRegistry* registry, const std::string& name, KernelFn kernel) {
  OpDef def;
  def.name = name;
  def.inputs = {"x"};
  def.outputs = {"y"};
  def.infer = [](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> { return ctx.inputs; };
  def.sbp = [](const AttrMap&, const std::vector<TensorDesc>&) { return std::vector<SbpSignature>{}; };
  def.cpu_kernel = std::move(kernel);
  return registry->Register(std::move(def));
}

// A copy that sleeps, to make a consumer slow.
absl::Status RegisterSlowIdentity(OpRegistry* registry) {
  return RegisterTestOp(registry, "slow_identity", [](const KernelContext& ctx) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::copy_n(ctx.inputs[0]->data<float>(), ctx.inputs[0]->elem_count(), ctx.outputs[0]->data<float>());
    return absl::OkStatus();
  });
}

TEST(FlowTest, ProducerNeverRunsMoreThanItsRegisterCountAhead) {
  constexpr int kPieces = 8;
  TestPlanBuilder b(1, kPieces);
  const int64_t x = b.AddRegister(0, "x", 2, {F32(Shape{4})});
  const int64_t mid = b.AddRegister(0, "mid", 2, {F32(Shape{4})});  // 2 credits
  const int64_t out = b.AddRegister(0, "out", 1, {F32(Shape{4})});
  b.AddSource(0, "x.source", "x", x);
  b.BindInput(0, "x", x, Shape{4});
  b.AddCompute(0, "fast", "relu", {}, {x}, {mid}, /*stream=*/0);
  b.AddCompute(0, "slow", "slow_identity", {}, {mid}, {out}, /*stream=*/1);
  b.AddSink(0, "out.sink", "out", out);
  b.BindOutput(0, "out", out, Shape{4});

  std::unique_ptr<OpRegistry> registry = MakeBuiltinRegistry();
  ASSERT_TRUE(RegisterSlowIdentity(registry.get()).ok());
  std::mutex mu;
  std::map<std::string, int64_t> acts;
  int64_t max_lead = 0;
  SessionOptions options;
  options.on_act = [&](const ActEvent& event) {
    std::lock_guard<std::mutex> lock(mu);
    ++acts[*event.task_name];
    max_lead = std::max(max_lead, acts["fast"] - acts["slow"]);
  };
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(b.Build(), registry.get(), options);
  ASSERT_TRUE(session.ok()) << session.status();
  for (int step = 0; step < 2; ++step) {
    for (int piece = 0; piece < kPieces; ++piece)
      ASSERT_TRUE((*session)->Feed("x", Iota(Shape{4}, -1.0f + piece, 1)).ok());
    ASSERT_TRUE((*session)->RunStep().ok());
    for (int piece = 0; piece < kPieces; ++piece) {
      std::vector<float> expected = Iota(Shape{4}, -1.0f + piece, 1).ToVector<float>();
      for (float& e : expected) e = std::max(e, 0.0f);
      EXPECT_EQ((*session)->Fetch("out", piece)->ToVector<float>(), expected) << "piece " << piece;
    }
  }
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(acts["fast"], 2 * kPieces);
  EXPECT_EQ(acts["slow"], 2 * kPieces);
  EXPECT_EQ(max_lead, 2);  // reached (the consumer is slow) and never exceeded
}

TEST(FlowTest, AKernelErrorEndsTheStepWithTheActorsName) {
  TestPlanBuilder b(1, 1);
  const int64_t x = b.AddRegister(0, "x", 1, {F32(Shape{3})});
  const int64_t y = b.AddRegister(0, "y", 1, {F32(Shape{3})});
  b.AddSource(0, "x.source", "x", x);
  b.BindInput(0, "x", x, Shape{3});
  b.AddCompute(0, "broken", "failing_op", {}, {x}, {y});
  b.AddSink(0, "y.sink", "y", y);
  b.BindOutput(0, "y", y, Shape{3});
  std::unique_ptr<OpRegistry> registry = MakeBuiltinRegistry();
  ASSERT_TRUE(RegisterTestOp(registry.get(), "failing_op", [](const KernelContext&) {
                return absl::InvalidArgumentError("boom");
              }).ok());
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(b.Build(), registry.get());
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Feed("x", Iota(Shape{3}, 0, 1)).ok());
  absl::Status status = (*session)->RunStep();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("actor 'broken' (task 2, COMPUTE): boom"));
  EXPECT_EQ((*session)->RunStep().code(), absl::StatusCode::kInvalidArgument);  // broken for good
}

// The memory planner lets registers share bytes when their lifetimes are disjoint in task
// order. Here `a` (relu -> relu2) and `b` (neg -> add) share bytes. `neg` is ready as early as
// `relu`, so a runtime free to fire it would overwrite `a` before relu2 reads it; the runtime
// must alternate the two registers in task order.
PlanProto SharedBytesPlan() {
  TestPlanBuilder b(1, 4);
  const int64_t x = b.AddRegister(0, "x", 1, {F32(Shape{3})});
  const int64_t a = b.AddRegister(0, "a", 1, {F32(Shape{3})});
  const int64_t c = b.AddRegister(0, "c", 1, {F32(Shape{3})});
  const int64_t neg = b.AddRegister(0, "b", 1, {F32(Shape{3})});
  const int64_t y = b.AddRegister(0, "y", 1, {F32(Shape{3})});
  b.AddSource(0, "x.source", "x", x);
  b.BindInput(0, "x", x, Shape{3});
  b.AddCompute(0, "relu", "relu", {}, {x}, {a});
  b.AddCompute(0, "relu2", "relu", {}, {a}, {c});
  b.AddCompute(0, "neg", "scalar_mul", {{"value", -1.0}}, {x}, {neg});
  b.AddCompute(0, "add", "add", {}, {c, neg}, {y});
  b.AddSink(0, "y.sink", "y", y);
  b.BindOutput(0, "y", y, Shape{3});
  PlanProto plan = b.Build();
  RankPlanProto* rank = plan.mutable_rank_plans(0);
  rank->mutable_registers(3)->mutable_memory()->set_offset(rank->registers(1).memory().offset());  // b on a
  return plan;
}

TEST(FlowTest, RegistersSharingBytesAlternateInTaskOrder) {
  std::unique_ptr<OpRegistry> registry = MakeBuiltinRegistry();
  for (bool deterministic : {false, true}) {
    SessionOptions options;
    options.deterministic = deterministic;
    absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(SharedBytesPlan(), registry.get(), options);
    ASSERT_TRUE(session.ok()) << session.status();
    for (int step = 0; step < 2; ++step) {
      for (int piece = 0; piece < 4; ++piece) {
        ASSERT_TRUE((*session)->Feed("x", Iota(Shape{3}, -1.0f - piece, 1.5f + step)).ok());
      }
      ASSERT_TRUE((*session)->RunStep().ok());
      for (int piece = 0; piece < 4; ++piece) {
        std::vector<float> expected = Iota(Shape{3}, -1.0f - piece, 1.5f + step).ToVector<float>();
        for (float& e : expected) e = std::max(e, 0.0f) - e;  // relu(x) + (-x)
        EXPECT_EQ((*session)->Fetch("y", piece)->ToVector<float>(), expected)
            << "deterministic " << deterministic << " step " << step << " piece " << piece;
      }
    }
    EXPECT_TRUE((*session)->Close().ok());
  }
}

// v (a step constant) is repeated for 4 pieces, added to each piece's x, and the sums are
// accumulated into one value per step.
TEST(FlowTest, RepeatAndAccumulateOverFourPieces) {
  TestPlanBuilder b(1, 4);
  const int64_t v = b.AddRegister(0, "v", 1, {F32(Shape{3})}, true);
  const int64_t rep = b.AddRegister(0, "v.repeat", 1, {F32(Shape{3})});
  const int64_t x = b.AddRegister(0, "x", 2, {F32(Shape{3})});
  const int64_t sum = b.AddRegister(0, "y", 1, {F32(Shape{3})});
  const int64_t total = b.AddRegister(0, "total", 1, {F32(Shape{3})});
  InitializerProto two;
  two.set_kind(InitializerProto::CONSTANT);
  two.set_value(2);
  b.AddSource(0, "v.source", "v", v);
  b.BindVariable(0, "v", v, Shape{3}, two);
  b.AddTask(0, TaskProto::REPEAT, "v.repeat", {v}, {rep})->mutable_count()->set_count(4);
  b.AddSource(0, "x.source", "x", x);
  b.BindInput(0, "x", x, Shape{3});
  b.AddCompute(0, "add", "add", {}, {x, rep}, {sum});
  b.AddSink(0, "y.sink", "y", sum);
  b.BindOutput(0, "y", sum, Shape{3});
  b.AddTask(0, TaskProto::ACCUMULATE, "y.accumulate", {sum}, {total})->mutable_count()->set_count(4);
  b.AddSink(0, "total.sink", "total", total);
  b.BindOutput(0, "total", total, Shape{3});

  std::unique_ptr<OpRegistry> registry = MakeBuiltinRegistry();
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(b.Build(), registry.get());
  ASSERT_TRUE(session.ok()) << session.status();
  for (int step = 0; step < 2; ++step) {
    std::vector<float> expected_total(3, 0);
    for (int piece = 0; piece < 4; ++piece) {
      ASSERT_TRUE((*session)->Feed("x", Iota(Shape{3}, 10.0f * piece + step, 1)).ok());
      for (int i = 0; i < 3; ++i) expected_total[i] += 10.0f * piece + step + i + 2;
    }
    ASSERT_TRUE((*session)->RunStep().ok());
    ASSERT_EQ((*session)->FetchCount("y"), 4);
    ASSERT_EQ((*session)->FetchCount("total"), 1);
    for (int piece = 0; piece < 4; ++piece) {
      EXPECT_EQ((*session)->Fetch("y", piece)->ToVector<float>(),
                Iota(Shape{3}, 10.0f * piece + step + 2, 1).ToVector<float>());
    }
    EXPECT_EQ((*session)->Fetch("total")->ToVector<float>(), expected_total);
  }
  EXPECT_TRUE((*session)->Close().ok());
}

// relu also waits for a control register of tick_a; tick_a and tick_b wait for each other, so
// neither ever fires. The watchdog ends the step with a report naming the wait.
TEST(FlowTest, WatchdogReportsAStarvedActor) {
  TestPlanBuilder b(1, 1);
  const int64_t x = b.AddRegister(0, "x", 1, {F32(Shape{3})});
  const int64_t a = b.AddRegister(0, "tick_a.out", 1, {});
  const int64_t c = b.AddRegister(0, "tick_b.out", 1, {});
  const int64_t y = b.AddRegister(0, "y", 1, {F32(Shape{3})});
  b.AddSource(0, "x.source", "x", x);
  b.BindInput(0, "x", x, Shape{3});
  b.AddTask(0, TaskProto::TICK, "tick_a", {c}, {a});
  b.AddTask(0, TaskProto::TICK, "tick_b", {a}, {c});
  b.AddCompute(0, "relu", "relu", {}, {x, a}, {y});
  b.AddSink(0, "y.sink", "y", y);
  b.BindOutput(0, "y", y, Shape{3});

  std::unique_ptr<OpRegistry> registry = MakeBuiltinRegistry();
  SessionOptions options;
  options.watchdog_timeout_ms = 200;
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(b.Build(), registry.get(), options);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Feed("x", Iota(Shape{3}, 0, 1)).ok());
  absl::Status status = (*session)->RunStep();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  const std::string report(status.message());
  EXPECT_THAT(report, HasSubstr("no actor progressed for 200 ms while waiting for step 1"));
  EXPECT_THAT(report, HasSubstr("actor 'relu' (task 4, COMPUTE, running, 0 acts): waits for register 'tick_a.out' "
                                "(id 101) from producer 'tick_a' (task 2) on rank 0"));
  EXPECT_THAT(report,
              HasSubstr("actor 'x.source' (task 1, SOURCE, running, 1 acts): emitted every piece of the "
                        "started steps; waits for register 'x' (id 100) to be returned by 'relu' (task 4) on rank 0"));
  EXPECT_THAT(report, HasSubstr("actor 'tick_b' (task 3, TICK, running, 0 acts): waits for register 'tick_a.out'"));
  // The session is broken now: it says so instead of hanging again.
  EXPECT_EQ((*session)->RunStep().code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace actor
}  // namespace oneflow_like
