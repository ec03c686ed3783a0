// RankExecutor: the StepExecutor (step_executor.h) of one process in a multi-process job: it
// runs ONE rank of the plan (one actor::Runtime over the TCP transport of a DistributedContext),
// and uses the control plane for what crosses processes outside the plan: assembling scalar
// outputs such as the loss, barriers, and failures.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<StepExecutor> exec,
//                    CreateRankExecutor(plan, &registry, session_options, ctx.get()));
//   RETURN_IF_ERROR(exec->Feed("idx", whole_batch_piece));   // this rank takes its shard
//   RETURN_IF_ERROR(exec->RunStep(0));
//   ASSIGN_OR_RETURN(double loss, exec->MeanScalar("loss", 0)); // the same value on every rank
//
// Waiting for a step ends with: done; this runtime's error; the job's failure (a peer died or
// aborted: the status names it); or this rank's watchdog (no act for watchdog_timeout_ms: the
// report lists which actors wait for which register from which producer).
// Scalars: each rank holding output `name` publishes the sum of its firings' values when its
// shard takes part in the logical value (mesh coordinate 0 on every non-partial-sum axis), then
// every rank reads all contributions (key "scalar/<name>/<step>/<rank>").
// Not thread-safe; the DistributedContext must outlive the executor.
#ifndef ONEFLOW_LIKE_TRAIN_RANK_EXECUTOR_H_
#define ONEFLOW_LIKE_TRAIN_RANK_EXECUTOR_H_

#include <memory>

#include "oneflow_like/train/distributed.h"
#include "oneflow_like/train/step_executor.h"

namespace oneflow_like {
namespace train {

absl::StatusOr<std::unique_ptr<StepExecutor>> CreateRankExecutor(const PlanProto& plan, const OpRegistry* registry,
                                                                 actor::SessionOptions options,
                                                                 DistributedContext* context);

}  // namespace train
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_TRAIN_RANK_EXECUTOR_H_
