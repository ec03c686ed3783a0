#include "oneflow_like/compiler/boxing/boxing_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"

namespace oneflow_like {
namespace compiler {

Region Region::Whole(const Shape& shape) {
  Region r;
  r.begin.assign(shape.num_axes(), 0);
  r.end.assign(shape.dims().begin(), shape.dims().end());
  return r;
}

Region Region::OfShard(const ShardSlice& slice) {
  Region r;
  r.begin.assign(slice.offset.begin(), slice.offset.end());
  r.end = r.begin;
  for (int a = 0; a < slice.shape.num_axes(); ++a) r.end[a] += slice.shape.dim(a);
  return r;
}

int64_t Region::elem_count() const {
  int64_t n = 1;
  for (int a = 0; a < num_axes(); ++a) n *= std::max<int64_t>(0, dim(a));
  return n;
}

Shape Region::shape() const {
  std::vector<int64_t> dims(num_axes());
  for (int a = 0; a < num_axes(); ++a) dims[a] = dim(a);
  return Shape(std::move(dims));
}

bool Region::Contains(const Region& inner) const {
  if (inner.num_axes() != num_axes()) return false;
  for (int a = 0; a < num_axes(); ++a) {
    if (inner.begin[a] < begin[a] || inner.end[a] > end[a]) return false;
  }
  return true;
}

std::string Region::ToString() const {
  std::string out = "[";
  for (int a = 0; a < num_axes(); ++a) absl::StrAppend(&out, a ? "," : "", begin[a], ":", end[a]);
  return out + "]";
}

Region Intersect(const Region& a, const Region& b) {
  CHECK_EQ(a.num_axes(), b.num_axes());
  Region r = a;
  for (int i = 0; i < a.num_axes(); ++i) {
    r.begin[i] = std::max(a.begin[i], b.begin[i]);
    r.end[i] = std::max(r.begin[i], std::min(a.end[i], b.end[i]));
  }
  return r;
}

Region RelativeTo(const Region& inner, const Region& outer) {
  CHECK(outer.Contains(inner)) << inner.ToString() << " is not inside " << outer.ToString();
  Region r = inner;
  for (int a = 0; a < inner.num_axes(); ++a) {
    r.begin[a] -= outer.begin[a];
    r.end[a] -= outer.begin[a];
  }
  return r;
}

std::string BoxingKindName(BoxingKind kind) {
  switch (kind) {
    case BoxingKind::kIdentity: return "identity";
    case BoxingKind::kAllGather: return "all_gather";
    case BoxingKind::kAllReduce: return "all_reduce";
    case BoxingKind::kReduceScatter: return "reduce_scatter";
    case BoxingKind::kAllToAll: return "all_to_all";
    case BoxingKind::kLocalSlice: return "local_slice";
    case BoxingKind::kBroadcastToPartial: return "broadcast_to_partial";
    case BoxingKind::kSplitToPartial: return "split_to_partial";
    case BoxingKind::kCrossPlacement: return "cross_placement";
    case BoxingKind::kNd: return "nd";
  }
  return "unknown";
}

std::string BoxingScheduleName(BoxingSchedule schedule) {
  switch (schedule) {
    case BoxingSchedule::kNone: return "none";
    case BoxingSchedule::kDirect: return "direct";
    case BoxingSchedule::kRing: return "ring";
    case BoxingSchedule::kStaged: return "staged";
    case BoxingSchedule::kCollective: return "collective";
  }
  return "unknown";
}

std::string StepKindName(StepKind kind) {
  switch (kind) {
    case StepKind::kSlice: return "slice";
    case StepKind::kTransfer: return "transfer";
    case StepKind::kAdd: return "add";
    case StepKind::kConcat: return "concat";
    case StepKind::kZeros: return "zeros";
    case StepKind::kCollective: return "collective";
    case StepKind::kCopy: return "copy";
  }
  return "unknown";
}

std::string CollectiveKindName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kAllToAll: return "all_to_all";
  }
  return "unknown";
}

std::vector<int32_t> BoxingPlan::StepsOfRank(Rank rank) const {
  std::vector<int32_t> out;
  for (size_t i = 0; i < steps.size(); ++i) {
    const BoxingStep& s = steps[i];
    bool mine = s.rank == rank || (s.kind == StepKind::kTransfer && s.peer == rank) ||
                (s.kind == StepKind::kCollective && std::find(s.group.begin(), s.group.end(), rank) != s.group.end());
    if (mine) out.push_back(static_cast<int32_t>(i));
  }
  return out;
}

int64_t BoxingPlan::CountSteps(StepKind kind, Rank rank) const {
  int64_t n = 0;
  for (const BoxingStep& s : steps) {
    if (s.kind != kind) continue;
    if (rank.valid() && s.rank != rank &&
        !(s.kind == StepKind::kCollective && std::find(s.group.begin(), s.group.end(), rank) != s.group.end())) {
      continue;
    }
    ++n;
  }
  return n;
}

std::string BoxingPlan::ToString() const {
  std::string out = absl::StrCat("boxing ", desc.ToString(), " ", src_placement.ToString(), " ", src_sbp.ToString(),
                                 " -> ", dst_placement.ToString(), " ", dst_sbp.ToString(), ": ", BoxingKindName(kind),
                                 ", ", schedule_detail.empty() ? BoxingScheduleName(schedule) : schedule_detail, "\n");
  auto vals = [](const auto& ids) {
    return absl::StrJoin(ids, ",", [](std::string* o, int32_t v) { absl::StrAppend(o, "v", v); });
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    const BoxingStep& s = steps[i];
    absl::StrAppend(&out, i, ": ", StepKindName(s.kind));
    if (s.kind == StepKind::kCollective) {
      absl::StrAppend(&out, " ", CollectiveKindName(s.collective), " group [",
                      absl::StrJoin(s.group, ",", [](std::string* o, Rank r) { absl::StrAppend(o, r.value()); }),
                      "] ", vals(s.inputs), " -> v", s.output, "..v", s.output + static_cast<int32_t>(s.group.size()) - 1);
    } else {
      absl::StrAppend(&out, " r", s.rank.value());
      if (s.kind == StepKind::kTransfer) absl::StrAppend(&out, " <- r", s.peer.value());
      if (s.kind == StepKind::kCopy && !s.inputs.empty()) {
        absl::StrAppend(&out, " ", DeviceTypeName(values[s.inputs[0]].device.type), " -> ",
                        DeviceTypeName(values[s.output].device.type));
      }
      absl::StrAppend(&out, " ", vals(s.inputs), " -> v", s.output, " ", values[s.output].region.ToString());
    }
    absl::StrAppend(&out, " ", s.bytes, "B\n");
  }
  absl::StrAppend(&out, "dst: ", vals(dst_values), "\n");
  return out;
}

}  // namespace compiler
}  // namespace oneflow_like
