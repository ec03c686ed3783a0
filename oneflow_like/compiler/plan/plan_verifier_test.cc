#include "oneflow_like/compiler/plan/plan_verifier.h"

#include <functional>
#include <string>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/plan/plan_test_util.h"

namespace oneflow_like {
namespace compiler {
namespace {

// Expects VerifyPlan to fail with InternalError whose message contains every `parts`.
void ExpectFails(const PlanProto& plan, std::initializer_list<std::string> parts,
                 const PlanVerifierOptions& options = {}) {
  const absl::Status status = VerifyPlan(plan, options);
  ASSERT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  for (const std::string& part : parts) {
    EXPECT_NE(status.message().find(part), std::string::npos)
        << "missing \"" << part << "\" in: " << status.message();
  }
}

// The data-parallel matmul of docs/plan_format.md on 2 ranks, built with the test builder:
// per rank r, y = x @ w (sink), dw = x^T @ dy is a partial sum, all-reduced by pulling the
// peer's partial (TRANSFER) and adding (BOXING_ADD).
PlanProto DataParallelMatmul(int64_t pieces_per_step = 1) {
  TestPlanBuilder b(/*world_size=*/2, pieces_per_step);
  int64_t partial[2], add[2];
  for (int32_t r = 0; r < 2; ++r) {
    auto [x_source, x] = b.AddInput(r, "x");
    auto [w_holder, w] = b.AddVariable(r, "w");
    auto [dy_source, dy] = b.AddInput(r, "dy");
    const int64_t y_task = b.AddTask(r, TaskProto::COMPUTE, "y.matmul");
    b.Connect(x, y_task);
    b.Connect(w, y_task);
    const int64_t dw_task = b.AddTask(r, TaskProto::COMPUTE, "dw.matmul");
    b.Connect(x, dw_task);
    b.Connect(dy, dw_task);
    b.AddSink(b.AddRegister(y_task, "y"), "y");
    partial[r] = b.AddRegister(dw_task, "dw.partial");
    add[r] = b.AddTask(r, TaskProto::BOXING_ADD, "dw.add");
    b.Connect(partial[r], add[r]);
  }
  for (int32_t r = 0; r < 2; ++r) {
    const int64_t pull = b.AddTransfer(partial[1 - r], r, "dw.transfer");
    b.Connect(b.AddRegister(pull, "dw.peer"), add[r]);
    b.AddSink(b.AddRegister(add[r], "dw"), "dw");
  }
  return b.Build();
}

TEST(PlanVerifierTest, ValidTwoRankPlanWithTransfersPasses) {
  const PlanProto plan = DataParallelMatmul();
  EXPECT_TRUE(VerifyPlan(plan).ok()) << VerifyPlan(plan);
  EXPECT_TRUE(VerifyPlan(plan, {.steps = 5}).ok()) << VerifyPlan(plan, {.steps = 5});
}

TEST(PlanVerifierTest, StepRateVariableReadPerPieceWithoutRepeatDeadlocks) {
  // With 3 pieces per step, y.matmul reads w once per piece, but the holder emits w once per
  // step: piece 2 waits for a w that only comes with the next step (no REPEAT in between).
  ExpectFails(DataParallelMatmul(3),
              {"deadlock: simulating 2 step(s) of 3 piece(s)",
               "rank 0 task 4 'y.matmul' (COMPUTE) fired 2 time(s); waits for register 102 'w' "
               "on rank 0 (not readable: its producer rank 0 task 2 'w.holder' (SOURCE) has "
               "produced 2 buffer(s), all read)"});
}

// Each case breaks one invariant of the valid plan and names the message it must produce.
struct BrokenCase {
  std::string name;
  std::function<void(PlanProto*)> edit;
  std::initializer_list<std::string> message;
};

TEST(PlanVerifierTest, EachBrokenInvariantIsReportedPrecisely) {
  // Ids in DataParallelMatmul: rank 0 tasks 1 x.source, 2 w.holder, 3 dy.source, 4 y.matmul,
  // 5 dw.matmul, 6 y.sink, 7 dw.add; rank 1 tasks 8-14 likewise; then 15 dw.transfer and
  // 16 dw.sink on rank 0, 17 and 18 on rank 1. Registers: rank 0 101 x, 102 w, 103 dy, 104 y,
  // 105 dw.partial; rank 1 106-110; 111 dw.peer and 112 dw on rank 0, 113 and 114 on rank 1.
  const BrokenCase cases[] = {
      {"pieces", [](PlanProto* p) { p->set_pieces_per_step(0); }, {"pieces_per_step is 0"}},
      {"duplicate task id",
       [](PlanProto* p) { FindTask(p, 9)->set_id(2); },
       {"task id 2 is used twice", "'w.holder'", "rank 1"}},
      {"register produced twice",
       [](PlanProto* p) {
         FindEntry(p, 1, 106)->set_id(101);
         FindTask(p, 8)->set_produced_register_ids(0, 101);
         FindTask(p, 8)->mutable_outputs(0)->set_register_id(101);
       },
       {"register id 101 is produced on two ranks"}},
      {"missing mirror",
       [](PlanProto* p) {
         auto* regs = p->mutable_rank_plans(1)->mutable_registers();
         for (int i = 0; i < regs->size(); ++i) {
           if (regs->Get(i).has_remote()) regs->DeleteSubrange(i, 1);
         }
       },
       {"rank 1 task 17 'dw.transfer' (TRANSFER): consumed register 105 does not exist on rank 1"}},
      {"consumer that does not consume",
       [](PlanProto* p) {
         FindTask(p, 6)->clear_consumed_register_ids();
         FindTask(p, 6)->clear_inputs();
       },
       {"register 104 'y' on rank 0 lists consumer rank 0 task 6 'y.sink' (SINK)",
        "which does not consume it"}},
      {"consumer list missing the task",
       [](PlanProto* p) { FindEntry(p, 0, 104)->clear_consumers(); },
       {"rank 0 task 6 'y.sink' (SINK) consumes register 104 'y' on rank 0",
        "does not list it as a consumer"}},
      {"wrong producer",
       [](PlanProto* p) { FindEntry(p, 0, 104)->mutable_producer()->set_task_id(5); },
       {"rank 0 task 4 'y.matmul' (COMPUTE): produced register 104 names task 5"}},
      {"mirror shape differs",
       [](PlanProto* p) { FindEntry(p, 1, 105)->mutable_slots(0)->set_dims(0, 3); },
       {"mirror register 105 'dw.partial' on rank 1 does not match the producer's register on "
        "rank 0: slot 0 is float32[3,2] here but float32[2,2] on rank 0"}},
      {"transfer peer",
       [](PlanProto* p) {
         p->set_world_size(3);
         FindTask(p, 17)->mutable_transfer()->set_peer_rank(2);
       },
       {"rank 1 task 17 'dw.transfer' (TRANSFER) must consume exactly one mirror register whose "
        "producer is on its peer_rank 2",
        "a mirror of rank 0"}},
      {"count",
       [](PlanProto* p) { FindEntry(p, 0, 104)->set_count(0); },
       {"register 104 'y' on rank 0 has count 0 < 1"}},
      {"slot ref",
       [](PlanProto* p) { FindTask(p, 4)->mutable_inputs(1)->set_slot(3); },
       {"rank 0 task 4 'y.matmul' (COMPUTE): input 1 names slot 3 of register 102 'w' on rank 0, "
        "which has 1 slot(s)"}},
      {"source consumes",
       [](PlanProto* p) {
         FindTask(p, 1)->mutable_io()->set_tensor_name("not_a_variable");
         FindTask(p, 1)->add_consumed_register_ids(104);
         FindEntry(p, 0, 104)->add_consumers()->set_task_id(1);
       },
       {"'x.source' (SOURCE) consumes registers, but 'not_a_variable' has no VARIABLE binding"}},
      {"outside block",
       [](PlanProto* p) { FindEntry(p, 0, 105)->mutable_memory()->set_offset(1024); },
       {"register 105 'dw.partial' on rank 0 needs bytes [1024, 1088) of block 1, which has only"}},
      {"alignment",
       [](PlanProto* p) { FindEntry(p, 0, 104)->mutable_memory()->set_offset(32); },
       {"register 104 'y' on rank 0 is not 64-byte aligned: offset 32"}},
      {"persistent overlap",
       [](PlanProto* p) {
         p->mutable_rank_plans(0)->mutable_memory_blocks(0)->set_persistent(true);
         FindEntry(p, 0, 104)->mutable_memory()->set_block_id(0);  // y now sits on w's bytes
         FindEntry(p, 0, 104)->mutable_memory()->set_offset(0);
       },
       {"register 102 'w' on rank 0 [0, 64) and register 104 'y' on rank 0 [0, 64) share bytes of "
        "persistent block 0"}},
      {"memory summary",
       [](PlanProto* p) { p->mutable_memory(1)->set_planned_bytes(5); },
       {"memory[1] says rank 1 planned_bytes 5"}},
      {"order in stream",
       [](PlanProto* p) { FindTask(p, 5)->set_order_in_stream(3); },
       {"rank 0 stream cpu:0/0: order_in_stream must be a permutation", "'dw.matmul'",
        "like rank 0 task 4 'y.matmul'"}},
      {"consumer before producer",
       [](PlanProto* p) {
         FindTask(p, 4)->set_order_in_stream(0);  // y.matmul swaps places with x.source
         FindTask(p, 1)->set_order_in_stream(3);
       },
       {"rank 0 task 4 'y.matmul' (COMPUTE) consumes register 101 'x' on rank 0 but is ordered at "
        "0, "
        "not after its producer rank 0 task 1 'x.source' (SOURCE) at 3"}},
  };
  for (const BrokenCase& broken : cases) {
    SCOPED_TRACE(broken.name);
    PlanProto plan = DataParallelMatmul();
    ASSERT_TRUE(VerifyPlan(plan).ok());
    broken.edit(&plan);
    ExpectFails(plan, broken.message);
  }
}

// One rank, stream 0: x.source -> x -> a -> ra -> b -> rb -> c -> rc -> sink. Lifetimes in
// stream order: x [0,1], ra [1,2], rb [2,3], rc [3,4].
PlanProto Chain(int64_t* x, int64_t* ra, int64_t* rb) {
  TestPlanBuilder b(1, 2);
  auto [source, x_reg] = b.AddInput(0, "x");
  int64_t previous = x_reg;
  int64_t regs[3];
  for (int i = 0; i < 3; ++i) {
    const int64_t task = b.AddTask(0, TaskProto::COMPUTE, std::string(1, 'a' + i));
    b.Connect(previous, task);
    previous = regs[i] = b.AddRegister(task, std::string("r") + static_cast<char>('a' + i));
  }
  b.AddSink(previous, "y");
  *x = x_reg;
  *ra = regs[0];
  *rb = regs[1];
  return b.Build();
}

TEST(PlanVerifierTest, ReusableBytesMayBeSharedOnlyByDisjointLifetimes) {
  int64_t x, ra, rb;
  PlanProto plan = Chain(&x, &ra, &rb);
  ASSERT_TRUE(VerifyPlan(plan).ok()) << VerifyPlan(plan);
  // x [0,1] and rb [2,3] are never alive together: rb may take x's bytes.
  PlanProto shared = plan;
  FindEntry(&shared, 0, rb)->mutable_memory()->set_offset(0);
  EXPECT_TRUE(VerifyPlan(shared).ok()) << VerifyPlan(shared);
  // ra [1,2] and rb [2,3] are both alive at order 2 (b reads ra while writing rb).
  PlanProto clash = plan;
  FindEntry(&clash, 0, rb)
      ->mutable_memory()
      ->set_offset(FindEntry(&clash, 0, ra)->memory().offset());
  ExpectFails(clash, {"register 102 'ra' on rank 0 [64, 128) and register 103 'rb' on rank 0 "
                      "[64, 128) share bytes of block 1 but are alive together on stream 0 "
                      "(orders 1..2 and 2..3)"});
  // With count 2 the source may run a piece ahead: x has no lifetime the verifier can order,
  // so its bytes may not be shared at all.
  PlanProto ahead = shared;
  FindEntry(&ahead, 0, x)->set_count(2);
  ahead.mutable_rank_plans(0)->mutable_memory_blocks(1)->set_size_bytes(512);
  ahead.clear_memory();
  ExpectFails(ahead, {"register 101 'x' on rank 0 [0, 128) and register 103 'rb' on rank 0 [0, 64) "
                      "share bytes of block 1, but their lifetimes cannot be ordered (first: it "
                      "has count 2; second: it has a lifetime on stream cpu:0/0)"});
  EXPECT_TRUE(VerifyPlan(clash, {.check_memory_reuse = false}).ok());
}

// The diamond of plan_simulator.h, pieces_per_step 4: x.source -> x (count 1) -> X and Y;
// X -> ACCUMULATE(4) -> REPEAT(4) -> Z; Y -> ry -> Z.
PlanProto Diamond(int32_t ry_count) {
  TestPlanBuilder b(1, 4);
  auto [source, x] = b.AddInput(0, "x");
  const int64_t left = b.AddTask(0, TaskProto::COMPUTE, "X");
  const int64_t right = b.AddTask(0, TaskProto::COMPUTE, "Y");
  b.Connect(x, left);
  b.Connect(x, right);
  const int64_t accumulate = b.AddCountTask(0, TaskProto::ACCUMULATE, "acc", 4);
  b.Connect(b.AddRegister(left, "rx"), accumulate);
  const int64_t repeat = b.AddCountTask(0, TaskProto::REPEAT, "rep", 4);
  b.Connect(b.AddRegister(accumulate, "sum"), repeat);
  const int64_t join = b.AddTask(0, TaskProto::COMPUTE, "Z");
  b.Connect(b.AddRegister(repeat, "sum@piece"), join);
  b.Connect(b.AddRegister(right, "ry", ry_count), join);
  b.AddSink(b.AddRegister(join, "z"), "z");
  return b.Build();
}

TEST(PlanVerifierTest, DiamondThroughAccumulateNeedsBuffersOnTheOtherBranch) {
  // Z needs the REPEAT of the sum of all 4 pieces of X before it reads any piece of ry. With
  // ry count 1, Y writes piece 1 and then cannot write piece 2 (Z has not read piece 1), so Y
  // never returns piece 2 of x; x has 1 buffer, so the source cannot emit piece 3, X never
  // sees pieces 3 and 4, ACCUMULATE never completes: a cycle of waits.
  ExpectFails(Diamond(1),
              {"deadlock: simulating 2 step(s) of 4 piece(s) got stuck",
               "rank 0 task 1 'x.source' (SOURCE) fired 2 time(s); waits for a free buffer of "
               "register 101 'x' on rank 0 (not free: all 1 buffer(s) in use; buffer 1 not yet "
               "returned by rank 0 task 3 'Y' (COMPUTE) (read 1, returned 1)",
               "rank 0 task 3 'Y' (COMPUTE) fired 1 time(s); waits for a free buffer of register "
               "105 'ry' on rank 0 (not free: all 1 buffer(s) in use; buffer 0 not yet returned by "
               "rank 0 task 6 'Z' (COMPUTE) (read 0, returned 0)",
               "rank 0 task 4 'acc' (ACCUMULATE) fired 2 time(s), 2 of 4 into the current round; "
               "waits for register 102 'rx' on rank 0 (not readable: its producer rank 0 task 2 "
               "'X' (COMPUTE) has produced 2 buffer(s), all read)"});
  // With 4 buffers Y can run the whole step ahead and the plan completes.
  const PlanProto fixed = Diamond(4);
  EXPECT_TRUE(VerifyPlan(fixed).ok()) << VerifyPlan(fixed);
  EXPECT_TRUE(VerifyPlan(fixed, {.steps = 3}).ok());
  // The exact threshold is 3: once Y has written pieces 1-3 it has returned piece 3 of x, so
  // the source can emit piece 4 (held in x's own buffer) and X completes the round. With 2, Y
  // stalls on piece 3 and x stalls on piece 4.
  EXPECT_TRUE(VerifyPlan(Diamond(3)).ok()) << VerifyPlan(Diamond(3));
  ExpectFails(Diamond(2), {"deadlock", "'acc' (ACCUMULATE) fired 3 time(s), 3 of 4"});
}

// A training loop with pieces_per_step 4: the holder's w is REPEATed to the forward, the
// gradient ACCUMULATEd into the optimizer, which also reads w and sends the update back.
PlanProto TrainingLoop(int64_t repeat_count, int64_t accumulate_count) {
  TestPlanBuilder b(1, 4);
  auto [holder, w] = b.AddVariable(0, "w");
  auto [x_source, x] = b.AddInput(0, "x");
  const int64_t repeat = b.AddCountTask(0, TaskProto::REPEAT, "w.repeat", repeat_count);
  b.Connect(w, repeat);
  const int64_t forward = b.AddTask(0, TaskProto::COMPUTE, "grad");
  b.Connect(x, forward);
  b.Connect(b.AddRegister(repeat, "w@piece"), forward);
  const int64_t accumulate = b.AddCountTask(0, TaskProto::ACCUMULATE, "grad.acc", accumulate_count);
  b.Connect(b.AddRegister(forward, "g"), accumulate);
  const int64_t optimizer = b.AddTask(0, TaskProto::COMPUTE, "sgd_update");
  b.Connect(w, optimizer);
  b.Connect(b.AddRegister(accumulate, "g.sum"), optimizer);
  b.Connect(b.AddRegister(optimizer, "w.new"), holder);  // the back edge
  return b.Build();
}

TEST(PlanVerifierTest, VariableHolderWithUpdateBackEdgePasses) {
  const PlanProto plan = TrainingLoop(4, 4);
  for (int64_t steps : {1, 2, 5}) {
    EXPECT_TRUE(VerifyPlan(plan, {.steps = steps}).ok()) << VerifyPlan(plan, {.steps = steps});
  }
  // Rates that do not match the pieces: the REPEAT feeds only 3 of the 4 pieces.
  ExpectFails(TrainingLoop(3, 4), {"deadlock", "'grad.acc' (ACCUMULATE)"});
  // ACCUMULATE(3) over 4 pieces per step leaves a round half way.
  ExpectFails(TrainingLoop(4, 3), {"'grad.acc' (ACCUMULATE)"});
}

// Two ranks, each: x.source -> c0 (all-reduce of float32[2,2]) -> c1 (all-gather of the two
// [2,2] blocks into float32[4,2]) -> sink, collectives on stream 1 with the given global orders.
PlanProto Collectives(std::vector<int64_t> rank0_orders, std::vector<int64_t> rank1_orders,
                      CollectiveParams::Kind rank1_second_kind = CollectiveParams::ALL_GATHER) {
  TestPlanBuilder b(2, 1);
  const std::vector<int64_t>* orders[2] = {&rank0_orders, &rank1_orders};
  for (int32_t r = 0; r < 2; ++r) {
    auto [source, previous] = b.AddInput(r, "x");
    for (int i = 0; i < 2; ++i) {
      const auto kind = i == 0 ? CollectiveParams::ALL_REDUCE
                               : (r == 1 ? rank1_second_kind : CollectiveParams::ALL_GATHER);
      const int64_t c = b.AddCollective(r, "c" + std::to_string(i), {0, 1}, (*orders[r])[i], kind);
      b.Connect(previous, c);
      if (i == 1) {
        b.SetCollectiveGeometry(c, {4, 2}, {{0, 0}, {4, 2}}, {{{0, 0}, {2, 2}}, {{2, 0}, {4, 2}}},
                                {{{0, 0}, {4, 2}}, {{0, 0}, {4, 2}}});
      }
      previous = b.AddRegister(c, "c" + std::to_string(i), 1, {F32({2 + 2 * i, 2})});
    }
    b.AddSink(previous, "y");
  }
  return b.Build();
}

TEST(PlanVerifierTest, CollectiveOrderMustMatchAcrossRanks) {
  EXPECT_TRUE(VerifyPlan(Collectives({0, 1}, {0, 1})).ok())
      << VerifyPlan(Collectives({0, 1}, {0, 1}));
  EXPECT_TRUE(VerifyPlan(Collectives({3, 7}, {3, 7})).ok());
  ExpectFails(Collectives({0, 1}, {0, 2}),
              {"collective group [0,1]: member ranks issue different sequences; at position 1 "
               "rank 0 issues global_order 1 (ALL_GATHER, rank 0 task 3 'c1' (COLLECTIVE)) but "
               "rank 1 issues global_order 2 (ALL_GATHER, rank 1 task 7 'c1' (COLLECTIVE))"});
  ExpectFails(Collectives({0, 1}, {0, 1}, CollectiveParams::REDUCE_SCATTER),
              {"at position 1", "REDUCE_SCATTER"});
  // Rank 1 issues its collectives in the opposite order along its stream.
  ExpectFails(Collectives({0, 1}, {1, 0}),
              {"rank 1 stream cpu:0/1 issues global_order 1 (ALL_REDUCE, rank 1 task 6 'c0' "
               "(COLLECTIVE)) before global_order 0",
               "global_order must increase"});
}

// One collective of `kind` over ranks {0, 1, 2} of float32[7,4] split on rows [0:3], [3:5],
// [5:7] (on the side that is split: inputs for ALL_GATHER, outputs for REDUCE_SCATTER, both
// for ALL_TO_ALL with rows in and columns [0:2], [2:3], [3:4] out). `edit` breaks something
// before slots are sized from the geometry, `after` once the plan is built.
PlanProto ThreeRankCollective(
    CollectiveParams::Kind kind,
    const std::function<void(TestPlanBuilder&, const std::vector<int64_t>&)>& edit = nullptr,
    const std::function<void(PlanProto*)>& after = nullptr) {
  using Box = TestPlanBuilder::Box;
  const Box whole{{0, 0}, {7, 4}};
  const std::vector<Box> rows = {{{0, 0}, {3, 4}}, {{3, 0}, {5, 4}}, {{5, 0}, {7, 4}}};
  const std::vector<Box> columns = {{{0, 0}, {7, 2}}, {{0, 2}, {7, 3}}, {{0, 3}, {7, 4}}};
  const std::vector<Box> all(3, whole);
  std::vector<Box> in = all, out = all;
  if (kind == CollectiveParams::ALL_GATHER) in = rows;
  if (kind == CollectiveParams::REDUCE_SCATTER) out = rows;
  if (kind == CollectiveParams::ALL_TO_ALL) in = rows, out = columns;
  TestPlanBuilder b(3, 1);
  std::vector<int64_t> tasks;
  for (int32_t r = 0; r < 3; ++r) tasks.push_back(b.AddCollective(r, "c", {0, 1, 2}, 0, kind));
  for (int64_t t : tasks) b.SetCollectiveGeometry(t, {7, 4}, whole, in, out);
  if (edit) edit(b, tasks);
  auto dims = [](const RegionProto& region) {
    std::vector<int64_t> d;
    for (int a = 0; a < region.begin_size() && a < region.end_size(); ++a) {
      d.push_back(region.end(a) - region.begin(a));
    }
    return d;
  };
  for (int32_t r = 0; r < 3; ++r) {
    const CollectiveParams& p = b.task(tasks[r])->collective();
    const int member = std::min(r, p.input_regions_size() - 1);
    auto [source, x] = b.AddInput(r, "x", 1, F32(dims(p.input_regions(member))));
    b.Connect(x, tasks[r]);
    const std::vector<int64_t> out_dims =
        member < p.output_regions_size() ? dims(p.output_regions(member)) : std::vector<int64_t>{1};
    b.AddSink(b.AddRegister(tasks[r], "c.out", 1, {F32(out_dims)}), "y");
  }
  PlanProto plan = b.Build();
  if (after) after(&plan);
  return plan;
}

TEST(PlanVerifierTest, CollectiveGeometryOfEveryKindPasses) {
  for (auto kind : {CollectiveParams::ALL_REDUCE, CollectiveParams::ALL_GATHER,
                    CollectiveParams::REDUCE_SCATTER, CollectiveParams::ALL_TO_ALL}) {
    const absl::Status status = VerifyPlan(ThreeRankCollective(kind));
    EXPECT_TRUE(status.ok()) << CollectiveParams::Kind_Name(kind) << ": " << status;
  }
}

TEST(PlanVerifierTest, CollectiveNeedsOneRegionPerMember) {
  ExpectFails(ThreeRankCollective(CollectiveParams::ALL_GATHER,
                                  [](TestPlanBuilder& b, const std::vector<int64_t>& tasks) {
                                    for (int64_t t : tasks) {
                                      b.task(t)->mutable_collective()->mutable_input_regions()->RemoveLast();
                                    }
                                  }),
              {"rank 0 task 1 'c' (COLLECTIVE) has 2 input and 3 output region(s) for a group of 3"});
}

TEST(PlanVerifierTest, CollectiveSlotMustHaveItsRegionsShape) {
  // Rank 1's input slot is [3,4] while its region [3:5,0:4] is [2,4].
  ExpectFails(ThreeRankCollective(CollectiveParams::ALL_GATHER, nullptr,
                                  [](PlanProto* plan) {
                                    const TaskProto* c = FindTask(plan, 2);
                                    FindEntry(plan, 1, c->inputs(0).register_id())
                                        ->mutable_slots(0)
                                        ->set_dims(0, 3);
                                  }),
              {"rank 1 task 2 'c' (COLLECTIVE): its input slot is float32[3,4]",
               "member 1's input region [3:5,0:4] has another shape"});
  // Output side: rank 2's all-gather output [7,4] declared as [6,4].
  ExpectFails(ThreeRankCollective(CollectiveParams::ALL_GATHER, nullptr,
                                  [](PlanProto* plan) {
                                    const TaskProto* c = FindTask(plan, 3);
                                    FindEntry(plan, 2, c->outputs(0).register_id())
                                        ->mutable_slots(0)
                                        ->set_dims(0, 6);
                                  }),
              {"rank 2 task 3 'c' (COLLECTIVE): its output slot", "member 2's output region"});
}

TEST(PlanVerifierTest, CollectiveRegionsMustFitTheKind) {
  using Box = TestPlanBuilder::Box;
  const Box whole{{0, 0}, {7, 4}};
  auto with = [&](CollectiveParams::Kind kind, std::vector<Box> in, std::vector<Box> out) {
    return ThreeRankCollective(kind, [=](TestPlanBuilder& b, const std::vector<int64_t>& tasks) {
      for (int64_t t : tasks) b.SetCollectiveGeometry(t, {7, 4}, whole, in, out);
    });
  };
  const std::vector<Box> all(3, whole);
  // ALL_GATHER whose inputs overlap (rows [0:3] and [2:5]).
  ExpectFails(with(CollectiveParams::ALL_GATHER, {{{0, 0}, {3, 4}}, {{2, 0}, {5, 4}}, {{5, 0}, {7, 4}}}, all),
              {"(ALL_GATHER): input regions of member 0 (rank 0) [0:3,0:4] and member 1 (rank 1) "
               "[2:5,0:4] overlap; they must tile [0:7,0:4]"});
  // ALL_GATHER whose inputs leave row 6 out.
  ExpectFails(with(CollectiveParams::ALL_GATHER, {{{0, 0}, {3, 4}}, {{3, 0}, {5, 4}}, {{5, 0}, {6, 4}}}, all),
              {"input regions cover 24 of the 28 elements"});
  // ALL_GATHER whose member 1 output is only part of the tensor.
  ExpectFails(with(CollectiveParams::ALL_GATHER, {{{0, 0}, {3, 4}}, {{3, 0}, {5, 4}}, {{5, 0}, {7, 4}}},
                   {whole, {{0, 0}, {5, 4}}, whole}),
              {"member 1 (rank 1) output region [0:5,0:4] must be the whole group region [0:7,0:4]"});
  // REDUCE_SCATTER with a partial input, then with overlapping outputs.
  ExpectFails(with(CollectiveParams::REDUCE_SCATTER, {whole, whole, {{0, 0}, {7, 3}}},
                   {{{0, 0}, {3, 4}}, {{3, 0}, {5, 4}}, {{5, 0}, {7, 4}}}),
              {"(REDUCE_SCATTER): member 2 (rank 2) input region [0:7,0:3] must be the whole"});
  ExpectFails(with(CollectiveParams::REDUCE_SCATTER, all,
                   {{{0, 0}, {4, 4}}, {{3, 0}, {5, 4}}, {{5, 0}, {7, 4}}}),
              {"(REDUCE_SCATTER): output regions of member 0", "overlap"});
  // ALL_REDUCE with a split output.
  ExpectFails(with(CollectiveParams::ALL_REDUCE, all,
                   {whole, whole, {{5, 0}, {7, 4}}}),
              {"(ALL_REDUCE): member 2 (rank 2) output region [5:7,0:4] must be the whole"});
  // ALL_TO_ALL whose outputs do not tile (columns [0:2] twice).
  ExpectFails(with(CollectiveParams::ALL_TO_ALL, {{{0, 0}, {3, 4}}, {{3, 0}, {5, 4}}, {{5, 0}, {7, 4}}},
                   {{{0, 0}, {7, 2}}, {{0, 0}, {7, 2}}, {{0, 3}, {7, 4}}}),
              {"(ALL_TO_ALL): output regions of member 0 (rank 0) [0:7,0:2] and member 1", "overlap"});
  // ALL_TO_ALL whose inputs do not tile (a row missing).
  ExpectFails(with(CollectiveParams::ALL_TO_ALL, {{{0, 0}, {3, 4}}, {{3, 0}, {4, 4}}, {{5, 0}, {7, 4}}},
                   {{{0, 0}, {7, 2}}, {{0, 2}, {7, 3}}, {{0, 3}, {7, 4}}}),
              {"(ALL_TO_ALL): input regions cover 24 of the 28"});
  // A region outside the group region, and a group region outside the tensor.
  ExpectFails(with(CollectiveParams::ALL_GATHER, {{{0, 0}, {3, 4}}, {{3, 0}, {5, 4}}, {{5, 0}, {8, 4}}}, all),
              {"member 2 (rank 2) input region [5:8,0:4] is not a box inside the group region"});
  ExpectFails(ThreeRankCollective(CollectiveParams::ALL_REDUCE,
                                  [](TestPlanBuilder& b, const std::vector<int64_t>& tasks) {
                                    for (int64_t t : tasks) {
                                      b.task(t)->mutable_collective()->set_logical_dims(0, 6);
                                    }
                                  }),
              {"group_region [0:7,0:4] is not a box inside the logical tensor [6,4]"});
}

TEST(PlanVerifierTest, CollectiveMembersMustAgree) {
  // Rank 2 believes rank 1 holds rows [3:6] and itself [6:7]: its own geometry is consistent
  // (and its slots fit), but it disagrees with ranks 0 and 1.
  ExpectFails(ThreeRankCollective(CollectiveParams::ALL_GATHER,
                                  [](TestPlanBuilder& b, const std::vector<int64_t>& tasks) {
                                    b.SetCollectiveGeometry(
                                        tasks[2], {7, 4}, {{0, 0}, {7, 4}},
                                        {{{0, 0}, {3, 4}}, {{3, 0}, {6, 4}}, {{6, 0}, {7, 4}}},
                                        std::vector<TestPlanBuilder::Box>(3, {{0, 0}, {7, 4}}));
                                  }),
              {"rank 2 task 3 'c' (COLLECTIVE) and rank 0 task 1 'c' (COLLECTIVE) are members of "
               "the collective with global_order 0 but disagree"});
  // Same regions, another kind on rank 1 (also caught by the order check first).
  ExpectFails(ThreeRankCollective(CollectiveParams::ALL_REDUCE,
                                  [](TestPlanBuilder& b, const std::vector<int64_t>& tasks) {
                                    b.task(tasks[1])->mutable_collective()->set_kind(
                                        CollectiveParams::ALL_TO_ALL);
                                  }),
              {"collective group [0,1,2]"});
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
