// Check 6b of VerifyPlan: the geometry of COLLECTIVE tasks (CollectiveParams.logical_dims,
// group_region, input_regions, output_regions; docs/plan_format.md). Per task: one region per
// group member on each side, every region a valid box inside the group region inside the
// logical tensor, and the task's slots shaped like its member's regions. Per collective (one
// global_order): every member task carries the same kind, ranks and regions, and the regions
// fit the kind:
//   ALL_REDUCE      every input and output region is the group region
//   ALL_GATHER      the inputs tile the group region, every output is the group region
//   REDUCE_SCATTER  every input is the group region, the outputs tile it
//   ALL_TO_ALL      both sides tile the group region
// "Tile" = inside it, pairwise disjoint, volumes summing to its volume (empty boxes allowed:
// uneven splits leave some members nothing).
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/compiler/plan/plan_checks.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace compiler {
namespace {

using Regions = google::protobuf::RepeatedPtrField<RegionProto>;

std::string RegionText(const RegionProto& region) {
  std::vector<std::string> axes;
  for (int a = 0; a < std::max(region.begin_size(), region.end_size()); ++a) {
    axes.push_back(absl::StrCat(a < region.begin_size() ? absl::StrCat(region.begin(a)) : "?", ":",
                                a < region.end_size() ? absl::StrCat(region.end(a)) : "?"));
  }
  return absl::StrCat("[", absl::StrJoin(axes, ","), "]");
}

bool SameRegion(const RegionProto& a, const RegionProto& b) {
  return std::equal(a.begin().begin(), a.begin().end(), b.begin().begin(), b.begin().end()) &&
         std::equal(a.end().begin(), a.end().end(), b.end().begin(), b.end().end());
}

bool SameRegions(const Regions& a, const Regions& b) {
  if (a.size() != b.size()) return false;
  for (int i = 0; i < a.size(); ++i) {
    if (!SameRegion(a.Get(i), b.Get(i))) return false;
  }
  return true;
}

int64_t Volume(const RegionProto& region) {
  int64_t volume = 1;
  for (int a = 0; a < region.begin_size(); ++a) volume *= region.end(a) - region.begin(a);
  return volume;
}

// Volume of the intersection of two valid boxes of the same rank.
int64_t OverlapVolume(const RegionProto& a, const RegionProto& b) {
  int64_t volume = 1;
  for (int axis = 0; axis < a.begin_size(); ++axis) {
    const int64_t lo = std::max(a.begin(axis), b.begin(axis));
    const int64_t hi = std::min(a.end(axis), b.end(axis));
    if (hi <= lo) return 0;
    volume *= hi - lo;
  }
  return volume;
}

bool Inside(const RegionProto& inner, const RegionProto& outer) {
  for (int a = 0; a < inner.begin_size(); ++a) {
    if (inner.begin(a) < outer.begin(a) || inner.end(a) > outer.end(a)) return false;
  }
  return true;
}

// A box of `axes` axes with 0 <= begin <= end <= bound (per axis).
bool ValidBox(const RegionProto& region, int axes, const RegionProto* bound,
              const google::protobuf::RepeatedField<int64_t>* dims) {
  if (region.begin_size() != axes || region.end_size() != axes) return false;
  for (int a = 0; a < axes; ++a) {
    if (region.begin(a) < 0 || region.begin(a) > region.end(a)) return false;
    if (dims != nullptr && region.end(a) > dims->Get(a)) return false;
  }
  return bound == nullptr || Inside(region, *bound);
}

absl::Status CheckSlotShape(const PlanIndex& index, const TaskProto& task,
                            const google::protobuf::RepeatedPtrField<SlotRefProto>& refs,
                            const RegionProto& region, const char* side, int member) {
  const std::string label = PlanIndex::TaskLabel(task);
  if (refs.size() != 1) {
    return PlanError(absl::StrCat(label, " has ", refs.size(), " payload ", side,
                                  "s; a COLLECTIVE member has exactly one"));
  }
  const RegisterProto* entry = index.FindEntry(task.rank(), refs.Get(0).register_id());
  const TensorDescProto& slot = entry->slots(refs.Get(0).slot());
  bool same = slot.dims_size() == region.begin_size();
  for (int a = 0; same && a < slot.dims_size(); ++a) {
    same = slot.dims(a) == region.end(a) - region.begin(a);
  }
  if (same) return absl::OkStatus();
  return PlanError(absl::StrCat(label, ": its ", side, " slot is ", SlotText(slot),
                                " but member ", member, "'s ", side, " region ",
                                RegionText(region), " has another shape"));
}

// The per-task part: counts, boxes, slot shapes.
absl::Status CheckMemberGeometry(const PlanIndex& index, const TaskProto& task) {
  const std::string label = PlanIndex::TaskLabel(task);
  const CollectiveParams& params = task.collective();
  const int group = params.ranks_size();
  if (params.input_regions_size() != group || params.output_regions_size() != group) {
    return PlanError(absl::StrCat(label, " has ", params.input_regions_size(), " input and ",
                                  params.output_regions_size(), " output region(s) for a group of ",
                                  group, " rank(s); it needs one of each per member"));
  }
  const int axes = params.logical_dims_size();
  for (int64_t d : params.logical_dims()) {
    if (d < 0) return PlanError(absl::StrCat(label, " has a negative logical dim ", d));
  }
  if (!params.has_group_region() ||
      !ValidBox(params.group_region(), axes, nullptr, &params.logical_dims())) {
    return PlanError(absl::StrCat(label, ": group_region ", RegionText(params.group_region()),
                                  " is not a box inside the logical tensor [",
                                  absl::StrJoin(params.logical_dims(), ","), "]"));
  }
  for (int m = 0; m < group; ++m) {
    for (const auto& [regions, side] :
         {std::pair(&params.input_regions(), "input"), std::pair(&params.output_regions(), "output")}) {
      if (!ValidBox(regions->Get(m), axes, &params.group_region(), nullptr)) {
        return PlanError(absl::StrCat(label, ": member ", m, " (rank ", params.ranks(m), ") ", side,
                                      " region ", RegionText(regions->Get(m)),
                                      " is not a box inside the group region ",
                                      RegionText(params.group_region())));
      }
    }
  }
  int member = 0;
  while (params.ranks(member) != task.rank()) ++member;  // CheckTasks: the rank is in the group
  RETURN_IF_ERROR(CheckSlotShape(index, task, task.inputs(), params.input_regions(member), "input", member));
  return CheckSlotShape(index, task, task.outputs(), params.output_regions(member), "output", member);
}

// The per-collective part: the regions of one side fit the kind.
absl::Status CheckSide(const TaskProto& task, const Regions& regions, bool tiles, const char* side) {
  const CollectiveParams& params = task.collective();
  const RegionProto& whole = params.group_region();
  const std::string head = absl::StrCat(PlanIndex::TaskLabel(task), " (",
                                        CollectiveParams::Kind_Name(params.kind()), "): ");
  if (!tiles) {
    for (int m = 0; m < regions.size(); ++m) {
      if (SameRegion(regions.Get(m), whole)) continue;
      return PlanError(absl::StrCat(head, "member ", m, " (rank ", params.ranks(m), ") ", side,
                                    " region ", RegionText(regions.Get(m)),
                                    " must be the whole group region ", RegionText(whole)));
    }
    return absl::OkStatus();
  }
  int64_t total = 0;
  for (int m = 0; m < regions.size(); ++m) {
    total += Volume(regions.Get(m));
    for (int other = 0; other < m; ++other) {
      if (OverlapVolume(regions.Get(m), regions.Get(other)) == 0) continue;
      return PlanError(absl::StrCat(head, side, " regions of member ", other, " (rank ",
                                    params.ranks(other), ") ", RegionText(regions.Get(other)),
                                    " and member ", m, " (rank ", params.ranks(m), ") ",
                                    RegionText(regions.Get(m)), " overlap; they must tile ",
                                    RegionText(whole)));
    }
  }
  if (total != Volume(whole)) {
    return PlanError(absl::StrCat(head, side, " regions cover ", total, " of the ", Volume(whole),
                                  " elements of the group region ", RegionText(whole),
                                  "; they must tile it"));
  }
  return absl::OkStatus();
}

absl::Status CheckKindGeometry(const TaskProto& task) {
  const CollectiveParams& params = task.collective();
  bool inputs_tile = false, outputs_tile = false;
  switch (params.kind()) {
    case CollectiveParams::ALL_REDUCE: break;
    case CollectiveParams::ALL_GATHER: inputs_tile = true; break;
    case CollectiveParams::REDUCE_SCATTER: outputs_tile = true; break;
    case CollectiveParams::ALL_TO_ALL: inputs_tile = outputs_tile = true; break;
    default:
      return PlanError(absl::StrCat(PlanIndex::TaskLabel(task), " has an unknown collective kind ",
                                    params.kind()));
  }
  RETURN_IF_ERROR(CheckSide(task, params.input_regions(), inputs_tile, "input"));
  return CheckSide(task, params.output_regions(), outputs_tile, "output");
}

bool SameCall(const CollectiveParams& a, const CollectiveParams& b) {
  return a.kind() == b.kind() &&
         std::equal(a.ranks().begin(), a.ranks().end(), b.ranks().begin(), b.ranks().end()) &&
         std::equal(a.logical_dims().begin(), a.logical_dims().end(), b.logical_dims().begin(),
                    b.logical_dims().end()) &&
         SameRegion(a.group_region(), b.group_region()) &&
         SameRegions(a.input_regions(), b.input_regions()) &&
         SameRegions(a.output_regions(), b.output_regions());
}

}  // namespace

absl::Status CheckCollectiveGeometry(const PlanIndex& index) {
  std::map<int64_t, const TaskProto*> first_of_call;  // global_order -> its first member task
  for (int64_t t = 0; t < index.num_tasks(); ++t) {
    const TaskProto& task = index.task(t);
    if (task.type() != TaskProto::COLLECTIVE) continue;
    RETURN_IF_ERROR(CheckMemberGeometry(index, task));
    auto [it, first] = first_of_call.emplace(task.collective().global_order(), &task);
    if (first) {
      RETURN_IF_ERROR(CheckKindGeometry(task));
    } else if (!SameCall(it->second->collective(), task.collective())) {
      return PlanError(absl::StrCat(
          PlanIndex::TaskLabel(task), " and ", PlanIndex::TaskLabel(*it->second),
          " are members of the collective with global_order ", task.collective().global_order(),
          " but disagree on its kind, ranks, logical_dims or regions"));
    }
  }
  return absl::OkStatus();
}

}  // namespace compiler
}  // namespace oneflow_like
