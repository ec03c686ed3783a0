// The boxing plans of the lowering, memoized per distinct request (name excluded): the layers of
// a deep model repeat the same transitions, and the planner's cost grows with the placement size.
//
// Plans are also shared across placements that differ by a shift of every rank by a multiple of
// the cost model's ranks per node (the stages of a pipeline: cpu:[0..63] and cpu:[64..127]): the
// planner decides by parallel ids and link classes only, so the plan of the shifted request is
// the canonical plan with its ranks shifted (not when CostConfig::rank_to_node places ranks).
// Lowering one rank (not kAuto, PlanForOneRank), a plan it takes part in is built for the real
// ranks, and of a plan it takes no part in only the shape is computed (BoxingExpander::Shape, once
// per canonical request: counts, which source values destinations reuse; for a bucketable plan its
// steps' groups and volumes); no whole canonical plan is kept.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/lower/lowering.h"

namespace oneflow_like {
namespace compiler {
namespace lower_internal {
namespace {

Placement Shifted(const Placement& p, int32_t by) {
  if (by == 0) return p;
  std::vector<Rank> ranks;
  ranks.reserve(p.ranks().size());
  for (Rank r : p.ranks()) ranks.push_back(Rank(r.value() + by));
  return *Placement::Create(p.device_type(), std::move(ranks), p.hierarchy());
}

Rank ShiftRank(Rank r, int32_t by) { return r.valid() ? Rank(r.value() + by) : r; }

// The shift taking the canonical request to this one: the lowest rank of both placements,
// rounded down to a node boundary (0 when nodes are placed explicitly).
int32_t CanonicalShift(const Placement& a, const Placement& b, const CostConfig& cost) {
  if (!cost.rank_to_node.empty() || cost.ranks_per_node <= 0) return 0;
  int32_t low = a.ranks().front().value();
  for (const Placement* p : {&a, &b}) {
    for (Rank r : p->ranks()) low = std::min(low, r.value());
  }
  return low - low % cost.ranks_per_node;
}

std::string PlanKey(const TensorDesc& desc, const Placement& src, const NdSbp& src_sbp, const Placement& dst,
                    const NdSbp& dst_sbp) {
  return absl::StrCat(desc.ToString(), " ", src.ToString(), " ", NdSbpText(src_sbp), " ", dst.ToString(), " ",
                      NdSbpText(dst_sbp));
}

// Whether `plan` is collectives alone, all ALL_REDUCE or all REDUCE_SCATTER, each member reading
// a source shard: the form a gradient bucket can absorb.
bool CollectivesOnly(const BoxingPlan& plan) {
  if (plan.steps.empty()) return false;
  for (const BoxingStep& step : plan.steps) {
    if (step.kind != StepKind::kCollective || step.group.empty() || step.collective != plan.steps[0].collective) {
      return false;
    }
    if (step.collective != CollectiveKind::kAllReduce && step.collective != CollectiveKind::kReduceScatter) {
      return false;
    }
    for (int32_t in : step.inputs) {
      if (in < 0 || in >= plan.num_source_values()) return false;
    }
  }
  return true;
}

// Elements of a collective step's group region (the bounding box of its members' regions).
int64_t GroupVolume(const BoxingPlan& plan, const BoxingStep& step) {
  Region box = plan.values[step.inputs[0]].region;
  for (size_t m = 0; m < step.group.size(); ++m) {
    for (const Region* r :
         {&plan.values[step.inputs[m]].region, &plan.values[step.output + static_cast<int32_t>(m)].region}) {
      for (int a = 0; a < box.num_axes(); ++a) {
        box.begin[a] = std::min(box.begin[a], r->begin[a]);
        box.end[a] = std::max(box.end[a], r->end[a]);
      }
    }
  }
  int64_t v = 1;
  for (int a = 0; a < box.num_axes(); ++a) v *= box.end[a] - box.begin[a];
  return v;
}

// Which values are some destination device's, and which sources they reuse.
void MarkDestinations(const std::vector<int32_t>& dst_values, int32_t num_sources, int32_t num_values,
                      PlanLayout* layout) {
  layout->aliased_source.assign(num_sources, false);
  layout->is_destination.assign(num_values, false);
  for (int32_t v : dst_values) {
    if (v < 0 || v >= num_values) continue;  // reported by EmitBoxing
    layout->is_destination[v] = true;
    if (v < num_sources) layout->aliased_source[v] = true;
  }
}

// Counts of a plan known by its shape alone (no steps: point-to-point, so not bucketable).
PlanLayout CountsOfShape(const BoxingShape& shape) {
  PlanLayout layout;
  layout.num_tasks = shape.num_tasks;
  layout.num_collectives = shape.num_collectives;
  MarkDestinations(shape.dst_values, shape.num_source_values, shape.num_values, &layout);
  return layout;
}

// What every use needs, lowered rank or not: counts, reused sources, bucketability.
PlanLayout Counts(const BoxingPlan& plan) {
  PlanLayout layout;
  for (const BoxingStep& step : plan.steps) {
    const bool collective = step.kind == StepKind::kCollective;
    layout.num_tasks += collective ? static_cast<int64_t>(step.group.size()) : 1;
    layout.num_collectives += collective ? 1 : 0;
  }
  MarkDestinations(plan.dst_values, plan.num_source_values(), static_cast<int32_t>(plan.values.size()), &layout);
  layout.collectives_only = CollectivesOnly(plan);
  if (layout.collectives_only) {
    for (const BoxingStep& step : plan.steps) layout.group_volume.push_back(GroupVolume(plan, step));
  }
  return layout;
}

// The steps a rank of [first, end) runs, sends from or joins (BoxingPlan::StepsOfRank of a range).
std::vector<int32_t> StepsOfRanks(const BoxingPlan& plan, int32_t first, int32_t end) {
  auto in = [&](Rank r) { return r.value() >= first && r.value() < end; };
  std::vector<int32_t> out;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const BoxingStep& s = plan.steps[i];
    bool mine = in(s.rank) || (s.kind == StepKind::kTransfer && in(s.peer));
    if (!mine && s.kind == StepKind::kCollective) mine = std::any_of(s.group.begin(), s.group.end(), in);
    if (mine) out.push_back(static_cast<int32_t>(i));
  }
  return out;
}

// Counts, plus where each step's tasks and each value's register fall, and the lowered ranks'
// steps (only_rank .. end_rank - 1; end_rank -1: only_rank alone).
PlanLayout LayOut(const BoxingPlan& plan, int32_t only_rank, int32_t end_rank = -1) {
  PlanLayout layout = Counts(plan);
  layout.step_offset.resize(plan.steps.size());
  layout.collective_index.resize(plan.steps.size());
  layout.value_offset.assign(plan.values.size(), -1);
  layout.value_step.assign(plan.values.size(), -1);
  int32_t offset = 0, collectives = 0;
  for (size_t k = 0; k < plan.steps.size(); ++k) {
    const BoxingStep& step = plan.steps[k];
    layout.step_offset[k] = offset;
    layout.collective_index[k] = collectives;
    const int32_t outputs = step.kind == StepKind::kCollective ? static_cast<int32_t>(step.group.size()) : 1;
    for (int32_t m = 0; m < outputs; ++m) {
      const int32_t v = step.output + m;
      if (v >= 0 && v < static_cast<int32_t>(plan.values.size())) {
        layout.value_offset[v] = offset + m;
        layout.value_step[v] = static_cast<int32_t>(k);
      }
    }
    offset += outputs;
    collectives += step.kind == StepKind::kCollective ? 1 : 0;
  }
  if (only_rank >= 0 && end_rank > only_rank + 1) {
    layout.local_steps = StepsOfRanks(plan, only_rank, end_rank);
  } else if (only_rank >= 0) {
    layout.local_steps = plan.StepsOfRank(Rank(only_rank));
  }
  return layout;
}

// One rank's part of `full` (which it takes part in), renumbered: the sources, every destination
// value, the rank's steps, the steps defining their inputs and the destinations, and the values
// those steps read or define; ids in order, offsets and names those of the whole plan. A 10^6-step
// plan of which a rank runs 10^3 steps is kept at that size.
CachedPlan Reduce(const BoxingPlan& full, int32_t me) {
  const PlanLayout whole = LayOut(full, me);
  const int32_t num_sources = full.num_source_values();
  std::vector<bool> keep_step(full.steps.size(), false), local(full.steps.size(), false);
  for (int32_t k : whole.local_steps) local[k] = true;
  auto keep_defining = [&](int32_t v) {
    if (v >= num_sources && v < static_cast<int32_t>(full.values.size()) && whole.value_step[v] >= 0) {
      keep_step[whole.value_step[v]] = true;
    }
  };
  for (int32_t k : whole.local_steps) {
    keep_step[k] = true;
    for (int32_t in : full.steps[k].inputs) keep_defining(in);
  }
  for (int32_t v : full.dst_values) keep_defining(v);
  std::vector<bool> keep_value(full.values.size(), false);
  for (int32_t v = 0; v < num_sources && v < static_cast<int32_t>(full.values.size()); ++v) keep_value[v] = true;
  auto keep = [&](int32_t v) {
    if (v >= 0 && v < static_cast<int32_t>(full.values.size())) keep_value[v] = true;
  };
  for (int32_t v : full.dst_values) keep(v);
  for (size_t k = 0; k < full.steps.size(); ++k) {
    if (!keep_step[k]) continue;
    const BoxingStep& step = full.steps[k];
    const int32_t outputs = step.kind == StepKind::kCollective ? static_cast<int32_t>(step.group.size()) : 1;
    for (int32_t m = 0; m < outputs; ++m) keep(step.output + m);
    if (local[k]) {
      for (int32_t in : step.inputs) keep(in);
    }
  }
  CachedPlan out;
  BoxingPlan& plan = out.plan;
  PlanLayout& layout = out.layout;
  plan.desc = full.desc;
  plan.src_placement = full.src_placement;
  plan.src_sbp = full.src_sbp;
  plan.dst_placement = full.dst_placement;
  plan.dst_sbp = full.dst_sbp;
  plan.kind = full.kind;
  plan.axis_kinds = full.axis_kinds;
  plan.schedule = full.schedule;
  plan.schedule_detail = full.schedule_detail;
  std::vector<int32_t> new_value(full.values.size(), -1), new_step(full.steps.size(), -1);
  for (size_t v = 0; v < full.values.size(); ++v) {
    if (!keep_value[v]) continue;
    new_value[v] = static_cast<int32_t>(plan.values.size());
    plan.values.push_back(full.values[v]);
    layout.original_value.push_back(static_cast<int32_t>(v));
    layout.value_offset.push_back(whole.value_offset[v]);
    layout.is_destination.push_back(whole.is_destination[v]);
  }
  auto renumber = [&](int32_t v) { return v >= 0 && v < static_cast<int32_t>(full.values.size()) ? new_value[v] : -1; };
  for (size_t k = 0; k < full.steps.size(); ++k) {
    if (!keep_step[k]) continue;
    new_step[k] = static_cast<int32_t>(plan.steps.size());
    BoxingStep step = full.steps[k];
    for (int32_t& in : step.inputs) in = renumber(in);
    step.output = renumber(step.output);
    plan.steps.push_back(std::move(step));
    layout.step_offset.push_back(whole.step_offset[k]);
    layout.collective_index.push_back(whole.collective_index[k]);
  }
  layout.value_step.resize(plan.values.size(), -1);
  for (size_t v = 0; v < full.values.size(); ++v) {
    if (new_value[v] >= 0 && whole.value_step[v] >= 0) layout.value_step[new_value[v]] = new_step[whole.value_step[v]];
  }
  for (int32_t v : full.dst_values) plan.dst_values.push_back(renumber(v));
  for (int32_t k : whole.local_steps) layout.local_steps.push_back(new_step[k]);
  layout.num_tasks = whole.num_tasks;
  layout.num_collectives = whole.num_collectives;
  layout.aliased_source = whole.aliased_source;
  layout.collectives_only = whole.collectives_only;
  layout.group_volume = whole.group_volume;
  return out;
}

// A reduced point-to-point part (BoxingExpander::ExpandPart) as Reduce would make it from the
// whole plan: one task per step, so value v of the whole plan is the output of step
// v - num_sources, at that task offset.
CachedPlan FromPart(BoxingPart part, int32_t me) {
  CachedPlan out;
  PlanLayout& layout = out.layout;
  const BoxingPlan& plan = part.plan;
  const int32_t num_sources = plan.num_source_values();
  const int32_t num_values = static_cast<int32_t>(plan.values.size());
  layout.num_tasks = part.num_steps;
  layout.value_offset.assign(num_values, -1);
  layout.value_step.assign(num_values, -1);
  for (int32_t v = num_sources; v < num_values; ++v) {
    layout.value_offset[v] = part.original_value[v] - num_sources;
    layout.value_step[v] = v - num_sources;
  }
  for (size_t k = 0; k < plan.steps.size(); ++k) {
    layout.step_offset.push_back(part.original_value[num_sources + k] - num_sources);
    layout.collective_index.push_back(0);
  }
  MarkDestinations(plan.dst_values, num_sources, num_values, &layout);
  layout.local_steps = plan.StepsOfRank(Rank(me));
  layout.original_value = std::move(part.original_value);
  out.plan = std::move(part.plan);
  return out;
}

BoxingPlan ShiftPlan(const BoxingPlan& canonical, int32_t by) {
  BoxingPlan plan = canonical;
  if (by == 0) return plan;
  plan.src_placement = Shifted(canonical.src_placement, by);
  plan.dst_placement = Shifted(canonical.dst_placement, by);
  for (BoxingValue& v : plan.values) v.device.rank = ShiftRank(v.device.rank, by);
  for (BoxingStep& step : plan.steps) {
    step.rank = ShiftRank(step.rank, by);
    step.peer = ShiftRank(step.peer, by);
    for (Rank& r : step.group) r = ShiftRank(r, by);
  }
  return plan;
}

}  // namespace

absl::StatusOr<const CachedPlan*> Lowerer::PlanFor(TensorId tensor, const Value& src, const Placement& placement,
                                                   const NdSbp& nd_sbp, bool use) {
  const TensorNode& t = graph_.tensor(tensor);
  const CostConfig& cost = options_.boxing_options.cost;
  const std::string key = PlanKey(*t.desc, src.placement, src.nd_sbp, placement, nd_sbp);
  auto cached = plan_cache_.find(key);
  // A range of ranks builds whole plans where it takes part (one rank builds its part alone).
  const bool takes_part = !builder_.partial() || Touches(src.placement) || Touches(placement);
  if (cached == plan_cache_.end() && builder_.partial() && collective_expander_ == nullptr &&
      (builder_.num_ranks() == 1 || !takes_part)) {
    ASSIGN_OR_RETURN(CachedPlan entry, PlanForOneRank(t, src, placement, nd_sbp));
    cached = plan_cache_.emplace(key, std::move(entry)).first;
  }
  if (cached == plan_cache_.end()) {
    BoxingRequest request{*t.desc, src.placement, src.nd_sbp, placement, nd_sbp, absl::StrCat("tensor '", t.name, "'")};
    const int32_t shift = CanonicalShift(src.placement, placement, cost);
    BoxingRequest shifted = request;
    shifted.src_placement = Shifted(src.placement, -shift);
    shifted.dst_placement = Shifted(placement, -shift);
    const std::string canonical_key =
        PlanKey(*t.desc, shifted.src_placement, src.nd_sbp, shifted.dst_placement, nd_sbp);
    auto canonical = canonical_.find(canonical_key);
    if (canonical == canonical_.end()) {
      absl::StatusOr<BoxingPlan> built = expander_->Expand(shifted);
      if (!built.ok()) return expander_->Expand(request).status();  // the error naming the real ranks
      CanonicalPlan entry{*std::move(built)};
      if (collective_expander_ != nullptr) {  // kAuto: the cheaper of point-to-point and collective
        ASSIGN_OR_RETURN(BoxingPlan collective, collective_expander_->Expand(shifted));
        bool has_collective = false;
        for (const BoxingStep& step : collective.steps) has_collective |= step.kind == StepKind::kCollective;
        entry.point_to_point_seconds = BoxingCost(entry.plan, cost).seconds;
        entry.collective_seconds = has_collective ? BoxingCost(collective, cost).seconds : 0.0;
        entry.use_collective = has_collective && entry.collective_seconds < entry.point_to_point_seconds;
        if (entry.use_collective) entry.plan = std::move(collective);
      }
      canonical = canonical_.emplace(canonical_key, std::move(entry)).first;
    }
    const CanonicalPlan& canon = canonical->second;
    if (collective_expander_ != nullptr) {
      BoxingRequest unnamed = request;
      unnamed.name.clear();
      BoxingChoiceProto& choice = choices_[unnamed.ToString()];
      choice.set_transition(unnamed.ToString());
      choice.set_point_to_point_seconds(canon.point_to_point_seconds);
      choice.set_collective_seconds(canon.collective_seconds);
      choice.set_chosen(canon.use_collective ? "collective" : "point_to_point");
    }
    CachedPlan entry;
    if (takes_part) {
      entry.plan = ShiftPlan(canon.plan, shift);
      entry.layout = LayOut(entry.plan, builder_.first_rank(), builder_.end_rank());
    } else {  // counts only; a bucketable plan keeps its steps' groups
      entry.complete = false;
      entry.layout = Counts(canon.plan);
      entry.plan.desc = canon.plan.desc;
      if (entry.layout.collectives_only) {
        for (const BoxingStep& step : canon.plan.steps) {
          BoxingStep& kept = entry.plan.steps.emplace_back();
          kept.kind = step.kind;
          kept.collective = step.collective;
          for (Rank r : step.group) kept.group.push_back(ShiftRank(r, shift));
        }
      }
    }
    cached = plan_cache_.emplace(key, std::move(entry)).first;
  }
  if (use && collective_expander_ != nullptr) {
    auto choice = choices_.find(
        BoxingRequest{*t.desc, src.placement, src.nd_sbp, placement, nd_sbp, ""}.ToString());
    if (choice != choices_.end()) choice->second.set_uses(choice->second.uses() + 1);
  }
  return &cached->second;
}

// One rank (not kAuto): whole plans only where the rank takes part, built for the real ranks;
// for the others only their shape, memoized per canonical request (no steps are kept, so the
// 10^5..10^6-step boxings of other stages cost neither the memory nor the time of building them).
absl::StatusOr<CachedPlan> Lowerer::PlanForOneRank(const TensorNode& t, const Value& src, const Placement& placement,
                                                   const NdSbp& nd_sbp) {
  const Rank me(builder_.first_rank());
  BoxingRequest request{*t.desc, src.placement, src.nd_sbp, placement, nd_sbp, absl::StrCat("tensor '", t.name, "'")};
  CachedPlan entry;
  if (builder_.num_ranks() == 1 && (src.placement.Contains(me) || placement.Contains(me))) {
    ASSIGN_OR_RETURN(BoxingPart part, expander_->ExpandPart(request, me));
    if (part.reduced) return FromPart(std::move(part), me.value());
    if (CollectivesOnly(part.plan)) {  // bucketable: bucket.cc reads every step; one per group anyway
      entry.plan = std::move(part.plan);
      entry.layout = LayOut(entry.plan, me.value());
      return entry;
    }
    return Reduce(part.plan, me.value());
  }
  const int32_t shift = CanonicalShift(src.placement, placement, options_.boxing_options.cost);
  BoxingRequest shifted = request;
  shifted.src_placement = Shifted(src.placement, -shift);
  shifted.dst_placement = Shifted(placement, -shift);
  const std::string canonical_key = PlanKey(*t.desc, shifted.src_placement, src.nd_sbp, shifted.dst_placement, nd_sbp);
  auto shape = shapes_.find(canonical_key);
  if (shape == shapes_.end()) {
    absl::StatusOr<BoxingShape> built = expander_->Shape(shifted);
    if (!built.ok()) return expander_->Shape(request).status();  // the error naming the real ranks
    shape = shapes_.emplace(canonical_key, *std::move(built)).first;
  }
  entry.complete = false;
  entry.plan.desc = *t.desc;
  if (!shape->second.plan.has_value()) {
    entry.layout = CountsOfShape(shape->second);
    return entry;
  }
  const BoxingPlan& canon = *shape->second.plan;  // a bucketable plan keeps its steps' groups
  entry.layout = Counts(canon);
  if (entry.layout.collectives_only) {
    for (const BoxingStep& step : canon.steps) {
      BoxingStep& kept = entry.plan.steps.emplace_back();
      kept.kind = step.kind;
      kept.collective = step.collective;
      for (Rank r : step.group) kept.group.push_back(ShiftRank(r, shift));
    }
  }
  return entry;
}

}  // namespace lower_internal
}  // namespace compiler
}  // namespace oneflow_like
