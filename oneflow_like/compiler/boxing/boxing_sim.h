// Reference interpreter of a BoxingPlan, for tests: runs every step on in-memory tensors, one
// value after another, exactly as the plan says (no scheduling, no threads). Its output fed to
// AssembleTensor with the destination layout must give back the logical tensor that
// ShardTensor split for the source layout.
//
//   std::vector<Tensor> src = ShardTensor(x, plan.src_sbp, plan.src_placement.hierarchy()).value();
//   std::vector<Tensor> dst = SimulateBoxing(plan, src).value();
//   Tensor y = AssembleTensor(dst, x.shape(), plan.dst_sbp, plan.dst_placement.hierarchy()).value();
//
// Sums are computed in double and rounded to the dtype once per step (bool: logical or).
#ifndef ONEFLOW_LIKE_COMPILER_BOXING_BOXING_SIM_H_
#define ONEFLOW_LIKE_COMPILER_BOXING_BOXING_SIM_H_

#include <vector>

#include "oneflow_like/compiler/boxing/boxing_plan.h"
#include "oneflow_like/core/status.h"
#include "oneflow_like/core/tensor.h"

namespace oneflow_like {
namespace compiler {

// `src_shards`: one per source device, in parallel-id order, with the plan's dtype and the
// shapes of the source values. Returns one tensor per destination device. InvalidArgument if
// the shards do not match (count, dtype, shape), naming the first mismatch; Internal if the
// plan itself is inconsistent (a value used before definition, regions that do not fit).
absl::StatusOr<std::vector<Tensor>> SimulateBoxing(const BoxingPlan& plan, const std::vector<Tensor>& src_shards);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_BOXING_BOXING_SIM_H_
