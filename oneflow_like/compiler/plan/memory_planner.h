// The memory planner: assigns byte offsets inside one memory block to buffers with known
// lifetimes, so that buffers that are never alive at the same time can share bytes.
//
// Input: one BufferRequest per buffer, with its size and its lifetime [first_use, last_use]
// (inclusive) in positions of the rank's static schedule. Output: an offset per buffer, the
// block size, and the size the block would have without any reuse.
//
// Guarantees (what the plan verifier and the runtime rely on):
//   - every offset is a multiple of `alignment`; every buffer occupies
//     [offset, offset + RoundUp(bytes, alignment)) and that range lies inside [0, block_bytes);
//   - two buffers whose lifetimes intersect (share at least one position) never share a byte;
//     buffers with disjoint lifetimes may;
//   - a zero-byte buffer gets offset 0 and occupies nothing;
//   - naive_bytes = sum of RoundUp(bytes, alignment) (the block without reuse), and
//     block_bytes <= naive_bytes;
//   - the result depends only on the requests (deterministic).
//
// Heuristic ("greedy by size", as in TFLite's arena planner): buffers are placed in order of
// decreasing size (ties: earlier first_use, then lower index); each goes to the lowest aligned
// offset that does not collide with an already placed buffer whose lifetime intersects its own.
// The placed lifetimes live in a segment tree over the compressed time axis, so finding the k
// placed buffers that are alive together with a new one costs O(log n + k log n) and the whole
// assignment O(n log n + sum of k log k). The block is never smaller than the peak sum of the
// aligned sizes of simultaneously live buffers (a lower bound no assignment can beat); on
// typical schedules greedy-by-size lands within a few percent of it.
//
// Worked example (alignment 64):
//   requests  a {bytes 100, [0, 1]}  b {bytes 64, [1, 2]}  c {bytes 128, [2, 3]}
//   aligned sizes 128, 64, 128; order of placement: a (128, t0), c (128, t2), b.
//   a -> 0. c: lifetime [2,3] misses a's [0,1] -> 0. b: alive with a and c -> first gap at 128.
//   offsets {0, 128, 0}, block_bytes 192, naive_bytes 320.
//
// Thread-safety: a pure function.
#ifndef ONEFLOW_LIKE_COMPILER_PLAN_MEMORY_PLANNER_H_
#define ONEFLOW_LIKE_COMPILER_PLAN_MEMORY_PLANNER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace oneflow_like {
namespace compiler {

// One buffer to place. Lifetime = the inclusive interval [first_use, last_use] of static
// schedule positions during which its bytes must not be touched by anybody else.
struct BufferRequest {
  int64_t bytes = 0;      // >= 0
  int64_t first_use = 0;  // any integers with first_use <= last_use (negative is fine)
  int64_t last_use = 0;
};

struct MemoryAssignment {
  std::vector<int64_t> offsets;  // one per request, same order
  int64_t block_bytes = 0;       // max over buffers of offset + aligned size (0 if none)
  int64_t naive_bytes = 0;       // sum of aligned sizes (no reuse)
};

// Places `requests` into one block (see the contract above).
// Errors: InvalidArgument for a negative size, last_use < first_use (names the buffer index),
// alignment < 1, or sizes whose aligned sum overflows int64.
absl::StatusOr<MemoryAssignment> AssignOffsets(const std::vector<BufferRequest>& requests,
                                               int64_t alignment = 64);

// The peak, over time, of the sum of aligned sizes of the buffers alive at that time: a lower
// bound for AssignOffsets(...).block_bytes. REQUIRES: requests valid as for AssignOffsets.
int64_t PeakLiveBytes(const std::vector<BufferRequest>& requests, int64_t alignment = 64);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_PLAN_MEMORY_PLANNER_H_
