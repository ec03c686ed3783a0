#include "oneflow_like/compiler/boxing/boxing.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"
#include "oneflow_like/compiler/boxing/boxing_emit.h"

namespace oneflow_like {
namespace compiler {

using internal::Layout;
using internal::StepSink;

std::string BoxingRequest::ToString() const {
  return absl::StrCat(desc.ToString(), " ", src_placement.ToString(), " ", src_sbp.ToString(), " -> ",
                      dst_placement.ToString(), " ", dst_sbp.ToString());
}

namespace {

std::string Describe(const BoxingRequest& r) {
  return r.name.empty() ? absl::StrCat("boxing ", r.ToString()) : absl::StrCat("boxing '", r.name, "' (", r.ToString(), ")");
}

BoxingKind Classify1D(const Sbp& from, const Sbp& to) {
  if (from == to) return BoxingKind::kIdentity;
  if (to.is_broadcast()) return from.is_split() ? BoxingKind::kAllGather : BoxingKind::kAllReduce;
  if (to.is_split()) {
    if (from.is_split()) return BoxingKind::kAllToAll;
    return from.is_partial_sum() ? BoxingKind::kReduceScatter : BoxingKind::kLocalSlice;
  }
  return from.is_broadcast() ? BoxingKind::kBroadcastToPartial : BoxingKind::kSplitToPartial;
}

std::vector<int> ChangedAxes(const NdSbp& a, const NdSbp& b) {
  std::vector<int> axes;
  for (int i = 0; i < a.num_axes(); ++i) {
    if (a[i] != b[i]) axes.push_back(i);
  }
  return axes;
}

// One stage of a schedule: from the previous layout (the source for the first stage) to `to`
// (on the destination placement for the last stage, the source placement otherwise).
struct Stage {
  NdSbp to;
  bool ring = false;
};

struct Schedule {
  BoxingSchedule kind = BoxingSchedule::kDirect;
  std::vector<Stage> stages;
  std::string detail;
  BoxingCostSummary cost;
};

std::vector<int32_t> EmitStages(const BoxingRequest& r, const std::vector<Stage>& stages, const CostConfig& config,
                                std::vector<int32_t> values, StepSink* sink) {
  NdSbp cur = r.src_sbp;
  for (size_t i = 0; i < stages.size(); ++i) {
    const Placement& to_placement = i + 1 == stages.size() ? r.dst_placement : r.src_placement;
    Layout from(r.src_placement, cur, r.desc.shape);
    Layout to(to_placement, stages[i].to, r.desc.shape);
    if (stages[i].ring) {
      std::optional<internal::GroupSpec> spec = internal::PlanGroups(from, to);
      CHECK(spec.has_value() && internal::RingApplies(*spec)) << "ring stage does not apply: " << r.ToString();
      values = internal::EmitRing(*spec, from, values, to, sink);
    } else {
      values = internal::EmitDirect(from, values, to, config, sink);
    }
    if (sink->gave_up()) break;
    cur = stages[i].to;
  }
  return values;
}

std::vector<int32_t> SourceIds(const BoxingRequest& r) {
  std::vector<int32_t> ids(r.src_placement.num_devices());
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

// The cost of a schedule; with `give_up_above`, nullopt as soon as it is known to cost more
// (which saves costing the O(n^2) direct schedule of a large group to the end when a ring or a
// staged schedule is far cheaper).
std::optional<BoxingCostSummary> CostOf(const BoxingRequest& r, const std::vector<Stage>& stages,
                                        const CostConfig& config,
                                        double give_up_above = std::numeric_limits<double>::infinity()) {
  BoxingCostAccumulator acc(&config);
  acc.set_give_up_above(give_up_above);
  StepSink sink(nullptr, &acc, SizeOf(r.desc.dtype), static_cast<int32_t>(r.src_placement.num_devices()));
  EmitStages(r, stages, config, SourceIds(r), &sink);
  if (acc.gave_up()) return std::nullopt;
  return acc.Finish();
}

bool RingAppliesTo(const BoxingRequest& r, const NdSbp& from, const NdSbp& to) {
  if (r.src_placement != r.dst_placement) return false;
  std::optional<internal::GroupSpec> spec =
      internal::PlanGroups(Layout(r.src_placement, from, r.desc.shape), Layout(r.src_placement, to, r.desc.shape));
  return spec.has_value() && internal::RingApplies(*spec);
}

// Staged candidates: every order of the changed mesh axes (all orders up to 3 axes, else
// ascending and descending), skipping orders whose intermediate layouts are invalid.
std::vector<Schedule> StagedCandidates(const BoxingRequest& r, const CostConfig& config) {
  std::vector<Schedule> out;
  std::vector<int> axes = ChangedAxes(r.src_sbp, r.dst_sbp);
  if (r.src_placement != r.dst_placement || axes.size() < 2) return out;
  std::vector<std::vector<int>> orders;
  if (axes.size() <= 3) {
    do orders.push_back(axes); while (std::next_permutation(axes.begin(), axes.end()));
  } else {
    orders.push_back(axes);
    orders.emplace_back(axes.rbegin(), axes.rend());
  }
  for (const std::vector<int>& order : orders) {
    Schedule s;
    s.kind = BoxingSchedule::kStaged;
    std::vector<Sbp> cur = r.src_sbp.sbps();
    NdSbp from = r.src_sbp;
    bool valid = true;
    std::vector<std::string> parts;
    for (int axis : order) {
      cur[axis] = r.dst_sbp[axis];
      NdSbp to(cur);
      if (!ValidateNdSbp(to, r.desc.shape, r.src_placement).ok()) {
        valid = false;
        break;
      }
      BoxingRequest sub = r;
      sub.src_sbp = from;
      sub.dst_sbp = to;
      Stage stage{to, false};
      if (RingAppliesTo(r, from, to)) {
        // Ring iff strictly cheaper than direct: direct is given up on once dearer than the ring.
        const double ring = CostOf(sub, {Stage{to, true}}, config)->seconds;
        const std::optional<BoxingCostSummary> direct = CostOf(sub, {stage}, config, ring);
        stage.ring = !direct.has_value() || ring < direct->seconds;
      }
      parts.push_back(absl::StrCat("axis ", axis, ": ", stage.ring ? "ring" : "direct"));
      s.stages.push_back(stage);
      from = to;
    }
    if (!valid) continue;
    s.detail = absl::StrCat("staged[", absl::StrJoin(parts, ", "), "]");
    s.cost = *CostOf(r, s.stages, config);
    out.push_back(std::move(s));
  }
  return out;
}

// The cheapest candidate schedule (the first of the cheapest: direct, ring, staged orders). Direct
// is costed last, given up on once dearer than the best other; `need_cost` false (Expand): a lone
// candidate is not costed at all.
absl::StatusOr<Schedule> ChooseSchedule(const BoxingRequest& r, const BoxingOptions& options, bool need_cost = true) {
  const CostConfig& config = options.cost;
  std::vector<Schedule> candidates;
  const SchedulePolicy policy = options.policy;
  const bool with_direct = policy == SchedulePolicy::kAuto || policy == SchedulePolicy::kDirect;
  if (with_direct) candidates.push_back(Schedule{BoxingSchedule::kDirect, {Stage{r.dst_sbp, false}}, "direct", {}});
  if (policy == SchedulePolicy::kAuto || policy == SchedulePolicy::kRing) {
    if (RingAppliesTo(r, r.src_sbp, r.dst_sbp)) {
      Schedule ring{BoxingSchedule::kRing, {Stage{r.dst_sbp, true}}, "ring", {}};
      ring.cost = *CostOf(r, ring.stages, config);
      candidates.push_back(std::move(ring));
    } else if (policy == SchedulePolicy::kRing) {
      return absl::InvalidArgumentError(absl::StrCat(
          Describe(r), ": the ring schedule does not apply (it needs one placement on which exactly one mesh "
                       "axis changes P->B, P->S or S->B, with at least 2 devices along it); use kAuto or kDirect"));
    }
  }
  if (policy == SchedulePolicy::kAuto || policy == SchedulePolicy::kStaged) {
    std::vector<Schedule> staged = StagedCandidates(r, config);
    if (staged.empty() && policy == SchedulePolicy::kStaged) {
      return absl::InvalidArgumentError(absl::StrCat(
          Describe(r), ": the staged schedule does not apply (it needs one placement on which at least two mesh "
                       "axes change, with valid intermediate layouts); use kAuto or kDirect"));
    }
    for (Schedule& s : staged) candidates.push_back(std::move(s));
  }
  if (candidates.size() == 1 && !need_cost) return std::move(candidates[0]);
  size_t first = 0;
  if (with_direct) {  // candidate 0: it wins ties, so it loses only when strictly dearer
    double best_other = std::numeric_limits<double>::infinity();
    for (size_t i = 1; i < candidates.size(); ++i) best_other = std::min(best_other, candidates[i].cost.seconds);
    std::optional<BoxingCostSummary> direct = CostOf(r, candidates[0].stages, config, best_other);
    if (direct.has_value()) {
      candidates[0].cost = *direct;
    } else {
      first = 1;
    }
  }
  size_t best = first;
  for (size_t i = first + 1; i < candidates.size(); ++i) {
    if (candidates[i].cost.seconds < candidates[best].cost.seconds) best = i;
  }
  return std::move(candidates[best]);
}

// The plan's header fields, and its source values.
BoxingPlan NewPlan(const BoxingRequest& r) {
  BoxingPlan plan;
  plan.desc = r.desc;
  plan.src_placement = r.src_placement;
  plan.src_sbp = r.src_sbp;
  plan.dst_placement = r.dst_placement;
  plan.dst_sbp = r.dst_sbp;
  plan.kind = ClassifyBoxing(r, &plan.axis_kinds);
  Layout src(r.src_placement, r.src_sbp, r.desc.shape);
  for (int64_t i = 0; i < src.num_devices(); ++i) plan.values.push_back(BoxingValue{src.device(i), src.box(i)});
  if (plan.kind == BoxingKind::kIdentity) {
    plan.schedule = BoxingSchedule::kNone;
    plan.schedule_detail = "none";
    plan.dst_values = SourceIds(r);
  }
  return plan;
}

}  // namespace

absl::Status ValidateBoxingRequest(const BoxingRequest& r) {
  if (r.desc.dtype == DataType::kInvalid || SizeOf(r.desc.dtype) <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(r), ": the tensor has an invalid dtype (", DataTypeName(r.desc.dtype), ")"));
  }
  if (r.src_placement.num_devices() == 0 || r.dst_placement.num_devices() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(r), ": the ", r.src_placement.num_devices() == 0 ? "source" : "destination",
                                                   " placement has no ranks"));
  }
  absl::Status s = ValidateNdSbp(r.src_sbp, r.desc.shape, r.src_placement);
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(Describe(r), ": source layout invalid: ", s.message()));
  s = ValidateNdSbp(r.dst_sbp, r.desc.shape, r.dst_placement);
  if (!s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(r), ": destination layout invalid: ", s.message()));
  }
  return absl::OkStatus();
}

