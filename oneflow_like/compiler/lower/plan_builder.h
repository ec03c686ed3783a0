// PlanBuilder: the lowering's mutable task/register graph before it becomes a PlanProto.
// Internal to //oneflow_like/compiler/lower (lower.h is the public API).
//
// Tasks and registers live in two dense arrays; their ids are their indices, assigned from two
// plan-wide counters in creation order. The lowering creates every task after the tasks that
// produce its inputs, so id order is a topological order of the data edges (the only back
// edge, an update consumed by a variable holder, is added last and marked).
//
//   int64_t t = builder.AddTask(info);                         // task id t
//   int64_t r = builder.AddRegister(t, desc, "y@r0");          // register r produced by t, slot 0
//   builder.AddInput(consumer, r);                             // consumer reads r, slot 0
//
// A consumer on another rank than the register's producer must be a TRANSFER task; Assemble
// writes a mirror of the register (same id, slots and count, `remote` location) into that
// rank's plan. Not thread-safe.
#ifndef ONEFLOW_LIKE_COMPILER_LOWER_PLAN_BUILDER_H_
#define ONEFLOW_LIKE_COMPILER_LOWER_PLAN_BUILDER_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

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
  // Returns the new task's id. `info.proto.rank` and `type` must be set.
  int64_t AddTask(TaskInfo info);
  // A register produced by `task` with one slot `desc`; appended to the task's produced
  // registers and payload outputs. Returns its id.
  int64_t AddRegister(int64_t task, const TensorDesc& desc, const std::string& name, bool step_rate);
  // Appends a slot `desc` to `register_id` and to its producer's payload outputs; its index.
  int32_t AddSlot(int64_t register_id, const TensorDesc& desc);
  // `task` reads `slot` of `register_id` as its next payload input.
  void AddInput(int64_t task, int64_t register_id, int32_t slot = 0);
  // `task` consumes `register_id` without reading it (a control input that paces its firings).
  void AddControlInput(int64_t task, int64_t register_id);

  const std::deque<TaskInfo>& tasks() const { return tasks_; }
  const std::deque<RegisterInfo>& registers() const { return registers_; }
  TaskInfo& task(int64_t id) { return tasks_[id]; }
  RegisterInfo& reg(int64_t id) { return registers_[id]; }

  // Per rank (ascending): tasks in id order, then registers produced there and mirrors of
  // remote registers consumed there, in id order. Memory locations must already be set on the
  // registers (registers.cc). Internal error if a cross-rank consumer is not a TRANSFER.
  // Moves the protos out: the builder is spent afterwards.
  absl::Status Assemble(PlanProto* plan);

 private:
  std::deque<TaskInfo> tasks_;  // deque: protos are not nothrow-movable, no relocation copies
  std::deque<RegisterInfo> registers_;
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
