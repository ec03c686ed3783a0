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
// A bucket (CollectiveParams.parts non-empty, "Buckets" in the doc) is an ALL_REDUCE or a
// REDUCE_SCATTER with one input per part and, as outputs, slots 0..K-1 of one register (+ slot
// K, the staging slot of a REDUCE_SCATTER: 1-D, the sum of the parts' group region volumes);
// every part passes the checks above as a geometry of its own (the same functions, given the
// part, the call's kind and ranks), all slots have one dtype, and members agree on the parts.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/compiler/plan/plan_checks.h"
#include "oneflow_like/compiler/plan/plan_errors.h"
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

using Ranks = google::protobuf::RepeatedField<int32_t>;

// "rank 0 task 1 'c' (COLLECTIVE)", or with ", part 2" for a part of a bucket.
std::string Subject(const TaskProto& task, int part) {
  return part < 0 ? PlanIndex::TaskLabel(task) : absl::StrCat(PlanIndex::TaskLabel(task), ", part ", part);
}

const TensorDescProto& SlotOf(const PlanIndex& index, const TaskProto& task, const SlotRefProto& ref) {
  return index.FindEntry(task.rank(), ref.register_id())->slots(ref.slot());  // CheckTasks: it exists
}

absl::Status CheckSlotShape(const PlanIndex& index, const TaskProto& task, const SlotRefProto& ref,
                            const RegionProto& region, const char* side, int member,
                            const std::string& subject) {
  const TensorDescProto& slot = SlotOf(index, task, ref);
  bool same = slot.dims_size() == region.begin_size();
  for (int a = 0; same && a < slot.dims_size(); ++a) {
    same = slot.dims(a) == region.end(a) - region.begin(a);
  }
  if (same) return absl::OkStatus();
  return PlanError(absl::StrCat(subject, ": its ", side, " slot is ", SlotText(slot),
                                " but member ", member, "'s ", side, " region ",
                                RegionText(region), " has another shape"));
}

// The per-member part of one geometry (a single collective's, or one part of a bucket): one
// region per member on each side, every region a box inside the group region inside the tensor.
absl::Status CheckBoxes(const CollectiveParams& geometry, const Ranks& ranks,
                        const std::string& subject) {
  const int group = ranks.size();
  if (geometry.input_regions_size() != group || geometry.output_regions_size() != group) {
    return PlanError(absl::StrCat(subject, " has ", geometry.input_regions_size(), " input and ",
                                  geometry.output_regions_size(), " output region(s) for a group of ",
                                  group, " rank(s); it needs one of each per member"));
  }
  const int axes = geometry.logical_dims_size();
  for (int64_t d : geometry.logical_dims()) {
    if (d < 0) return PlanError(absl::StrCat(subject, " has a negative logical dim ", d));
  }
  if (!geometry.has_group_region() ||
      !ValidBox(geometry.group_region(), axes, nullptr, &geometry.logical_dims())) {
    return PlanError(absl::StrCat(subject, ": group_region ", RegionText(geometry.group_region()),
                                  " is not a box inside the logical tensor [",
                                  absl::StrJoin(geometry.logical_dims(), ","), "]"));
  }
  for (int m = 0; m < group; ++m) {
    for (const auto& [regions, side] : {std::pair(&geometry.input_regions(), "input"),
                                        std::pair(&geometry.output_regions(), "output")}) {
      if (!ValidBox(regions->Get(m), axes, &geometry.group_region(), nullptr)) {
        return PlanError(absl::StrCat(subject, ": member ", m, " (rank ", ranks.Get(m), ") ", side,
                                      " region ", RegionText(regions->Get(m)),
                                      " is not a box inside the group region ",
                                      RegionText(geometry.group_region())));
      }
    }
  }
  return absl::OkStatus();
}

int Member(const TaskProto& task) {
  const auto& ranks = task.collective().ranks();
  return static_cast<int>(std::find(ranks.begin(), ranks.end(), task.rank()) - ranks.begin());
}

