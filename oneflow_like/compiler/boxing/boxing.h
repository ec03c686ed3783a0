// The boxing planner: the communication that converts a global tensor from the layout its
// producer delivers (placement + NdSbp) to the one its consumer needs.
//
//   BoxingRequest   a logical TensorDesc, a source (placement, NdSbp), a destination.
//   ClassifyBoxing  names the transition (BoxingKind): on one 1-D placement
//                   S->B all_gather, P->B all_reduce, P->S reduce_scatter, S(i)->S(j)
//                   all_to_all, B->S local_slice, B->P broadcast_to_partial, S->P
//                   split_to_partial; on one n-D placement kNd (with the 1-D kind per mesh
//                   axis in axis_kinds); between placements kCrossPlacement.
//   BoxingExpander  turns a request into a BoxingPlan (boxing_plan.h). Two implementations:
//     PointToPointExpander  (CPU/TCP) transfers plus local slice/add/concat/zeros. It compares
//                   schedules with the cost model and keeps the cheapest:
//                     direct  every destination block straight from a holder (any request);
//                     ring    one mesh axis P->B / P->S / S->B, per group of that axis, as a
//                             chunked ring reduce-scatter and/or all-gather: P->B moves
//                             2(m-1)/m of the tensor per rank instead of (m-1) tensors, at the
//                             price of 2(m-1) messages, so it wins for large tensors only;
//                     staged  n-D, same placement: one mesh axis at a time through valid
//                             intermediate layouts (e.g. (P,P)->(B,P)->(B,B): two group
//                             all-reduces instead of every rank receiving n-1 tensors), each
//                             stage direct or ring; every axis order is tried.
//     CollectiveExpander    (GPU/NCCL) one collective step per group for each mesh axis that
//                   changes by a collective transition, local steps for B->S, B->P, S->P; falls
//                   back to PointToPointExpander when that cannot express the request
//                   (different placements, nested splits).
//   EstimateBoxing  what PointToPointExpander would choose and its cost, without materializing
//                   the steps (for SBP selection); BoxingCostCache memoizes it.
//
// Every request is validated: a bad dtype, shape or an NdSbp that cannot lay out the shape on
// its placement is InvalidArgument naming the request. Plans are deterministic: the same
// request and options always give the identical step list.
//
// Worked example: float32[7,5] on cpu:[0,1,2,3] from (P) to (B), with the default CostConfig,
// is kAllReduce with the direct schedule (each rank receives 3 partial tensors and adds them);
// float32[1024,1024] gets the ring schedule (6 messages of ~1 MB per rank, 3 adds, 1 concat).
//
// Thread-safety: expanders and free functions are const and thread-safe; a BoxingCostCache is
// owned by one caller.
#ifndef ONEFLOW_LIKE_COMPILER_BOXING_BOXING_H_
#define ONEFLOW_LIKE_COMPILER_BOXING_BOXING_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "oneflow_like/compiler/boxing/boxing_cost.h"
#include "oneflow_like/compiler/boxing/boxing_plan.h"
#include "oneflow_like/compiler/boxing/cost_model.h"
#include "oneflow_like/core/sbp.h"
#include "oneflow_like/core/shape.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace compiler {

struct BoxingRequest {
  TensorDesc desc;  // logical dtype and shape
  Placement src_placement;
  NdSbp src_sbp;
  Placement dst_placement;
  NdSbp dst_sbp;
  // Names the edge in error messages, e.g. "fc1.matmul:out -> fc2.matmul:in0". Optional.
  std::string name;

  // "float32[7,5] cpu:[0,1] (S(0)) -> cpu:[2,3,4] (S(1))".
  std::string ToString() const;
};

// OK, or InvalidArgument naming the request and the offending dtype / shape / SBP / placement.
absl::Status ValidateBoxingRequest(const BoxingRequest& request);

// The kind of the transition; `axis_kinds` (optional) receives the per-mesh-axis kinds on one
// placement (empty between placements). REQUIRES: ValidateBoxingRequest passed.
BoxingKind ClassifyBoxing(const BoxingRequest& request, std::vector<BoxingKind>* axis_kinds = nullptr);

enum class SchedulePolicy : int32_t {
  kAuto = 0,  // cheapest of direct, ring (where it applies), staged (n-D); ties keep the first
  kDirect,    // always direct
  kRing,      // ring; InvalidArgument if it does not apply (exactly one mesh axis P->B/P->S/S->B)
  kStaged,    // staged; InvalidArgument unless >= 2 mesh axes of one placement change
};

