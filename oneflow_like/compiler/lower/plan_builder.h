// PlanBuilder: the lowering's mutable task/register graph before it becomes a PlanProto.
// Internal to //oneflow_like/compiler/lower (lower.h is the public API).
//
// Task and register ids come from two plan-wide counters in creation order. The lowering
// creates every task after the tasks that produce its inputs, so id order is a topological
// order of the data edges (the only back edge, an update consumed by a variable holder, is added
// last and marked). Each emission (an op's tasks on every device, one boxing, one bucket, ...)
// reserves its ids first, then adds its tasks at ids it computes from the reservation:
//
//   int64_t t0 = builder.ReserveTasks(n), r0 = builder.ReserveRegisters(n);
//   builder.AddTask(t0 + d, info);                            // device d's task
//   builder.AddRegister(r0 + d, t0 + d, desc, "y@r0", false);   // its register, slot 0
//   builder.AddInput(t0 + d, r, 0);                           // it reads register r, slot 0
//
// Whole plan (only_rank -1): every reserved id is added, in increasing order (checked; a gap
// is an internal error at Assemble). A consumer on another rank than the register's producer
// must be a TRANSFER task; Assemble writes a mirror of the register (same id, slots and count,
// `remote` location) into that rank's plan.
//
// One rank (only_rank r): the counters advance by whole reservations, but only rank r's tasks and
// registers are added. The far ends the rank must agree on are added as such: AddRemoteConsumer
// (another rank's TRANSFER reads a local register: its id, rank, stage and position) and
// AddMirror (a local TRANSFER reads another rank's register: the mirror's id, producer, slots and
// name; the lowering sets its count before Assemble). Not thread-safe.
//
// A range of ranks (first_rank r, num_ranks k: ranks r .. r+k-1, what `olplan verify` lowers a
// chunk at a time): as one rank, with every rank of the range local. A register read on another
// rank of the range gets its mirror at Assemble as in the whole plan; the far ends outside the
// range are added as for one rank (AddRemoteConsumer, AddMirror, one mirror per consuming rank).
#ifndef ONEFLOW_LIKE_COMPILER_LOWER_PLAN_BUILDER_H_
#define ONEFLOW_LIKE_COMPILER_LOWER_PLAN_BUILDER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "oneflow_like/core/proto/plan.pb.h"
#include "oneflow_like/core/sbp.h"
#include "oneflow_like/core/shape.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace compiler {
namespace lower_internal {

// Bookkeeping the register-count and lifetime rules read (registers.cc).
struct TaskInfo {
  TaskProto proto;         // everything but id, consumed/produced ids, inputs/outputs, order
  int stage = 0;           // pipeline stage the task works for
  int64_t position = -1;   // program-order index of the op it belongs to (-1: a source)
  bool side_stream = false;  // a COMPUTE task on the second compute stream (kSideComputeStream)
};

struct RegisterInfo {
  RegisterProto proto;       // id, producer, consumers, count, slots, name (no location yet)
  std::vector<int64_t> consumer_tasks;  // task ids, in the order added (deduplicated)
  std::vector<int64_t> slot_bytes;  // bytes of each slot (one, except a gradient bucket's)
  bool step_rate = false;    // produced once per step while pieces_per_step > 1
  bool persistent = false;   // a variable holder's register (persistent block)
  bool held_across_steps = false;  // an update consumed by a holder in the next step
};

class PlanBuilder {
 public:
  // first_rank -1: the whole plan; else ranks first_rank .. first_rank + num_ranks - 1.
  explicit PlanBuilder(int32_t first_rank = -1, int32_t num_ranks = 1)
      : first_rank_(first_rank), end_rank_(first_rank < 0 ? -1 : first_rank + num_ranks) {}

  // Not the whole plan: one rank or a range of ranks.
  bool partial() const { return first_rank_ >= 0; }
  int32_t first_rank() const { return first_rank_; }
  // One past the last rank of the range (-1 for the whole plan).
  int32_t end_rank() const { return end_rank_; }
  int32_t num_ranks() const { return end_rank_ - first_rank_; }
  // Whether tasks of `rank` are added (every rank for the whole plan).
  bool Emits(int32_t rank) const { return first_rank_ < 0 || (rank >= first_rank_ && rank < end_rank_); }

