// BoxingPlan: the per-rank steps that convert a global tensor from one layout (placement +
// NdSbp) to another, expressed in shard geometry (boxes in logical coordinates).
//
// The plan is a small dataflow program in SSA form. Every *value* is one buffer on one device
// covering a box (`Region`) of the logical tensor; values [0, num_source_values) are the
// source shards in parallel-id order. Every *step* runs on one rank, reads values and defines
// new ones, and appears after the steps that define its inputs:
//
//   kSlice      out = in restricted to out.region                  (local copy)
//   kTransfer   out (on `rank`) = in (on `peer`): a Send on peer matched with a Recv on rank.
//               The plan emitter turns it into a TRANSFER task on the receiving rank. Both
//               values are on devices of one type (peer != rank).
//   kCopy       out = in, between two devices of `rank` (host <-> device: cpu <-> cuda); the
//               plan emitter turns it into a COPY task. A move between device types across
//               ranks goes through host memory: copy to the host on the sender (if it is not
//               the host), transfer host -> host, copy to the device on the receiver.
//   kAdd        out = element-wise sum of inputs (all with out.region) (P -> B, P -> S)
//   kConcat     out = zeros, then each input written at its region (S -> B). Inputs need not
//               cover out.region: uncovered elements are zero (e.g. S -> P embeds a shard).
//   kZeros      out = zeros (destination shards that hold no part of a partial sum)
//   kCollective one collective call over `group` (CollectiveExpander only): input k and output
//               k belong to group[k]; outputs are the values output, output + 1, ...
//
// Worked example, float32[8] from cpu:[0,1] S(0) to B, direct schedule:
//   values 0 (r0 [0:4]), 1 (r1 [4:8]) are the sources;
//   step 0: kTransfer r1 <- r0, in 0, out 2 (r1 [0:4])   step 1: kTransfer r0 <- r1, in 1, out 3
//   step 2: kConcat r0 (0, 3) -> 4 (r0 [0:8])            step 3: kConcat r1 (2, 1) -> 5
//   dst_values = {4, 5}.
// dst_values may name a source value (no work needed for that shard, e.g. identity).
//
// Plans are immutable values once built; building is deterministic (same request, same plan).
#ifndef ONEFLOW_LIKE_COMPILER_BOXING_BOXING_PLAN_H_
#define ONEFLOW_LIKE_COMPILER_BOXING_BOXING_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "oneflow_like/core/ids.h"
#include "oneflow_like/core/sbp.h"
#include "oneflow_like/core/shape.h"

namespace oneflow_like {
namespace compiler {

using Coords = absl::InlinedVector<int64_t, 4>;
// Value ids of a step's inputs (most steps have one or two).
using ValueIds = absl::InlinedVector<int32_t, 2>;

// A box [begin, end) per axis of the logical tensor.
struct Region {
  Coords begin;
  Coords end;

  static Region Whole(const Shape& shape);
  static Region OfShard(const ShardSlice& slice);
  int num_axes() const { return static_cast<int>(begin.size()); }
  int64_t dim(int axis) const { return end[axis] - begin[axis]; }
  int64_t elem_count() const;
  bool empty() const { return elem_count() == 0; }
  Shape shape() const;
  std::vector<int64_t> offset() const { return std::vector<int64_t>(begin.begin(), begin.end()); }
  bool Contains(const Region& inner) const;
  std::string ToString() const;  // "[0:4,0:5]"

