// The deterministic executor: messages are handled one at a time in a reproducible order, so
// a test can assert exactly who told whom what.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oneflow_like/actor/session.h"
#include "oneflow_like/actor/test_plan_builder.h"
#include "oneflow_like/actor/test_util.h"

namespace oneflow_like {
namespace actor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// x -> relu -> y on one rank, one piece per step.
PlanProto ReluPlan() {
  TestPlanBuilder b(1, 1);
  const int64_t x = b.AddRegister(0, "x", 1, {F32(Shape{2})});
  const int64_t y = b.AddRegister(0, "y", 1, {F32(Shape{2})});
  b.AddSource(0, "x.source", "x", x);
  b.BindInput(0, "x", x, Shape{2});
  b.AddCompute(0, "relu", "relu", {}, {x}, {y});
  b.AddSink(0, "y.sink", "y", y);
  b.BindOutput(0, "y", y, Shape{2});
  return b.Build();
}

TEST(DeterministicTest, OneStepIsThisExactMessageSequence) {
  std::unique_ptr<OpRegistry> registry = MakeBuiltinRegistry();
  SessionOptions options;
  options.deterministic = true;
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(ReluPlan(), registry.get(), options);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Feed("x", Tensor::FromVector<float>(Shape{2}, {-1, 3})).ok());
  ASSERT_TRUE((*session)->RunStep().ok());
  EXPECT_EQ((*session)->Fetch("y")->ToVector<float>(), std::vector<float>({0, 3}));
  // relu sends its output before returning its input; the step is done once the sink fired,
  // with the two returns still pending.
  EXPECT_THAT((*session)->message_log(),
              ElementsAre("r0 start_step -> 'x.source'", "r0 ready -> 'relu' port 0 buffer 0",
                          "r0 ready -> 'y.sink' port 0 buffer 0"));
  ASSERT_TRUE((*session)->Close().ok());
  EXPECT_THAT((*session)->message_log(),
              ElementsAre("r0 start_step -> 'x.source'", "r0 ready -> 'relu' port 0 buffer 0",
                          "r0 ready -> 'y.sink' port 0 buffer 0", "r0 returned -> 'x.source' port 0 buffer 0",
                          "r0 returned -> 'relu' port 0 buffer 0", "r0 end_of_stream -> 'x.source'",
                          "r0 end_of_data -> 'relu'", "r0 end_of_data -> 'y.sink'"));
}

// Two ranks exchange their x through TRANSFERs and sum: the same run twice gives the same
// message log, and the values are right.
PlanProto ExchangePlan() {
  TestPlanBuilder b(2, 2);
  int64_t x[2], peer[2], sum[2];
  for (int r = 0; r < 2; ++r) x[r] = b.AddRegister(r, "x", 2, {F32(Shape{2})});
  for (int r = 0; r < 2; ++r) {
    b.AddMirror(r, x[1 - r]);
    peer[r] = b.AddRegister(r, "x.peer", 1, {F32(Shape{2})});
    sum[r] = b.AddRegister(r, "sum", 1, {F32(Shape{2})});
    b.AddSource(r, "x.source", "x", x[r]);
    b.BindInput(r, "x", x[r], Shape{2}, {}, "P");
    b.AddTask(r, TaskProto::TRANSFER, "x.transfer", {x[1 - r]}, {peer[r]}, 1)->mutable_transfer()->set_peer_rank(1 - r);
    b.AddTask(r, TaskProto::BOXING_ADD, "x.add", {x[r], peer[r]}, {sum[r]});
    b.AddSink(r, "sum.sink", "sum", sum[r]);
    b.BindOutput(r, "sum", sum[r], Shape{2}, {}, "B");
  }
  return b.Build();
}

std::vector<std::string> RunExchange(const OpRegistry* registry) {
  SessionOptions options;
  options.deterministic = true;
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(ExchangePlan(), registry, options);
  EXPECT_TRUE(session.ok()) << session.status();
  for (int step = 0; step < 2; ++step) {
    for (int piece = 0; piece < 2; ++piece) {
      for (int r = 0; r < 2; ++r) {
        const float base = static_cast<float>(10 * step + 4 * piece + r);
        EXPECT_TRUE((*session)->FeedShard("x", r, Tensor::FromVector<float>(Shape{2}, {base, -base})).ok());
      }
    }
    EXPECT_TRUE((*session)->RunStep().ok());
    for (int piece = 0; piece < 2; ++piece) {
      const float total = static_cast<float>(2 * (10 * step + 4 * piece) + 1);
      EXPECT_EQ((*session)->Fetch("sum", piece)->ToVector<float>(), std::vector<float>({total, -total}));
    }
  }
  EXPECT_TRUE((*session)->Close().ok());
  return (*session)->message_log();
}

TEST(DeterministicTest, TwoRankRunsAreReproducible) {
  std::unique_ptr<OpRegistry> registry = MakeBuiltinRegistry();
  const std::vector<std::string> first = RunExchange(registry.get());
  EXPECT_EQ(first, RunExchange(registry.get()));
  EXPECT_THAT(first, ::testing::Contains("r1 ready -> 'x.transfer' port 0 buffer 0"));
}

TEST(DeterministicTest, ADeadlockIsReportedAtOnce) {
  // relu also consumes a control register that nobody ever fills (its producer waits on relu).
  TestPlanBuilder b(1, 1);
  const int64_t x = b.AddRegister(0, "x", 1, {F32(Shape{2})});
  const int64_t y = b.AddRegister(0, "y", 1, {F32(Shape{2})});
  const int64_t tick = b.AddRegister(0, "tick.out", 1, {});
  b.AddSource(0, "x.source", "x", x);
  b.BindInput(0, "x", x, Shape{2});
  b.AddTask(0, TaskProto::TICK, "tick", {y}, {tick});
  b.AddCompute(0, "relu", "relu", {}, {x, tick}, {y});
  b.AddSink(0, "y.sink", "y", y);
  b.BindOutput(0, "y", y, Shape{2});
  std::unique_ptr<OpRegistry> registry = MakeBuiltinRegistry();
  SessionOptions options;
  options.deterministic = true;
  options.watchdog_timeout_ms = 1000000;  // not needed: the executor sees the empty queue
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(b.Build(), registry.get(), options);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Feed("x", Tensor::FromVector<float>(Shape{2}, {1, 2})).ok());
  absl::Status status = (*session)->RunStep();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(status.message()), HasSubstr("no message pending while waiting for step 1"));
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("actor 'relu' (task 3, COMPUTE, running, 0 acts): waits for register 'tick.out'"));
}

}  // namespace
}  // namespace actor
}  // namespace oneflow_like
