// Check 8 across streams (plan_memory_order.h): registers of two compute streams may share
// bytes only when a chain of register dependencies and stream orders puts every use of one
// before the other's write, in the same piece and into the next one.
#include <initializer_list>
#include <string>
#include <tuple>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/plan/plan_test_util.h"
#include "oneflow_like/compiler/plan/plan_verifier.h"

namespace oneflow_like {
namespace compiler {
namespace {

constexpr int32_t kSide = 4;  // the second compute stream

// One rank, `pieces` pieces per step. Stream 0: x.source, fwd (reads x), mid (reads fwd's f),
// opt (reads dw's g and mid's m), sink (reads opt's o). Stream 4: dw (reads x). Every register
// has bytes of its own (TestPlanBuilder); tests move one onto another's.
struct TwoStreams {
  PlanProto plan;
  int64_t x = 0, f = 0, g = 0, m = 0, o = 0;  // registers
};

TwoStreams Build(int64_t pieces = 1) {
  TestPlanBuilder b(1, pieces);
  TwoStreams t;
  int64_t source;
  std::tie(source, t.x) = b.AddInput(0, "x");
  const int64_t fwd = b.AddTask(0, TaskProto::COMPUTE, "fwd");
  b.Connect(t.x, fwd);
  t.f = b.AddRegister(fwd, "f");
  const int64_t dw = b.AddTask(0, TaskProto::COMPUTE, "dw", kSide);
  b.task(dw)->set_stream_kind(STREAM_COMPUTE);
  b.Connect(t.x, dw);
  t.g = b.AddRegister(dw, "g");
  const int64_t mid = b.AddTask(0, TaskProto::COMPUTE, "mid");
  b.Connect(t.f, mid);
  t.m = b.AddRegister(mid, "m");
  const int64_t opt = b.AddTask(0, TaskProto::COMPUTE, "opt");
  b.Connect(t.g, opt);
  b.Connect(t.m, opt);
  t.o = b.AddRegister(opt, "o");
  b.AddSink(t.o, "o");
  t.plan = b.Build();
  return t;
}

// Puts register `moved` on the bytes of `onto` (same block, same size).
void Share(PlanProto* plan, int64_t moved, int64_t onto) {
  FindEntry(plan, 0, moved)->mutable_memory()->set_offset(FindEntry(plan, 0, onto)->memory().offset());
}

void ExpectFails(const PlanProto& plan, std::initializer_list<std::string> parts) {
  const absl::Status status = VerifyPlan(plan);
  ASSERT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  for (const std::string& part : parts) {
    EXPECT_NE(status.message().find(part), std::string::npos) << "missing \"" << part << "\" in: " << status.message();
  }
}

TEST(PlanMemoryOrderTest, TheBuiltPlanVerifies) {
  const TwoStreams t = Build();
  EXPECT_TRUE(VerifyPlan(t.plan).ok()) << VerifyPlan(t.plan);
}

TEST(PlanMemoryOrderTest, ReuseAfterAChainThroughTheOtherStreamIsAccepted) {
  // x's users: x.source, fwd (stream 0), dw (stream 4). o is written by opt, which reads g,
  // which dw writes: every use of x happens before opt in the piece; o's users (opt, the sink)
  // come before x.source of the next piece on stream 0.
  TwoStreams t = Build();
  Share(&t.plan, t.o, t.x);
  EXPECT_TRUE(VerifyPlan(t.plan).ok()) << VerifyPlan(t.plan);
  // The same with 3 pieces per step.
  TwoStreams p = Build(3);
  Share(&p.plan, p.o, p.x);
  EXPECT_TRUE(VerifyPlan(p.plan).ok()) << VerifyPlan(p.plan);
}

TEST(PlanMemoryOrderTest, ReuseWithoutAChainIsRejectedNamingBothRegistersAndTasks) {
  // m is written by mid, after x's last use on stream 0 (fwd), but nothing orders dw (stream 4)
  // before mid: dw may still read x while mid writes m. One stream's positions would allow it.
  TwoStreams t = Build();
  Share(&t.plan, t.m, t.x);
  ExpectFails(t.plan, {"register 101 'x' on rank 0 [0, 64) and register 104 'm' on rank 0 [0, 64) share bytes of block 1",
                       "no chain of register dependencies",
                       "rank 0 task 3 'dw' (COMPUTE) (stream cpu:0/4) does not happen before rank 0 task 4 'mid' "
                       "(COMPUTE) (stream cpu:0/0) writes register 104 'm' on rank 0 in the same piece",
                       "rank 0 task 4 'mid' (COMPUTE) (stream cpu:0/0) does not happen before rank 0 task 1 "
                       "'x.source' (SOURCE) (stream cpu:0/0) writes register 101 'x' on rank 0 in the same piece"});
}

TEST(PlanMemoryOrderTest, ASecondStreamRegisterMayNotOverlapWhatItsProducerRacesWith) {
  // g (written by dw on stream 4) on f's bytes (fwd -> mid on stream 0): dw is ordered after
  // x.source only, so it may write g while fwd writes f or mid reads it.
  TwoStreams t = Build();
  Share(&t.plan, t.g, t.f);
  ExpectFails(t.plan, {"register 102 'f' on rank 0 [64, 128) and register 103 'g' on rank 0 [64, 128)",
                       "rank 0 task 2 'fwd' (COMPUTE) (stream cpu:0/0) does not happen before rank 0 task 3 'dw'"});
  // g on o's bytes: opt reads g while writing o.
  TwoStreams u = Build();
  Share(&u.plan, u.o, u.g);
  ExpectFails(u.plan, {"register 103 'g'", "register 105 'o'", "share bytes of block 1"});
}

TEST(PlanMemoryOrderTest, ARegisterWithCountTwoSharesWithNothingOfAnotherStream) {
  // o on x's bytes is ordered (above), but with x counting 2 buffers the source may run a piece
  // ahead: no lifetime at all.
  TwoStreams t = Build();
  FindEntry(&t.plan, 0, t.x)->set_count(2);
  t.plan.clear_memory();
  Share(&t.plan, t.o, t.x);
  ExpectFails(t.plan, {"register 101 'x' on rank 0 [0, 128)", "it has count 2"});
}

// Two pieces per step: dw (stream 4) feeds an ACCUMULATE on stream 0, which acts every piece:
// x.source, fwd (reads x), dw (stream 4, reads x), then acc (reads dw's g) and late (reads
// fwd's f) in the order given, sinks of acc's sum and of late's l.
struct Accumulated {
  PlanProto plan;
  int64_t x = 0, l = 0;
};

Accumulated BuildAccumulated(bool late_after_acc) {
  TestPlanBuilder b(1, 2);
  Accumulated t;
  int64_t source;
  std::tie(source, t.x) = b.AddInput(0, "x");
  const int64_t fwd = b.AddTask(0, TaskProto::COMPUTE, "fwd");
  b.Connect(t.x, fwd);
  const int64_t f = b.AddRegister(fwd, "f");
  const int64_t dw = b.AddTask(0, TaskProto::COMPUTE, "dw", kSide);
  b.task(dw)->set_stream_kind(STREAM_COMPUTE);
  b.Connect(t.x, dw);
  const int64_t g = b.AddRegister(dw, "g");
  auto add_late = [&] {
    const int64_t late = b.AddTask(0, TaskProto::COMPUTE, "late");
    b.Connect(f, late);
    t.l = b.AddRegister(late, "l");
  };
  if (!late_after_acc) add_late();
  const int64_t acc = b.AddCountTask(0, TaskProto::ACCUMULATE, "acc", 2);
  b.Connect(g, acc);
  const int64_t sum = b.AddRegister(acc, "sum");
  if (late_after_acc) add_late();
  b.AddSink(sum, "sum");
  b.AddSink(t.l, "l");
  t.plan = b.Build();
  return t;
}

TEST(PlanMemoryOrderTest, AnAccumulateActingEveryPieceOrdersTheSecondStream) {
  Accumulated after = BuildAccumulated(true);
  ASSERT_TRUE(VerifyPlan(after.plan).ok()) << VerifyPlan(after.plan);
  Share(&after.plan, after.l, after.x);  // dw -> acc -> (stream 0) late
  EXPECT_TRUE(VerifyPlan(after.plan).ok()) << VerifyPlan(after.plan);
  Accumulated before = BuildAccumulated(false);
  ASSERT_TRUE(VerifyPlan(before.plan).ok()) << VerifyPlan(before.plan);
  Share(&before.plan, before.l, before.x);  // late may write l while dw still reads x
  ExpectFails(before.plan, {"register 101 'x'", "'l'", "rank 0 task 3 'dw' (COMPUTE) (stream cpu:0/4) does not happen "
                                                       "before rank 0 task 4 'late'"});
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
