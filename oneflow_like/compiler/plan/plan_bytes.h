// Bytes of a plan as the runtime allocates them, for the tools that report planned memory
// (olplan, oltrain's RESULT line) so they all count the same way:
//   SlotBytes(slot)            one buffer slot's payload (elements x dtype size)
//   MirrorStagingBytes(reg)    a mirror of another rank's register (RegisterProto.remote): the
//                              runtime stages its buffers outside the planned blocks
//                              (actor/runtime_build.cc): the slots, each rounded up to 64 bytes,
//                              times `count` (at least 1 byte)
//   RankPeakBytes(plan, rank)  the rank's planned blocks (PlanProto.memory) plus the staging of
//                              its mirrors: what its allocator holds at the peak
#ifndef ONEFLOW_LIKE_COMPILER_PLAN_PLAN_BYTES_H_
#define ONEFLOW_LIKE_COMPILER_PLAN_PLAN_BYTES_H_

#include <cstdint>

#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace compiler {

int64_t SlotBytes(const TensorDescProto& slot);
int64_t MirrorStagingBytes(const RegisterProto& mirror);
// The staging of every mirror of `rank_plan`.
int64_t StagingBytes(const RankPlanProto& rank_plan);
// 0 if `plan` has no plan for `rank`.
int64_t RankPeakBytes(const PlanProto& plan, int32_t rank);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_PLAN_PLAN_BYTES_H_