BoxingKind ClassifyBoxing(const BoxingRequest& r, std::vector<BoxingKind>* axis_kinds) {
  if (axis_kinds != nullptr) axis_kinds->clear();
  if (r.src_placement != r.dst_placement) return BoxingKind::kCrossPlacement;
  std::vector<BoxingKind> kinds;
  for (int a = 0; a < r.src_sbp.num_axes(); ++a) kinds.push_back(Classify1D(r.src_sbp[a], r.dst_sbp[a]));
  if (axis_kinds != nullptr) *axis_kinds = kinds;
  if (std::all_of(kinds.begin(), kinds.end(), [](BoxingKind k) { return k == BoxingKind::kIdentity; })) {
    return BoxingKind::kIdentity;
  }
  return kinds.size() == 1 ? kinds[0] : BoxingKind::kNd;
}

absl::StatusOr<BoxingPlan> PointToPointExpander::Expand(const BoxingRequest& request) const {
  RETURN_IF_ERROR(ValidateBoxingRequest(request));
  BoxingPlan plan = NewPlan(request);
  if (plan.kind == BoxingKind::kIdentity) return plan;
  ASSIGN_OR_RETURN(Schedule schedule, ChooseSchedule(request, options_, /*need_cost=*/false));
  plan.schedule = schedule.kind;
  plan.schedule_detail = schedule.detail;
  // A costing pass counted the steps: reserve, so 10^5..10^6-step plans (512 ranks) are built
  // without reallocation. (A lone candidate was not costed: the vectors grow.)
  const int64_t num_steps = schedule.cost.num_transfers + schedule.cost.num_local_steps;
  plan.steps.reserve(num_steps);
  plan.values.reserve(plan.values.size() + num_steps);
  StepSink sink(&plan, nullptr, SizeOf(request.desc.dtype), plan.num_source_values());
  plan.dst_values = EmitStages(request, schedule.stages, options_.cost, SourceIds(request), &sink);
  return plan;
}