struct BoxingOptions {
  CostConfig cost;                               // link and compute parameters
  SchedulePolicy policy = SchedulePolicy::kAuto;
};

// What a lowering of one rank needs of a plan that rank takes no part in (lower/plan_cache.cc):
// the counts and the destination values, without the steps, so a 10^6-step plan of other ranks
// costs no memory. Equal to the counts of the plan Expand builds for the same request.
struct BoxingShape {
  int32_t num_source_values = 0;
  int32_t num_values = 0;       // sources included
  int64_t num_tasks = 0;        // one per step; a collective step one per member
  int64_t num_collectives = 0;  // collective steps
  std::vector<int32_t> dst_values;
  std::optional<BoxingPlan> plan;  // the whole plan, where the expander built it anyway

  static BoxingShape Of(BoxingPlan plan);
};

// One rank's part of a plan (lower/plan_cache.cc, per-rank compiles): `plan` holds the source
// values, every destination value, the steps `me` runs or sends from with the values they read and
// define, and the steps defining those; values renumbered in order (original_value: their ids in
// the whole plan; steps point-to-point, one value each). `reduced` false: `plan` is the whole plan.
struct BoxingPart {
  BoxingPlan plan;
  bool reduced = false;
  std::vector<int32_t> original_value;  // reduced: by value
  int64_t num_steps = 0;                // reduced: the whole plan's
};

class BoxingExpander {
 public:
  virtual ~BoxingExpander() = default;
  virtual std::string name() const = 0;
  // The plan for `request`; InvalidArgument for a bad request.
  virtual absl::StatusOr<BoxingPlan> Expand(const BoxingRequest& request) const = 0;
  // The shape of Expand(request)'s plan; by default built from the plan itself.
  virtual absl::StatusOr<BoxingShape> Shape(const BoxingRequest& request) const;
  // `me`'s part of Expand(request)'s plan; by default the whole plan (reduced false).
  virtual absl::StatusOr<BoxingPart> ExpandPart(const BoxingRequest& request, Rank me) const;
};

class PointToPointExpander final : public BoxingExpander {
 public:
  explicit PointToPointExpander(BoxingOptions options = {}) : options_(std::move(options)) {}
  std::string name() const override { return "point_to_point"; }
  absl::StatusOr<BoxingPlan> Expand(const BoxingRequest& request) const override;
  // Counts the steps as they are emitted, keeping none.
  absl::StatusOr<BoxingShape> Shape(const BoxingRequest& request) const override;
  // Two emissions: the first finds me's steps, the second keeps only what the part needs.
  absl::StatusOr<BoxingPart> ExpandPart(const BoxingRequest& request, Rank me) const override;

 private:
  BoxingOptions options_;
};

class CollectiveExpander final : public BoxingExpander {
 public:
  // `options` configure the point-to-point fallback.
  explicit CollectiveExpander(BoxingOptions options = {}) : options_(std::move(options)) {}
  std::string name() const override { return "collective"; }
  absl::StatusOr<BoxingPlan> Expand(const BoxingRequest& request) const override;
  // Between placements the point-to-point fallback's shape / part (no collective there).
  absl::StatusOr<BoxingShape> Shape(const BoxingRequest& request) const override;
  absl::StatusOr<BoxingPart> ExpandPart(const BoxingRequest& request, Rank me) const override;

 private:
  BoxingOptions options_;
};

struct BoxingEstimate {
  BoxingKind kind = BoxingKind::kIdentity;
  BoxingSchedule schedule = BoxingSchedule::kNone;
  std::string schedule_detail;
  BoxingCostSummary cost;  // equals BoxingCost(PointToPointExpander(options).Expand(r), options.cost)
};

// What PointToPointExpander(options) would build for `request`, and its cost.
absl::StatusOr<BoxingEstimate> EstimateBoxing(const BoxingRequest& request, const BoxingOptions& options = {});

// Memoizes EstimateBoxing by request (name excluded), for SBP selection where the same
// transition is priced many times. Not thread-safe.
class BoxingCostCache {
 public:
  explicit BoxingCostCache(BoxingOptions options = {}) : options_(std::move(options)) {}
  absl::StatusOr<BoxingEstimate> Estimate(const BoxingRequest& request);
  size_t size() const { return cache_.size(); }
  const BoxingOptions& options() const { return options_; }

 private:
  BoxingOptions options_;
  absl::flat_hash_map<std::string, BoxingEstimate> cache_;
};

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_BOXING_BOXING_H_
