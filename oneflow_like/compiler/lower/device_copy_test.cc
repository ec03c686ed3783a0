// Moves between devices of one rank are COPY tasks (issue 14): a cpu data source feeding a cuda
// placement, a value coming back to the host, an output of a cuda placement fetched from the
// host. The plans verify, have COPY tasks with the right direction, device and copy stream,
// never a TRANSFER from a rank to itself, memory blocks per device, and a per-rank lowering
// equal to the whole plan's. The verifier refuses a self-TRANSFER, a COPY across ranks and
// the other broken forms, naming the task.
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oneflow_like/compiler/lower/lower_test_util.h"
#include "oneflow_like/compiler/plan/plan_verifier.h"
#include "oneflow_like/compiler/test_util.h"

namespace oneflow_like {
namespace compiler {
namespace testing {
namespace {

using ::testing::HasSubstr;

// x is fed on the host; w and y live on the device; z = relu(y) back on the host; y is fetched.
std::string HostDeviceText(const std::string& ranks) {
  return "config(name=\"h2d\", seed=3)\n"
         "x = input(shape=[8,4]) placement=cpu:[" + ranks + "] sbp=[S(0)]\n"
         "w = variable(shape=[4,6], init=ones) placement=cuda:[" + ranks + "] sbp=[B]\n"
         "y = matmul(x, w) placement=cuda:[" + ranks + "] in_sbp=[[S(0)], [B]]\n"
         "z = relu(y) placement=cpu:[" + ranks + "] in_sbp=[[S(0)]]\n"
         "output(y)\noutput(z)\n";
}

const DeviceProto* BlockDevice(const RankPlanProto& rank_plan, int64_t block_id) {
  for (const MemoryBlockProto& block : rank_plan.memory_blocks()) {
    if (block.id() == block_id) return &block.device();
  }
  return nullptr;
}

const RegisterProto& LocalRegister(const PlanProto& plan, int rank, int64_t id) {
  const RegisterProto* reg = FindLocalRegister(plan, rank, id);
  CHECK(reg != nullptr) << "register " << id << " on rank " << rank;
  return *reg;
}

void ExpectNoSelfTransfer(const PlanProto& plan) {
  for (const TaskProto* t : TasksOfType(plan, TaskProto::TRANSFER)) {
    EXPECT_NE(t->transfer().peer_rank(), t->rank()) << t->name();
  }
}

// Every COPY: on the cuda device of its rank, H2D (stream 2) or D2H (stream 3) by its params,
// reading a register in a block of `from` and writing one in a block of `to`.
void ExpectWellFormedCopies(const PlanProto& plan) {
  for (const TaskProto* t : TasksOfType(plan, TaskProto::COPY)) {
    SCOPED_TRACE(t->name());
    ASSERT_TRUE(t->has_copy());
    const bool h2d = t->copy().from().type() == "cpu";
    EXPECT_EQ(t->copy().to().type(), h2d ? "cuda" : "cpu");
    EXPECT_EQ(t->device().type(), "cuda");
    EXPECT_EQ(t->stream_kind(), STREAM_COPY);
    EXPECT_EQ(t->stream_id(), h2d ? 2 : 3);
    EXPECT_THAT(t->name(), HasSubstr(h2d ? ".h2d@" : ".d2h@"));
    ASSERT_EQ(t->inputs_size(), 1);
    ASSERT_EQ(t->outputs_size(), 1);
    const RankPlanProto& rank_plan = RankPlan(plan, t->rank());
    const RegisterProto& in = LocalRegister(plan, t->rank(), t->inputs(0).register_id());
    const RegisterProto& out = LocalRegister(plan, t->rank(), t->outputs(0).register_id());
    EXPECT_EQ(BlockDevice(rank_plan, in.memory().block_id())->type(), t->copy().from().type());
    EXPECT_EQ(BlockDevice(rank_plan, out.memory().block_id())->type(), t->copy().to().type());
  }
}

TEST(DeviceCopyTest, HostDataFeedsDevicePlacementThroughCopies) {
  for (const std::string ranks : {"0", "0,1"}) {
    SCOPED_TRACE(ranks);
    const PlanProto plan = LowerTextOrDie(HostDeviceText(ranks));
    ASSERT_EQ(VerifyPlan(plan), absl::OkStatus());
    const int world = ranks == "0" ? 1 : 2;
    EXPECT_EQ(CountTasks(plan, TaskProto::TRANSFER), 0);  // every move stays on its rank
    ExpectWellFormedCopies(plan);
    for (int r = 0; r < world; ++r) {
      // x to the device; y back to the host once, for z and for y's sink.
      EXPECT_EQ(CountTasks(plan, TaskProto::COPY, r), 2);
      const std::string at = "@r" + std::to_string(r);
      const TaskProto& h2d = FindTask(plan, "x.cross_placement.h2d" + at);
      EXPECT_EQ(h2d.inputs(0).register_id(), FindTask(plan, "x.source" + at).produced_register_ids(0));
      const TaskProto& d2h = FindTask(plan, "y.cross_placement.d2h" + at);
      EXPECT_EQ(d2h.inputs(0).register_id(), FindTask(plan, "y" + at).produced_register_ids(0));
      EXPECT_EQ(FindTask(plan, "y" + at).device().type(), "cuda");
      EXPECT_EQ(FindTask(plan, "y" + at).inputs(0).register_id(), h2d.produced_register_ids(0));
      EXPECT_EQ(FindTask(plan, "z" + at).inputs(0).register_id(), d2h.produced_register_ids(0));
      // The user fetches y from the host.
      const TaskProto& y_sink = FindTask(plan, "y.sink" + at);
      EXPECT_EQ(y_sink.device().type(), "cpu");
      EXPECT_EQ(y_sink.inputs(0).register_id(), d2h.produced_register_ids(0));
    }
  }
}

TEST(DeviceCopyTest, MemoryBlocksPerDevice) {
  const PlanProto plan = LowerTextOrDie(HostDeviceText("0,1"));
  for (int r = 0; r < 2; ++r) {
    const RankPlanProto& rank_plan = RankPlan(plan, r);
    ASSERT_EQ(rank_plan.memory_blocks_size(), 4);
    // cpu first: blocks 0 (persistent) and 1; cuda: 2 (persistent) and 3.
    for (int b = 0; b < 4; ++b) {
      EXPECT_EQ(rank_plan.memory_blocks(b).id(), b);
      EXPECT_EQ(rank_plan.memory_blocks(b).device().type(), b < 2 ? "cpu" : "cuda");
      EXPECT_EQ(rank_plan.memory_blocks(b).persistent(), b % 2 == 0);
    }
    // w (cuda, persistent) in block 2; x's shard on the host in block 1; y on the device in 3.
    const std::string at = "@r" + std::to_string(r);
    EXPECT_EQ(FindRegisterByName(plan, "w" + at).memory().block_id(), 2);
    EXPECT_EQ(FindRegisterByName(plan, "x" + at).memory().block_id(), 1);
    EXPECT_EQ(FindRegisterByName(plan, "y" + at).memory().block_id(), 3);
    EXPECT_EQ(rank_plan.memory_blocks(0).size_bytes(), 0);   // no variable on the host
    EXPECT_EQ(rank_plan.memory_blocks(2).size_bytes(), 128);  // w: f32[4,6] = 96 bytes, aligned
    // The summary has the rank's total and one entry per device, whose sums add up to it.
    const RankMemoryProto& memory = plan.memory(r);
    ASSERT_EQ(memory.devices_size(), 2);
    EXPECT_EQ(memory.devices(0).device().type(), "cpu");
    EXPECT_EQ(memory.devices(1).device().type(), "cuda");
    EXPECT_EQ(memory.devices(0).planned_bytes() + memory.devices(1).planned_bytes(), memory.planned_bytes());
    EXPECT_EQ(memory.devices(0).naive_bytes() + memory.devices(1).naive_bytes(), memory.naive_bytes());
    EXPECT_EQ(memory.devices(1).planned_bytes(),
              rank_plan.memory_blocks(2).size_bytes() + rank_plan.memory_blocks(3).size_bytes());
  }
}

TEST(DeviceCopyTest, CpuOnlyPlansKeepOneDeviceAndNoCopies) {
  const PlanProto plan = LowerTextOrDie(MlpText(2), {}, AddMlpUpdates);
  EXPECT_EQ(CountTasks(plan, TaskProto::COPY), 0);
  for (const RankPlanProto& rank_plan : plan.rank_plans()) {
    ASSERT_EQ(rank_plan.memory_blocks_size(), 2);
    EXPECT_EQ(rank_plan.memory_blocks(0).id(), 0);
    EXPECT_EQ(rank_plan.memory_blocks(1).id(), 1);
  }
  for (const RankMemoryProto& memory : plan.memory()) EXPECT_EQ(memory.devices_size(), 0);
}

TEST(DeviceCopyTest, CudaOnlyRankHasBlocksZeroAndOneOnItsDevice) {
  const PlanProto plan = LowerTextOrDie(
      "x = input(shape=[8,4]) placement=cuda:[0,1] sbp=[S(0)]\n"
      "y = relu(x) in_sbp=[[B]]\noutput(y)\n");
  ASSERT_EQ(VerifyPlan(plan), absl::OkStatus());
  // Gathering on the device is a transfer of device memory; fetching y copies it to the host.
  EXPECT_EQ(CountTasks(plan, TaskProto::TRANSFER), 2);
  EXPECT_EQ(CountTasks(plan, TaskProto::COPY), 2);
  ExpectWellFormedCopies(plan);
  ExpectNoSelfTransfer(plan);
  const RankPlanProto& r0 = RankPlan(plan, 0);
  ASSERT_EQ(r0.memory_blocks_size(), 4);  // the host holds y's copy for the sink
  EXPECT_EQ(r0.memory_blocks(0).device().type(), "cpu");
  EXPECT_EQ(r0.memory_blocks(2).device().type(), "cuda");
}

// A move between device types and ranks: through host memory (a transfer between hosts, then a
// copy on the receiver), and the output back to that rank's host.
const char kAcrossRanksText[] =
    "config(name=\"across\", micro_batches=2)\n"
    "x = input(shape=[8,4]) placement=cpu:[0]\n"
    "h = relu(x) placement=cpu:[0] stage=0\n"
    "y = relu(h) placement=cuda:[1] stage=1\n"
    "output(y)\n";

TEST(DeviceCopyTest, AcrossRanksAndDevicesGoesThroughHostMemory) {
  const PlanProto plan = LowerTextOrDie(kAcrossRanksText);
  ASSERT_EQ(VerifyPlan(plan), absl::OkStatus());
  ExpectNoSelfTransfer(plan);
  ExpectWellFormedCopies(plan);
  const std::vector<const TaskProto*> transfers = TasksOfType(plan, TaskProto::TRANSFER);
  ASSERT_EQ(transfers.size(), 1u);
  EXPECT_EQ(transfers[0]->rank(), 1);
  EXPECT_EQ(transfers[0]->transfer().peer_rank(), 0);
  EXPECT_EQ(transfers[0]->device().type(), "cpu");  // host memory over the transport
  EXPECT_EQ(CountTasks(plan, TaskProto::COPY, 0), 0);
  const std::vector<const TaskProto*> copies = TasksOfType(plan, TaskProto::COPY, 1);
  ASSERT_EQ(copies.size(), 2u);  // h to the device, y back for its sink
  EXPECT_EQ(copies[0]->copy().from().type(), "cpu");
  EXPECT_EQ(copies[0]->inputs(0).register_id(), transfers[0]->produced_register_ids(0));
  EXPECT_EQ(copies[1]->copy().to().type(), "cpu");
}

// x is read on the device in two layouts: copied once per rank (in its own layout), then
// gathered on the device.
const char kTwoLayoutsText[] =
    "config(name=\"two_layouts\")\n"
    "x = input(shape=[8,4]) placement=cpu:[0,1] sbp=[S(0)]\n"
    "a = relu(x) placement=cuda:[0,1] in_sbp=[[S(0)]]\n"
    "b = relu(x) placement=cuda:[0,1] in_sbp=[[B]]\n"
    "output(a)\noutput(b)\n";

TEST(DeviceCopyTest, OneCopyPerRankSharedByEveryLayoutOnTheDevice) {
  const PlanProto plan = LowerTextOrDie(kTwoLayoutsText);
  ASSERT_EQ(VerifyPlan(plan), absl::OkStatus());
  ExpectWellFormedCopies(plan);
  ExpectNoSelfTransfer(plan);
  for (int r = 0; r < 2; ++r) {
    int h2d = 0;
    for (const TaskProto* t : TasksOfType(plan, TaskProto::COPY, r)) h2d += t->copy().from().type() == "cpu";
    EXPECT_EQ(h2d, 1) << "rank " << r;
    // The other half of x comes from the other rank's device.
    const std::vector<const TaskProto*> transfers = TasksOfType(plan, TaskProto::TRANSFER, r);
    ASSERT_EQ(transfers.size(), 1u);
    EXPECT_EQ(transfers[0]->device().type(), "cuda");
  }
}

// A pipeline over two device placements fed from the host, 4 micro-batches: registers on
// stage-crossing edges get counts > 1, mirrors of copied registers included.
const char kPipelineText[] =
    "config(name=\"pp_dev\", micro_batches=4)\n"
    "x = input(shape=[8,4]) placement=cpu:[0,1] sbp=[S(0)]\n"
    "h = relu(x) placement=cuda:[0,1] in_sbp=[[S(0)]] stage=0\n"
    "g = relu(h) placement=cuda:[2,3] in_sbp=[[S(0)]] stage=1\n"
    "k = add(g, x) placement=cuda:[2,3] in_sbp=[[B], [B]] stage=1\n"
    "d = add(h, x) placement=cuda:[0,1] in_sbp=[[B], [B]] stage=0\n"
    "e = add(k, d) placement=cuda:[0,1] in_sbp=[[B], [B]] stage=0\n"
    "output(e)\n";

TEST(DeviceCopyTest, PipelineAcrossDevicePlacementsVerifies) {
  const PlanProto plan = LowerTextOrDie(kPipelineText);
  ASSERT_EQ(VerifyPlan(plan), absl::OkStatus());
  ExpectWellFormedCopies(plan);
  ExpectNoSelfTransfer(plan);
}

// An op without inputs on the device is paced by the rank's host source (a control input
// across devices): that register is read on two streams, so it keeps bytes of its own.
const char kPacedAcrossDevicesText[] =
    "config(name=\"paced\")\n"
    "x = input(shape=[8,4]) placement=cpu:[0]\n"
    "h1 = relu(x) placement=cpu:[0]\n"
    "h2 = relu(h1) placement=cpu:[0]\n"
    "s = fill(shape=[8,4], value=1.0) placement=cuda:[0]\n"
    "h3 = relu(h2) placement=cpu:[0]\n"
    "h4 = relu(h3) placement=cpu:[0]\n"
    "h5 = relu(h4) placement=cpu:[0]\n"
    "y = add(h5, s) placement=cuda:[0]\n"
    "output(y)\n";

TEST(DeviceCopyTest, ControlInputAcrossDevicesVerifies) {
  const PlanProto plan = LowerTextOrDie(kPacedAcrossDevicesText);
  EXPECT_EQ(VerifyPlan(plan), absl::OkStatus());
  const TaskProto& fill = FindTask(plan, "s@r0");
  EXPECT_EQ(fill.device().type(), "cuda");
  EXPECT_EQ(fill.inputs_size(), 0);
  ASSERT_EQ(fill.consumed_register_ids_size(), 1);  // the pacing register, on the host
  const RegisterProto& pacing = LocalRegister(plan, 0, fill.consumed_register_ids(0));
  EXPECT_EQ(pacing.memory().block_id(), 1);
  // Its bytes are its own: no other register of the host's reusable block overlaps them.
  const int64_t begin = pacing.memory().offset(), end = begin + pacing.memory().buffer_bytes();
  for (const RegisterProto& reg : RankPlan(plan, 0).registers()) {
    if (reg.id() == pacing.id() || !reg.has_memory() || reg.memory().block_id() != 1) continue;
    const int64_t b = reg.memory().offset(), e = b + reg.count() * reg.memory().buffer_bytes();
    EXPECT_TRUE(e <= begin || b >= end) << reg.name() << " shares bytes with " << pacing.name();
  }
}

TEST(DeviceCopyTest, PerRankLoweringEqualsTheWholePlan) {
  std::unique_ptr<OpRegistry> registry = BuiltinRegistry();
  for (const std::string& text : {HostDeviceText("0"), HostDeviceText("0,1"), std::string(kAcrossRanksText),
                                  std::string(kTwoLayoutsText), std::string(kPipelineText),
                                  std::string(kPacedAcrossDevicesText)}) {
    const PlanProto whole = ExpectPerRankMatchesWhole(AnnotatedGraph(text, *registry), {});
    EXPECT_GT(CountTasks(whole, TaskProto::COPY), 0);
  }
  // Ranks without work (a world larger than the placements) lower to empty plans.
  LowerOptions wider;
  wider.world_size = 6;
  for (const char* text : {kAcrossRanksText, kPipelineText}) {
    ExpectPerRankMatchesWhole(AnnotatedGraph(text, *registry), wider);
  }
}

// ---- The verifier on broken device moves ----

class DeviceCopyVerifierTest : public ::testing::Test {
 protected:
  TaskProto& MutableTask(PlanProto* plan, const std::string& name) {
    for (RankPlanProto& rank_plan : *plan->mutable_rank_plans()) {
      for (TaskProto& t : *rank_plan.mutable_tasks()) {
        if (t.name() == name) return t;
      }
    }
    LOG(FATAL) << "no task " << name;
  }
  std::string Error(const PlanProto& plan) { return std::string(VerifyPlan(plan).message()); }

