// Internal to the plan verifier (check 8, plan_verifier_memory.cc): what happens before what
// among one rank's tasks, for registers of different streams that share bytes.
//
// Two registers A and B may share bytes when, in every execution the actors allow, every use
// of one ends before the other is written. The verifier proves it from the plan alone: the
// events are the firings of the rank's tasks that run once per piece (by the simulation: a
// task that emits and reads every piece, an ACCUMULATE reading every piece, a REPEAT emitting
// every piece), the k-th firing of each in piece k; the edges are
// each stream's static order (order_in_stream, those tasks only; the last of a piece before
// the first of the next) and producer -> consumer of every register the consumer reads in the
// piece it is written (not a variable holder's back edge). A happens before B's producer in
// the same piece, and B's uses before A's producer in the next piece, or the other way round:
// positions in different streams' orders prove nothing on their own.
//
// A vector clock per task (the latest task of each of the rank's streams that happens before
// it or is it) answers both questions: `a` before `b` within a piece iff clock(b)[stream(a)]
// >= place(a) and a != b; `a` in piece k before `b` in piece k + 1 iff some stream s has
// clock(last task of s)[stream(a)] >= place(a) and clock(b)[s] >= 0 (b is after s's first).
//
// Example: stream 0 runs x, dx, opt and stream 4 runs dw, with x -> dw -> opt. dw happens
// before opt, not before dx; opt in a piece before dw in the next (through stream 0's order
// into the next piece, then x -> dw).
#ifndef ONEFLOW_LIKE_COMPILER_PLAN_PLAN_MEMORY_ORDER_H_
#define ONEFLOW_LIKE_COMPILER_PLAN_PLAN_MEMORY_ORDER_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "oneflow_like/compiler/plan/plan_index.h"
#include "oneflow_like/compiler/plan/plan_simulator.h"

namespace oneflow_like {
namespace compiler {

class PieceOrder {
 public:
  // REQUIRES: `simulation` of `index` over `steps` steps; `rank_plan` one of its rank plans.
  PieceOrder(const PlanIndex& index, const PlanSimulation& simulation, int64_t steps,
             const RankPlanProto& rank_plan);

  // Whether `task` (of this rank) takes part: runs once per piece, and no cycle holds it.
  bool Known(const TaskProto& task) const { return Local(task) >= 0; }
  // `a` in a piece happens before `b` in the same piece. False if either is not Known.
  bool Before(const TaskProto& a, const TaskProto& b) const;
  // `a` in a piece happens before `b` in the next piece. False if either is not Known.
  bool BeforeNext(const TaskProto& a, const TaskProto& b) const;

 private:
  int64_t Local(const TaskProto& task) const;  // -1: not Known
  int64_t Clock(int64_t local, int64_t stream) const { return clocks_[local * num_streams_ + stream]; }

  absl::flat_hash_map<int64_t, int64_t> local_;  // task id -> index among the Known tasks
  std::vector<int64_t> stream_;                  // by local index: the task's stream
  std::vector<int64_t> place_;                   // by local index: its place in the stream
  std::vector<int64_t> last_;                    // by stream: the local index of its last task
  std::vector<int64_t> clocks_;                  // local index x stream, -1: none
  int64_t num_streams_ = 0;
};

// One register in a reusable block as check 8 sees it.
struct SharedBytes {
  const RegisterProto* reg = nullptr;
  int64_t begin = 0;  // bytes [begin, end) of the block
  int64_t end = 0;
  // Registers of one class are checked elsewhere (one stream's lifetimes); a pair of different
  // classes must be ordered by happens-before.
  int64_t cls = 0;
  bool orderable = false;  // false: shares bytes with nothing of another class
  int64_t tag = 0;         // the caller's, for `unorderable`
};

// The error for two registers sharing bytes, one of which is not orderable.
using UnorderableError = std::function<absl::Status(const SharedBytes& a, const SharedBytes& b)>;

// Every pair of `shared` (registers of `block` on `rank`) that shares a byte and is of
// different classes: both orderable, all their tasks Known, and A's producer and consumers
// happen before B's producer within a piece and B's before A's producer in the next piece, or
// the other way round. Else InternalError naming both registers and the unordered tasks.
absl::Status CheckOrderedSharing(const PieceOrder& order, const PlanIndex& index, int32_t rank, int64_t block,
                                 std::vector<SharedBytes> shared, const UnorderableError& unorderable);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_PLAN_PLAN_MEMORY_ORDER_H_
