// Lowering: an inferred, SBP-annotated Graph -> the physical PlanProto (compiler steps 4-7:
// boxing insertion, pipeline register counts, physical expansion, streams, registers, memory).
// The firing rules the plan obeys are in docs/plan_format.md; this header states the rules the
// lowering uses to produce them.
//
// Physical expansion (expand.cc). N = pieces_per_step = max(1, micro_batches) *
// max(1, gradient_accumulation_steps).
//   - every source tensor: one SOURCE task per device of its placement (parallel-id order), its
//     register holds this device's shard. Inputs (INPUT binding) are piece-rate; variables
//     (VARIABLE binding, initializer with the derived seed) are step-rate and their register
//     lives in the rank's persistent block.
//   - every op: one COMPUTE task per device, ComputeParams with the op type, attrs and one
//     ShardInfoProto per input/output from the op's NdSbpSignature; one register (one slot,
//     the physical shard desc) per output per task.
//   - every is_output tensor: one SINK per device of its placement, in the tensor's own layout,
//     piece-rate (a step-rate output goes through REPEAT when N > 1).
//   - rates (only when N > 1): an op is step-rate if it is an optimizer op (OpDef::is_optimizer)
//     or all its inputs are step-rate (e.g. a cast of a weight); other ops are piece-rate. A
//     step-rate value read at piece rate is first boxed (at step rate) then REPEAT(N)ed per
//     device; a piece-rate value read at step rate is ACCUMULATE(N)d per device in its own
//     layout, then boxed at step rate. Communication thus happens once per step when it can.
//   - variable updates: the new value, boxed to the variable's layout at step rate, is a
//     register consumed by the variable's holder SOURCE on each device (the back edge).
//
// Gradient buckets (bucket.cc): just before the first optimizer op, every optimizer input that
// is an op output produced earlier and whose boxing plan is collectives only (ALL_REDUCE or
// REDUCE_SCATTER, one per group) becomes a part of a bucket: per (group, kind, dtype), in
// ascending position of the gradient's producer (= the order backward produces them), parts
// are appended until the bucket holds >= bucket_bytes, then it is closed. Each bucket is one
// COLLECTIVE task per member with CollectiveParams.parts (docs/plan_format.md, "Buckets"), its
// inputs the parts' sources and its outputs the slots of one register (plus the staging slot
// for REDUCE_SCATTER); global_order follows the order buckets close. The optimizer's Value of
// each gradient is then that register at the part's slot.
//
// Boxing (boxing_lower.cc): for each (tensor, placement, NdSbp, rate) a consumer needs that
// differs from what the producer delivers, the expander's BoxingPlan is expanded once and
// reused by every consumer needing that layout:
//   kTransfer -> TRANSFER on the receiving rank, consuming a mirror of the sender's register;
//   kSlice -> BOXING_SLICE (region relative to the input); kConcat -> BOXING_CONCAT (input
//   regions relative to the output; the output starts as zeros, uncovered elements stay zero);
//   kZeros -> BOXING_CONCAT with no payload inputs (all zeros), paced by a control input: the
//   rank's own source shard when it holds one; kAdd -> BOXING_ADD; kCollective -> one
//   COLLECTIVE task per member rank, global_order from one plan-wide counter in creation order
//   (identical on every member), with CollectiveParams' geometry: logical_dims, member k's
//   input / output region = the logical box of the value it reads / defines, group_region =
//   their bounding box (docs/plan_format.md); kCopy -> COPY (between two devices of one rank:
//   host -> device or device -> host; on the device side, CopyParams from / to). A transfer or
//   copy step never moves part of a value: the planner slices on the sender first.
//   Devices: a move between devices of one rank is always a COPY, never a TRANSFER from a rank
//   to itself; between ranks and device types it goes through host memory (a copy to the host
//   on the sender unless it is the host, a host transfer, a copy to the device on the
//   receiver). A value read on the other device of the same ranks in another layout is first
//   copied in its producer's layout (one COPY per device, shared by every layout read there),
//   then boxed on that device. An output of a device placement is fetched from the host: its
//   sinks run on the ranks' cpu, after a device -> host COPY.
//
// Streams (registers.cc): COMPUTE, BOXING_*, SOURCE, SINK, REPEAT, ACCUMULATE on stream 0
// (STREAM_COMPUTE); TRANSFER and COLLECTIVE on stream 1 (STREAM_COMM); COPY on the device's
// copy streams (STREAM_COPY): 2 host -> device, 3 device -> host. order_in_stream = the task's
// rank among the tasks of its (rank, device, stream) in id (= creation, topological) order.
//
// Register counts (registers.cc), S = number of stages (1 + max OpNode::stage):
//   count = 1, except when N > 1 and S > 1 for a piece-rate, non-persistent register whose
//   producer works for stage s and which either (a) is read by a task of another stage s' or
//   (b) stays alive across another stage's op (an op of a stage != s lies strictly between
//   its producer's op and its last consumer's op in program order, e.g. an activation kept
//   for the backward of stage s): then count = min(N, S - min(s, s')) (case (b): s' = s), the
//   number of micro-batches stage min(s, s') has in flight under 1F1B. Boxing, REPEAT and
//   ACCUMULATE tasks work for the stage of the value they convert (a source: its first
//   consumer's stage). Step-rate registers, holders and updates always have count 1.
//
// Memory (registers.cc): per (rank, device), the k-th device of the rank (cpu first) gets
// block 2k (persistent), holding the variable holders' registers back to back, and block
// 2k + 1 (reusable), holding every other register on that device (a CPU-only rank: blocks 0
// and 1). A register is on its producer's device, a COPY's output on CopyParams.to. A
// register with count 1, piece-rate, not an update, whose producer and consumers are all on
// the compute stream of one device of this rank gets its offset from the memory planner over its lifetime [producer
// position, last consumer position] in the rank's linearized schedule (its tasks in id
// order); with compute_streams 2, one whose tasks are on stream 0 or 4 of one device and run
// once per piece, over [acquire(producer), max release] of stream_lifetimes.h; every other
// register is live the whole step and is laid out back to back after the planned region. buffer_bytes = slot bytes rounded up to `alignment`.
// On a pipeline stage that keeps more than one piece in flight (N > 1, S > 1, min(N, S - s,
// max_register_count) > 1 for the rank's stage, a loss), the planned registers of the forward
// (tasks emitted for ops up to the loss) and of the backward are planned as two regions, one
// after the other, and one used in both phases is live the whole step (registers.h,
// PhaseSplit): a shared byte would make piece k + 1's forward wait for piece k's backward.
//
// Worked example: x[4,3] input S(0) and w[3,2] variable B on cpu:[0,1], y = matmul(x, w) with
// signature (S(0), B) -> S(0), output(y), N = 1: on each rank r, tasks x.source, w.source,
// y (COMPUTE, shards x [4,3]@[2r,0], w [3,2]@[0,0], y [4,2]@[2r,0]), y.sink; registers x
// (f32[2,3]), w (f32[3,2], persistent), y (f32[2,2]). With pin `y = relu(x) in_sbp=[[B]]`
// instead, rank 0 gets a TRANSFER of rank 1's x register (mirror with remote {rank: 1}) and a
// BOXING_CONCAT of its own shard and the transferred one before the relu.
//
// One rank (LowerOptions::only_rank): the same decisions, the same ids (each emission reserves
// as many task and register ids as the whole plan gives it, computed from the op's placement or
// the boxing plan without building the other ranks' tasks), only that rank's tasks and registers
// built; the far ends it must agree on are derived, not built: the mirror of a register it
// receives (producer, slots, name, and its count from the stages and positions of the ops that
// read it on its own rank), the receiving task of a register it sends.
//
// Deterministic: the same graph and options give a byte-identical PlanProto. Cost: linear in
// ops x devices plus the boxing plans' sizes; BoxingPlans are memoized per distinct request, so
// the repeated layers of a deep model are planned once (a 24-layer GPT on 512 ranks, 1.5M
// tasks, lowers in ~8 s optimized). One rank: linear in its own tasks plus the distinct boxing
// plans' sizes. Thread-compatible (no shared state).
#ifndef ONEFLOW_LIKE_COMPILER_LOWER_LOWER_H_
#define ONEFLOW_LIKE_COMPILER_LOWER_LOWER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_like/compiler/boxing/boxing.h"
#include "oneflow_like/compiler/graph.h"
#include "oneflow_like/core/proto/plan.pb.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace compiler {