  PlanProto plan_ = LowerTextOrDie(HostDeviceText("0,1"));
};

TEST_F(DeviceCopyVerifierTest, SelfTransferIsRefusedNamingTheTask) {
  TaskProto& copy = MutableTask(&plan_, "x.cross_placement.h2d@r1");
  copy.set_type(TaskProto::TRANSFER);
  copy.mutable_transfer()->set_peer_rank(1);
  const std::string error = Error(plan_);
  EXPECT_THAT(error, HasSubstr("'x.cross_placement.h2d@r1' (TRANSFER) has peer_rank 1, its own rank"));
  EXPECT_THAT(error, HasSubstr("is a COPY"));
}

TEST_F(DeviceCopyVerifierTest, CopyAcrossRanksIsRefused) {
  PlanProto plan = LowerTextOrDie(kAcrossRanksText);
  TaskProto& transfer = *const_cast<TaskProto*>(TasksOfType(plan, TaskProto::TRANSFER)[0]);
  transfer.set_type(TaskProto::COPY);
  transfer.mutable_copy()->mutable_from()->set_type("cpu");
  transfer.mutable_copy()->mutable_to()->set_type("cuda");
  transfer.set_stream_kind(STREAM_COPY);
  const std::string error = Error(plan);
  EXPECT_THAT(error, HasSubstr(transfer.name()));
  EXPECT_THAT(error, HasSubstr("of rank 0; a COPY moves data between two devices of its own rank 1"));
}

TEST_F(DeviceCopyVerifierTest, CopyBetweenOneDeviceOrOffItsStreamIsRefused) {
  TaskProto& copy = MutableTask(&plan_, "x.cross_placement.h2d@r0");
  copy.mutable_copy()->mutable_from()->set_type("cuda");
  EXPECT_THAT(Error(plan_), HasSubstr("'x.cross_placement.h2d@r0' (COPY) copies from cuda:0 to cuda:0"));
  copy.mutable_copy()->mutable_from()->set_type("cpu");
  copy.set_stream_kind(STREAM_COMPUTE);
  EXPECT_THAT(Error(plan_), HasSubstr("runs on a STREAM_COMPUTE stream; a COPY runs on a copy stream"));
  copy.set_stream_kind(STREAM_COPY);
  copy.clear_copy();
  EXPECT_THAT(Error(plan_), HasSubstr("(COPY) has no CopyParams"));
}

TEST_F(DeviceCopyVerifierTest, ValuesOnTheWrongDeviceAreRefused) {
  // The copy's direction reversed: its input is on the host, not on the device it names.
  TaskProto& copy = MutableTask(&plan_, "x.cross_placement.h2d@r0");
  std::swap(*copy.mutable_copy()->mutable_from(), *copy.mutable_copy()->mutable_to());
  EXPECT_THAT(Error(plan_), HasSubstr("copies cuda:0 -> cpu:0, but its input register"));
  std::swap(*copy.mutable_copy()->mutable_from(), *copy.mutable_copy()->mutable_to());
  ASSERT_EQ(VerifyPlan(plan_), absl::OkStatus());
  // A device kernel moved to the host reads device memory.
  TaskProto& y = MutableTask(&plan_, "y@r0");
  y.mutable_device()->set_type("cpu");
  const std::string error = Error(plan_);
  EXPECT_THAT(error, HasSubstr("'y@r0'"));
  EXPECT_THAT(error, HasSubstr("cuda:0"));
}

TEST_F(DeviceCopyVerifierTest, PerDeviceMemorySummaryMustMatchTheBlocks) {
  RankMemoryProto& memory = *plan_.mutable_memory(1);
  memory.mutable_devices(1)->set_planned_bytes(memory.devices(1).planned_bytes() + 64);
  EXPECT_THAT(Error(plan_), HasSubstr("memory[1] says rank 1 device cuda:0 planned_bytes"));
}

}  // namespace
}  // namespace testing
}  // namespace compiler
}  // namespace oneflow_like
