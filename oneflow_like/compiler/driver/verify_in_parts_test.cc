// VerifyInParts (the whole-plan checks, lowered a range of ranks at a time) on GPT jobs of every
// layout kind: it accepts the plans the whole-plan compile verifies, its content hash is the
// whole plan's, whatever the number of ranks per part, and its counts are the whole plan's.
// (Defects are StreamedVerifier's tests, plan/streamed_verifier_test.cc: the compiler makes none.)
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/driver/compile.h"
#include "oneflow_like/compiler/driver/gpt_test_case.h"
#include "oneflow_like/compiler/driver/verify_in_parts.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/models/gpt.h"

namespace oneflow_like {
namespace compiler {
namespace {

using Case = GptTestCase;

class VerifyInPartsTest : public ::testing::TestWithParam<Case> {
 protected:
  std::unique_ptr<OpRegistry> registry_ = testing::BuiltinRegistry();
};

TEST_P(VerifyInPartsTest, AcceptsTheCompiledPlanAndHashesItLikeTheWholePlan) {
  const Case& c = GetParam();
  const CompileOptions options = GptTestOptions(c);
  absl::StatusOr<GlobalDecisions> decisions = GptTestDecisions(c, *registry_);
  ASSERT_TRUE(decisions.ok()) << decisions.status();
  absl::StatusOr<PlanProto> whole = LowerDecisions(*decisions, options);
  ASSERT_TRUE(whole.ok()) << whole.status();
  int64_t tasks = 0, registers = 0;
  for (const RankPlanProto& r : whole->rank_plans()) {
    tasks += r.tasks_size();
    registers += r.registers_size();
  }
  const int32_t world = whole->world_size();
  for (int32_t per_part : {1, 3, world, 0}) {
    SCOPED_TRACE("ranks per part " + std::to_string(per_part));
    InPartsOptions parts;
    parts.ranks_per_part = per_part;
    std::vector<std::string> lines;
    parts.progress = [&](const std::string& line) { lines.push_back(line); };
    absl::StatusOr<InPartsReport> report = VerifyInParts(*decisions, options, parts);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->content_hash, whole->content_hash());
    EXPECT_EQ(report->world_size, world);
    EXPECT_EQ(report->ranks_with_work, whole->ranks_size());
    EXPECT_EQ(report->tasks, tasks);
    EXPECT_EQ(report->registers, registers);
    const int32_t used = report->ranks_per_part;
    EXPECT_GE(used, 1);
    if (per_part > 0) EXPECT_EQ(used, per_part);
    EXPECT_GE(lines.size(), static_cast<size_t>((world + used - 1) / used));  // one line per range at least
  }
}

std::string Name(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(
    Layouts, VerifyInPartsTest,
    // Pipelines get pp + 1 layers: an uneven split over the stages.
    ::testing::Values(Case{"dp4_zero1", {.dp = 4}, 1, 1}, Case{"tp4", {.tp = 4}},
                      Case{"pp4_micro4_recompute", {.pp = 4}, 4, 0, true, BoxingStyle::kPointToPoint, 5},
                      Case{"dp2_tp2_pp2_zero1_recompute", {.dp = 2, .tp = 2, .pp = 2}, 4, 1, true,
                           BoxingStyle::kPointToPoint, 3},
                      Case{"dp2_tp2_pp2_buckets", {.dp = 2, .tp = 2, .pp = 2}, 4, 1, false, BoxingStyle::kCollective, 3},
                      Case{"dp2_tp2_auto", {.dp = 2, .tp = 2}, 2, 0, false, BoxingStyle::kAuto},
                      Case{"dp2_world5_idle_ranks", {.dp = 2}, 2, 0, false, BoxingStyle::kPointToPoint, 2, 0, 1, 5}),
    Name);

// A world smaller than the placements is the lowering's error, passed through.
TEST(VerifyInPartsErrorsTest, AWorldSmallerThanThePlacementsIsRefused) {
  std::unique_ptr<OpRegistry> registry = testing::BuiltinRegistry();
  models::GptConfig config{.vocab = 64, .seq_len = 8, .n_layer = 1, .n_embd = 16, .n_head = 2, .batch = 4};
  absl::StatusOr<Graph> graph = models::BuildGptJob(*registry, config, {.dp = 4}, {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  CompileOptions options;
  absl::StatusOr<GlobalDecisions> decisions = RunGlobalPasses(*std::move(graph), options);
  ASSERT_TRUE(decisions.ok()) << decisions.status();
  options.world_size = 2;
  absl::StatusOr<InPartsReport> report = VerifyInParts(*decisions, options);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument) << report.status();
  EXPECT_NE(report.status().message().find("world_size 2"), std::string::npos) << report.status();
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
