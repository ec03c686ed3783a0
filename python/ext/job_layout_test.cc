// JobLayout (what a process holding only its own rank's plan knows of the other ranks) against
// the whole plan: on GPT jobs of several layouts (2-D, pipeline with micro-batches, ZeRO-1,
// uneven splits) and a hand-written job, the ranks equal the whole plan's and every rank's
// derived binding equals the whole plan's binding of that rank (kind and shard: offsets, mesh
// coordinates, SBP), with no binding where the whole plan has none.
#include "python/ext/job_layout.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/driver/compile.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/compiler/text_format.h"
#include "oneflow_like/models/gpt.h"

namespace oneflow_like {
namespace python {
namespace {

void ExpectLayoutMatchesWholePlan(compiler::Graph graph) {
  absl::StatusOr<compiler::GlobalDecisions> decisions = compiler::RunGlobalPasses(std::move(graph));
  ASSERT_TRUE(decisions.ok()) << decisions.status();
  absl::StatusOr<PlanProto> whole = compiler::LowerDecisions(*decisions);
  ASSERT_TRUE(whole.ok()) << whole.status();
  const JobLayout layout = JobLayout::FromGraph(decisions->graph);
  EXPECT_EQ(layout.ranks(), std::vector<int32_t>(whole->ranks().begin(), whole->ranks().end()));

  std::map<std::pair<std::string, int32_t>, TensorBindingProto> expected;  // the last of a name wins
  std::set<std::string> names;
  for (const RankPlanProto& rank : whole->rank_plans()) {
    for (const TensorBindingProto& b : rank.bindings()) {
      expected[{b.tensor_name(), rank.rank()}] = b;
      names.insert(b.tensor_name());
    }
  }
  ASSERT_FALSE(names.empty());
  int64_t compared = 0;
  for (const std::string& name : names) {
    for (int32_t rank = 0; rank < whole->world_size(); ++rank) {
      const std::optional<TensorBindingProto> derived = layout.Binding(name, rank);
      auto it = expected.find({name, rank});
      if (it == expected.end()) {
        EXPECT_FALSE(derived.has_value()) << name << " on rank " << rank;
        continue;
      }
      ASSERT_TRUE(derived.has_value()) << name << " on rank " << rank;
      EXPECT_EQ(derived->tensor_name(), name);
      EXPECT_EQ(derived->kind(), it->second.kind()) << name << " on rank " << rank;
      EXPECT_EQ(derived->shard().SerializeAsString(), it->second.shard().SerializeAsString())
          << name << " on rank " << rank << ":\n" << derived->shard().DebugString() << "vs\n"
          << it->second.shard().DebugString();
      ++compared;
    }
  }
  EXPECT_EQ(compared, static_cast<int64_t>(expected.size()));
  EXPECT_FALSE(layout.Binding("no such tensor", 0).has_value());
}

struct Case {
  std::string name;
  models::ParallelLayout layout;
  int32_t micro_batches = 0;
  int32_t zero_stage = 0;
  int64_t n_layer = 2;
  int64_t batch = 0;  // 0 = 2 per dp rank
};

class JobLayoutGptTest : public ::testing::TestWithParam<Case> {};

TEST_P(JobLayoutGptTest, EveryRanksBindingEqualsTheWholePlans) {
  const Case& c = GetParam();
  std::unique_ptr<OpRegistry> registry = compiler::testing::BuiltinRegistry();
  models::GptConfig config{.vocab = 64, .seq_len = 8, .n_layer = c.n_layer, .n_embd = 16, .n_head = 2,
                           .batch = c.batch > 0 ? c.batch : 2 * c.layout.dp};
  models::TrainOptions train;
  train.micro_batches = c.micro_batches;
  train.zero_stage = c.zero_stage;
  absl::StatusOr<compiler::Graph> graph = models::BuildGptJob(*registry, config, c.layout, train);
  ASSERT_TRUE(graph.ok()) << graph.status();
  ExpectLayoutMatchesWholePlan(*std::move(graph));
}

INSTANTIATE_TEST_SUITE_P(Layouts, JobLayoutGptTest,
                         ::testing::Values(Case{"dp2_tp2_zero1", {.dp = 2, .tp = 2}, 2, 1},
                                           Case{"pp2_micro2", {.pp = 2}, 2, 0},
                                           Case{"dp3_pp2_uneven", {.dp = 3, .pp = 2}, 1, 1, 3, 5}),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// Inputs and outputs on different placements, a 2-D mesh, an output that is re-laid out.
TEST(JobLayoutTest, HandWrittenJobWithBoxedOutputs) {
  std::unique_ptr<OpRegistry> registry = compiler::testing::BuiltinRegistry();
  absl::StatusOr<compiler::Graph> graph = compiler::ParseGraph(
      "config(name=\"mix\")\n"
      "x = input(shape=[6, 4], dtype=float32) placement=cpu:[[0,1],[2,3]] sbp=[S(0), B]\n"
      "w = variable(shape=[4, 5], dtype=float32) placement=cpu:[[0,1],[2,3]] sbp=[B, S(1)]\n"
      "y = matmul(x, w) placement=cpu:[[0,1],[2,3]]\n"
      "z = identity(y) placement=cpu:[4,5] sbp=[S(1)]\n"
      "output(y, z)\n",
      *registry);
  ASSERT_TRUE(graph.ok()) << graph.status();
  ExpectLayoutMatchesWholePlan(*std::move(graph));
}

}  // namespace
}  // namespace python
}  // namespace oneflow_like
