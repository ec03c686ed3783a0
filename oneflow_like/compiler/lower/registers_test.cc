// Streams and static order, pipeline register counts, memory lifetimes and reuse.
#include <algorithm>
#include <map>
#include <set>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/lower/lower_test_util.h"

namespace oneflow_like {
namespace compiler {
namespace testing {
namespace {

// Two stages on two ranks, 4 micro-batches. h0 crosses to stage 1 and is also kept for the
// "backward" op d0 of stage 0 (stage-1 ops run in between); g1 crosses back to stage 0.
constexpr char kPipelineText[] = R"(config(name="pp", micro_batches=4)
x = input(shape=[8,4]) placement=cpu:[0]
w0 = variable(shape=[4,4], init=ones) placement=cpu:[0]
w1 = variable(shape=[4,4], init=ones) placement=cpu:[1]
h0 = matmul(x, w0) stage=0
h1 = matmul(h0, w1) placement=cpu:[1] stage=1
g1 = relu(h1) placement=cpu:[1] stage=1
d0 = add(g1, h0) placement=cpu:[0] stage=0
output(d0)
)";

TEST(RegistersTest, PipelineRegisterCountsFollowTheStageRule) {
  const PlanProto plan = LowerTextOrDie(kPipelineText);
  EXPECT_EQ(plan.pieces_per_step(), 4);
  // S = 2 stages, N = 4: count = min(N, S - min stage) = 2 on stage-crossing and kept registers.
  const RegisterProto& h0 = FindRegisterByName(plan, "h0@r0");  // crosses and is kept for d0
  EXPECT_EQ(h0.count(), 2);
  const TaskProto& h1 = FindTask(plan, "h1@r1");
  const RegisterProto* h0_on_r1 = FindLocalRegister(plan, 1, h1.inputs(0).register_id());
  ASSERT_NE(h0_on_r1, nullptr);  // the transferred copy feeding stage 1
  EXPECT_EQ(h0_on_r1->count(), 2);
  const TaskProto& d0 = FindTask(plan, "d0@r0");
  const RegisterProto* g1_on_r0 = FindLocalRegister(plan, 0, d0.inputs(0).register_id());
  ASSERT_NE(g1_on_r0, nullptr);  // g1 back in stage 0
  EXPECT_EQ(g1_on_r0->count(), 2);
  EXPECT_EQ(FindRegisterByName(plan, "h1@r1").count(), 1);  // stays inside stage 1
  EXPECT_EQ(FindRegisterByName(plan, "d0@r0").count(), 1);
  EXPECT_EQ(FindRegisterByName(plan, "x@r0").count(), 1);
  // The mirror of h0 on rank 1 has the producer's count.
  bool found = false;
  for (const RegisterProto* m : Mirrors(plan, 1)) {
    if (m->id() == h0.id()) {
      found = true;
      EXPECT_EQ(m->count(), 2);
    }
  }
  EXPECT_TRUE(found);
}

// Three stages on three ranks: forward f0 -> f1 -> f2, then "backward" b2 -> b1 -> b0, each
// backward op reading its stage's forward activation.
constexpr char kThreeStageText[] = R"(config(name="pp3", micro_batches=4)
x = input(shape=[8,4]) placement=cpu:[0]
f0 = relu(x) stage=0
f1 = relu(f0) placement=cpu:[1] stage=1
f2 = relu(f1) placement=cpu:[2] stage=2
b2 = relu(f2) placement=cpu:[2] stage=2
b1 = add(b2, f1) placement=cpu:[1] stage=1
b0 = add(b1, f0) placement=cpu:[0] stage=0
output(b0)
)";

TEST(RegistersTest, ThreeStageCountsShrinkTowardsTheLastStage) {
  const PlanProto plan = LowerTextOrDie(kThreeStageText);
  // Kept for the backward: min(N=4, S=3 - s).
  EXPECT_EQ(FindRegisterByName(plan, "f0@r0").count(), 3);
  EXPECT_EQ(FindRegisterByName(plan, "f1@r1").count(), 2);
  // Inside the last stage, nothing in between: 1.
  EXPECT_EQ(FindRegisterByName(plan, "f2@r2").count(), 1);
  EXPECT_EQ(FindRegisterByName(plan, "b2@r2").count(), 1);
  // Received copies feeding another stage: min(N, S - min(s, s')).
  auto input_count = [&](const std::string& task, int rank, int input) {
    const RegisterProto* reg = FindLocalRegister(plan, rank, FindTask(plan, task).inputs(input).register_id());
    return reg == nullptr ? -1 : reg->count();
  };
  EXPECT_EQ(input_count("f1@r1", 1, 0), 3);  // f0 from stage 0
  EXPECT_EQ(input_count("f2@r2", 2, 0), 2);  // f1 from stage 1
  EXPECT_EQ(input_count("b1@r1", 1, 0), 2);  // b2 from stage 2 to stage 1
  EXPECT_EQ(input_count("b0@r0", 0, 0), 3);  // b1 from stage 1 to stage 0
}

TEST(RegistersTest, CapAndSinglePieceKeepCountsLow) {
  LowerOptions capped;
  capped.max_register_count = 1;
  EXPECT_EQ(FindRegisterByName(LowerTextOrDie(kPipelineText, capped), "h0@r0").count(), 1);
  std::string one_piece = kPipelineText;
  one_piece.replace(one_piece.find("micro_batches=4"), 15, "micro_batches=1");
  EXPECT_EQ(FindRegisterByName(LowerTextOrDie(one_piece), "h0@r0").count(), 1);
}

TEST(RegistersTest, StreamsAndOrderArePermutationsRespectingDependencies) {
  const PlanProto plan = LowerTextOrDie(kPipelineText);
  for (const RankPlanProto& rank_plan : plan.rank_plans()) {
    std::map<int64_t, const TaskProto*> by_id;
    std::map<int, std::set<int64_t>> orders;
    for (const TaskProto& t : rank_plan.tasks()) {
      by_id[t.id()] = &t;
      const bool comm = t.type() == TaskProto::TRANSFER || t.type() == TaskProto::COLLECTIVE;
      EXPECT_EQ(t.stream_kind(), comm ? STREAM_COMM : STREAM_COMPUTE) << t.name();
      EXPECT_EQ(t.stream_id(), comm ? 1 : 0) << t.name();
      orders[t.stream_id()].insert(t.order_in_stream());
    }
    for (const auto& [stream, order] : orders) {
      EXPECT_EQ(*order.begin(), 0);
      EXPECT_EQ(*order.rbegin(), static_cast<int64_t>(order.size()) - 1);  // a permutation
    }
    // Producer before consumer on the same stream (update back edges excepted).
    for (const RegisterProto& reg : rank_plan.registers()) {
      if (reg.has_remote()) continue;
      const TaskProto* producer = by_id[reg.producer().task_id()];
      for (const TaskRefProto& c : reg.consumers()) {
        if (c.rank() != rank_plan.rank()) continue;
        const TaskProto* consumer = by_id[c.task_id()];
        if (consumer->stream_id() == producer->stream_id() && consumer->type() != TaskProto::SOURCE) {
          EXPECT_LT(producer->order_in_stream(), consumer->order_in_stream()) << reg.name();
        }
      }
    }
  }
}

// A single-rank chain: registers with disjoint lifetimes share bytes.
constexpr char kChainText[] = R"(config(name="chain")
x = input(shape=[16,8]) placement=cpu:[0]
w1 = variable(shape=[8,12], init=ones)
w2 = variable(shape=[12,4], init=ones)
h = matmul(x, w1)
a = relu(h)
b = gelu(a)
y = matmul(b, w2)
output(y)
)";

TEST(RegistersTest, MemoryReusesBytesOfRegistersWithDisjointLifetimes) {
  const PlanProto plan = LowerTextOrDie(kChainText);
  const RankPlanProto& rank_plan = RankPlan(plan, 0);
  // Independent lifetimes: [producer position, last consumer position] in task order.
  std::map<int64_t, int64_t> position;
  for (int i = 0; i < rank_plan.tasks_size(); ++i) position[rank_plan.tasks(i).id()] = i;
  struct Span {
    std::string name;
    int64_t first, last, begin, end;
  };
  std::vector<Span> spans;
  int64_t naive = 0, persistent = 0;
  for (const RegisterProto& reg : rank_plan.registers()) {
    naive += reg.count() * reg.memory().buffer_bytes();
    if (reg.memory().block_id() == 0) {
      persistent += reg.memory().buffer_bytes();
      continue;
    }
    Span s{reg.name(), position[reg.producer().task_id()], position[reg.producer().task_id()],
           reg.memory().offset(), reg.memory().offset() + reg.count() * reg.memory().buffer_bytes()};
    for (const TaskRefProto& c : reg.consumers()) s.last = std::max(s.last, position[c.task_id()]);
    spans.push_back(s);
  }
  ASSERT_EQ(spans.size(), 5u);  // x, h, a, b, y
  int shared_pairs = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    for (size_t j = i + 1; j < spans.size(); ++j) {
      const Span& p = spans[i];
      const Span& q = spans[j];
      const bool bytes_overlap = p.begin < q.end && q.begin < p.end;
      const bool alive_together = p.first <= q.last && q.first <= p.last;
      EXPECT_FALSE(bytes_overlap && alive_together) << p.name << " and " << q.name;
      if (bytes_overlap) ++shared_pairs;
    }
  }
  EXPECT_GT(shared_pairs, 0);
  ASSERT_EQ(plan.memory_size(), 1);
  EXPECT_EQ(plan.memory(0).naive_bytes(), naive);
  EXPECT_LT(plan.memory(0).planned_bytes(), plan.memory(0).naive_bytes());
  EXPECT_EQ(plan.memory(0).planned_bytes(),
            rank_plan.memory_blocks(0).size_bytes() + rank_plan.memory_blocks(1).size_bytes());
  EXPECT_EQ(rank_plan.memory_blocks(0).size_bytes(), persistent);
}

