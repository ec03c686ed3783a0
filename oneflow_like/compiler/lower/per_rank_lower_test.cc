// One rank's lowering (LowerOptions::only_rank) against the whole plan, byte for byte, on the
// lowering tests' text jobs: data parallel with an SGD update, micro-batches and accumulation,
// pipelines of two and three stages (register counts > 1 across stages, mirrors of them), every
// boxing kind point-to-point and as collectives, gradient buckets with ZeRO's reduce-scatter,
// the 2x2 GPT block, kAuto's choices, a world larger than the placements, and an op without
// inputs paced on a rank without sources.
#include <limits>
#include <string>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/lower/lower_test_util.h"
#include "oneflow_like/compiler/test_util.h"

namespace oneflow_like {
namespace compiler {
namespace testing {
namespace {

void Check(const std::string& text, const LowerOptions& options = {},
           const std::function<void(Graph*)>& edit = nullptr) {
  std::unique_ptr<OpRegistry> registry = BuiltinRegistry();
  const Graph graph = AnnotatedGraph(text, *registry, edit);
  const PlanProto whole = ExpectPerRankMatchesWhole(graph, options);
  EXPECT_GT(whole.rank_plans_size(), 0);
}

LowerOptions Collective(int64_t bucket_bytes = 0) {
  LowerOptions options;
  options.boxing = BoxingStyle::kCollective;
  options.bucket_bytes = bucket_bytes;
  return options;
}

TEST(PerRankLowerTest, DataParallelMlpWithUpdates) {
  Check(MlpText(1), {}, AddMlpUpdates);
  Check(MlpText(4), {}, AddMlpUpdates);
  Check(MlpText(2, 3), {}, AddMlpUpdates);
  Check(MlpText(4), Collective(), AddMlpUpdates);
}

TEST(PerRankLowerTest, WorldLargerThanThePlacementsLeavesRanksWithoutWork) {
  LowerOptions options;
  options.world_size = 4;
  Check(MlpText(2), options, AddMlpUpdates);
}

TEST(PerRankLowerTest, PipelinesCountRegistersAcrossStages) {
  Check(R"(config(name="pp", micro_batches=4)
x = input(shape=[8,4]) placement=cpu:[0]
w0 = variable(shape=[4,4], init=ones) placement=cpu:[0]
w1 = variable(shape=[4,4], init=ones) placement=cpu:[1]
h0 = matmul(x, w0) stage=0
h1 = matmul(h0, w1) placement=cpu:[1] stage=1
g1 = relu(h1) placement=cpu:[1] stage=1
d0 = add(g1, h0) placement=cpu:[0] stage=0
output(d0)
)");
  Check(R"(config(name="pp3", micro_batches=4)
x = input(shape=[8,4]) placement=cpu:[0,1]
f0 = relu(x) stage=0
f1 = relu(f0) placement=cpu:[2,3] stage=1
f2 = relu(f1) placement=cpu:[4] stage=2
b2 = relu(f2) placement=cpu:[4] stage=2
b1 = add(b2, f1) placement=cpu:[2,3] stage=1
b0 = add(b1, f0) placement=cpu:[0,1] stage=0
output(b0)
)");
}

TEST(PerRankLowerTest, OpWithoutInputsPacedByTheLatestValueOfItsRank) {
  // The seed-like fill on rank 1 (no source there) is paced by h1, which rank 1 also sends.
  Check(R"(config(name="seed", micro_batches=2)
x = input(shape=[8,4]) placement=cpu:[0]
h0 = relu(x) placement=cpu:[0] stage=0
h1 = relu(h0) placement=cpu:[1] stage=1
s = fill(shape=[8,4], value=1.0) placement=cpu:[1] stage=1
d1 = add(h1, s) placement=cpu:[1] stage=1
d0 = add(h1, h0) placement=cpu:[0] stage=0
output(d1)
output(d0)
)");
}

TEST(PerRankLowerTest, MirrorCountsSeeTheReadersOnTheProducersRank) {
  // h1 (stage 1 of 3) is sent to rank 2 within stage 1 and paces the fill s on rank 1 after
  // ops of other stages: kept alive across them, so its count (and its mirror's) is 2.
  Check(R"(config(name="paced", micro_batches=4)
x = input(shape=[8,4]) placement=cpu:[0]
f0 = relu(x) placement=cpu:[0] stage=0
h1 = relu(f0) placement=cpu:[1] stage=1
r1 = relu(h1) placement=cpu:[2] stage=1
f2 = relu(r1) placement=cpu:[3] stage=2
b0 = relu(f0) placement=cpu:[0] stage=0
s = fill(shape=[8,4], value=1.0) placement=cpu:[1] stage=1
output(f2)
output(b0)
output(s)
)");
  // a on cpu:[0,1] B boxed to cpu:[1,2] B: rank 1 keeps its own register (the destination
  // aliases the source), which b@r1 of stage 1 reads; whatever rank 2 receives is counted with it.
  Check(R"(config(name="alias", micro_batches=4)
x = input(shape=[8,4]) placement=cpu:[0,1] sbp=[B]
a = relu(x) placement=cpu:[0,1] stage=0
b = relu(a) placement=cpu:[1,2] stage=1 in_sbp=[[B]]
c = relu(b) placement=cpu:[3] stage=2
output(c)
)");
}

TEST(PerRankLowerTest, EveryBoxingKindPointToPointAndCollective) {
  const std::string kinds[][2] = {{"S(0)", "B"}, {"S(0)", "S(1)"}, {"B", "S(0)"}, {"S(1)", "S(0)"}};
  for (const auto& [from, to] : kinds) {
    const std::string text = "x = input(shape=[7,6]) placement=cpu:[0,1,2] sbp=[" + from + "]\n" +
                             "y = relu(x) in_sbp=[[" + to + "]]\noutput(y)\n";
    SCOPED_TRACE(from + " -> " + to);
    Check(text);
    Check(text, Collective());
  }
  for (const char* to : {"B", "S(1)", "S(0)"}) {  // from a partial sum
    const std::string text = std::string("a = input(shape=[8,4]) placement=cpu:[0,1,2] sbp=[S(1)]\n"
                                         "b = input(shape=[4,6]) placement=cpu:[0,1,2] sbp=[S(0)]\n"
                                         "p = matmul(a, b) out_sbp=[[P]]\n"
                                         "z = relu(p) in_sbp=[[") + to + "]]\noutput(z)\n";
    SCOPED_TRACE(std::string("P -> ") + to);
    Check(text);
    Check(text, Collective());
  }
  // Between placements and on a 2x2 mesh.
  Check("x = input(shape=[7,6]) placement=cpu:[0,1] sbp=[S(0)]\n"
        "y = relu(x) placement=cpu:[2,3,4] in_sbp=[[S(1)]]\noutput(y)\n");
  for (const char* to : {"B, B", "S(1), S(0)", "B, S(1)"}) {
    const std::string text = std::string("x = input(shape=[8,6]) placement=cpu:[[0,1],[2,3]] sbp=[S(0), P]\n"
                                         "y = relu(x) in_sbp=[[") + to + "]]\noutput(y)\n";
    SCOPED_TRACE(std::string("(S(0), P) -> ") + to);
    Check(text);
    Check(text, Collective());
  }
}

TEST(PerRankLowerTest, GptBlockOnAMeshEveryBoxingStyle) {
  Check(kGptBlockText);
  Check(kGptBlockText, Collective());
  LowerOptions automatic;
  automatic.boxing = BoxingStyle::kAuto;
  Check(kGptBlockText, automatic);
  LowerOptions no_reuse;
  no_reuse.reuse_memory = false;
  no_reuse.max_register_count = 1;
  Check(kGptBlockText, no_reuse);
}

// A range that is not one: refused naming the numbers; LowerToPlan makes one plan only.
TEST(PerRankLowerTest, BadRangesAreRefused) {
  std::unique_ptr<OpRegistry> registry = BuiltinRegistry();
  const Graph graph = AnnotatedGraph(MlpText(2), *registry, AddMlpUpdates);
  LowerOptions options;
  options.only_rank = -1;
  options.num_ranks = 2;
  absl::StatusOr<std::vector<PlanProto>> range = LowerRankRange(graph, options);
  EXPECT_EQ(range.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(range.status().message().find("only_rank >= 0"), std::string::npos) << range.status();
  options.only_rank = 0;
  options.num_ranks = 0;
  EXPECT_EQ(LowerRankRange(graph, options).status().code(), absl::StatusCode::kInvalidArgument);
  options.num_ranks = 3;  // ranks 0 .. 2 of a world of 2
  range = LowerRankRange(graph, options);
  EXPECT_EQ(range.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(range.status().message().find("ranks 0 .. 2 run past the world of 2"), std::string::npos)
      << range.status();
  options.only_rank = 1;
  options.num_ranks = std::numeric_limits<int32_t>::max();  // would overflow the range's end
  EXPECT_EQ(LowerRankRange(graph, options).status().code(), absl::StatusCode::kInvalidArgument);
  options.only_rank = 0;
  options.num_ranks = 2;
  absl::StatusOr<PlanProto> one = LowerToPlan(graph, options);
  EXPECT_EQ(one.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(one.status().message().find("LowerRankRange"), std::string::npos) << one.status();
  range = LowerRankRange(graph, options);
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(range->size(), 2u);
}

}  // namespace
}  // namespace testing
}  // namespace compiler
}  // namespace oneflow_like
