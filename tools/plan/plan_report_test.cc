// olplan's memory and summary reports per device: a rank whose blocks are on two devices (a
// cpu data source feeding a cuda placement) is reported per device, with sums that add up to
// the rank's; a CPU-only plan reports no devices.
#include "tools/plan/plan_report.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oneflow_like/compiler/driver/compile.h"
#include "oneflow_like/compiler/test_util.h"

namespace oneflow_like {
namespace plan_tool {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

PlanProto CompileText(const std::string& text) {
  std::unique_ptr<OpRegistry> registry = compiler::testing::BuiltinRegistry();
  absl::StatusOr<PlanProto> plan = compiler::Compile(compiler::testing::ParseOrDie(text, *registry));
  CHECK(plan.ok()) << plan.status();
  return *std::move(plan);
}

TEST(PlanReportTest, RanksOnTwoDevicesAreReportedPerDevice) {
  const PlanProto plan = CompileText(
      "config(name=\"h2d\")\n"
      "x = input(shape=[8,16]) placement=cpu:[0,1] sbp=[S(0)]\n"
      "w = variable(shape=[16,4], init=ones) placement=cuda:[0,1]\n"
      "y = matmul(x, w) placement=cuda:[0,1]\n"
      "output(y)\n");
  absl::StatusOr<PlanSummary> s = Summarize(plan);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->ranks.size(), 2u);
  for (const RankReport& r : s->ranks) {
    ASSERT_EQ(r.devices.size(), 2u);
    EXPECT_EQ(r.devices[0].device, "cpu:0");
    EXPECT_EQ(r.devices[1].device, "cuda:0");
    EXPECT_EQ(r.devices[0].planned_bytes + r.devices[1].planned_bytes, r.block_bytes);
    EXPECT_GE(r.devices[1].planned_bytes, 16 * 4 * 4);  // w on the device
  }
  const std::string memory = MemoryText(*s, 0);
  EXPECT_THAT(memory, HasSubstr("ranks [0,1]: peak"));  // both ranks alike: one group
  EXPECT_THAT(memory, HasSubstr("host/device copies"));  // x's copy on the device, y's on the host
  EXPECT_THAT(memory, HasSubstr("per device: cpu:0 planned blocks "));
  EXPECT_THAT(memory, HasSubstr("; cuda:0 planned blocks "));
  EXPECT_THAT(SummaryText(*s), HasSubstr("(cpu:0 "));
  EXPECT_THAT(MemoryJson(*s, 0), HasSubstr("\"devices\":[{\"device\":\"cpu:0\""));
  EXPECT_THAT(SummaryJson(*s), HasSubstr("\"device\":\"cuda:0\""));
  // --device-memory is compared with the accelerator's blocks, not the host's: a budget of the
  // cuda blocks fits although the rank's total is larger, one byte less does not.
  const RankReport& r = s->ranks[0];
  ASSERT_GT(r.devices[0].planned_bytes, 0);  // host blocks exist
  EXPECT_EQ(r.device_bytes, r.devices[1].planned_bytes);
  EXPECT_EQ(s->peak_device_bytes, r.device_bytes);
  EXPECT_LT(r.device_bytes, r.planned_bytes);
  EXPECT_THAT(MemoryText(*s, r.device_bytes), HasSubstr("  fits in "));
  EXPECT_THAT(MemoryText(*s, r.device_bytes - 1), HasSubstr("DOES NOT FIT"));
  EXPECT_THAT(MemoryJson(*s, r.device_bytes), HasSubstr("\"fits\":true"));
}

TEST(PlanReportTest, CpuOnlyPlansHaveNoDeviceBreakdown) {
  const PlanProto plan = CompileText(
      "config(name=\"cpu\")\n"
      "x = input(shape=[8,16]) placement=cpu:[0,1] sbp=[S(0)]\n"
      "w = variable(shape=[16,4], init=ones)\n"
      "y = matmul(x, w)\n"
      "output(y)\n");
  absl::StatusOr<PlanSummary> s = Summarize(plan);
  ASSERT_TRUE(s.ok()) << s.status();
  for (const RankReport& r : s->ranks) {
    EXPECT_TRUE(r.devices.empty());
    EXPECT_EQ(r.device_bytes, r.planned_bytes);  // one device: the whole peak
  }
  EXPECT_THAT(MemoryText(*s, 0), Not(HasSubstr("per device")));
  EXPECT_THAT(MemoryJson(*s, 0), Not(HasSubstr("devices")));
}

}  // namespace
}  // namespace plan_tool
}  // namespace oneflow_like