TEST(RegistersTest, WithoutReuseNoBytesAreShared) {
  LowerOptions options;
  options.reuse_memory = false;
  const PlanProto plan = LowerTextOrDie(kChainText, options);
  const RankPlanProto& rank_plan = RankPlan(plan, 0);
  std::vector<std::pair<int64_t, int64_t>> ranges;  // [begin, end) in block 1
  for (const RegisterProto& reg : rank_plan.registers()) {
    if (reg.memory().block_id() != 1) continue;
    ranges.push_back({reg.memory().offset(), reg.memory().offset() + reg.count() * reg.memory().buffer_bytes()});
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) EXPECT_LE(ranges[i - 1].second, ranges[i].first);
  EXPECT_EQ(plan.memory(0).planned_bytes(), plan.memory(0).naive_bytes());
}

TEST(RegistersTest, CrossRankAndMultiBufferRegistersAreLiveAllStep) {
  const PlanProto plan = LowerTextOrDie(kPipelineText);
  // h0 on rank 0 has count 2 and is read by a transfer: no other register may share its bytes.
  const RankPlanProto& rank_plan = RankPlan(plan, 0);
  const RegisterProto& h0 = FindRegisterByName(plan, "h0@r0");
  const int64_t begin = h0.memory().offset(), end = begin + h0.count() * h0.memory().buffer_bytes();
  for (const RegisterProto& reg : rank_plan.registers()) {
    if (reg.has_remote() || reg.id() == h0.id() || reg.memory().block_id() != 1) continue;
    const int64_t b = reg.memory().offset(), e = b + reg.count() * reg.memory().buffer_bytes();
    EXPECT_FALSE(b < end && begin < e) << reg.name();
  }
}

