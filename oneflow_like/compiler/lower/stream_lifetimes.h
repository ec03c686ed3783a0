// Internal to //oneflow_like/compiler/lower: lifetimes of registers touched by the second
// compute stream (LowerOptions::compute_streams = 2), on the axis of the first one.
//
// The memory planner places intervals of one axis, the rank's linearized schedule (its tasks
// in id order). A register whose producer and consumers are all on compute stream 0 lives
// [producer, last consumer] on it: stream 0 runs its tasks in that order, piece after piece.
// A task on stream 4 has no place on that axis, so it gets two, both positions of stream-0
// tasks of its device, derived from what happens before what within one piece (the edges are
// each stream's static order and producer -> consumer of every piece-rate register of the
// device; a vector clock per task holds the latest task of each stream that happens before
// it or is it):
//   acquire(T): the last stream-0 task that happens before T (T starts after it ends);
//   release(T): the first stream-0 task that T happens before (T has ended when it starts).
// For a stream-0 task both are its own position. A register touched by stream 4 then lives
// [acquire(producer), max over producer and consumers of release]. If two registers' intervals
// are disjoint, R1's before R2's, then every user of R1 happens before R2's producer in the
// same piece (user -> release(user) -> stream 0's order -> acquire(producer) -> producer), and
// every user of R2 before R1's producer in the next piece (through the end of stream 0's piece
// and the start of the next): the two can share bytes in every execution the actors allow,
// however far stream 4 lags. A register one of whose tasks has no acquire / release (no
// stream-0 task before / after it), or runs other than once per piece, gets none and stays
// live the whole step. An ACCUMULATE (micro-batches: a weight gradient summed over the pieces)
// runs once per piece too: it is the stream-0 task a gradient's stream-4 producer happens
// before.
//
// Worked example: positions x 0, y 1 (reads x), dy 2, dw 3 (stream 4: reads x and dy), dx 4
// (reads dy), opt 5 (reads dw); the rest on stream 0. acquire(dw) = 2 (dy -> dw), release(dw)
// = 5 (dw -> opt). Register x lives [0, 5], dy [2, 5], dw's output [2, 5], y's output [1, ...]
// (stream 0 alone, as always). With one stream x lives [0, 3] and dx's output [4, ...] may take
// its bytes; with two it may not: nothing tells stream 0 at dx that dw has read x.
#ifndef ONEFLOW_LIKE_COMPILER_LOWER_STREAM_LIFETIMES_H_
#define ONEFLOW_LIKE_COMPILER_LOWER_STREAM_LIFETIMES_H_

#include <cstdint>
#include <vector>

#include "oneflow_like/compiler/lower/plan_builder.h"

namespace oneflow_like {
namespace compiler {
namespace lower_internal {

struct StreamLifetimes {
  static constexpr int64_t kNone = -1;
  // Per task index in PlanBuilder::tasks(): positions in `position` (below), kNone when there
  // is none or the task is outside the model (not on stream 0 / 4, or not once per piece).
  std::vector<int64_t> acquire;
  std::vector<int64_t> release;
};

// REQUIRES: streams assigned (AssignStreams); `position[i]` the position of task i in its
// rank's linearized schedule (ascending with the task index within a rank).
StreamLifetimes ComputeStreamLifetimes(const PlanBuilder& builder, const std::vector<int64_t>& position);

}  // namespace lower_internal
}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_LOWER_STREAM_LIFETIMES_H_
