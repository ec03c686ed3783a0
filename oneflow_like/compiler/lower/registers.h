// Internal to //oneflow_like/compiler/lower: the plan-wide passes over the PlanBuilder that run
// after all tasks exist: stream binding and static order, register counts, memory. The rules
// are stated in lower.h; this is where they are implemented.
//
// Worked example of a lifetime: on a rank whose tasks are (in id order) x.source, h (reads x),
// a (reads h), y (reads a), register h lives [1, 2] and register a [2, 3]; they intersect at
// position 2 (touching counts), so they get different bytes; x [0, 1] and a [2, 3] may share.
#ifndef ONEFLOW_LIKE_COMPILER_LOWER_REGISTERS_H_
#define ONEFLOW_LIKE_COMPILER_LOWER_REGISTERS_H_

#include <cstdint>
#include <map>
#include <vector>

#include "oneflow_like/compiler/lower/lowering.h"
#include "oneflow_like/compiler/lower/plan_builder.h"

namespace oneflow_like {
namespace compiler {
namespace lower_internal {

inline constexpr int32_t kComputeStream = 0;
inline constexpr int32_t kCommStream = 1;
// COPY tasks, on the device side of the copy (STREAM_COPY): host -> device and device -> host.
inline constexpr int32_t kHostToDeviceStream = 2;
inline constexpr int32_t kDeviceToHostStream = 3;
// LowerOptions::compute_streams = 2: the tasks marked TaskInfo::side_stream (STREAM_COMPUTE).
inline constexpr int32_t kSideComputeStream = 4;

// Sets stream_id, stream_kind and order_in_stream of every task.
void AssignStreams(PlanBuilder* builder);

struct PhaseSplit;
// Sets RegisterProto.count of every register (rule in lower.h). `max_count` 0 = no cap. A
// consumer task emitted for an op after the loss (`phases`) counts as reading after the loss
// whatever position it carries (a boxing task carries its source's: the tokens sliced for the
// embedding's gradient read the token register in the backward, which then has to hold the
// pieces the stage keeps in flight, not 1).
void AssignRegisterCounts(const StageInfo& stages, int64_t pieces_per_step, int32_t max_count,
                          const PhaseSplit& phases, PlanBuilder* builder);
// The count rule of lower.h for one register: produced for `stage` at `position` (-1: a source),
// read by ops of `readers` (the other tasks reading a register, boxing, REPEAT / ACCUMULATE,
// sinks, work for its own stage and position and never change it). `fixed`: step-rate,
// persistent or held across steps (count 1).
int32_t RegisterCount(const StageInfo& stages, int64_t pieces_per_step, int32_t max_count, int stage,
                      int64_t position, bool fixed, const ConsumerSummary& readers);

// Per (rank, device), what AssignMemory decided. A rank's devices are numbered in DeviceType
// order (cpu first), the k-th gets blocks 2k (persistent) and 2k + 1 (reusable): a CPU-only
// rank has blocks 0 and 1 as always.
struct RankMemory {
  int32_t rank = 0;
  DeviceProto device;
  int32_t device_number = 0;     // k
  int64_t persistent_bytes = 0;  // block 2k
  int64_t reusable_bytes = 0;    // block 2k + 1
  int64_t naive_bytes = 0;       // sum over its registers of count * buffer_bytes
};

// The device a register's bytes are on: its producer's, except a COPY's output (CopyParams.to).
const DeviceProto& RegisterDevice(const TaskProto& producer);

// Pipeline stages that keep more than one piece in flight (1F1B: the forward of piece k + 1
// runs before the backward of piece k) plan the bytes of their forward registers apart from
// those of their backward ones. Registers sharing bytes take turns in task order, and the
// forward's tasks come before the backward's: a shared byte would make piece k + 1's forward
// wait for piece k's backward, i.e. for the later stages -- the pipeline would run one stage
// at a time (pp2 x 4 micro-batches on 2 cores: 294 ms a step with reuse, 218 ms without).
// Forward registers share bytes among themselves (a stage's forwards run in piece order), and
// backward ones likewise; a count-1 register used in both phases gets bytes of its own.
// A task's phase is that of the op it was emitted for: tasks are emitted in program order, so
// the backward's are those from the first one emitted for an op after the loss on (boxing
// emitted for a backward op is backward even when the value it boxes is a forward one). A
// rank's split is decided by the stage it works for, not by the stage labels of its tasks
// (a boxing task carries its source's stage: a backward value boxed from the last stage into
// stage 0's rank is on stage 0's pool).
struct PhaseSplit {
  int64_t first_backward_task = -1;  // id of the first task emitted for an op after the loss; -1: none
  int64_t loss_position = -1;        // program position of the loss's producer
  int num_stages = 1;
  int64_t pieces_per_step = 1;
  int32_t max_count = 0;  // LowerOptions::max_register_count (0: no cap)
  std::map<int32_t, int> stage_of_rank;  // the lowest stage of the ops placed on each rank
  // Whether `rank`'s registers are split: min(N, S - stage, cap) > 1 for its stage.
  bool Splits(int32_t rank) const;
  // Whether the task `task_id` belongs to the backward.
  bool Backward(int64_t task_id) const { return first_backward_task >= 0 && task_id >= first_backward_task; }
};

// Sets the memory location of every register and returns one RankMemory per (rank, device)
// (ascending): the device of every rank's first task, and every device holding a register of
// it. Lifetimes: see lower.h. `reuse` false: no register shares bytes.
absl::StatusOr<std::vector<RankMemory>> AssignMemory(int64_t alignment, bool reuse, const PhaseSplit& phases,
                                                     PlanBuilder* builder);

// Adds the blocks of `memory` to the rank plans of `plan` and fills PlanProto.memory.
void AddMemoryBlocks(const std::vector<RankMemory>& memory, PlanProto* plan);

}  // namespace lower_internal
}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_LOWER_REGISTERS_H_