// Two stages, 4 micro-batches, the loss on stage 1: ops after it in program order are the
// backward. Stage 0 keeps 2 pieces in flight (1F1B), so its forward temporaries (x, a0, b0)
// and backward ones (e1 -> f0 -> g0) must not share bytes: registers sharing bytes take turns
// in task order, and piece 1's forward would wait for piece 0's backward, i.e. for stage 1.
constexpr char kPipelineLossText[] = R"(config(name="pp_loss", micro_batches=4)
x = input(shape=[8,4]) placement=cpu:[0]
w0 = variable(shape=[4,4], init=ones) placement=cpu:[0]
w1 = variable(shape=[4,4], init=ones) placement=cpu:[1]
a0 = matmul(x, w0) stage=0
b0 = relu(a0) stage=0
c0 = relu(b0) stage=0
h1 = matmul(c0, w1) placement=cpu:[1] stage=1
loss = reduce_mean(h1) placement=cpu:[1] stage=1
d1 = relu(loss) placement=cpu:[1] stage=1
e0 = relu(d1) placement=cpu:[0] stage=0
f0 = relu(e0) stage=0
g0 = relu(f0) stage=0
output(g0)
train(loss, optimizer=sgd(lr=0.1))
)";

// The same with a 2x2 last stage whose backward value e1 (S(0), P) is boxed into stage 0's
// rank: the receiving rank adds and concatenates it with count-1 registers whose tasks carry
// stage 1's label (a review's counterexample: they were planned in stage 0's forward pool).
constexpr char kPipelineMeshText[] = R"(config(name="pp_mesh", micro_batches=4)
x = input(shape=[8,4]) placement=cpu:[0]
w0 = variable(shape=[4,4], init=ones) placement=cpu:[0]
w1 = variable(shape=[4,4], init=ones) placement=cpu:[[1,2],[3,4]] sbp=[B,B]
a0 = matmul(x, w0) stage=0
b0 = relu(a0) stage=0
c0 = relu(b0) stage=0
h1 = matmul(c0, w1) placement=cpu:[[1,2],[3,4]] stage=1 in_sbp=[[S(0),B],[B,B]] out_sbp=[[S(0),B]]
loss = reduce_mean(h1) placement=cpu:[[1,2],[3,4]] stage=1
e1 = add(h1, h1) placement=cpu:[[1,2],[3,4]] stage=1 in_sbp=[[S(0),P],[S(0),P]] out_sbp=[[S(0),P]]
e0 = relu(e1) placement=cpu:[0] stage=0 in_sbp=[[B]]
f0 = relu(e0) stage=0
g0 = relu(f0) stage=0
output(g0)
train(loss, optimizer=sgd(lr=0.1))
)";

