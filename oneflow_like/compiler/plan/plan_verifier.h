// The plan verifier: checks the invariants docs/plan_format.md promises the runtime, on a
// finished PlanProto. It runs after lowering in the compiler driver and in every lowering
// test. A failure is a compiler bug, so it is absl::InternalError with a message that names
// the rank, task and register involved and what is wrong.
//
// Checks, in this order except that 3 runs before 2 (the first failure is returned):
//   1. Shape of the plan: ranks ascending and inside world_size, one rank plan per rank,
//      pieces_per_step >= 1; task ids unique in the plan; register ids unique per rank, and the
//      producing (non-mirror) entry of each id on exactly one rank.
//   2. Registers: count >= 1; producer and consumer lists agree with the tasks' produced and
//      consumed lists (both directions); a consumer on another rank pulls through a mirror on
//      its rank; every mirror names a producing rank that really has the register with the same
//      producer and the same slots (dtype and dims), and only TRANSFER tasks consume mirrors; a
//      register with slots has a memory location.
//   3. Tasks: consumed ids exist on the task's rank (local or mirror) and produced ids are local
//      registers it produces; slot refs in range; per-type params: TRANSFER consumes exactly one
//      mirror whose producer is on TransferParams.peer_rank; ACCUMULATE / REPEAT count >= 1;
//      peer_rank is not the task's own rank (a move within a rank is a COPY); COLLECTIVE's rank
//      is in its group; SINK produces nothing; only a variable holder (a SOURCE whose
//      io.tensor_name has a VARIABLE binding on its rank) consumes registers. COPY has
//      CopyParams naming two different devices, runs on one of them on a STREAM_COPY stream,
//      reads registers of its own rank (never a mirror) in blocks of `from` and writes
//      registers in blocks of `to`, each input shaped like its output.
//      Bindings name local registers and valid slots.
//   4. Memory: blocks unique per rank; every location inside its block, offset and buffer_bytes
//      multiples of options.alignment, slots inside a buffer; registers in a persistent block
//      never share bytes; PlanProto.memory (when present) matches the blocks and registers,
//      per device too where it lists devices. On a rank with blocks on several devices, each
//      register is in a block of the device its producer writes (a COPY: CopyParams.to) and
//      each payload input is on its task's device (plan_verifier_devices.cc).
//   5. Streams: order_in_stream is a permutation of 0..n-1 per (rank, device, stream); a
//      producer runs before its consumers on the same stream (except the update back edge
//      into a variable holder).
//   6. Collectives: for every communicator group (CollectiveParams.ranks), global_order strictly
//      increases along each stream, and every member rank issues the same sequence of
//      (global_order, kind); the first mismatch is reported.
//      Then their geometry (CollectiveParams.logical_dims, group_region, input_regions,
//      output_regions): one region per member on each side, boxes inside the group region
//      inside the tensor, each member's input / output slot shaped like its regions; the
//      regions fit the kind (ALL_REDUCE: all whole; ALL_GATHER: inputs tile the group region,
//      outputs whole; REDUCE_SCATTER: the reverse; ALL_TO_ALL: both tile); and every member
//      task of one collective (same global_order) carries the same kind, ranks, regions and
//      issue_phase.
//      A bucket (CollectiveParams.parts) is an ALL_REDUCE or REDUCE_SCATTER with one input per
//      part and slots 0..K-1 of one register as outputs (+ slot K, the 1-D staging slot of a
//      REDUCE_SCATTER, sized the sum of the parts' group regions); each part's geometry gets
//      the checks above, all slots share one dtype, and the members agree on the parts.
//   7. Deadlock freedom (options.steps > 0): plan_simulator.h runs the abstract firing rules for
//      that many steps of pieces_per_step pieces (collectives as cross-rank rendezvous); if
//      it gets stuck, or leaves buffers unread or
//      a REPEAT / ACCUMULATE half done, the message names blocked tasks and the registers they
//      wait for (not readable: which producer; not free: which consumers hold it).
//   8. Reuse in non-persistent blocks (needs 7). A register has a lifetime when it has count 1
//      and its producer and all consumers are on one stream and fire once per piece (the
//      simulation's counts; no REPEAT holding it, no update back edge): [producer
//      order_in_stream, last consumer order_in_stream], as the stream runs its tasks in that
//      order piece after piece. Two registers of one stream may share bytes only if these are
//      disjoint; registers of different streams (or used on several streams of one device,
//      count 1, once per piece) only if a chain of register dependencies and stream orders puts
//      every use of one before the other's write, in the piece and into the next
//      (plan_memory_order.h); a register without a lifetime (count > 1, read on another rank
//      or device, step-rate, ...) must have bytes of its own. The doc's warning is caught: with
//      dy.source on a copy stream, r3 and r6 may no longer share bytes.
//
// Example: the 2-rank data-parallel matmul of docs/plan_format.md passes. Dropping rank 1's
// mirror of register 4 fails with
//   "VerifyPlan: rank 1 task 16 'dw.transfer@r1' (TRANSFER): consumed register 4 does not
//    exist on rank 1 (neither produced there nor mirrored)".
//
// Cost: O(tasks + registers + edges) for 1-6 (hash maps), O((tasks + edges) * steps *
// pieces_per_step) for 7, O(r log r) for 8 (r = registers). Thread-compatible; the plan is
// only read.
#ifndef ONEFLOW_LIKE_COMPILER_PLAN_PLAN_VERIFIER_H_
#define ONEFLOW_LIKE_COMPILER_PLAN_PLAN_VERIFIER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace compiler {

struct PlanVerifierOptions {
  // Steps to simulate for the deadlock check (each of pieces_per_step pieces). Two steps
  // exercise the variable update back edge once. 0 = skip checks 7 and 8.
  int64_t steps = 2;
  // Required alignment of MemoryLocationProto.offset and buffer_bytes. 1 = no check.
  int64_t alignment = 64;
  // Check 8 (byte sharing of registers with overlapping lifetimes in reusable blocks).
  bool check_memory_reuse = true;
  // How many blocked tasks a deadlock report names.
  int max_reported_tasks = 4;
};

// OK, or InternalError naming the first violated invariant (see above). A per-rank plan
// (PlanProto.per_rank) is refused: it lacks the other ends of its transfers and collectives.
absl::Status VerifyPlan(const PlanProto& plan, const PlanVerifierOptions& options = {});

// The checks a rank makes alone on its per-rank plan (CompileOptions::only_rank), cheap and run
// before its first step: 1; 3; 2 for what it holds (its registers' own consumers, mirrors read
// only by its TRANSFER tasks; not the producer's side of a mirror or the mirror of a register it
// sends); 4; 5; 6 along its streams (not the member ranks' sequences) and its own collective
// tasks' geometry. What needs every rank (both ends of each transfer, every member of each
// collective issuing the same sequence and params, the deadlock simulation 7 and reuse 8) runs
// on the whole plan: VerifyPlan, `olplan verify`; for a plan too large to hold, StreamedVerifier
// (streamed_verifier.h) gives VerifyPlan's verdict from the per-rank plans, one at a time.
absl::Status VerifyRankPlan(const PlanProto& plan, const PlanVerifierOptions& options = {});

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_PLAN_PLAN_VERIFIER_H_