  // The first of `n` task (register) ids of the next emission.
  int64_t ReserveTasks(int64_t n);
  int64_t ReserveRegisters(int64_t n);
  // Adds the task `id` (reserved; `info.proto.rank` and `type` set). Returns `id`.
  int64_t AddTask(int64_t id, TaskInfo info);
  // The register `id` (reserved) produced by local task `task` with one slot `desc`; appended
  // to the task's produced registers and payload outputs. Returns `id`.
  int64_t AddRegister(int64_t id, int64_t task, const TensorDesc& desc, const std::string& name, bool step_rate);
  // Appends a slot `desc` to local `register_id` and to its producer's payload outputs; its index.
  int32_t AddSlot(int64_t register_id, const TensorDesc& desc);
  // Local `task` reads `slot` of `register_id` (local, or a mirror) as its next payload input.
  void AddInput(int64_t task, int64_t register_id, int32_t slot = 0);
  // Local `task` consumes `register_id` without reading it (a control input that paces it).
  void AddControlInput(int64_t task, int64_t register_id);

  // One rank: task `stub` (id, rank, type set; stage and position for the rules) of another
  // rank reads local register `register_id`.
  void AddRemoteConsumer(int64_t register_id, const TaskInfo& stub);
  // One rank: the mirror `proto` (id, producer, slots, name, remote; no consumers) of another
  // rank's register, before a local task consumes it. Kept from its first call.
  void AddMirror(RegisterProto proto);

  // Local tasks and registers in id order (every task of the plan for the whole plan).
  const std::deque<TaskInfo>& tasks() const { return tasks_; }
  const std::deque<RegisterInfo>& registers() const { return registers_; }
  TaskInfo& task_at(size_t index) { return tasks_[index]; }
  RegisterInfo& register_at(size_t index) { return registers_[index]; }
  // A local task or a remote stub by id; REQUIRES: added.
  const TaskInfo& task(int64_t id) const;
  // The index of local task `id` in tasks(), -1 for another rank's.
  int64_t TaskIndex(int64_t id) const;
  // A local register by id; REQUIRES: added.
  RegisterInfo& reg(int64_t id);
  bool IsLocalRegister(int64_t id) const;
  // One rank: the mirrors by id (their count is set by the lowering).
  std::map<int64_t, RegisterProto>& mirrors() { return mirrors_; }

  // Per rank (ascending): tasks in id order, then registers produced there and mirrors of
  // remote registers consumed there, in id order. Memory locations must already be set on the
  // registers (registers.cc). Internal error if a cross-rank consumer is not a TRANSFER or the
  // whole plan's ids have a gap. Moves the protos out: the builder is spent afterwards.
  // Moves every task and register into `plan` (the builder is empty afterwards). A range:
  // `step_rate_mirrors` (if not null) gets, per rank, the ids of its mirrors of registers made
  // in the range that are step-rate (those of mirrors() are the lowering's facts).
  absl::Status Assemble(PlanProto* plan, std::map<int32_t, std::vector<int64_t>>* step_rate_mirrors = nullptr);

 private:
  absl::Status AssemblePartial(PlanProto* plan, std::map<int32_t, std::vector<int64_t>>* step_rate_mirrors);

  int32_t first_rank_ = -1;
  int32_t end_rank_ = -1;
  int64_t next_task_ = 0;      // one rank: the counters
  int64_t next_register_ = 0;
  std::string id_error_;       // whole plan: the first id added out of order
  std::deque<TaskInfo> tasks_;  // deque: protos are not nothrow-movable, no relocation copies
  std::deque<RegisterInfo> registers_;
  // One rank only: ids -> index in tasks_ / registers_, other ranks' consumer tasks, mirrors.
  absl::flat_hash_map<int64_t, int64_t> task_index_;
  absl::flat_hash_map<int64_t, int64_t> register_index_;
  absl::flat_hash_map<int64_t, TaskInfo> remote_tasks_;
  std::map<int64_t, RegisterProto> mirrors_;
};

// "cpu" / "cuda" device 0 of a rank (one device per process).
DeviceProto MakeDevice(DeviceType type);
// Logical dims, this device's offset and the informational NdSbp.
ShardInfoProto MakeShardInfo(const Shape& logical, const NdSbp& nd_sbp, const Placement& placement,
                             int64_t parallel_id);
RegionProto MakeRegion(const std::vector<int64_t>& begin, const std::vector<int64_t>& end);

}  // namespace lower_internal
}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_LOWER_PLAN_BUILDER_H_
