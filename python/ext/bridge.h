// The C++ side of `import oneflow_like`: plain C++ (no pybind11 here) over the compiler, the
// runtime and the trainer's distributed context, so that python/ext/module.cc only converts
// types. Everything a Python user does ends in one of these calls:
//
//   Engine engine;                                        // op registry; the job's processes
//   ASSIGN_OR_RETURN(GraphInfo info, engine.Infer(text)); // shapes of a traced op (eager + nn.Graph)
//   ASSIGN_OR_RETURN(CompiledPlan plan, engine.Compile(request));
//   ASSIGN_OR_RETURN(std::unique_ptr<Runner> run, engine.NewRunner(plan));
//   RETURN_IF_ERROR(run->FeedShard("x", /*rank=*/0, shard));   // per rank this process holds
//   RETURN_IF_ERROR(run->RunStep());
//   ASSIGN_OR_RETURN(std::vector<Tensor> y, run->FetchShards("y", 0));
//
// Jobs arrive as the compiler's text format (compiler/text_format.h), which Python writes, so
// shape inference, SBP selection, boxing and autograd are the compiler's own.
// Processes: without launcher variables every rank of a plan runs as threads of this process
// (actor::Session over the loopback). Under olrun (WORLD_SIZE set) the Engine joins the job
// (train::DistributedContext: rendezvous, TCP transport, heartbeats) on first use and each Runner
// runs this process's rank only; every process must then create the same runners in the same
// order (SPMD), as in OneFlow. There Compile lowers only this process's rank (compiler
// CompileOptions::only_rank: time and memory flat in the world size) unless the request asks for
// the whole plan, and NewRunner first checks that every process compiled the same job (the
// per-rank plans' job agreement vs rank 0's, train/plan_agreement.h), refusing a mismatch naming
// what differs and the rank before any actor exists or any data moves.
// Thread-compatible: one Python thread (the GIL) drives an Engine.
#ifndef ONEFLOW_LIKE_PYTHON_EXT_BRIDGE_H_
#define ONEFLOW_LIKE_PYTHON_EXT_BRIDGE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "oneflow_like/actor/session.h"
#include "oneflow_like/core/op_def.h"
#include "oneflow_like/core/proto/plan.pb.h"
#include "oneflow_like/core/tensor.h"
#include "oneflow_like/train/distributed.h"
#include "python/ext/channel_transport.h"
#include "python/ext/job_layout.h"

namespace oneflow_like {
namespace python {

// One tensor of an inferred graph.
struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype;      // "float32", ...
  std::string placement;  // "cpu:[0,1]" ("" when none)
  std::string nd_sbp;     // pinned or chosen, "(S(0), B)"; "" when free
};

struct CompileRequest {
  std::string text;            // the job (text format)
  int32_t world_size = 0;      // 0: as many ranks as the placements use
  // Eager autograd: the job's train(...) statement only names the loss; the compiler's
  // autograd pass adds the backward program, then the gradients of these variables become
  // outputs named "<variable>/grad" and the optimizer is dropped (nothing is updated).
  std::vector<std::string> gradients_of;
  bool gradients_only = false;
  // Under a launcher: true compiles every rank's plan (graph.whole_plan(): olplan, summaries of
  // every rank); false (default) only this process's rank. Ignored without a launcher (whole).
  bool whole_plan = false;
};

// A compiled job: the plan a Runner runs and, for a per-rank plan, what Python reads of the
// other ranks (where each holds the job's inputs, outputs and variables).
struct CompiledPlan {
  PlanProto plan;  // the whole plan, or this process's rank's (plan.has_per_rank())
  std::shared_ptr<const JobLayout> layout;  // set with a per-rank plan only
  bool per_rank() const { return plan.has_per_rank(); }
  // The ranks with work in the job (the whole plan's `ranks`, whichever plan this holds).
  std::vector<int32_t> job_ranks() const;
};

class Runner;

class Engine {
 public:
  // use_launcher_env=false: never joins a job; every runner runs all its ranks in this process.
  explicit Engine(bool use_launcher_env = true);
  ~Engine();
  const OpRegistry& registry() const { return registry_; }
  std::vector<std::string> OpTypes() const;

  // Parses and infers (placements, shapes, dtypes, pinned-SBP checks). Every tensor, in id order.
  absl::StatusOr<std::vector<TensorInfo>> Infer(const std::string& text) const;
  absl::StatusOr<CompiledPlan> Compile(const CompileRequest& request) const;

