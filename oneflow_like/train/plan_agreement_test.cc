// A rank given another job than rank 0 is refused before any data moves, naming what differs:
// another layer count, another micro-batch count; the same job on two ranks (their per-rank
// plans differ, their agreements do not) passes.
#include "oneflow_like/train/plan_agreement.h"

#include "gtest/gtest.h"
#include "oneflow_like/compiler/driver/compile.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/models/gpt.h"

namespace oneflow_like {
namespace train {
namespace {

class PlanAgreementTest : public ::testing::Test {
 protected:
  // Rank `rank`'s per-rank plan (or the whole plan, rank -1) of a 2 x 2 (dp x pp) GPT.
  PlanProto Plan(int32_t rank, int64_t n_layer = 2, int32_t micro_batches = 2) {
    models::GptConfig config{.vocab = 32, .seq_len = 8, .n_layer = n_layer, .n_embd = 16, .n_head = 2, .batch = 4};
    models::TrainOptions train;
    train.micro_batches = micro_batches;
    absl::StatusOr<compiler::Graph> graph = models::BuildGptJob(*registry_, config, {.dp = 2, .pp = 2}, train);
    EXPECT_TRUE(graph.ok()) << graph.status();
    compiler::CompileOptions options;
    options.only_rank = rank;
    absl::StatusOr<PlanProto> plan = compiler::Compile(*std::move(graph), options);
    EXPECT_TRUE(plan.ok()) << plan.status();
    return plan.ok() ? *plan : PlanProto();
  }
  std::unique_ptr<OpRegistry> registry_ = compiler::testing::BuiltinRegistry();
};

TEST_F(PlanAgreementTest, RanksOfOneJobAgree) {
  const PlanProto rank0 = Plan(0), rank3 = Plan(3);
  EXPECT_NE(rank0.content_hash(), rank3.content_hash());  // their own plans
  EXPECT_EQ(CompareWithRank0(PlanFingerprint(rank3), PlanFingerprint(rank0), 3), absl::OkStatus());
  const PlanProto whole = Plan(-1);
  EXPECT_EQ(CompareWithRank0(PlanFingerprint(whole), PlanFingerprint(Plan(-1)), 1), absl::OkStatus());
}

TEST_F(PlanAgreementTest, AnotherLayerCountIsRefusedNamingIt) {
  const absl::Status s = CompareWithRank0(PlanFingerprint(Plan(2, /*n_layer=*/3)), PlanFingerprint(Plan(0)), 2);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("rank 2 compiled another job than rank 0: ops "), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("variables "), absl::string_view::npos) << s;
  EXPECT_EQ(s.message().find("pieces_per_step"), absl::string_view::npos) << s;
}

TEST_F(PlanAgreementTest, AnotherMicroBatchCountIsRefusedNamingIt) {
  const absl::Status s =
      CompareWithRank0(PlanFingerprint(Plan(1, 2, /*micro_batches=*/4)), PlanFingerprint(Plan(0)), 1);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("pieces_per_step 4 vs 2"), absl::string_view::npos) << s;
}

TEST_F(PlanAgreementTest, WholeAgainstPerRankAndHashesAreNamed) {
  const absl::Status kinds = CompareWithRank0(PlanFingerprint(Plan(-1)), PlanFingerprint(Plan(0)), 1);
  EXPECT_NE(kinds.message().find("rank 1 compiled the whole plan but rank 0 its own rank's plan"),
            absl::string_view::npos)
      << kinds;
  const PlanProto other = Plan(-1, 3);
  const absl::Status hashes = CompareWithRank0(PlanFingerprint(other), PlanFingerprint(Plan(-1)), 1);
  EXPECT_NE(hashes.message().find(other.content_hash()), absl::string_view::npos) << hashes;
}

}  // namespace
}  // namespace train
}  // namespace oneflow_like
