#include "oneflow_like/compiler/sbp/sbp_pricing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace oneflow_like {
namespace compiler {
namespace {

template <typename T, typename Map>
int Intern(const T& value, Map* ids, std::vector<T>* values) {
  auto [it, inserted] = ids->emplace(value, static_cast<int>(values->size()));
  if (inserted) values->push_back(value);
  return it->second;
}

// The worst link class inside the first group of mesh axis `axis` of `placement`.
LinkClass GroupLink(const Placement& placement, int axis, const CostConfig& config) {
  int64_t stride = 1;
  for (int k = axis + 1; k < placement.num_hierarchy_axes(); ++k) stride *= placement.hierarchy()[k];
  LinkClass worst = LinkClass::kSameProcess;
  const std::vector<Rank>& ranks = placement.ranks();
  for (int64_t i = 1; i < placement.hierarchy()[axis]; ++i) {
    worst = std::max(worst, Classify(ranks[0], ranks[i * stride], config));
  }
  return worst;
}

struct StageCost {
  double seconds = 0;
  double bytes = 0;  // received per device
};

// One mesh axis of m devices changes `from` -> `to` on a group holding `b` bytes.
StageCost AxisCost(const Sbp& from, const Sbp& to, double m, double b, const LinkParams& link,
                   const CostConfig& config) {
  StageCost c;
  if (from == to || m <= 1) return c;
  const double overhead = config.task_overhead_seconds;
  auto messages = [&](double count, double bytes_each) {
    c.seconds += count * (link.alpha_seconds + bytes_each * link.beta_seconds_per_byte);
    c.bytes += count * bytes_each;
  };
  if (to.is_broadcast() && from.is_split()) {
    messages(m - 1, b / m);
    c.seconds += overhead + LocalCopySeconds(2 * b, config);  // concat
  } else if (to.is_broadcast()) {  // P -> B
    const double direct = (m - 1) * (link.alpha_seconds + b * link.beta_seconds_per_byte) +
                          overhead + LocalCopySeconds((m + 1) * b, config);
    const double ring = 2 * (m - 1) * (link.alpha_seconds + b / m * link.beta_seconds_per_byte) +
                        (m - 1) * (overhead + LocalCopySeconds(3 * b / m, config));
    c.seconds = std::min(direct, ring);
    c.bytes = direct <= ring ? (m - 1) * b : 2 * (m - 1) * b / m;
  } else if (to.is_split() && from.is_split()) {
    messages(m - 1, b / (m * m));
    c.seconds += overhead + LocalCopySeconds(2 * b / m, config);
  } else if (to.is_split() && from.is_partial_sum()) {
    messages(m - 1, b / m);
    c.seconds += overhead + LocalCopySeconds((m + 1) * b / m, config);
  } else if (to.is_split()) {  // B -> S
    c.seconds = overhead + LocalCopySeconds(2 * b / m, config);
  } else {  // B -> P or S -> P: zeros around the kept block
    c.seconds = overhead + LocalCopySeconds(b, config);
  }
  return c;
}

// Bytes one group of mesh axis `axis` holds under `layout`.
double GroupBytes(double bytes, const std::vector<Sbp>& layout, const Placement& placement, int axis) {
  for (int k = 0; k < static_cast<int>(layout.size()); ++k) {
    if (k != axis && layout[k].is_split()) bytes /= static_cast<double>(placement.hierarchy()[k]);
  }
  return bytes;
}

}  // namespace

BoxingQuote AnalyticBoxingQuote(const BoxingRequest& r, const CostConfig& config) {
  BoxingQuote quote;
  quote.exact = false;
  quote.kind = BoxingKindName(ClassifyBoxing(r));
  const double bytes = static_cast<double>(r.desc.byte_size());
  if (r.src_placement != r.dst_placement) {
    // Each destination device receives its shard from every partial source holding it.
    double shard = bytes, partial_sources = 1, src_parts = 1, dst_parts = 1;
    for (int k = 0; k < r.dst_sbp.num_axes(); ++k) {
      if (r.dst_sbp[k].is_split()) shard /= r.dst_placement.hierarchy()[k], dst_parts *= r.dst_placement.hierarchy()[k];
    }
    for (int k = 0; k < r.src_sbp.num_axes(); ++k) {
      if (r.src_sbp[k].is_partial_sum()) partial_sources *= r.src_placement.hierarchy()[k];
      if (r.src_sbp[k].is_split()) src_parts *= r.src_placement.hierarchy()[k];
    }
    const LinkParams& link = config.link(Classify(r.src_placement.ranks()[0], r.dst_placement.ranks()[0], config));
    const double messages = partial_sources * std::max(1.0, std::ceil(src_parts / dst_parts));
    quote.bytes = partial_sources * shard;
    quote.seconds = messages * link.alpha_seconds + quote.bytes * link.beta_seconds_per_byte;
    if (partial_sources > 1) quote.seconds += config.task_overhead_seconds + LocalCopySeconds(quote.bytes, config);
    return quote;
  }
  std::vector<int> changed;
  for (int k = 0; k < r.src_sbp.num_axes(); ++k) {
    if (r.src_sbp[k] != r.dst_sbp[k]) changed.push_back(k);
  }
  if (changed.empty()) return quote;
  std::vector<int> order = changed;
  double best = std::numeric_limits<double>::infinity();
  do {
    std::vector<Sbp> layout = r.src_sbp.sbps();
    StageCost total;
    for (int axis : order) {
      const double m = static_cast<double>(r.src_placement.hierarchy()[axis]);
      const LinkParams& link = config.link(GroupLink(r.src_placement, axis, config));
      const StageCost stage = AxisCost(layout[axis], r.dst_sbp[axis], m,
                                       GroupBytes(bytes, layout, r.src_placement, axis), link, config);
      total.seconds += stage.seconds;
      total.bytes += stage.bytes;
      layout[axis] = r.dst_sbp[axis];
    }
    if (total.seconds < best) best = total.seconds, quote.seconds = total.seconds, quote.bytes = total.bytes;
  } while (order.size() <= 3 && std::next_permutation(order.begin(), order.end()));
  return quote;
}

int BoxingPriceBook::DescId(const TensorDesc& desc) {
  auto [it, inserted] = desc_ids_.emplace(desc.ToString(), static_cast<int>(descs_.size()));
  if (inserted) descs_.push_back(desc);
  return it->second;
}

int BoxingPriceBook::PlacementId(const Placement& placement) {
  return Intern(placement, &placement_ids_, &placements_);
}

int BoxingPriceBook::NdSbpId(const NdSbp& nd_sbp) { return Intern(nd_sbp, &nd_sbp_ids_, &nd_sbps_); }

int BoxingPriceBook::Quote(int desc, int src_placement, int src_sbp, int dst_placement, int dst_sbp) {
  const auto key = std::make_tuple(desc, src_placement, src_sbp, dst_placement, dst_sbp);
  auto found = quote_ids_.find(key);
  if (found != quote_ids_.end()) return found->second;
  BoxingQuote quote;
  const BoxingRequest request{descs_[desc], placements_[src_placement], nd_sbps_[src_sbp],
                              placements_[dst_placement], nd_sbps_[dst_sbp], ""};
  if (src_placement == dst_placement && src_sbp == dst_sbp) {
    quote.kind = BoxingKindName(BoxingKind::kIdentity);
  } else if (absl::Status valid = ValidateBoxingRequest(request); !valid.ok()) {
    quote.seconds = std::numeric_limits<double>::infinity();
    quote.kind = "unsupported";
    quote.error = std::string(valid.message());
  } else if (request.src_placement.num_devices() + request.dst_placement.num_devices() > exact_max_devices_) {
    quote = AnalyticBoxingQuote(request, cache_.options().cost);
    ++num_analytic_;
  } else {
    ++num_exact_;
    absl::StatusOr<BoxingEstimate> estimate = cache_.Estimate(request);
    if (estimate.ok()) {
      quote.seconds = estimate->cost.seconds;
      quote.bytes = static_cast<double>(std::max(estimate->cost.max_bytes_sent, estimate->cost.max_bytes_received));
      quote.kind = BoxingKindName(estimate->kind);
    } else {
      quote.seconds = std::numeric_limits<double>::infinity();
      quote.kind = "unsupported";
      quote.error = std::string(estimate.status().message());
    }
  }
  const int id = static_cast<int>(quotes_.size());
  quotes_.push_back(std::move(quote));
  quote_ids_.emplace(key, id);
  return id;
}

}  // namespace compiler
}  // namespace oneflow_like
