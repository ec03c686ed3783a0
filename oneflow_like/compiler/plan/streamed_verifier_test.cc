// StreamedVerifier against VerifyPlan: on real GPT plans given as per-rank parts (each rank
// lowered alone, as the processes of a job do) the streamed verdict is OK and the simulation's
// counts are SimulatePlan's on the whole plan; on plans with one defect the streamed verdict is
// VerifyPlan's error on the merged plan, message for message.
#include "oneflow_like/compiler/plan/streamed_verifier.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/driver/compile.h"
#include "oneflow_like/compiler/driver/gpt_test_case.h"
#include "oneflow_like/compiler/plan/plan_sim_graph.h"
#include "oneflow_like/compiler/plan/plan_simulator.h"
#include "oneflow_like/compiler/plan/plan_test_util.h"
#include "oneflow_like/compiler/plan/plan_verifier.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/core/status.h"
#include "oneflow_like/models/gpt.h"

namespace oneflow_like {
namespace compiler {
namespace {

// The per-rank parts of `whole`, as LowerOptions::only_rank gives them.
std::vector<PlanProto> Split(const PlanProto& whole) {
  std::vector<PlanProto> parts;
  for (int i = 0; i < whole.rank_plans_size(); ++i) {
    PlanProto& part = parts.emplace_back();
    part.set_job_name(whole.job_name());
    part.set_world_size(whole.world_size());
    part.set_pieces_per_step(whole.pieces_per_step());
    part.add_ranks(whole.ranks(i));
    *part.add_rank_plans() = whole.rank_plans(i);
    if (i < whole.memory_size()) *part.add_memory() = whole.memory(i);
    part.mutable_per_rank()->set_rank(whole.ranks(i));
  }
  return parts;
}

absl::Status Streamed(const std::vector<PlanProto>& parts, int32_t world_size, int64_t pieces_per_step,
                      PlanSimulation* simulation = nullptr, const PlanVerifierOptions& options = {}) {
  StreamedVerifier verifier(world_size, pieces_per_step, options);
  for (const PlanProto& part : parts) RETURN_IF_ERROR(verifier.AddRank(part));
  RETURN_IF_ERROR(verifier.Finish());
  for (const PlanProto& part : parts) RETURN_IF_ERROR(verifier.CheckRank(part));
  if (simulation != nullptr) *simulation = verifier.simulation();
  return absl::OkStatus();
}

// `whole` has a defect: VerifyPlan refuses it, and the streamed verdict is the same error.
void ExpectSameError(const PlanProto& whole, const std::string& expected_part) {
  const absl::Status expected = VerifyPlan(whole);
  ASSERT_FALSE(expected.ok()) << "the defect went unnoticed";
  EXPECT_NE(std::string(expected.message()).find(expected_part), std::string::npos) << expected;
  EXPECT_EQ(Streamed(Split(whole), whole.world_size(), whole.pieces_per_step()), expected);
}

using Case = GptTestCase;

class StreamedVerifierGptTest : public ::testing::TestWithParam<Case> {};

TEST_P(StreamedVerifierGptTest, PartsPassWithTheWholePlansCounts) {
  const Case& c = GetParam();
  std::unique_ptr<OpRegistry> registry = testing::BuiltinRegistry();
  CompileOptions options = GptTestOptions(c);
  absl::StatusOr<GlobalDecisions> decisions = GptTestDecisions(c, *registry);
  ASSERT_TRUE(decisions.ok()) << decisions.status();
  absl::StatusOr<PlanProto> whole = LowerDecisions(*decisions, options);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_TRUE(VerifyPlan(*whole).ok());
  std::vector<PlanProto> parts;
  for (int32_t r = 0; r < whole->world_size(); ++r) {
    options.only_rank = r;
    absl::StatusOr<PlanProto> part = LowerDecisions(*decisions, options);
    ASSERT_TRUE(part.ok()) << part.status();
    parts.push_back(*std::move(part));
  }
  PlanSimulation streamed;
  ASSERT_EQ(Streamed(parts, whole->world_size(), whole->pieces_per_step(), &streamed), absl::OkStatus());
  absl::StatusOr<PlanSimulation> simulated = SimulatePlan(*whole, PlanVerifierOptions().steps);
  ASSERT_TRUE(simulated.ok() && simulated->completed);
  EXPECT_EQ(streamed.emitted_by_index, simulated->emitted_by_index);
  EXPECT_EQ(streamed.read_by_index, simulated->read_by_index);
  ASSERT_GT(streamed.emitted_by_index.size(), 0u);
  // Labels of tasks on earlier ranks come from the skeleton's interned names ("...@r0").
  PlanProto duplicate = *whole;
  RankPlanProto& last = *duplicate.mutable_rank_plans(duplicate.rank_plans_size() - 1);
  last.mutable_tasks(0)->set_id(duplicate.rank_plans(0).tasks(0).id());
  ExpectSameError(duplicate, "@r0' (");
  // A rank left out breaks the transfers and collectives that cross it.
  if (parts.size() > 1) {
    parts.erase(parts.begin() + 1);
    EXPECT_EQ(Streamed(parts, whole->world_size(), whole->pieces_per_step()).code(), absl::StatusCode::kInternal);
  }
}

std::string Name(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(
    Layouts, StreamedVerifierGptTest,
    ::testing::Values(Case{"dp4_zero1_p2p", {.dp = 4}, 1, 1},
                      Case{"tp4_collective", {.tp = 4}, 0, 0, false, BoxingStyle::kCollective},
                      Case{"pp4_micro4_recompute", {.pp = 4}, 4, 0, true, BoxingStyle::kPointToPoint, 4},
                      Case{"dp2_tp2_zero1_buckets", {.dp = 2, .tp = 2}, 2, 1, false, BoxingStyle::kCollective},
                      Case{"dp2_tp2_pp2_zero1_two_streams", {.dp = 2, .tp = 2, .pp = 2}, 2, 1, false,
                           BoxingStyle::kPointToPoint, 2, 0, 2}),
    Name);

// Rank 0: x.source -> x -> (rank 1) x.transfer -> x@1 -> a -> ra -> b -> rb -> y.sink; and
// z.source -> z -> z.sink.
struct TwoRanks {
  PlanProto plan;
  int64_t x = 0, ra = 0, rb = 0, z = 0, transfer = 0;
};
TwoRanks TwoRankPlan() {
  TestPlanBuilder b(2, 1);
  TwoRanks p;
  p.x = b.AddInput(0, "x").second;
  p.z = b.AddInput(0, "z").second;
  b.AddSink(p.z, "z");
  p.transfer = b.AddTransfer(p.x, 1, "x.transfer");
  const int64_t x1 = b.AddRegister(p.transfer, "x@1");
  const int64_t a = b.AddTask(1, TaskProto::COMPUTE, "a");
  b.Connect(x1, a);
  p.ra = b.AddRegister(a, "ra");
  const int64_t second = b.AddTask(1, TaskProto::COMPUTE, "b");
  b.Connect(p.ra, second);
  p.rb = b.AddRegister(second, "rb");
  b.AddSink(p.rb, "y");
  p.plan = b.Build();
  return p;
}

TEST(StreamedVerifierTest, HandBuiltPlanPasses) {
  const TwoRanks p = TwoRankPlan();
  ASSERT_TRUE(VerifyPlan(p.plan).ok()) << VerifyPlan(p.plan);
  EXPECT_EQ(Streamed(Split(p.plan), 2, 1), absl::OkStatus());
}

TEST(StreamedVerifierTest, ARankWithoutWorkMayBeGivenOrSkipped) {
  TwoRanks p = TwoRankPlan();
  p.plan.set_world_size(3);
  std::vector<PlanProto> parts = Split(p.plan);
  EXPECT_EQ(Streamed(parts, 3, 1), absl::OkStatus());
  PlanProto idle;
  idle.set_world_size(3);
  idle.set_pieces_per_step(1);
  idle.mutable_per_rank()->set_rank(2);
  parts.push_back(idle);
  EXPECT_EQ(Streamed(parts, 3, 1), absl::OkStatus());
}

TEST(StreamedVerifierTest, MirrorWithOtherSlots) {
  TwoRanks p = TwoRankPlan();
  FindEntry(&p.plan, 1, p.x)->mutable_slots(0)->set_dims(0, 3);
  ExpectSameError(p.plan, "does not match the producer's register on rank 0: slot 0 is float32[3,2] here");
}

TEST(StreamedVerifierTest, MirrorNamingAnotherProducer) {
  TwoRanks p = TwoRankPlan();
  FindEntry(&p.plan, 1, p.x)->mutable_producer()->set_task_id(p.transfer);
  ExpectSameError(p.plan, "names producer task");
}

TEST(StreamedVerifierTest, ProducerMissingACrossRankConsumer) {
  TwoRanks p = TwoRankPlan();
  FindEntry(&p.plan, 0, p.x)->clear_consumers();
  ExpectSameError(p.plan, "does not list it as a consumer");
}

TEST(StreamedVerifierTest, ProducerListingAConsumerThatDoesNotExist) {
  TwoRanks p = TwoRankPlan();
  FindEntry(&p.plan, 0, p.x)->mutable_consumers(0)->set_task_id(999);
  ExpectSameError(p.plan, "lists consumer task 999 on rank 1, which does not exist");
}

TEST(StreamedVerifierTest, DuplicateTaskIdAcrossRanks) {
  TwoRanks p = TwoRankPlan();
  FindTask(&p.plan, p.transfer)->set_id(1);  // rank 0's x.source
  ExpectSameError(p.plan, "task id 1 is used twice");
}

TEST(StreamedVerifierTest, RegisterProducedOnTwoRanks) {
  TwoRanks p = TwoRankPlan();
  FindEntry(&p.plan, 1, p.rb)->set_id(p.z);
  ExpectSameError(p.plan, "is produced on two ranks");
}

TEST(StreamedVerifierTest, MemorySummaryNamedByItsPlaceInTheWholePlan) {
  TwoRanks p = TwoRankPlan();
  p.plan.mutable_memory(1)->set_planned_bytes(p.plan.memory(1).planned_bytes() + 64);
  ExpectSameError(p.plan, "memory[1] says rank 1 planned_bytes");
}

TEST(StreamedVerifierTest, RegistersSharingBytesWhileAlive) {
  TwoRanks p = TwoRankPlan();
  FindEntry(&p.plan, 1, p.rb)->mutable_memory()->set_offset(FindEntry(&p.plan, 1, p.ra)->memory().offset());
  ExpectSameError(p.plan, "are alive together on stream 0");
}

TEST(StreamedVerifierTest, SharingBytesWithARegisterReadOnAnotherRank) {
  // x is read by rank 1's transfer: no lifetime; the message names that task from the skeleton.
  TwoRanks p = TwoRankPlan();
  FindEntry(&p.plan, 0, p.z)->mutable_memory()->set_offset(FindEntry(&p.plan, 0, p.x)->memory().offset());
  ExpectSameError(p.plan, "'x.transfer' (TRANSFER) runs on another stream than its producer");
}

// Rank r: x.source -> x -> c (COLLECTIVE over [0, 1]) -> y -> y.sink.
// Rank 1's member may carry another order, logical_dims or input region of member 0.
PlanProto CollectivePlan(int64_t rank1_order, std::vector<int64_t> rank1_dims = {2, 2},
                         TestPlanBuilder::Box rank1_member0_input = {{0, 0}, {2, 2}}) {
  TestPlanBuilder b(2, 1);
  for (int32_t r = 0; r < 2; ++r) {
    const int64_t x = b.AddInput(r, "x").second;
    const int64_t c = b.AddCollective(r, "c", {0, 1}, r == 0 ? 0 : rank1_order);
    b.Connect(x, c);
    b.AddSink(b.AddRegister(c, "y"), "y");
    if (r == 1) {
      b.SetCollectiveGeometry(c, rank1_dims, {{0, 0}, {2, 2}}, {rank1_member0_input, {{0, 0}, {2, 2}}},
                              {{{0, 0}, {2, 2}}, {{0, 0}, {2, 2}}});
    }
  }
  return b.Build();
}

TEST(StreamedVerifierTest, CollectivesPass) {
  const PlanProto plan = CollectivePlan(0);
  ASSERT_TRUE(VerifyPlan(plan).ok()) << VerifyPlan(plan);
  EXPECT_EQ(Streamed(Split(plan), 2, 1), absl::OkStatus());
}

TEST(StreamedVerifierTest, CollectiveOrderMismatch) {
  ExpectSameError(CollectivePlan(1), "member ranks issue different sequences");
}

TEST(StreamedVerifierTest, CollectiveMemberWithOtherRegions) {
  ExpectSameError(CollectivePlan(0, {3, 2}), "disagree on its logical_dims or regions");
  // Regions that do not fit the kind either: still a difference from rank 0's first member
  // (VerifyPlan checks the kind on a call's first member only).
  ExpectSameError(CollectivePlan(0, {2, 2}, {{0, 0}, {1, 2}}), "disagree on its logical_dims or regions");
}

// Members that would issue the call at different places of the agreed order (NCCL's) disagree.
TEST(StreamedVerifierTest, CollectiveMemberWithAnotherIssuePhase) {
  PlanProto plan = CollectivePlan(0);
  for (TaskProto& task : *plan.mutable_rank_plans(1)->mutable_tasks()) {
    if (task.type() == TaskProto::COLLECTIVE) task.mutable_collective()->set_issue_phase(CollectiveParams::AFTER_PIECES);
  }
  ExpectSameError(plan, "disagree on its issue_phase (PER_PIECE and AFTER_PIECES)");
}

// pieces_per_step 8, rank 0: x.source -> x -> X -> ACC(8) -> REPEAT(8) -> Z; x -> (rank 1)
// t -> Y -> y -> (rank 0) t2 -> y@0 (count `count`) -> Z: the Y path must hold the 8 pieces
// the ACCUMULATE waits for (x, t's output, y and y@0).
PlanProto PipelinePlan(int32_t count) {
  TestPlanBuilder b(2, 8);
  const int64_t x = b.AddInput(0, "x").second;
  const int64_t big_x = b.AddTask(0, TaskProto::COMPUTE, "X");
  b.Connect(x, big_x);
  const int64_t acc = b.AddCountTask(0, TaskProto::ACCUMULATE, "acc", 8);
  b.Connect(b.AddRegister(big_x, "x2"), acc);
  const int64_t repeat = b.AddCountTask(0, TaskProto::REPEAT, "repeat", 8);
  b.Connect(b.AddRegister(acc, "sum"), repeat);
  const int64_t t = b.AddTransfer(x, 1, "t");
  const int64_t y_task = b.AddTask(1, TaskProto::COMPUTE, "Y");
  b.Connect(b.AddRegister(t, "x@1"), y_task);
  const int64_t back = b.AddTransfer(b.AddRegister(y_task, "y"), 0, "t2");
  const int64_t z = b.AddTask(0, TaskProto::COMPUTE, "Z");
  b.Connect(b.AddRegister(repeat, "rep"), z);
  b.Connect(b.AddRegister(back, "y@0", count), z);
  b.AddSink(b.AddRegister(z, "out"), "out");
  return b.Build();
}

TEST(StreamedVerifierTest, DeadlockReportedAsVerifyPlanDoes) {
  const PlanProto enough = PipelinePlan(5);
  ASSERT_TRUE(VerifyPlan(enough).ok()) << VerifyPlan(enough);
  EXPECT_EQ(Streamed(Split(enough), 2, 8), absl::OkStatus());
  ExpectSameError(PipelinePlan(1), "deadlock: simulating 2 step(s) of 8 piece(s)");
}

TEST(IdTableTest, DenseAndSparseIdsGiveTheSameAnswers) {
  IdTable table;
  const std::vector<int64_t> ids = {5, 0, int64_t{1} << 40, -3, 70000, 65535, 1 << 20, 6};
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(table.Insert(ids[i], static_cast<int32_t>(i)), -1) << ids[i];
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(table.Find(ids[i]), static_cast<int32_t>(i)) << ids[i];
    EXPECT_EQ(table.Insert(ids[i], 99), static_cast<int32_t>(i)) << ids[i];
  }
  EXPECT_EQ(table.Find(7), -1);
  EXPECT_EQ(table.Find(-1), -1);
  EXPECT_EQ(table.Find(int64_t{1} << 41), -1);
  EXPECT_EQ(table.size(), static_cast<int64_t>(ids.size()));
}

TEST(StreamedVerifierTest, CallsOutOfOrderAreRefused) {
  const TwoRanks p = TwoRankPlan();
  const std::vector<PlanProto> parts = Split(p.plan);
  StreamedVerifier verifier(2, 1, {});
  EXPECT_EQ(verifier.CheckRank(parts[0]).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(verifier.AddRank(parts[1]).ok());
  EXPECT_NE(verifier.AddRank(parts[0]).message().find("ranks must be strictly ascending: 1 then 0"),
            absl::string_view::npos);
  StreamedVerifier other_world(3, 1, {});
  EXPECT_EQ(other_world.AddRank(parts[0]).code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