enum class BoxingStyle : int32_t {
  kPointToPoint = 0,  // PointToPointExpander: transfers + local slice/add/concat (CPU, TCP)
  kCollective,        // CollectiveExpander: COLLECTIVE tasks where possible (GPU, NCCL-style)
  // Per transition the cheaper of the two by the cost model (BoxingCost of each plan); each
  // choice is recorded in PlanProto.boxing_choices with both prices.
  kAuto,
};

struct LowerOptions {
  BoxingStyle boxing = BoxingStyle::kPointToPoint;  // default: CPU point-to-point
  BoxingOptions boxing_options;                     // cost model and schedule policy
  // Number of processes; 0 = 1 + the largest rank used by any placement.
  int32_t world_size = 0;
  // Cap on the count of pipeline registers (rule in the header); 0 = no cap beyond the rule.
  int32_t max_register_count = 0;
  // Memory alignment of every buffer and slot, bytes (power of two).
  int64_t alignment = 64;
  // Gradient buckets (bucket.cc): the data-parallel gradients an optimizer reads through a
  // collective (P -> B: ALL_REDUCE, P -> S for ZeRO: REDUCE_SCATTER) are grouped, per
  // communicator group, kind and dtype, in the order backward produces them, into calls of at
  // least this many bytes (the last bucket of a group may be smaller); 0 = one call per
  // gradient. Only where the boxing of a gradient is collectives alone (BoxingStyle kCollective,
  // or kAuto where it chose them).
  int64_t bucket_bytes = int64_t{4} << 20;
  // -1: the whole plan (every rank). r >= 0: only rank r's plan (docs/plan_format.md "Per-rank
  // plans"): its RankPlanProto byte for byte as in the whole plan (same task and register ids,
  // orders, offsets, counts, mirrors of what it receives, consumers on other ranks of what it
  // sends, collectives' params and global_order), `ranks` = {r} (empty if r has no work) and
  // its `memory` entry; job_name, world_size, pieces_per_step and boxing_choices as in the whole
  // plan. Time and memory depend on r's share of the work and on the number of distinct boxing
  // plans, not on the world size (lowering.h: every emission reserves the whole plan's ids).
  int32_t only_rank = -1;
  // With only_rank r >= 0: ranks r .. r + num_ranks - 1 (LowerRankRange; LowerToPlan needs 1).
  int32_t num_ranks = 1;
  // Lifetime-based byte sharing in the reusable block. It assumes each stream runs its tasks
  // strictly in order_in_stream, piece after piece (docs/plan_format.md); false = every
  // register gets its own bytes (for a runtime that fires ready actors in any order).
  bool reuse_memory = true;
  // Compute streams per device. 2: the ops whose outputs only optimizers read (the weight and
  // bias gradients) run on a second compute stream (4, registers.h) beside the rest of
  // backward, so a layer's weight- and input-gradient GEMMs can run at once on two cores; the
  // registers such a task reads or writes get a lifetime on stream 0's axis through what
  // happens before what (stream_lifetimes.h), else they are live the whole step.
  int32_t compute_streams = 1;
};