  // Launcher environment (olrun / torchrun variables): rank, world size; 0 / 1 without one.
  bool distributed() const { return distributed_; }
  int32_t rank() const { return rank_; }
  int32_t world_size() const { return world_size_; }
  int32_t local_rank() const { return local_rank_; }
  // Joins the job (rendezvous) if launched and not yet joined.
  absl::Status EnsureJoined();
  // All processes meet (nothing without a launcher). Names are made unique by a counter.
  absl::Status Barrier(const std::string& what);
  // Key-value exchange through the control plane: every process publishes `value`; returns
  // every process's value in rank order (Unavailable / DeadlineExceeded naming the rank).
  absl::StatusOr<std::vector<std::string>> AllGather(const std::string& value);
  // Ends the job cleanly (last barrier; later link EOFs are not failures). Idempotent.
  absl::Status Shutdown();
  // Tells every process this one fails (then the caller exits non-zero).
  void Abort(const std::string& reason);
  // The same-job check NewRunner makes (no-op without a launcher).
  absl::Status CheckSameJob(const PlanProto& plan);

  // Under a launcher: every process compares its plan's fingerprint (a per-rank plan's job
  // agreement, a whole plan's hash) with rank 0's first; FailedPrecondition naming what differs
  // on the rank that differs (which aborts the job, so every other process stops naming it).
  absl::StatusOr<std::unique_ptr<Runner>> NewRunner(const CompiledPlan& plan);
  train::DistributedContext* context() const { return context_.get(); }
  // A channel of the job's transport for one more Runtime (channel_transport.h).
  std::unique_ptr<comm::Transport> OpenChannel() { return hub_->Open(); }
  int64_t watchdog_ms() const { return watchdog_ms_; }

 private:
  OpRegistry registry_;
  bool distributed_ = false;
  int32_t rank_ = 0;
  int32_t world_size_ = 1;
  int32_t local_rank_ = 0;
  int64_t watchdog_ms_ = 60000;
  int64_t sequence_ = 0;  // unique names for barriers and exchanges
  bool shut_down_ = false;
  std::unique_ptr<train::DistributedContext> context_;
  std::unique_ptr<ChannelHub> hub_;  // after context_: destroyed first
};

// Runs one compiled plan, step after step.
class Runner {
 public:
  virtual ~Runner() = default;
  // The ranks whose shards this process holds (all of the plan's ranks in one process).
  virtual std::vector<int32_t> local_ranks() const = 0;
  virtual int64_t pieces_per_step() const = 0;
  // Whether `rank` holds a binding (input, output or variable) named `name`.
  virtual bool Holds(const std::string& name, int32_t rank) const = 0;
  virtual absl::Status FeedShard(const std::string& name, int32_t rank, const Tensor& shard) = 0;
  virtual absl::Status RunStep() = 0;
  // Output `name` on `rank`: one tensor per firing of the last step.
  virtual absl::StatusOr<std::vector<Tensor>> FetchShards(const std::string& name, int32_t rank) = 0;
  virtual absl::StatusOr<Tensor> ReadVariableShard(const std::string& name, int32_t rank) const = 0;
  virtual absl::Status WriteVariableShard(const std::string& name, int32_t rank, const Tensor& shard) = 0;
  // Sharded checkpoint (train/checkpoint.h) of every variable: save into `dir` (every process its
  // ranks, then rank 0 marks it complete) / load from `dir` saved under any layout.
  virtual absl::Status Save(const std::string& dir, int64_t step) = 0;
  virtual absl::StatusOr<int64_t> Load(const std::string& dir) = 0;
  // End-of-data drain. Called by the destructor when not called before (errors dropped).
  virtual absl::Status Close() = 0;
  const CompiledPlan& compiled() const { return compiled_; }
  // The binding of `name` on `rank` (any rank of the job), or null: from the plan for the ranks
  // it lowered, else (per-rank plan) derived from the job's layout (no slot, no initializer).
  const TensorBindingProto* Binding(const std::string& name, int32_t rank) const;

 protected:
  explicit Runner(const CompiledPlan& plan);
  CompiledPlan compiled_;
  const PlanProto& plan_;  // compiled_.plan
  std::map<std::pair<std::string, int32_t>, TensorBindingProto> bindings_;
  mutable std::map<std::pair<std::string, int32_t>, std::optional<TensorBindingProto>> derived_;
};

// Variables of a COMPLETE checkpoint (union over its ranks): name -> (logical shape, dtype name).
absl::StatusOr<std::map<std::string, std::pair<std::vector<int64_t>, std::string>>> CheckpointVariables(
    const std::string& dir);

// One line per op: "name: type  placement  in (S(0)), (B) -> out (S(0))", from the plan's SBP
// decisions (print(graph)).
std::string DescribeSbp(const PlanProto& plan);

}  // namespace python
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_PYTHON_EXT_BRIDGE_H_
