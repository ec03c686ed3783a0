// Internal to the boxing planner (boxing.cc, CollectiveExpander): the building blocks that emit
// the steps of one *stage* (one layout -> another) into a StepSink. Not a public API; use
// boxing.h.
//
// A StepSink either records steps into a BoxingPlan, or only feeds their cost into a
// BoxingCostAccumulator (used to compare schedules without materializing O(n^2) steps), or both.
// Emitters never read values back, so both modes emit the identical sequence.
#ifndef ONEFLOW_LIKE_COMPILER_BOXING_BOXING_EMIT_H_
#define ONEFLOW_LIKE_COMPILER_BOXING_BOXING_EMIT_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "oneflow_like/compiler/boxing/boxing_cost.h"
#include "oneflow_like/compiler/boxing/boxing_plan.h"
#include "oneflow_like/compiler/boxing/cost_model.h"

namespace oneflow_like {
namespace compiler {
namespace internal {

// One side of a stage: a placement, an NdSbp and the logical shape, with every device's box
// and mesh coordinates precomputed. REQUIRES: ValidateNdSbp(sbp, shape, placement) passed.
class Layout {
 public:
  Layout(const Placement& placement, const NdSbp& sbp, const Shape& shape);

  const Placement& placement() const { return placement_; }
  const NdSbp& sbp() const { return sbp_; }
  const Shape& shape() const { return shape_; }
  int num_mesh_axes() const { return static_cast<int>(placement_.hierarchy().size()); }
  int64_t mesh_dim(int axis) const { return placement_.hierarchy()[axis]; }
  int64_t num_devices() const { return placement_.num_devices(); }
  const Region& box(int64_t index) const { return boxes_[index]; }
  DeviceRef device(int64_t index) const { return DeviceRef{placement_.ranks()[index], placement_.device_type()}; }
  int64_t coord(int64_t index, int axis) const { return coords_[index * num_mesh_axes() + axis]; }
  Coords coords(int64_t index) const;
  // Parallel id of mesh coordinates `c` (row-major).
  int64_t IndexOf(const Coords& c) const;
  // Parallel id of `device` in this placement, or -1.
  int64_t IndexOfDevice(DeviceRef device) const;

 private:
  Placement placement_;
  NdSbp sbp_;
  Shape shape_;
  std::vector<Region> boxes_;
  std::vector<int64_t> coords_;  // num_devices x num_mesh_axes
  absl::flat_hash_map<int32_t, int64_t> index_of_rank_;
};

// One rank's part of a point-to-point plan in two passes over the same emission (ExpandPart in
// boxing.cc): pass 1 (no plan) records the steps `me` runs or sends from; pass 2 (a plan) keeps
// only the values new_id names (renumbered, in order) and the steps defining them, their inputs
// renumbered (-1: not kept). Point-to-point steps define one value each, so a step is kept with
// its output.
struct StepFilter {
  Rank me;
  std::vector<std::pair<int32_t, ValueIds>> local;  // pass 1: (output, inputs) of me's steps
  std::vector<int32_t> new_id;                      // pass 2: by value id, its new id or -1
};

class StepSink {
 public:
  // `plan` (may be null) receives values and steps; `cost` (may be null) receives their cost.
  StepSink(BoxingPlan* plan, BoxingCostAccumulator* cost, int64_t elem_size, int32_t next_value);

  int32_t Slice(DeviceRef device, int32_t input, const Region& region);
  // Between ranks, devices of one type (a TRANSFER).
  int32_t Transfer(DeviceRef from, DeviceRef to, int32_t input, const Region& region);
  // Between two devices of one rank (a COPY: host <-> device). A value is copied to a device
  // once: the second request returns the first copy.
  int32_t Copy(DeviceRef from, DeviceRef to, int32_t input, const Region& region);
  // `input` (on `from`) brought to `to`, whichever way: a copy within a rank, a transfer between
  // ranks of one device type, else through host memory (copy to the host on from.rank unless it
  // is the host, transfer host -> host, copy to `to` unless it is the host). REQUIRES from != to.
  int32_t Move(DeviceRef from, DeviceRef to, int32_t input, const Region& region);
  int32_t Add(DeviceRef device, ValueIds inputs, const Region& region);
  int32_t Concat(DeviceRef device, ValueIds inputs, const Region& region);
  int32_t Zeros(DeviceRef device, const Region& region);
  // One collective; returns the first of group.size() consecutive output values, output k on
  // group[k] with out_regions[k]. `group_elems`: elements of the group's whole tensor.
  int32_t Collective(CollectiveKind kind, const std::vector<DeviceRef>& group, ValueIds inputs,
                     const std::vector<Region>& out_regions, int64_t group_elems);

