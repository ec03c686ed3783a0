#include "oneflow_like/compiler/plan/plan_bytes.h"

#include <algorithm>

#include "oneflow_like/core/data_type.h"

namespace oneflow_like {
namespace compiler {

int64_t SlotBytes(const TensorDescProto& slot) {
  int64_t n = 1;
  for (int64_t d : slot.dims()) n *= d;
  return n * SizeOf(static_cast<DataType>(slot.dtype()));
}

int64_t MirrorStagingBytes(const RegisterProto& mirror) {
  constexpr int64_t kAlignment = 64;  // the runtime's Allocator::kAlignment
  int64_t stride = 0;
  for (const TensorDescProto& slot : mirror.slots()) stride += (SlotBytes(slot) + kAlignment - 1) / kAlignment * kAlignment;
  return std::max<int64_t>(1, stride * std::max(1, mirror.count()));
}

int64_t StagingBytes(const RankPlanProto& rank_plan) {
  int64_t bytes = 0;
  for (const RegisterProto& reg : rank_plan.registers()) {
    if (reg.has_remote()) bytes += MirrorStagingBytes(reg);
  }
  return bytes;
}

int64_t RankPeakBytes(const PlanProto& plan, int32_t rank) {
  int64_t blocks = 0, staging = 0;
  bool found = false;
  for (const RankMemoryProto& m : plan.memory()) {
    if (m.rank() == rank) blocks = m.planned_bytes();
  }
  for (const RankPlanProto& rp : plan.rank_plans()) {
    if (rp.rank() != rank) continue;
    staging = StagingBytes(rp);
    found = true;
  }
  return found ? blocks + staging : 0;
}

}  // namespace compiler
}  // namespace oneflow_like
