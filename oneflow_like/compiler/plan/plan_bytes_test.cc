// plan_bytes: slots, mirrors' staging and a rank's peak, against sums worked out by hand.
#include "oneflow_like/compiler/plan/plan_bytes.h"

#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace oneflow_like {
namespace compiler {
namespace {

PlanProto Parse(const char* text) {
  PlanProto plan;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &plan));
  return plan;
}

TEST(PlanBytesTest, SlotsMirrorsAndRankPeaks) {
  const PlanProto plan = Parse(R"pb(
    world_size: 2
    ranks: [0, 1]
    rank_plans {
      rank: 0
      registers { id: 1 slots { dtype: DT_FLOAT32 dims: [3, 5] } }
      registers {
        id: 2
        count: 2
        remote { rank: 1 }
        slots { dtype: DT_FLOAT32 dims: [3, 5] }
        slots { dtype: DT_INT64 dims: [9] }
      }
      registers { id: 3 remote { rank: 1 } slots { dtype: DT_FLOAT64 dims: [0] } }
    }
    rank_plans { rank: 1 registers { id: 4 slots { dtype: DT_BFLOAT16 dims: [7] } } }
    memory { rank: 0 planned_bytes: 1000 }
    memory { rank: 1 planned_bytes: 4096 }
  )pb");
  const RankPlanProto& r0 = plan.rank_plans(0);
  EXPECT_EQ(SlotBytes(r0.registers(0).slots(0)), 60);         // 15 float32
  EXPECT_EQ(SlotBytes(r0.registers(1).slots(1)), 72);         // 9 int64
  EXPECT_EQ(SlotBytes(plan.rank_plans(1).registers(0).slots(0)), 14);
  // Slots rounded to 64 bytes each (60 -> 64, 72 -> 128), times count 2; an empty mirror: 1 byte.
  EXPECT_EQ(MirrorStagingBytes(r0.registers(1)), 2 * (64 + 128));
  EXPECT_EQ(MirrorStagingBytes(r0.registers(2)), 1);
  EXPECT_EQ(StagingBytes(r0), 2 * (64 + 128) + 1);             // the local register is in the blocks
  EXPECT_EQ(RankPeakBytes(plan, 0), 1000 + 2 * (64 + 128) + 1);
  EXPECT_EQ(RankPeakBytes(plan, 1), 4096);                     // no mirrors
  EXPECT_EQ(RankPeakBytes(plan, 5), 0);                        // no such rank
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