BoxingShape BoxingShape::Of(BoxingPlan plan) {
  BoxingShape shape;
  shape.num_source_values = plan.num_source_values();
  shape.num_values = static_cast<int32_t>(plan.values.size());
  for (const BoxingStep& step : plan.steps) {
    const bool collective = step.kind == StepKind::kCollective;
    shape.num_tasks += collective ? static_cast<int64_t>(step.group.size()) : 1;
    shape.num_collectives += collective ? 1 : 0;
  }
  shape.dst_values = plan.dst_values;
  shape.plan = std::move(plan);
  return shape;
}

absl::StatusOr<BoxingShape> BoxingExpander::Shape(const BoxingRequest& request) const {
  ASSIGN_OR_RETURN(BoxingPlan plan, Expand(request));
  return BoxingShape::Of(std::move(plan));
}

absl::StatusOr<BoxingShape> PointToPointExpander::Shape(const BoxingRequest& request) const {
  RETURN_IF_ERROR(ValidateBoxingRequest(request));
  BoxingShape shape;
  shape.num_source_values = static_cast<int32_t>(request.src_placement.num_devices());
  shape.num_values = shape.num_source_values;
  if (ClassifyBoxing(request) == BoxingKind::kIdentity) {
    shape.dst_values = SourceIds(request);
    return shape;
  }
  ASSIGN_OR_RETURN(Schedule schedule, ChooseSchedule(request, options_, /*need_cost=*/false));
  StepSink counter(nullptr, nullptr, SizeOf(request.desc.dtype), shape.num_source_values);
  shape.dst_values = EmitStages(request, schedule.stages, options_.cost, SourceIds(request), &counter);
  shape.num_values = counter.next_value();
  shape.num_tasks = shape.num_values - shape.num_source_values;  // one value per step, no collectives
  return shape;
}

