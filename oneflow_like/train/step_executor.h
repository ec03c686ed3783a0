// StepExecutor: what the trainer needs from "something that runs the plan's steps", so one
// Trainer drives both ways of running a Plan:
//  - LocalExecutor (below): every rank of the plan in THIS process (actor::Session over the
//    loopback transport);
//  - RankExecutor (rank_executor.h): this process runs ONE rank of the plan; the others are
//    other processes reached over TCP (olrun / torchrun-style environment).
//
//   std::unique_ptr<StepExecutor> exec = ...;
//   for (int p = 0; p < exec->pieces_per_step(); ++p) RETURN_IF_ERROR(exec->Feed("x", x[p]));
//   RETURN_IF_ERROR(exec->RunStep(step));
//   ASSIGN_OR_RETURN(double loss, exec->MeanScalar("loss", step));   // same on every process
//
// Feed takes the LOGICAL tensor of one piece; each executor gives its ranks their shards.
// Errors are those of the runtime (a failed rank, the watchdog's report) and of the transport.
// Not thread-safe: one thread drives an executor.
#ifndef ONEFLOW_LIKE_TRAIN_STEP_EXECUTOR_H_
#define ONEFLOW_LIKE_TRAIN_STEP_EXECUTOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "oneflow_like/core/status.h"
#include "oneflow_like/actor/session.h"
#include "oneflow_like/core/tensor.h"

namespace oneflow_like {
namespace train {

class StepExecutor {
 public:
  virtual ~StepExecutor() = default;
  virtual int64_t pieces_per_step() const = 0;
  // One piece of input `name` (call pieces_per_step() times per step, before RunStep).
  virtual absl::Status Feed(const std::string& name, const Tensor& logical) = 0;
  // Runs step `step` (0, 1, ...) to completion.
  absl::Status RunStep(int64_t step) {
    RETURN_IF_ERROR(StartStep(step));
    return FinishStep(step);
  }
  // RunStep in two halves: StartStep starts `step` (its pieces fed) and returns at once; at
  // most actor::Runtime::kMaxStepsInFlight steps may be started and not finished. FinishStep
  // waits until `step`, the oldest unfinished one, is done. Feeding and starting step n + 1
  // before FinishStep(n) overlaps the host's between-step work with compute; the runtime
  // still orders step n + 1 after step n's variable updates.
  virtual absl::Status StartStep(int64_t step) = 0;
  virtual absl::Status FinishStep(int64_t step) = 0;
  // The mean over the last finished step's firings of the scalar output `name`, assembled over
  // ranks.
  virtual absl::StatusOr<double> MeanScalar(const std::string& name, int64_t step) = 0;
  // The Runtimes of this process's ranks (for checkpoints), in rank order.
  virtual std::vector<actor::Runtime*> local_runtimes() const = 0;
  virtual int32_t world_size() const = 0;
  // Returns once every process reached the barrier `name` (a LocalExecutor: at once).
  virtual absl::Status Barrier(const std::string& name) = 0;
  // End-of-data drain.
  virtual absl::Status Close() = 0;
  // The rank-0 process (prints the job's output); always true for a LocalExecutor.
  virtual bool leader() const = 0;
  // E.g. "all 4 ranks run as threads of this process (loopback transport)".
  virtual std::string Description() const = 0;
  // The in-process session (LocalExecutor), else nullptr.
  virtual actor::Session* session() const { return nullptr; }
};

// All ranks of `plan` in this process. `registry` must outlive the executor.
absl::StatusOr<std::unique_ptr<StepExecutor>> CreateLocalExecutor(const PlanProto& plan, const OpRegistry* registry,
                                                                  actor::SessionOptions options);

}  // namespace train
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_TRAIN_STEP_EXECUTOR_H_