// A bucket member (CollectiveParams.parts; docs/plan_format.md "Buckets"): the kind, one input
// per part, its outputs slots 0..K-1 (+ the staging slot K of a REDUCE_SCATTER) of one
// register, every part's geometry and slot shapes, one dtype, the staging size.
absl::Status CheckBucket(const PlanIndex& index, const TaskProto& task) {
  const std::string label = PlanIndex::TaskLabel(task);
  const CollectiveParams& params = task.collective();
  const int parts = params.parts_size();
  const bool scatter = params.kind() == CollectiveParams::REDUCE_SCATTER;
  if (params.kind() != CollectiveParams::ALL_REDUCE && !scatter) {
    return PlanError(absl::StrCat(label, " is a bucket of ", parts, " part(s) but its kind is ",
                                  CollectiveParams::Kind_Name(params.kind()),
                                  "; only ALL_REDUCE and REDUCE_SCATTER calls are bucketed"));
  }
  const int outputs = parts + (scatter ? 1 : 0);
  if (task.inputs_size() != parts || task.outputs_size() != outputs) {
    return PlanError(absl::StrCat(label, ": a bucket of ", parts, " part(s) has ", task.inputs_size(),
                                  " payload input(s) and ", task.outputs_size(), " output(s); it needs ",
                                  parts, " and ", outputs, scatter ? " (one per part, and the staging slot)"
                                                                   : " (one per part)"));
  }
  const int64_t bucket = task.outputs(0).register_id();
  for (int k = 0; k < outputs; ++k) {
    if (task.outputs(k).register_id() == bucket && task.outputs(k).slot() == k) continue;
    return PlanError(absl::StrCat(label, ": output ", k, " is slot ", task.outputs(k).slot(),
                                  " of register ", task.outputs(k).register_id(),
                                  ", not slot ", k, " of register ", bucket,
                                  "; a bucket's outputs are the slots of one register in part order"));
  }
  const int member = Member(task);
  const TensorDescProto& first = SlotOf(index, task, task.inputs(0));
  int64_t staged = 0;
  for (int k = 0; k < parts; ++k) {
    const CollectiveParams& part = params.parts(k);
    const std::string subject = Subject(task, k);
    if (part.parts_size() > 0) return PlanError(subject + " has parts of its own");
    RETURN_IF_ERROR(CheckBoxes(part, params.ranks(), subject));
    RETURN_IF_ERROR(CheckSlotShape(index, task, task.inputs(k), part.input_regions(member), "input",
                                   member, subject));
    RETURN_IF_ERROR(CheckSlotShape(index, task, task.outputs(k), part.output_regions(member),
                                   "output", member, subject));
    for (const SlotRefProto* ref : {&task.inputs(k), &task.outputs(k)}) {
      const TensorDescProto& slot = SlotOf(index, task, *ref);
      if (slot.dtype() == first.dtype()) continue;
      return PlanError(absl::StrCat(subject, ": its ", ref == &task.inputs(k) ? "input" : "output",
                                    " slot is ", SlotText(slot), " but part 0's input is ",
                                    SlotText(first), "; every slot of a bucket has one dtype"));
    }
    staged += Volume(part.group_region());
  }
  if (!scatter) return absl::OkStatus();
  const TensorDescProto& staging = SlotOf(index, task, task.outputs(parts));
  if (staging.dtype() != first.dtype() || staging.dims_size() != 1 || staging.dims(0) != staged) {
    return PlanError(absl::StrCat(label, ": its staging slot (output ", parts, ") is ",
                                  SlotText(staging), "; it must be 1-D with the ", staged,
                                  " elements of the parts' group regions, dtype of the parts"));
  }
  return absl::OkStatus();
}

// The per-task part: counts, boxes, slot shapes.
absl::Status CheckMemberGeometry(const PlanIndex& index, const TaskProto& task) {
  const CollectiveParams& params = task.collective();
  if (params.parts_size() > 0) return CheckBucket(index, task);
  const std::string label = PlanIndex::TaskLabel(task);
  RETURN_IF_ERROR(CheckBoxes(params, params.ranks(), label));
  for (const auto& [refs, side] : {std::pair(&task.inputs(), "input"), std::pair(&task.outputs(), "output")}) {
    if (refs->size() == 1) continue;
    return PlanError(absl::StrCat(label, " has ", refs->size(), " payload ", side,
                                  "s; a COLLECTIVE member has exactly one"));
  }
  const int member = Member(task);  // CheckTasks: the rank is in the group
  RETURN_IF_ERROR(CheckSlotShape(index, task, task.inputs(0), params.input_regions(member), "input",
                                 member, label));
  return CheckSlotShape(index, task, task.outputs(0), params.output_regions(member), "output",
                        member, label);
}