  friend bool operator==(const Region& a, const Region& b) { return a.begin == b.begin && a.end == b.end; }
  friend bool operator!=(const Region& a, const Region& b) { return !(a == b); }
  template <typename H>
  friend H AbslHashValue(H h, const Region& r) { return H::combine(std::move(h), r.begin, r.end); }
};
// The intersection of two boxes of the same rank (possibly empty).
Region Intersect(const Region& a, const Region& b);
// `inner` in the coordinates of `outer`'s buffer (what a slice/concat task needs).
// REQUIRES: outer.Contains(inner).
Region RelativeTo(const Region& inner, const Region& outer);

// One device of one rank.
struct DeviceRef {
  Rank rank;
  DeviceType type = DeviceType::kCpu;
  friend bool operator==(const DeviceRef& a, const DeviceRef& b) { return a.rank == b.rank && a.type == b.type; }
  friend bool operator!=(const DeviceRef& a, const DeviceRef& b) { return !(a == b); }
};

// What a boxing does, by the SBP transition (1-D names; see ClassifyBoxing in boxing.h).
enum class BoxingKind : int32_t {
  kIdentity = 0,
  kAllGather,           // S -> B
  kAllReduce,           // P -> B
  kReduceScatter,       // P -> S
  kAllToAll,            // S(i) -> S(j)
  kLocalSlice,          // B -> S
  kBroadcastToPartial,  // B -> P: one holder keeps the value, the others hold zeros
  kSplitToPartial,      // S -> P: each shard embedded in zeros
  kCrossPlacement,      // different placements (pipeline stage boundary, other rank count)
  kNd,                  // same n-D placement (n >= 2), at least one mesh axis changes
};
// "identity", "all_gather", "all_reduce", "reduce_scatter", "all_to_all", "local_slice",
// "broadcast_to_partial", "split_to_partial", "cross_placement", "nd".
std::string BoxingKindName(BoxingKind kind);

// How the steps were scheduled.
enum class BoxingSchedule : int32_t {
  kNone = 0,    // no steps (identity)
  kDirect,      // every destination block fetched straight from a holder
  kRing,        // ring reduce-scatter / all-gather within groups of one mesh axis, chunked
  kStaged,      // n-D: one mesh axis at a time, each stage direct or ring
  kCollective,  // collective steps (CollectiveExpander)
};
std::string BoxingScheduleName(BoxingSchedule schedule);  // "none", "direct", ...

enum class StepKind : int32_t { kSlice = 0, kTransfer, kAdd, kConcat, kZeros, kCollective, kCopy };
std::string StepKindName(StepKind kind);  // "slice", "transfer", ...

// Mirrors CollectiveParams.Kind in plan.proto (same numbers).
enum class CollectiveKind : int32_t { kAllReduce = 0, kAllGather = 1, kReduceScatter = 2, kAllToAll = 3 };
std::string CollectiveKindName(CollectiveKind kind);

struct BoxingValue {
  DeviceRef device;
  Region region;
};

struct BoxingStep {
  StepKind kind = StepKind::kSlice;
  Rank rank;                     // where it runs; kTransfer: the receiver; kCollective: unset;
                                 // kCopy: the rank of both devices
  Rank peer;                     // kTransfer: the sender
  ValueIds inputs;               // value ids
  int32_t output = -1;           // value id (kCollective: the first of group.size())
  int64_t bytes = 0;             // bytes of the output (kTransfer: bytes on the wire)
  CollectiveKind collective = CollectiveKind::kAllReduce;  // kCollective only
  std::vector<Rank> group;                                 // kCollective only
};

struct BoxingPlan {
  TensorDesc desc;  // logical
  Placement src_placement;
  NdSbp src_sbp;
  Placement dst_placement;
  NdSbp dst_sbp;

  BoxingKind kind = BoxingKind::kIdentity;
  // Same placement: the 1-D kind of every mesh axis (kIdentity where it does not change).
  // Different placements: empty.
  std::vector<BoxingKind> axis_kinds;
  BoxingSchedule schedule = BoxingSchedule::kNone;
  std::string schedule_detail;  // e.g. "ring", "staged[axis 1: ring, axis 0: direct]"

  std::vector<BoxingValue> values;  // [0, num_source_values): source shards
  std::vector<BoxingStep> steps;    // in dependency order
  std::vector<int32_t> dst_values;  // destination shard of each dst device (parallel-id order)

  int32_t num_source_values() const { return static_cast<int32_t>(src_placement.num_devices()); }
  // Indices of the steps that run on `rank` or send from it (kTransfer with peer == rank), and
  // of collectives whose group contains it; in plan order.
  std::vector<int32_t> StepsOfRank(Rank rank) const;
  // Number of steps of `kind` running on `rank` (kTransfer: received by `rank`); all ranks if
  // `rank` is unset.
  int64_t CountSteps(StepKind kind, Rank rank = Rank()) const;
  // One line per step, e.g. "3: transfer r1 <- r0 v0 -> v2 [0:4,0:5] 80B",
  // "4: copy r1 cpu -> cuda v2 -> v3 [0:4,0:5] 80B".
  std::string ToString() const;
};

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_BOXING_BOXING_PLAN_H_
