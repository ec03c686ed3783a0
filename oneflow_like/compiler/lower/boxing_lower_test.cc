// Boxing lowering: which tasks each SBP transition becomes, mirrors, sharing, collectives.
#include <algorithm>
#include <set>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/lower/lower_test_util.h"

namespace oneflow_like {
namespace compiler {
namespace testing {
namespace {

// x[8,6] pinned to `x_sbp` on cpu:[0,1]; y = relu(x) consumed in `in_sbp`.
std::string RelayText(const std::string& x_sbp, const std::string& in_sbp) {
  return "x = input(shape=[8,6]) placement=cpu:[0,1] sbp=[" + x_sbp + "]\n" +
         "y = relu(x) in_sbp=[[" + in_sbp + "]]\noutput(y)\n";
}

// p[8,6] is a partial sum on cpu:[0,1] (matmul contracting over split k); z = relu(p) in `in_sbp`.
std::string PartialText(const std::string& in_sbp) {
  return "a = input(shape=[8,4]) placement=cpu:[0,1] sbp=[S(1)]\n"
         "b = input(shape=[4,6]) placement=cpu:[0,1] sbp=[S(0)]\n"
         "p = matmul(a, b) out_sbp=[[P]]\n"
         "z = relu(p) in_sbp=[[" + in_sbp + "]]\noutput(z)\n";
}

struct KindCounts {
  int transfer, slice, concat, add, collective;
};
KindCounts Count(const PlanProto& plan, int rank) {
  return {CountTasks(plan, TaskProto::TRANSFER, rank), CountTasks(plan, TaskProto::BOXING_SLICE, rank),
          CountTasks(plan, TaskProto::BOXING_CONCAT, rank), CountTasks(plan, TaskProto::BOXING_ADD, rank),
          CountTasks(plan, TaskProto::COLLECTIVE, rank)};
}

TEST(BoxingLowerTest, SplitToBroadcastIsTransferPlusConcat) {
  const PlanProto plan = LowerTextOrDie(RelayText("S(0)", "B"));
  for (int r : {0, 1}) {
    const KindCounts c = Count(plan, r);
    EXPECT_EQ(c.transfer, 1) << "rank " << r;
    EXPECT_EQ(c.concat, 1) << "rank " << r;
    EXPECT_EQ(c.add + c.slice + c.collective, 0) << "rank " << r;
    const TaskProto& transfer = *TasksOfType(plan, TaskProto::TRANSFER, r)[0];
    EXPECT_EQ(transfer.transfer().peer_rank(), 1 - r);
    EXPECT_EQ(transfer.stream_kind(), STREAM_COMM);
    // The concat places rank 0's rows [0,4) and rank 1's rows [4,8) into the [8,6] result.
    const TaskProto& concat = *TasksOfType(plan, TaskProto::BOXING_CONCAT, r)[0];
    ASSERT_EQ(concat.concat().input_regions_size(), 2);
    std::set<int64_t> row_begins;
    for (const RegionProto& region : concat.concat().input_regions()) {
      row_begins.insert(region.begin(0));
      EXPECT_EQ(region.end(0) - region.begin(0), 4);
      EXPECT_EQ(region.end(1), 6);
    }
    EXPECT_EQ(row_begins, (std::set<int64_t>{0, 4}));
    const TaskProto& relu = FindTask(plan, "y@r" + std::to_string(r));
    EXPECT_EQ(relu.inputs(0).register_id(), concat.outputs(0).register_id());
    EXPECT_EQ(relu.compute().input_shards(0).offset(0), 0);  // B: whole tensor
  }
}

TEST(BoxingLowerTest, MirrorRegisterMatchesProducerAndListsTransfer) {
  const PlanProto plan = LowerTextOrDie(RelayText("S(0)", "B"));
  for (int r : {0, 1}) {
    const TaskProto& transfer = *TasksOfType(plan, TaskProto::TRANSFER, r)[0];
    ASSERT_EQ(transfer.consumed_register_ids_size(), 1);
    const int64_t id = transfer.consumed_register_ids(0);
    const std::vector<const RegisterProto*> mirrors = Mirrors(plan, r);
    ASSERT_EQ(mirrors.size(), 1u);
    const RegisterProto& mirror = *mirrors[0];
    EXPECT_EQ(mirror.id(), id);
    EXPECT_EQ(mirror.remote().rank(), 1 - r);
    const RegisterProto* producer = FindLocalRegister(plan, 1 - r, id);
    ASSERT_NE(producer, nullptr);
    EXPECT_EQ(producer->name(), "x@r" + std::to_string(1 - r));  // the peer's input shard
    EXPECT_EQ(mirror.slots_size(), 1);
    EXPECT_EQ(mirror.slots(0).SerializeAsString(), producer->slots(0).SerializeAsString());
    EXPECT_EQ(mirror.count(), producer->count());
    EXPECT_EQ(mirror.producer().task_id(), producer->producer().task_id());
    bool listed = false;
    for (const TaskRefProto& ref : producer->consumers()) listed |= ref.task_id() == transfer.id() && ref.rank() == r;
    EXPECT_TRUE(listed);
  }
}

TEST(BoxingLowerTest, PartialToBroadcastAddsTheTransferredPartial) {
  const PlanProto plan = LowerTextOrDie(PartialText("B"));
  for (int r : {0, 1}) {
    const KindCounts c = Count(plan, r);
    EXPECT_EQ(c.transfer, 1);
    EXPECT_EQ(c.add, 1);
    EXPECT_EQ(c.concat + c.slice + c.collective, 0);
    const TaskProto& add = *TasksOfType(plan, TaskProto::BOXING_ADD, r)[0];
    EXPECT_EQ(add.inputs_size(), 2);
  }
}

TEST(BoxingLowerTest, PartialToSplitSlicesTransfersAndAdds) {
  const PlanProto plan = LowerTextOrDie(PartialText("S(0)"));
  for (int r : {0, 1}) {
    const KindCounts c = Count(plan, r);
    EXPECT_EQ(c.transfer, 1);
    EXPECT_EQ(c.add, 1);
    EXPECT_GE(c.slice, 1);
    EXPECT_EQ(c.concat + c.collective, 0);
    // The sum has this rank's rows only.
    const TaskProto& relu = FindTask(plan, "z@r" + std::to_string(r));
    const RegisterProto* in = FindLocalRegister(plan, r, relu.inputs(0).register_id());
    ASSERT_NE(in, nullptr);
    EXPECT_EQ(in->slots(0).dims(0), 4);
    EXPECT_EQ(in->slots(0).dims(1), 6);
  }
}

TEST(BoxingLowerTest, SplitToOtherSplitExchangesBlocks) {
  const PlanProto plan = LowerTextOrDie(RelayText("S(0)", "S(1)"));
  for (int r : {0, 1}) {
    const KindCounts c = Count(plan, r);
    EXPECT_EQ(c.transfer, 1);
    EXPECT_GE(c.slice, 1);
    EXPECT_EQ(c.concat, 1);
    EXPECT_EQ(c.add + c.collective, 0);
    const TaskProto& relu = FindTask(plan, "y@r" + std::to_string(r));
    EXPECT_EQ(relu.compute().input_shards(0).offset(1), 3 * r);
  }
}

TEST(BoxingLowerTest, BroadcastToSplitIsALocalSlice) {
  const PlanProto plan = LowerTextOrDie(RelayText("B", "S(0)"));
  for (int r : {0, 1}) {
    const KindCounts c = Count(plan, r);
    EXPECT_EQ(c.slice, 1);
    EXPECT_EQ(c.transfer + c.concat + c.add + c.collective, 0);
    const TaskProto& slice = *TasksOfType(plan, TaskProto::BOXING_SLICE, r)[0];
    const RegionProto& region = slice.slice().output_regions(0);
    EXPECT_EQ(region.begin(0), 4 * r);
    EXPECT_EQ(region.end(0), 4 * r + 4);
    EXPECT_EQ(region.end(1), 6);
    EXPECT_TRUE(Mirrors(plan, r).empty());
  }
}

TEST(BoxingLowerTest, BroadcastToPartialZeroFillsAllButOneHolder) {
  const PlanProto plan = LowerTextOrDie(
      "x = input(shape=[8,6]) placement=cpu:[0,1] sbp=[B]\n"
      "z = input(shape=[8,6]) placement=cpu:[0,1] sbp=[P]\n"
      "y = add(x, z) in_sbp=[[P], [P]]\n"
      "w = relu(y) in_sbp=[[B]]\n"
      "output(w)\n");
  int zero_fills = 0;
  for (int r : {0, 1}) {
    EXPECT_EQ(CountTasks(plan, TaskProto::TRANSFER, r), 1);  // the P -> B of y only
    for (const TaskProto* t : TasksOfType(plan, TaskProto::BOXING_CONCAT, r)) {
      if (t->inputs_size() > 0) continue;
      ++zero_fills;
      // Paced by (but not reading) this rank's shard of x.
      ASSERT_EQ(t->consumed_register_ids_size(), 1);
      EXPECT_EQ(t->consumed_register_ids(0), FindTask(plan, "x.source@r" + std::to_string(r)).outputs(0).register_id());
      EXPECT_EQ(FindTask(plan, "y@r" + std::to_string(r)).inputs(0).register_id(), t->outputs(0).register_id());
    }
  }
  EXPECT_EQ(zero_fills, 1);  // one rank keeps x, the other holds zeros
}

TEST(BoxingLowerTest, CrossPlacementTransfersOnlyToTheConsumerRanks) {
  const PlanProto plan = LowerTextOrDie(
      "x = input(shape=[6,4]) placement=cpu:[0,1] sbp=[S(0)]\n"
      "y = relu(x) placement=cpu:[2,3,4] in_sbp=[[S(0)]] stage=1\n"
      "output(y)\n");
  EXPECT_EQ(plan.world_size(), 5);
  EXPECT_EQ(plan.ranks_size(), 5);
  for (int r : {0, 1}) EXPECT_EQ(CountTasks(plan, TaskProto::TRANSFER, r), 0);
  // Rows: rank 2 needs [0,2) (rank 0), rank 3 [2,4) (rank 0 row 2, rank 1 row 3), rank 4 [4,6) (rank 1).
  EXPECT_EQ(CountTasks(plan, TaskProto::TRANSFER, 2), 1);
  EXPECT_EQ(CountTasks(plan, TaskProto::TRANSFER, 3), 2);
  EXPECT_EQ(CountTasks(plan, TaskProto::TRANSFER, 4), 1);
  EXPECT_EQ(CountTasks(plan, TaskProto::BOXING_CONCAT, 3), 1);
  for (const TaskProto* t : TasksOfType(plan, TaskProto::TRANSFER)) {
    EXPECT_TRUE(t->transfer().peer_rank() == 0 || t->transfer().peer_rank() == 1);
  }
  for (int r : {2, 3, 4}) {
    const TaskProto& relu = FindTask(plan, "y@r" + std::to_string(r));
    const RegisterProto* in = FindLocalRegister(plan, r, relu.inputs(0).register_id());
    ASSERT_NE(in, nullptr);
    EXPECT_EQ(in->slots(0).dims(0), 2);
    EXPECT_EQ(relu.compute().input_shards(0).offset(0), 2 * (r - 2));
  }
}

TEST(BoxingLowerTest, ConsumersOfTheSameLayoutShareOneBoxing) {
  const PlanProto plan = LowerTextOrDie(
      "x = input(shape=[8,6]) placement=cpu:[0,1] sbp=[S(0)]\n"
      "y = relu(x) in_sbp=[[B]]\n"
      "z = gelu(x) in_sbp=[[B]]\n"
      "output(y, z)\n");
  for (int r : {0, 1}) {
    EXPECT_EQ(CountTasks(plan, TaskProto::TRANSFER, r), 1);
    EXPECT_EQ(CountTasks(plan, TaskProto::BOXING_CONCAT, r), 1);
    const std::string suffix = "@r" + std::to_string(r);
    EXPECT_EQ(FindTask(plan, "y" + suffix).inputs(0).register_id(), FindTask(plan, "z" + suffix).inputs(0).register_id());
  }
}

TEST(BoxingLowerTest, CollectiveExpanderEmitsOrderedCollectives) {
  LowerOptions options;
  options.boxing = BoxingStyle::kCollective;
  const PlanProto plan = LowerTextOrDie(
      "a = input(shape=[8,4]) placement=cpu:[0,1] sbp=[S(1)]\n"
      "b = input(shape=[4,6]) placement=cpu:[0,1] sbp=[S(0)]\n"
      "p = matmul(a, b) out_sbp=[[P]]\n"
      "q = matmul(a, b) out_sbp=[[P]]\n"
      "y = relu(p) in_sbp=[[B]]\n"
      "z = relu(q) in_sbp=[[S(0)]]\n"
      "output(y, z)\n",
      options);
  std::vector<std::vector<std::pair<int64_t, int>>> per_rank(2);  // (global_order, kind) in stream order
  for (int r : {0, 1}) {
    EXPECT_EQ(CountTasks(plan, TaskProto::TRANSFER, r), 0);
    EXPECT_EQ(CountTasks(plan, TaskProto::BOXING_ADD, r), 0);
    std::vector<const TaskProto*> collectives = TasksOfType(plan, TaskProto::COLLECTIVE, r);
    ASSERT_EQ(collectives.size(), 2u);
    std::sort(collectives.begin(), collectives.end(),
              [](const TaskProto* a, const TaskProto* b) { return a->order_in_stream() < b->order_in_stream(); });
    for (const TaskProto* t : collectives) {
      EXPECT_EQ(t->stream_kind(), STREAM_COMM);
      EXPECT_EQ(t->collective().ranks_size(), 2);
      per_rank[r].push_back({t->collective().global_order(), t->collective().kind()});
    }
  }
  EXPECT_EQ(per_rank[0], per_rank[1]);
  EXPECT_LT(per_rank[0][0].first, per_rank[0][1].first);
  EXPECT_EQ(per_rank[0][0].second, CollectiveParams::ALL_REDUCE);
  EXPECT_EQ(per_rank[0][1].second, CollectiveParams::REDUCE_SCATTER);
}

}  // namespace
}  // namespace testing
}  // namespace compiler
}  // namespace oneflow_like
