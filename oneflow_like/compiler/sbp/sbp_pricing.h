// Boxing prices for SBP selection: what moving a tensor from one (placement, NdSbp) to another
// costs, memoized so that a transition is priced once per compile.
//
// Two regimes, chosen per request by size:
//   exact     (source + destination devices <= exact_max_devices, default 64): what the boxing
//             planner would build, EstimateBoxing through a BoxingCostCache. Its cost grows
//             with the number of rank pairs (a 512-rank all-gather is 261,632 transfers and
//             takes seconds to estimate), so it is kept for small placements.
//   analytic  (larger placements): a closed-form alpha-beta model of the same schedules, per
//             group of one mesh axis (all groups of an axis run in parallel, so one group is
//             representative; its link class is the worst one inside the first group):
//               all_gather S->B       (m-1) (alpha + beta b/m)
//               all_to_all S(i)->S(j) (m-1) (alpha + beta b/m^2)
//               reduce_scatter P->S   (m-1) (alpha + beta b/m) + adds of m shards
//               all_reduce P->B       min(direct (m-1)(alpha + beta b) + adds of m tensors,
//                                         ring 2(m-1)(alpha + beta b/m) + adds of m-1 chunks)
//               local B->S, B->P, S->P  task overhead + memory traffic
//             with m the axis size and b the bytes one group holds (the tensor divided by the
//             splits of the other mesh axes). n-D transitions change one axis at a time; every
//             order of the changed axes (up to 3) is tried and the cheapest kept, like the
//             planner's staged schedule. Between placements each destination device receives
//             its shard (times the number of partial sources) from the source devices holding
//             it, on the link class between the two placements' first ranks.
// Example: float32[1024,1024] S(0) -> B on 4 ranks of one node (exact), and on 512 ranks
// (analytic: 511 x (30 us + (4 MB / 512) / 1.5 GB/s) for a same-node group, cross-node
// parameters here since the 512 ranks span 64 nodes).
//
// Quotes are per firing; SBP selection multiplies them by the edge's rate. Not thread-safe.
#ifndef ONEFLOW_LIKE_COMPILER_SBP_SBP_PRICING_H_
#define ONEFLOW_LIKE_COMPILER_SBP_SBP_PRICING_H_

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "oneflow_like/compiler/boxing/boxing.h"

namespace oneflow_like {
namespace compiler {

// The price of one transition, for one firing.
struct BoxingQuote {
  double seconds = 0;   // estimated time; kInfiniteSeconds (sbp_solver.h) if refused
  double bytes = 0;     // per device: the most bytes any rank sends or receives
  std::string kind;     // BoxingKindName ("identity" when nothing moves)
  std::string error;    // non-empty: why the boxing planner refused the request
  bool exact = true;    // false: from the analytic model
};

// The analytic model above for one request. REQUIRES: ValidateBoxingRequest passed.
BoxingQuote AnalyticBoxingQuote(const BoxingRequest& request, const CostConfig& config);

class BoxingPriceBook {
 public:
  BoxingPriceBook(BoxingOptions options, int64_t exact_max_devices)
      : cache_(std::move(options)), exact_max_devices_(exact_max_devices) {}

  // Interning: small ids make repeated lookups cheap.
  int DescId(const TensorDesc& desc);
  int PlacementId(const Placement& placement);
  int NdSbpId(const NdSbp& nd_sbp);
  // The quote id of a transition given by interned ids (priced on first use).
  int Quote(int desc, int src_placement, int src_sbp, int dst_placement, int dst_sbp);
  const BoxingQuote& quote(int id) const { return quotes_[id]; }
  const NdSbp& nd_sbp(int id) const { return nd_sbps_[id]; }

  int64_t num_exact() const { return num_exact_; }        // priced by EstimateBoxing
  int64_t num_analytic() const { return num_analytic_; }  // priced by the analytic model
  const BoxingOptions& options() const { return cache_.options(); }

 private:
  BoxingCostCache cache_;
  int64_t exact_max_devices_;
  int64_t num_exact_ = 0, num_analytic_ = 0;
  std::vector<TensorDesc> descs_;
  std::vector<Placement> placements_;
  std::vector<NdSbp> nd_sbps_;
  absl::flat_hash_map<std::string, int> desc_ids_;
  absl::flat_hash_map<Placement, int> placement_ids_;
  absl::flat_hash_map<NdSbp, int> nd_sbp_ids_;
  absl::flat_hash_map<std::tuple<int, int, int, int, int>, int> quote_ids_;
  std::vector<BoxingQuote> quotes_;
};

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_SBP_SBP_PRICING_H_