absl::StatusOr<BoxingPart> BoxingExpander::ExpandPart(const BoxingRequest& request, Rank /*me*/) const {
  BoxingPart part;
  ASSIGN_OR_RETURN(part.plan, Expand(request));
  return part;
}

absl::StatusOr<BoxingPart> PointToPointExpander::ExpandPart(const BoxingRequest& request, Rank me) const {
  RETURN_IF_ERROR(ValidateBoxingRequest(request));
  BoxingPart part;
  part.reduced = true;
  BoxingPlan& plan = part.plan;
  plan = NewPlan(request);
  const int32_t num_sources = plan.num_source_values();
  for (int32_t v = 0; v < num_sources; ++v) part.original_value.push_back(v);
  if (plan.kind == BoxingKind::kIdentity) return part;
  ASSIGN_OR_RETURN(Schedule schedule, ChooseSchedule(request, options_, /*need_cost=*/false));
  plan.schedule = schedule.kind;
  plan.schedule_detail = schedule.detail;
  const int64_t elem_size = SizeOf(request.desc.dtype);
  internal::StepFilter filter;
  filter.me = me;
  StepSink find(nullptr, nullptr, elem_size, num_sources);
  find.set_filter(&filter);
  const std::vector<int32_t> dst = EmitStages(request, schedule.stages, options_.cost, SourceIds(request), &find);
  const int32_t num_values = find.next_value();
  part.num_steps = num_values - num_sources;
  std::vector<bool> keep(num_values, false);
  auto mark = [&](int32_t v) {
    if (v >= 0 && v < num_values) keep[v] = true;
  };
  for (int32_t v = 0; v < num_sources; ++v) mark(v);
  for (int32_t v : dst) mark(v);
  for (const auto& [output, inputs] : filter.local) {
    mark(output);
    for (int32_t in : inputs) mark(in);
  }
  filter.local.clear();
  filter.new_id.assign(num_values, -1);
  for (int32_t v = 0, next = 0; v < num_values; ++v) {
    if (!keep[v]) continue;
    filter.new_id[v] = next++;
    if (v >= num_sources) part.original_value.push_back(v);
  }
  plan.values.reserve(part.original_value.size());
  plan.steps.reserve(part.original_value.size() - num_sources);
  StepSink keep_part(&plan, nullptr, elem_size, num_sources);
  keep_part.set_filter(&filter);
  EmitStages(request, schedule.stages, options_.cost, SourceIds(request), &keep_part);
  for (int32_t v : dst) plan.dst_values.push_back(v >= 0 && v < num_values ? filter.new_id[v] : -1);
  return part;
}

absl::StatusOr<BoxingPart> CollectiveExpander::ExpandPart(const BoxingRequest& request, Rank me) const {
  if (request.src_placement != request.dst_placement) return PointToPointExpander(options_).ExpandPart(request, me);
  return BoxingExpander::ExpandPart(request, me);
}

absl::StatusOr<BoxingShape> CollectiveExpander::Shape(const BoxingRequest& request) const {
  if (request.src_placement != request.dst_placement) return PointToPointExpander(options_).Shape(request);
  return BoxingExpander::Shape(request);
}