// The plan of `graph`. REQUIRES of `graph` (else Internal naming the op / tensor): inferred
// (desc and placement on every tensor and op), SBP-annotated (TensorNode::nd_sbp on every
// tensor, OpNode::nd_sbp_signature on every op, valid for the shapes and placements), every
// op output's nd_sbp equal to its signature's output. Errors of the boxing planner pass through.
absl::StatusOr<PlanProto> LowerToPlan(const Graph& graph, const LowerOptions& options = {});

// 1 + the largest rank of any source tensor's or op's placement: the world a lowering takes when
// LowerOptions::world_size is 0 (every such rank gets tasks). REQUIRES: `graph` inferred.
int32_t PlacementWorldSize(const Graph& graph);

// The per-rank plans of ranks options.only_rank .. only_rank + num_ranks - 1 from one lowering,
// each as LowerToPlan with only_rank = that rank gives it, byte for byte (a rank without work:
// no rank plan). What `olplan verify` lowers a chunk of a large world at a time with: one rank's
// global work (the boxing shapes of the plans it takes no part in) is done once per range, and
// the plans a range takes part in are built whole (the range's steps kept). InvalidArgument for
// only_rank < 0, num_ranks < 1 or a range past the world.
absl::StatusOr<std::vector<PlanProto>> LowerRankRange(const Graph& graph, const LowerOptions& options);

// (PiecesPerStep, the pieces of one step, is declared in graph.h.)

// The Philox seed a variable's initializer gets when the job leaves it 0: FNV-1a-64 over
// "<job seed>:<tensor name>" (never 0). A non-zero seed is kept.
uint64_t DeriveInitializerSeed(uint64_t job_seed, const std::string& tensor_name, uint64_t given_seed);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_LOWER_LOWER_H_
