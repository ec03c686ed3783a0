// Two compute streams (LowerOptions::compute_streams = 2): lifetimes of the registers stream 4
// touches on stream 0's axis (stream_lifetimes.h), the bytes they may share, and per-rank
// plans equal to the whole plan's.
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/lower/lower_test_util.h"
#include "oneflow_like/compiler/plan/plan_verifier.h"
#include "oneflow_like/compiler/test_util.h"

namespace oneflow_like {
namespace compiler {
namespace testing {
namespace {

// One rank, one piece, every tensor f32[16,16] (1024 bytes). dw is read only by the optimizer
// w_new: it runs on stream 4, reading x (also read by h on stream 0) and dy. Positions (the
// rank's task order): x.source 0, dy.source 1, w.source 2, buf.source 3, h 4, dw 5 (stream 4),
// e 6, w_new 7, a 8, b 9, c 10, c.sink 11.
constexpr char kText[] = R"(config(name="two", seed=5)
x = input(shape=[16,16]) placement=cpu:[0]
dy = input(shape=[16,16]) placement=cpu:[0]
w = variable(shape=[16,16], init=normal(0.02)) placement=cpu:[0]
buf = variable(shape=[16,16], init=zeros) placement=cpu:[0]
h = matmul(x, w)
dw = matmul(x, dy, transpose_a=true)
e = relu(h)
w_new, buf_new = sgd_update(w, dw, buf, lr=0.1, momentum=0.9)
a = relu(e)
b = relu(a)
c = add(a, b)
output(c)
)";

void Updates(Graph* graph) {
  AddUpdate(graph, "w", "w_new");
  AddUpdate(graph, "buf", "buf_new");
}

PlanProto Lower(int compute_streams) {
  LowerOptions options;
  options.compute_streams = compute_streams;
  return LowerTextOrDie(kText, options, Updates);
}

bool ShareBytes(const RegisterProto& a, const RegisterProto& b) {
  const MemoryLocationProto &ma = a.memory(), &mb = b.memory();
  return ma.block_id() == mb.block_id() && ma.offset() < mb.offset() + mb.buffer_bytes() &&
         mb.offset() < ma.offset() + ma.buffer_bytes();
}

TEST(StreamLifetimesTest, StreamFourRegistersLiveUntilStreamZeroKnowsTheyAreDone) {
  const PlanProto one = Lower(1), two = Lower(2);
  ASSERT_EQ(FindTask(two, "dw@r0").stream_id(), 4);
  ASSERT_EQ(FindTask(one, "dw@r0").stream_id(), 0);
  EXPECT_TRUE(VerifyPlan(two).ok()) << VerifyPlan(two);
  // Persistent block: w, buf (2 KiB). Whole step: the updates w_new, buf_new (2 KiB).
  // One stream, lifetimes: x [0,5] dy [1,5] h [4,6] dw [5,7] e [6,7] a [8,10] b [9,10] c [10,11]:
  // the peak is 4 KiB (x, dy, h, dw at 5), so 8 KiB in all.
  EXPECT_EQ(one.memory(0).planned_bytes(), 8 * 1024);
  // Two streams: acquire(dw) = 1 (dy.source -> dw), release(dw) = 7 (dw -> w_new): x [0,7],
  // dy [1,7], dw [1,7]; the peak is 5 KiB (x, dy, dw, h, e at 6): 9 KiB. (Live the whole step,
  // as before, x, dy and dw took 3 KiB of their own beside the 3 KiB of a, b, c: 10 KiB.)
  EXPECT_EQ(two.memory(0).planned_bytes(), 9 * 1024);
  // a comes after w_new, which reads dw: it may take x's bytes. e comes after h but nothing
  // orders it after dw on stream 4: it may not (with one stream it does).
  const RegisterProto& x2 = FindRegisterByName(two, "x@r0");
  EXPECT_TRUE(ShareBytes(x2, FindRegisterByName(two, "a@r0")));
  EXPECT_FALSE(ShareBytes(x2, FindRegisterByName(two, "e@r0")));
  EXPECT_TRUE(ShareBytes(FindRegisterByName(one, "x@r0"), FindRegisterByName(one, "e@r0")));
}

TEST(StreamLifetimesTest, PerRankPlansEqualTheWholePlan) {
  std::unique_ptr<OpRegistry> registry = BuiltinRegistry();
  const Graph graph = AnnotatedGraph(kText, *registry, Updates);
  LowerOptions options;
  options.compute_streams = 2;
  const PlanProto whole = ExpectPerRankMatchesWhole(graph, options);
  EXPECT_EQ(whole.memory(0).planned_bytes(), 9 * 1024);
}

// Two micro-batches: dw's gradient is summed by an ACCUMULATE on stream 0, which runs once per
// piece: the stream-0 task dw happens before. Positions: x.source 0, dy.source 1, w.source 2,
// buf.source 3, w.repeat 4, h 5, dw 6 (stream 4), e 7, dw.accumulate 8, w_new 9, a 10, b 11,
// c 12, c.sink 13.
std::string MicroBatchText() {
  std::string text = kText;
  text.replace(text.find("seed=5"), 6, "micro_batches=2, seed=5");
  return text;
}

TEST(StreamLifetimesTest, AnAccumulateEndsTheLifetimesOfItsGradientsInputs) {
  LowerOptions one, two;
  two.compute_streams = 2;
  const PlanProto plan1 = LowerTextOrDie(MicroBatchText(), one, Updates);
  const PlanProto plan2 = LowerTextOrDie(MicroBatchText(), two, Updates);
  EXPECT_EQ(plan2.pieces_per_step(), 2);
  EXPECT_TRUE(VerifyPlan(plan2).ok()) << VerifyPlan(plan2);
  // Persistent w, buf (2 KiB); whole step: the sum dw.accumulated, w_new, buf_new (3 KiB).
  // One stream: x [0,6] dy [1,6] w.repeated [4,5] h [5,7] dw [6,8] e [7,10]: peak 4 KiB.
  EXPECT_EQ(plan1.memory(0).planned_bytes(), 9 * 1024);
  // Two: acquire(dw) = 1, release(dw) = 8 (the ACCUMULATE): x [0,8] dy [1,8] dw [1,8], peak
  // 5 KiB at 5 and 7: 10 KiB (11 KiB with x, dy and dw live the whole step).
  EXPECT_EQ(plan2.memory(0).planned_bytes(), 10 * 1024);
  EXPECT_TRUE(ShareBytes(FindRegisterByName(plan2, "x@r0"), FindRegisterByName(plan2, "a@r0")));
  std::unique_ptr<OpRegistry> registry = BuiltinRegistry();
  ExpectPerRankMatchesWhole(AnnotatedGraph(MicroBatchText(), *registry, Updates), two);
}

}  // namespace
}  // namespace testing
}  // namespace compiler
}  // namespace oneflow_like