// The per-call part: the regions of one side of one geometry fit the kind.
absl::Status CheckSide(const CollectiveParams& geometry, const Ranks& ranks, const std::string& head,
                       const Regions& regions, bool tiles, const char* side) {
  const RegionProto& whole = geometry.group_region();
  if (!tiles) {
    for (int m = 0; m < regions.size(); ++m) {
      if (SameRegion(regions.Get(m), whole)) continue;
      return PlanError(absl::StrCat(head, "member ", m, " (rank ", ranks.Get(m), ") ", side,
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
                                    ranks.Get(other), ") ", RegionText(regions.Get(other)),
                                    " and member ", m, " (rank ", ranks.Get(m), ") ",
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

absl::Status CheckKind(const CollectiveParams& geometry, CollectiveParams::Kind kind,
                       const Ranks& ranks, const std::string& subject) {
  bool inputs_tile = false, outputs_tile = false;
  switch (kind) {
    case CollectiveParams::ALL_REDUCE: break;
    case CollectiveParams::ALL_GATHER: inputs_tile = true; break;
    case CollectiveParams::REDUCE_SCATTER: outputs_tile = true; break;
    case CollectiveParams::ALL_TO_ALL: inputs_tile = outputs_tile = true; break;
    default:
      return PlanError(absl::StrCat(subject, " has an unknown collective kind ", kind));
  }
  const std::string head = absl::StrCat(subject, " (", CollectiveParams::Kind_Name(kind), "): ");
  RETURN_IF_ERROR(CheckSide(geometry, ranks, head, geometry.input_regions(), inputs_tile, "input"));
  return CheckSide(geometry, ranks, head, geometry.output_regions(), outputs_tile, "output");
}

absl::Status CheckKindGeometry(const TaskProto& task) {
  const CollectiveParams& params = task.collective();
  if (params.parts_size() == 0) return CheckKind(params, params.kind(), params.ranks(), Subject(task, -1));
  for (int k = 0; k < params.parts_size(); ++k) {
    RETURN_IF_ERROR(CheckKind(params.parts(k), params.kind(), params.ranks(), Subject(task, k)));
  }
  return absl::OkStatus();
}

bool SameGeometry(const CollectiveParams& a, const CollectiveParams& b) {
  return std::equal(a.logical_dims().begin(), a.logical_dims().end(), b.logical_dims().begin(),
                    b.logical_dims().end()) &&
         SameRegion(a.group_region(), b.group_region()) &&
         SameRegions(a.input_regions(), b.input_regions()) &&
         SameRegions(a.output_regions(), b.output_regions());
}

}  // namespace

std::string CollectiveCallDifference(const CollectiveParams& a, const CollectiveParams& b) {
  if (a.kind() != b.kind()) return "its kind";
  if (!std::equal(a.ranks().begin(), a.ranks().end(), b.ranks().begin(), b.ranks().end())) {
    return "its ranks";
  }
  if (!SameGeometry(a, b)) return "its logical_dims or regions";
  if (a.issue_phase() != b.issue_phase()) {  // members would issue it at different places
    return absl::StrCat("its issue_phase (", CollectiveParams::IssuePhase_Name(a.issue_phase()), " and ",
                        CollectiveParams::IssuePhase_Name(b.issue_phase()), ")");
  }
  if (a.issue_pieces_in_flight() != b.issue_pieces_in_flight() || a.issue_backward() != b.issue_backward()) {
    return "its place among the pieces (issue_pieces_in_flight / issue_backward)";
  }
  if (a.parts_size() != b.parts_size()) {
    return absl::StrCat("its number of parts (", a.parts_size(), " and ", b.parts_size(), ")");
  }
  for (int k = 0; k < a.parts_size(); ++k) {
    if (!SameGeometry(a.parts(k), b.parts(k))) {
      return absl::StrCat("part ", k, " (its logical_dims or regions)");
    }
  }
  return "";
}

absl::Status CheckCollectiveGeometry(const PlanIndex& index, const EarlierCallMember& earlier_call) {
  std::map<int64_t, const TaskProto*> first_of_call;  // global_order -> its first member task
  for (int64_t t = 0; t < index.num_tasks(); ++t) {
    const TaskProto& task = index.task(t);
    if (task.type() != TaskProto::COLLECTIVE) continue;
    RETURN_IF_ERROR(CheckMemberGeometry(index, task));
    if (earlier_call && earlier_call(task)) continue;
    auto [it, first] = first_of_call.emplace(task.collective().global_order(), &task);
    if (first) {
      RETURN_IF_ERROR(CheckKindGeometry(task));
    } else if (const std::string difference = CollectiveCallDifference(it->second->collective(), task.collective());
               !difference.empty()) {
      return CallDifferenceError(PlanIndex::TaskLabel(task), PlanIndex::TaskLabel(*it->second),
                                 task.collective().global_order(), difference);
    }
  }
  return absl::OkStatus();
}

}  // namespace compiler
}  // namespace oneflow_like
