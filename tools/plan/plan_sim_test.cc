// How SimulatePlanTime prices COLLECTIVE firings: a ring over n ranks on the bytes the call
// moves. A bucket (CollectiveParams.parts) moves its parts (ALL_REDUCE) or its staging slot
// (REDUCE_SCATTER), never the staging slot and the shards copied out of it. And how it prices a
// same-node TRANSFER by its message size when the link was measured at two sizes (link_price.h).
#include "tools/plan/plan_sim.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/boxing/cost_model.h"
#include "oneflow_like/compiler/plan/plan_test_util.h"
#include "tools/plan/link_price.h"

namespace oneflow_like {
namespace plan_tool {
namespace {

using compiler::F32;
using compiler::TestPlanBuilder;

RegionProto Region(std::vector<int64_t> begin, std::vector<int64_t> end) {
  RegionProto r;
  for (int64_t b : begin) r.add_begin(b);
  for (int64_t e : end) r.add_end(e);
  return r;
}

// A part over 2 ranks of `whole` (inputs all of it), outputs all of it or split on axis 0.
CollectiveParams Part(std::vector<int64_t> dims, bool split) {
  CollectiveParams p;
  for (int64_t d : dims) p.add_logical_dims(d);
  *p.mutable_group_region() = Region(std::vector<int64_t>(dims.size(), 0), dims);
  for (int m = 0; m < 2; ++m) {
    *p.add_input_regions() = p.group_region();
    RegionProto out = p.group_region();
    if (split) {
      out.set_begin(0, m * dims[0] / 2);
      out.set_end(0, (m + 1) * dims[0] / 2);
    }
    *p.add_output_regions() = out;
  }
  return p;
}

// 2 ranks, each: inputs float32[4,4] and float32[6] -> one bucket -> a sink. Both kinds move
// 64 + 24 = 88 bytes; the REDUCE_SCATTER's register holds 44 bytes of shards besides.
PlanProto BucketPlan(CollectiveParams::Kind kind) {
  const bool scatter = kind == CollectiveParams::REDUCE_SCATTER;
  const std::vector<std::vector<int64_t>> dims = {{4, 4}, {6}};
  TestPlanBuilder b(2, 1);
  for (int32_t r = 0; r < 2; ++r) {
    const int64_t task = b.AddCollective(r, "bucket", {0, 1}, 0, kind);
    std::vector<TensorDescProto> slots;
    for (size_t k = 0; k < dims.size(); ++k) {
      *b.task(task)->mutable_collective()->add_parts() = Part(dims[k], scatter);
      auto [source, g] = b.AddInput(r, "g" + std::to_string(k), 1, F32(dims[k]));
      b.Connect(g, task);
      std::vector<int64_t> out = dims[k];
      if (scatter) out[0] /= 2;
      slots.push_back(F32(out));
    }
    if (scatter) slots.push_back(F32({22}));
    b.AddSink(b.AddRegister(task, "bucket", 1, slots), "y");
  }
  return b.Build();
}

// Seconds of the first firing of rank `rank`'s task `name`.
double FiringSeconds(const Simulation& sim, const std::string& name, int32_t rank = 0) {
  for (const Firing& f : sim.trace) {
    if (sim.task_names[f.task] == std::make_pair(rank, name)) return f.end - f.start;
  }
  ADD_FAILURE() << "no firing of " << name;
  return -1;
}

TEST(PlanSimTest, ABucketIsPricedOnTheBytesItsCallMoves) {
  SimOptions options;
  options.steps = 1;
  const auto& link = options.cost.link(compiler::LinkClass::kSameNode);
  const double expected = 2.0 * (2 - 1) * (link.alpha_seconds + 88.0 / 2 * link.beta_seconds_per_byte);
  for (auto kind : {CollectiveParams::ALL_REDUCE, CollectiveParams::REDUCE_SCATTER}) {
    absl::StatusOr<Simulation> sim = SimulatePlanTime(BucketPlan(kind), options);
    ASSERT_TRUE(sim.ok()) << sim.status();
    EXPECT_DOUBLE_EQ(FiringSeconds(*sim, "bucket"), expected) << CollectiveParams::Kind_Name(kind);
  }
}

// A message's price, worked out by hand: alpha 20 us, 256 KiB messages at 8 GB/s, 4 MiB ones at
// 4 GB/s. The bytes beyond the first 256 KiB cost (4194304 / 4e9 - 262144 / 8e9) / 3932160 s
// = 1015.808 us / 3932160 B each.
TEST(LinkPriceTest, TwoMeasuredSizesAreReproducedAndTheSizesBetweenInterpolated) {
  MessagePrice link;
  link.alpha_seconds = 20e-6;
  link.large_bytes_per_second = 4e9;
  link.large_message_bytes = 4194304;
  link.small_bytes_per_second = 8e9;
  link.small_message_bytes = 262144;
  EXPECT_NEAR(link.Seconds(0), 20e-6, 1e-12);
  EXPECT_NEAR(link.Seconds(1024), 20e-6 + 0.128e-6, 1e-12);                  // the small rate
  EXPECT_NEAR(link.Seconds(262144), 20e-6 + 32.768e-6, 1e-12);               // measured: 8 GB/s
  EXPECT_NEAR(link.Seconds(4194304), 20e-6 + 1048.576e-6, 1e-12);            // measured: 4 GB/s
  EXPECT_NEAR(link.Seconds(1048576), 20e-6 + 32.768e-6 + 203.1616e-6, 1e-12);  // 786432 B beyond
  EXPECT_NEAR(link.Seconds(8388608), 20e-6 + 32.768e-6 + 8126464 * (1015.808e-6 / 3932160), 1e-12);
  // without a small-message rate: one rate for every size
  link.small_bytes_per_second = 0;
  EXPECT_NEAR(link.Seconds(262144), 20e-6 + 65.536e-6, 1e-12);
}

// Rank 0 produces a 256 KiB register; rank 1's TRANSFER pulls it over the same-node link.
PlanProto TransferPlan() {
  TestPlanBuilder b(2, 1);
  auto [source, x] = b.AddInput(0, "x", 1, F32({256, 256}));
  const int64_t relu = b.AddTask(0, TaskProto::COMPUTE, "relu");
  b.Connect(x, relu);
  const int64_t y = b.AddRegister(relu, "y", 1, {F32({256, 256})});
  const int64_t pull = b.AddTransfer(y, 1, "y.transfer");
  b.AddSink(b.AddRegister(pull, "y@1", 1, {F32({256, 256})}), "y");
  return b.Build();
}

TEST(PlanSimTest, ASameNodeTransferIsPricedByItsMessageSize) {
  SimOptions options;
  options.steps = 1;
  options.cost.same_node.alpha_seconds = 19e-6;
  options.cost.same_node.beta_seconds_per_byte = 1 / 3.3e9;  // 4 MiB messages
  // one rate: alpha + 262144 B / 3.3 GB/s (the price that over-predicted configs/mlp.cfg)
  absl::StatusOr<Simulation> flat = SimulatePlanTime(TransferPlan(), options);
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_NEAR(FiringSeconds(*flat, "y.transfer", 1), 19e-6 + 262144 / 3.3e9, 1e-12);
  // measured at 256 KiB too (8.2 GB/s): a 256 KiB message is priced at that rate
  options.same_node_small_bytes_per_second = 8.2e9;
  absl::StatusOr<Simulation> sized = SimulatePlanTime(TransferPlan(), options);
  ASSERT_TRUE(sized.ok()) << sized.status();
  EXPECT_NEAR(FiringSeconds(*sized, "y.transfer", 1), 19e-6 + 262144 / 8.2e9, 1e-12);
  // in one process a transfer is a copy, whatever the link measurements
  options.in_process = true;
  absl::StatusOr<Simulation> copy = SimulatePlanTime(TransferPlan(), options);
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_NEAR(FiringSeconds(*copy, "y.transfer", 1),
              options.cost.task_overhead_seconds + compiler::LocalCopySeconds(262144, options.cost), 1e-12);
}

// A TRANSFER into a cuda register is staged through the host, as the runtime runs it: a
// device-to-host copy on the sender and a host-to-device copy here, each priced at the
// host_device link, on top of the network transfer.
TEST(PlanSimTest, ADeviceTransferPaysTwoHostDeviceCopies) {
  SimOptions options;
  options.steps = 1;
  options.cost.same_node.alpha_seconds = 19e-6;
  options.cost.same_node.beta_seconds_per_byte = 1 / 3.3e9;
  options.cost.host_device.alpha_seconds = 5e-6;
  options.cost.host_device.beta_seconds_per_byte = 1 / 6.4e10;
  PlanProto plan = TransferPlan();
  for (RankPlanProto& rank : *plan.mutable_rank_plans()) {
    for (TaskProto& t : *rank.mutable_tasks()) {
      if (t.type() == TaskProto::TRANSFER) t.mutable_device()->set_type("cuda");
    }
  }
  absl::StatusOr<Simulation> host = SimulatePlanTime(TransferPlan(), options);
  absl::StatusOr<Simulation> device = SimulatePlanTime(plan, options);
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_NEAR(FiringSeconds(*host, "y.transfer", 1), 19e-6 + 262144 / 3.3e9, 1e-12);
  EXPECT_NEAR(FiringSeconds(*device, "y.transfer", 1), 19e-6 + 262144 / 3.3e9 + 2 * (5e-6 + 262144 / 6.4e10), 1e-12);
}

// Two ranks of one 2-core node, each: input float32[64,64] (16 KiB) -> relu -> sink. The relus
// (no SBP decision: memory bound, overhead + 32 KiB in and out at the memory rate) run at the
// same time on the two cores.
PlanProto TwoReluPlan() {
  TestPlanBuilder b(2, 1);
  for (int32_t r = 0; r < 2; ++r) {
    auto [source, x] = b.AddInput(r, "x", 1, F32({64, 64}));
    const int64_t relu = b.AddTask(r, TaskProto::COMPUTE, "relu");
    b.Connect(x, relu);
    b.AddSink(b.AddRegister(relu, "y", 1, {F32({64, 64})}), "y");
  }
  return b.Build();
}

SimOptions TwoCoreNode() {
  SimOptions options;
  options.steps = 1;
  options.cost.task_overhead_seconds = 2e-6;
  options.cost.memory_bytes_per_second = 1e10;
  options.cost.ranks_per_node = 2;
  options.cores_per_node = 2;
  return options;
}

// Memory-bound firings share the node's memory bandwidth (two threads copying 128 MiB buffers
// here get 1.1x one thread's rate), unless their bytes fit in a core's L2 (cache_bytes) on a node
// whose working set fits in its last-level cache (llc_bytes): two threads copying 1 MiB buffers
// get 2x. A relu alone: 2 us + 32768 B / 1e10 B/s = 5.2768 us; two at once sharing: 10.5536 us.
TEST(PlanSimTest, SmallMemoryBoundFiringsShareNoBandwidthWhenTheNodeFitsInCache) {
  const PlanProto plan = TwoReluPlan();
  int64_t node_bytes = 0;  // the node's working set: both ranks' memory blocks
  for (const RankPlanProto& r : plan.rank_plans()) {
    for (const MemoryBlockProto& block : r.memory_blocks()) node_bytes += block.size_bytes();
  }
  ASSERT_GE(node_bytes, 4 * 16384);  // x and y on each rank
  const double alone = 2e-6 + 32768 / 1e10;
  SimOptions options = TwoCoreNode();
  absl::StatusOr<Simulation> shared = SimulatePlanTime(plan, options);
  ASSERT_TRUE(shared.ok()) << shared.status();
  EXPECT_NEAR(FiringSeconds(*shared, "relu", 0), 2 * alone, 1e-12);
  EXPECT_NEAR(FiringSeconds(*shared, "relu", 1), 2 * alone, 1e-12);
  // 32 KiB of registers per firing (16 KiB in, 16 KiB out): fits a 1 MiB L2, and no last-level cache given
  options.cache_bytes = 1 << 20;
  absl::StatusOr<Simulation> cached = SimulatePlanTime(plan, options);
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_NEAR(FiringSeconds(*cached, "relu", 0), alone, 1e-12);
  EXPECT_NEAR(FiringSeconds(*cached, "relu", 1), alone, 1e-12);
  // the firing's 32 KiB do not fit a 16 KiB L2
  options.cache_bytes = 16384;
  absl::StatusOr<Simulation> too_big = SimulatePlanTime(plan, options);
  ASSERT_TRUE(too_big.ok()) << too_big.status();
  EXPECT_NEAR(FiringSeconds(*too_big, "relu", 0), 2 * alone, 1e-12);
  // the node's working set fits its last-level cache exactly: cached; one byte less: DRAM, shared
  options.cache_bytes = 1 << 20;
  options.llc_bytes = node_bytes;
  absl::StatusOr<Simulation> fits = SimulatePlanTime(plan, options);
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_NEAR(FiringSeconds(*fits, "relu", 0), alone, 1e-12);
  options.llc_bytes = node_bytes - 1;
  absl::StatusOr<Simulation> spills = SimulatePlanTime(plan, options);
  ASSERT_TRUE(spills.ok()) << spills.status();
  EXPECT_NEAR(FiringSeconds(*spills, "relu", 0), 2 * alone, 1e-12);
}

// The runtime sends two messages per transfer: the bytes (kReady) and the buffer's return
// (kReturned, no payload). With return_messages a TRANSFER pays the second one too: between
// processes at return_message_seconds on the same node (else the link's alpha), in one process
// a firing's overhead for each of the two messages.
TEST(PlanSimTest, ATransferPaysTheBuffersReturnMessage) {
  SimOptions options;
  options.steps = 1;
  options.cost.same_node.alpha_seconds = 19e-6;
  options.cost.same_node.beta_seconds_per_byte = 1 / 3.3e9;
  options.return_messages = true;
  absl::StatusOr<Simulation> alpha = SimulatePlanTime(TransferPlan(), options);
  ASSERT_TRUE(alpha.ok()) << alpha.status();
  EXPECT_NEAR(FiringSeconds(*alpha, "y.transfer", 1), 19e-6 + 262144 / 3.3e9 + 19e-6, 1e-12);
  options.return_message_seconds = 5e-6;  // a 64-byte message in a stream
  absl::StatusOr<Simulation> streamed = SimulatePlanTime(TransferPlan(), options);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_NEAR(FiringSeconds(*streamed, "y.transfer", 1), 19e-6 + 262144 / 3.3e9 + 5e-6, 1e-12);
  options.in_process = true;
  absl::StatusOr<Simulation> copy = SimulatePlanTime(TransferPlan(), options);
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_NEAR(FiringSeconds(*copy, "y.transfer", 1),
              3 * options.cost.task_overhead_seconds + compiler::LocalCopySeconds(262144, options.cost), 1e-12);
}

}  // namespace
}  // namespace plan_tool
}  // namespace oneflow_like
