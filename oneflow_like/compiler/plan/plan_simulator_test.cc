#include "oneflow_like/compiler/plan/plan_simulator.h"

#include <chrono>
#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/plan/plan_test_util.h"
#include "oneflow_like/compiler/plan/plan_verifier.h"

namespace oneflow_like {
namespace compiler {
namespace {

TEST(PlanSimulatorTest, FiringCountsFollowTheRates) {
  // pieces_per_step 4: holder(w) -> REPEAT(4) -> grad <- x.source; grad -> ACCUMULATE(4) ->
  // sgd_update <- w; sgd_update -> w.new -> holder (back edge).
  TestPlanBuilder b(1, 4);
  auto [holder, w] = b.AddVariable(0, "w");
  auto [source, x] = b.AddInput(0, "x");
  const int64_t repeat = b.AddCountTask(0, TaskProto::REPEAT, "w.repeat", 4);
  b.Connect(w, repeat);
  const int64_t grad = b.AddTask(0, TaskProto::COMPUTE, "grad");
  b.Connect(x, grad);
  b.Connect(b.AddRegister(repeat, "w@piece"), grad);
  const int64_t accumulate = b.AddCountTask(0, TaskProto::ACCUMULATE, "acc", 4);
  b.Connect(b.AddRegister(grad, "g"), accumulate);
  const int64_t update = b.AddTask(0, TaskProto::COMPUTE, "sgd_update");
  b.Connect(w, update);
  b.Connect(b.AddRegister(accumulate, "g.sum"), update);
  b.Connect(b.AddRegister(update, "w.new"), holder);
  const PlanProto plan = b.Build();

  absl::StatusOr<PlanSimulation> run = SimulatePlan(plan, 3);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_TRUE(run->completed) << run->report;
  // Step-rate tasks fire once per step, piece-rate ones 4 times; REPEAT reads 1 and emits 4,
  // ACCUMULATE reads 4 and emits 1; the holder reads the update of every step but the last.
  EXPECT_EQ(run->emitted.at(holder), 3);
  EXPECT_EQ(run->read.at(holder), 2);
  EXPECT_EQ(run->emitted.at(source), 12);
  EXPECT_EQ(run->read.at(repeat), 3);
  EXPECT_EQ(run->emitted.at(repeat), 12);
  EXPECT_EQ(run->emitted.at(grad), 12);
  EXPECT_EQ(run->read.at(accumulate), 12);
  EXPECT_EQ(run->emitted.at(accumulate), 3);
  EXPECT_EQ(run->emitted.at(update), 3);
  EXPECT_EQ(SimulatePlan(plan, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PlanSimulatorTest, RepeatEmitsEveryInputCountTimes) {
  // x.source -> x (count 1) -> REPEAT(3) -> y -> sink, pieces_per_step 2: the REPEAT keeps x's
  // only buffer for its 3 emissions, then the source emits the next piece; 6 sinks per step.
  TestPlanBuilder b(1, 2);
  auto [source, x] = b.AddInput(0, "x");
  const int64_t repeat = b.AddCountTask(0, TaskProto::REPEAT, "rep", 3);
  b.Connect(x, repeat);
  const int64_t sink = b.AddSink(b.AddRegister(repeat, "y"), "y");
  const PlanProto plan = b.Build();
  absl::StatusOr<PlanSimulation> run = SimulatePlan(plan, 2);
  ASSERT_TRUE(run.ok());
  ASSERT_TRUE(run->completed) << run->report;
  EXPECT_EQ(run->read.at(repeat), 4);
  EXPECT_EQ(run->emitted.at(repeat), 12);
  EXPECT_EQ(run->read.at(sink), 12);
}

TEST(PlanSimulatorTest, ReportNamesTheBlockedTasksUpToTheLimit) {
  // A 2-task cycle without initial tokens: a waits for b's output and b for a's.
  TestPlanBuilder b(1, 1);
  auto [source, x] = b.AddInput(0, "x");
  const int64_t first = b.AddTask(0, TaskProto::COMPUTE, "a");
  const int64_t second = b.AddTask(0, TaskProto::COMPUTE, "b");
  b.Connect(x, first);
  const int64_t a_out = b.AddRegister(first, "a_out");
  b.Connect(a_out, second);
  b.Connect(b.AddRegister(second, "b_out"), first);
  const PlanProto plan = b.Build();
  absl::StatusOr<PlanSimulation> run = SimulatePlan(plan, 2, /*max_reported_tasks=*/1);
  ASSERT_TRUE(run.ok());
  EXPECT_FALSE(run->completed);
  EXPECT_NE(run->report.find("deadlock"), std::string::npos) << run->report;
  EXPECT_NE(run->report.find("2 blocked task(s)"), std::string::npos) << run->report;
  EXPECT_NE(run->report.find("'x.source' (SOURCE) fired 1 time(s)"), std::string::npos)
      << run->report;
  EXPECT_EQ(run->report.find("\n  rank 0 task 2 'a'"), std::string::npos) << "limit of 1 ignored";
  run = SimulatePlan(plan, 2);
  ASSERT_TRUE(run.ok());
  EXPECT_NE(run->report.find("rank 0 task 2 'a' (COMPUTE) fired 0 time(s); waits for register "
                             "103 'b_out' on rank 0 (not readable: its producer rank 0 task 3 "
                             "'b' (COMPUTE) has produced 0 buffer(s), all read)"),
            std::string::npos)
      << run->report;
}

TEST(PlanSimulatorTest, CollectivesAreARendezvousAcrossRanks) {
  // Rank 0: x.source -> c (all-reduce [0,1], order 0) -> post -> p. Rank 1: pulls p, and its
  // half of the same all-reduce consumes the pulled value. Rank 1 cannot join the collective
  // before rank 0 finished it: each rank on its own could fire, together they deadlock.
  TestPlanBuilder b(2, 1);
  auto [source, x] = b.AddInput(0, "x");
  const int64_t first = b.AddCollective(0, "c", {0, 1}, 0);
  b.Connect(x, first);
  const int64_t post = b.AddTask(0, TaskProto::COMPUTE, "post");
  b.Connect(b.AddRegister(first, "c.out"), post);
  const int64_t pull = b.AddTransfer(b.AddRegister(post, "p"), 1, "p.transfer");
  const int64_t second = b.AddCollective(1, "c", {0, 1}, 0);
  b.Connect(b.AddRegister(pull, "p@1"), second);
  b.AddSink(b.AddRegister(second, "c.out"), "y");
  const PlanProto plan = b.Build();
  absl::StatusOr<PlanSimulation> run = SimulatePlan(plan, 1);
  ASSERT_TRUE(run.ok());
  EXPECT_FALSE(run->completed);
  EXPECT_NE(run->report.find("rank 0 task 2 'c' (COLLECTIVE) fired 0 time(s); its collective "
                             "partner rank 1 task 5 'c' (COLLECTIVE) is not ready"),
            std::string::npos)
      << run->report;
  // Feeding rank 1's half from its own input instead makes the rendezvous possible.
  TestPlanBuilder ok(2, 1);
  for (int32_t r = 0; r < 2; ++r) {
    auto [input, reg] = ok.AddInput(r, "x");
    const int64_t collective = ok.AddCollective(r, "c", {0, 1}, 0);
    ok.Connect(reg, collective);
    ok.AddSink(ok.AddRegister(collective, "c.out"), "y");
  }
  run = SimulatePlan(ok.Build(), 2);
  ASSERT_TRUE(run.ok());
  EXPECT_TRUE(run->completed) << run->report;
  EXPECT_EQ(run->emitted.at(2), 2);
  EXPECT_EQ(run->emitted.at(5), 2);
}

TEST(PlanSimulatorTest, LargePlanVerifiesInSeconds) {
  // 2 ranks x 50k tasks (1e5 in all): per rank a chain of computes; every 1000th link crosses to
  // the other rank through a TRANSFER and back. pieces_per_step 4, 2 steps = 8 firings per task.
  TestPlanBuilder b(2, 4);
  for (int32_t r = 0; r < 2; ++r) {
    auto [source, previous] = b.AddInput(r, "x");
    for (int i = 0; i < 50000; ++i) {
      if (i % 1000 == 999) {
        const int64_t pull = b.AddTransfer(previous, 1 - r, "pull");
        const int64_t back = b.AddTransfer(b.AddRegister(pull, "pulled"), r, "back");
        previous = b.AddRegister(back, "back", 2);
        continue;
      }
      const int64_t task = b.AddTask(r, TaskProto::COMPUTE, "op");
      b.Connect(previous, task);
      previous = b.AddRegister(task, "out");
    }
    b.AddSink(previous, "y");
  }
  const PlanProto plan = b.Build();
  int64_t tasks = 0;
  for (const RankPlanProto& rank_plan : plan.rank_plans()) tasks += rank_plan.tasks_size();
  const auto start = std::chrono::steady_clock::now();
  const absl::Status status = VerifyPlan(plan);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("VerifyPlan of %lld tasks, 2 steps x 4 pieces: %.2f s\n",
              static_cast<long long>(tasks), seconds);
  EXPECT_GE(tasks, 100000);
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