absl::StatusOr<BoxingEstimate> EstimateBoxing(const BoxingRequest& request, const BoxingOptions& options) {
  RETURN_IF_ERROR(ValidateBoxingRequest(request));
  BoxingEstimate estimate;
  estimate.kind = ClassifyBoxing(request);
  if (estimate.kind == BoxingKind::kIdentity) {
    estimate.schedule_detail = "none";
    return estimate;
  }
  ASSIGN_OR_RETURN(Schedule schedule, ChooseSchedule(request, options));
  estimate.schedule = schedule.kind;
  estimate.schedule_detail = schedule.detail;
  estimate.cost = schedule.cost;
  return estimate;
}

absl::StatusOr<BoxingEstimate> BoxingCostCache::Estimate(const BoxingRequest& request) {
  std::string key = request.ToString();
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  ASSIGN_OR_RETURN(BoxingEstimate estimate, EstimateBoxing(request, options_));
  cache_.emplace(std::move(key), estimate);
  return estimate;
}

// ---- CollectiveExpander ----

absl::StatusOr<BoxingPlan> CollectiveExpander::Expand(const BoxingRequest& request) const {
  RETURN_IF_ERROR(ValidateBoxingRequest(request));
  BoxingPlan plan = NewPlan(request);
  if (plan.kind == BoxingKind::kIdentity) return plan;
  const PointToPointExpander fallback(options_);
  if (request.src_placement != request.dst_placement) return fallback.Expand(request);
  bool any_collective = false;

  // Mesh axes in ascending order; each stage is a collective per group, or a local step.
  struct CollectiveStage {
    NdSbp to;
    std::optional<CollectiveKind> collective;  // nullopt: direct (local) stage
  };
  std::vector<CollectiveStage> stages;
  std::vector<std::string> parts;
  std::vector<Sbp> cur = request.src_sbp.sbps();
  for (int axis : ChangedAxes(request.src_sbp, request.dst_sbp)) {
    const NdSbp from(cur);
    cur[axis] = request.dst_sbp[axis];
    const NdSbp to(cur);
    if (!ValidateNdSbp(to, request.desc.shape, request.src_placement).ok()) return fallback.Expand(request);
    Layout from_layout(request.src_placement, from, request.desc.shape);
    Layout to_layout(request.src_placement, to, request.desc.shape);
    std::optional<internal::GroupSpec> spec = internal::PlanGroups(from_layout, to_layout);
    std::optional<CollectiveKind> kind = internal::CollectiveFor(from[axis], to[axis]);
    if (kind.has_value() && spec.has_value() && from_layout.mesh_dim(axis) > 1) {
      stages.push_back({to, kind});
      any_collective = true;
      parts.push_back(absl::StrCat("axis ", axis, ": ", CollectiveKindName(*kind), " x", spec->groups.size()));
      continue;
    }
    // Otherwise the stage must be local (B->S, B->P, S->P, or a single device along the axis).
    BoxingCostAccumulator acc(&options_.cost);
    StepSink probe(nullptr, &acc, SizeOf(request.desc.dtype), plan.num_source_values());
    internal::EmitDirect(from_layout, SourceIds(request), to_layout, options_.cost, &probe);
    if (acc.Finish().num_transfers > 0) return fallback.Expand(request);
    stages.push_back({to, std::nullopt});
    parts.push_back(absl::StrCat("axis ", axis, ": local"));
  }
  if (!any_collective) return fallback.Expand(request);  // purely local: nothing for a collective to do
  plan.schedule = BoxingSchedule::kCollective;
  plan.schedule_detail = absl::StrCat("collective[", absl::StrJoin(parts, ", "), "]");
  StepSink sink(&plan, nullptr, SizeOf(request.desc.dtype), plan.num_source_values());
  std::vector<int32_t> values = SourceIds(request);
  NdSbp from = request.src_sbp;
  for (const CollectiveStage& stage : stages) {
    Layout from_layout(request.src_placement, from, request.desc.shape);
    Layout to_layout(request.src_placement, stage.to, request.desc.shape);
    if (stage.collective.has_value()) {
      std::optional<internal::GroupSpec> spec = internal::PlanGroups(from_layout, to_layout);
      values = internal::EmitCollectives(*spec, *stage.collective, from_layout, values, to_layout, &sink);
    } else {
      values = internal::EmitDirect(from_layout, values, to_layout, options_.cost, &sink);
    }
    from = stage.to;
  }
  plan.dst_values = std::move(values);
  return plan;
}

}  // namespace compiler
}  // namespace oneflow_like