  // Costing only, and the accumulator gave up (BoxingCostAccumulator::set_give_up_above): the
  // emitters may stop early; what they return is then meaningless.
  bool gave_up() const { return plan_ == nullptr && cost_ != nullptr && cost_->gave_up(); }
  // The id the next value will get (= the values so far, sources included).
  int32_t next_value() const { return next_value_; }
  void set_filter(StepFilter* filter) { filter_ = filter; }

 private:
  int32_t NewValue(DeviceRef device, const Region& region);
  int32_t Local(StepKind kind, DeviceRef device, ValueIds inputs, const Region& region);
  // The filter's part: whether the plan keeps value v, and a step (its output `out`) of `rank` /
  // from `peer` recorded or added, its ids renumbered.
  bool Keeps(int32_t v) const { return filter_ == nullptr || filter_->new_id[v] >= 0; }
  void AddStep(BoxingStep step, Rank peer_or_self);

  BoxingPlan* plan_;
  BoxingCostAccumulator* cost_;
  int64_t elem_size_;
  int32_t next_value_;
  absl::flat_hash_map<std::pair<int32_t, DeviceType>, int32_t> copies_;  // (input, to) -> copy
  StepFilter* filter_ = nullptr;
};

// Direct schedule for any pair of layouts (same or different placements, any SBPs): every
// destination block is fetched from one holder per partial-sum contributor (a local copy
// first, then the cheapest link; deterministic tie-break) and summed / assembled on the
// destination. Returns the destination value of every dst device.
std::vector<int32_t> EmitDirect(const Layout& src, const std::vector<int32_t>& src_values, const Layout& dst,
                                const CostConfig& config, StepSink* sink);

// A stage that changes exactly one mesh axis of one placement, decomposed into independent
// groups (the devices along that axis, all other coordinates fixed). Within a group every
// member's box is either the group's `whole` box (B, P) or the k-th balanced part of it (S).
struct GroupSpec {
  int mesh_axis = 0;
  Sbp from = Sbp::Broadcast();
  Sbp to = Sbp::Broadcast();
  struct Group {
    std::vector<int64_t> members;  // parallel ids, in mesh-axis order
    Region whole;
  };
  std::vector<Group> groups;
};
// nullopt unless src and dst share the placement, differ on exactly one mesh axis, and every
// group tiles as described above (no other mesh axis nests a split inside the changing one).
std::optional<GroupSpec> PlanGroups(const Layout& src, const Layout& dst);

// Whether the ring schedule applies: P -> B (some tensor axis of the group box has at least as
// many elements as members), P -> S or S -> B, with >= 2 members.
bool RingApplies(const GroupSpec& spec);
// Ring schedule: reduce-scatter (P ->) then all-gather (-> B), chunked into one chunk per member.
std::vector<int32_t> EmitRing(const GroupSpec& spec, const Layout& src, const std::vector<int32_t>& src_values,
                              const Layout& dst, StepSink* sink);

// The collective for a one-axis transition, if it is one: P -> B all-reduce, S -> B all-gather,
// P -> S reduce-scatter, S(i) -> S(j) all-to-all.
std::optional<CollectiveKind> CollectiveFor(const Sbp& from, const Sbp& to);
// One collective step per group.
std::vector<int32_t> EmitCollectives(const GroupSpec& spec, CollectiveKind kind, const Layout& src,
                                     const std::vector<int32_t>& src_values, const Layout& dst, StepSink* sink);

}  // namespace internal
}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_BOXING_BOXING_EMIT_H_