// Rank 0's count-1 registers in its reusable block: name, producer task id, [begin, end).
struct Placed {
  std::string name;
  int64_t producer;
  int64_t begin, end;
};
std::vector<Placed> ReusableOnRank0(const PlanProto& plan) {
  std::vector<Placed> placed;
  for (const RegisterProto& reg : RankPlan(plan, 0).registers()) {
    if (reg.memory().block_id() != 1 || reg.count() != 1) continue;
    placed.push_back({reg.name(), reg.producer().task_id(), reg.memory().offset(),
                      reg.memory().offset() + reg.memory().buffer_bytes()});
  }
  return placed;
}

TEST(RegistersTest, PipelinedStageKeepsForwardAndBackwardBytesApartUnderABoxedBackward) {
  const PlanProto plan = LowerTextOrDie(kPipelineMeshText);
  // Rank 0's backward starts with the tasks emitted for e0: the boxing of e1, then e0 itself.
  int64_t first_backward = FindTask(plan, "e0@r0").id();
  for (const TaskProto& t : RankPlan(plan, 0).tasks()) {
    if (t.name().find("e1") != std::string::npos) first_backward = std::min(first_backward, t.id());
  }
  const std::vector<Placed> placed = ReusableOnRank0(plan);
  int boxed_backward = 0, across = 0;
  for (const Placed& p : placed) {
    const bool p_backward = p.producer >= first_backward;
    boxed_backward += p_backward && p.name.find("e1") != std::string::npos;
    for (const Placed& q : placed) {
      const bool q_backward = q.producer >= first_backward;
      if (p_backward && !q_backward && p.begin < q.end && q.begin < p.end) {
        ++across;
        ADD_FAILURE() << p.name << " (backward) shares bytes with " << q.name << " (forward)";
      }
    }
  }
  EXPECT_GT(boxed_backward, 0) << "the boxing of e1 on rank 0 planned no count-1 register";
  EXPECT_EQ(across, 0);
}

TEST(RegistersTest, PipelinedStageKeepsForwardAndBackwardBytesApart) {
  for (int32_t max_count : {0, 1}) {
    SCOPED_TRACE(max_count == 0 ? "2 pieces in flight on stage 0" : "max_register_count 1: 1 in flight");
    LowerOptions options;
    options.max_register_count = max_count;
    const PlanProto plan = LowerTextOrDie(kPipelineLossText, options);
    const RankPlanProto& rank_plan = RankPlan(plan, 0);
    std::map<std::string, std::pair<int64_t, int64_t>> bytes;  // register name -> [begin, end)
    for (const RegisterProto& reg : rank_plan.registers()) {
      if (reg.memory().block_id() != 1) continue;
      bytes[reg.name()] = {reg.memory().offset(), reg.memory().offset() + reg.count() * reg.memory().buffer_bytes()};
    }
    auto overlap = [&](const std::string& a, const std::string& b) {
      EXPECT_EQ(bytes.count(a), 1u) << a;
      EXPECT_EQ(bytes.count(b), 1u) << b;
      return bytes[a].first < bytes[b].second && bytes[b].first < bytes[a].second;
    };
    const std::vector<std::string> forward = {"x@r0", "a0@r0", "b0@r0"}, backward = {"f0@r0", "g0@r0"};
    int across = 0;
    for (const std::string& f : forward) {
      for (const std::string& b : backward) across += overlap(f, b) ? 1 : 0;
    }
    if (max_count == 0) {
      EXPECT_EQ(across, 0);
      EXPECT_TRUE(overlap("x@r0", "b0@r0"));  // forward registers still share among themselves
    } else {
      EXPECT_GT(across, 0);  // one piece in flight: forward and backward share as before
    }
    EXPECT_LT(plan.memory(0).planned_bytes(), plan.memory(0).naive_bytes());
  }
}

}  // namespace
}  // namespace testing
}  // namespace compiler
}  // namespace oneflow_like
