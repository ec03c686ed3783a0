// Where a value's registers are (Value::At: closed forms of the emission's first ids), and, for
// the lowering of one rank, the mirrors of other ranks' registers its TRANSFER tasks read: their
// id, producer, slots and name from the value that holds them, their count from the readers of
// every value holding them (the rule of lower.h), so that they equal the whole plan's mirrors.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/lower/lowering.h"
#include "oneflow_like/compiler/lower/registers.h"
#include "oneflow_like/compiler/proto_convert.h"

namespace oneflow_like {
namespace compiler {
namespace lower_internal {

std::string RankName(const std::string& base, Rank rank) { return absl::StrCat(base, "@r", rank.value()); }

TensorDesc ShardDesc(const TensorDesc& logical, const NdSbp& nd_sbp, const Placement& placement, int64_t index) {
  return TensorDesc{logical.dtype, PhysicalShape(logical.shape, nd_sbp, placement.hierarchy(), index)};
}

const char* OriginSuffix(Origin origin) {
  switch (origin) {
    case Origin::kRepeat: return ".repeated";
    case Origin::kAccumulate: return ".accumulated";
    default: return "";
  }
}

RegRef Value::At(int64_t device) const {
  switch (origin) {
    case Origin::kBoxed: {
      const int32_t v = boxing->plan.dst_values[device];
      if (v < boxing->plan.num_source_values()) return src->At(v);
      const int64_t offset = boxing->layout.value_offset[v];
      return RegRef{reg_base + offset, 0, task_base + offset};
    }
    case Origin::kBucket: {
      const int32_t v = boxing->plan.dst_values[device];
      const int32_t k = boxing->layout.value_step[v];
      const int64_t member = v - boxing->plan.steps[k].output;
      return RegRef{bucket[k].first_register + member, bucket[k].slot, bucket[k].first_task + member};
    }
    default:
      return RegRef{reg_base + device * reg_stride, 0, task_base + device};
  }
}

void ConsumerSummary::Add(int stage, int64_t position) {
  if (max_stage < min_stage) {
    min_stage = max_stage = stage;
  } else {
    min_stage = std::min(min_stage, stage);
    max_stage = std::max(max_stage, stage);
  }
  if (position >= 0) {
    first = first < 0 ? position : std::min(first, position);
    last = std::max(last, position);
  }
}

void ConsumerSummary::Merge(const ConsumerSummary& other) {
  if (other.max_stage < other.min_stage) return;
  Add(other.min_stage, other.first);
  Add(other.max_stage, other.last);
}

absl::Status Lowerer::AddValueMirror(const Value& value, int64_t device) {
  const RegRef ref = value.At(device);
  if (value.origin == Origin::kBoxed) {
    const int32_t v = value.boxing->plan.dst_values[device];
    if (v >= value.boxing->plan.num_source_values()) {
      AddBoxingMirror(*value.boxing, *value.src, value.reg_base, value.task_base, value.summary, v, device);
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(AddValueMirror(*value.src, v));
    mirror_facts_[ref.reg].summaries.emplace_back(value.summary, -1);
    return absl::OkStatus();
  }
  const TensorNode& t = graph_.tensor(value.tensor);
  if (value.origin == Origin::kBucket) {
    return absl::InternalError(absl::StrCat("lowering: a gradient bucket of '", t.name, "' is read by another rank"));
  }
  const Rank rank = value.placement.ranks()[device];
  RegisterProto mirror;
  mirror.set_id(ref.reg);
  mirror.mutable_producer()->set_task_id(ref.task);
  mirror.mutable_producer()->set_rank(rank.value());
  *mirror.add_slots() = TensorDescToProto(ShardDesc(*t.desc, value.nd_sbp, value.placement, device));
  mirror.mutable_remote()->set_rank(rank.value());
  mirror.set_name(RankName(absl::StrCat(t.name, OriginSuffix(value.origin)), rank));
  builder_.AddMirror(std::move(mirror));
  MirrorFacts& facts = mirror_facts_[ref.reg];
  facts.stage = value.stage;
  facts.position = value.position;
  facts.step_rate = value.step_rate;
  facts.summaries.emplace_back(value.summary, device);
  return absl::OkStatus();
}

void Lowerer::AddBoxingMirror(const CachedPlan& boxing, const Value& src, int64_t first_register,
                              int64_t first_task, int32_t owner, int32_t v, int64_t device) {
  const BoxingPlan& plan = boxing.plan;
  const BoxingValue& value = plan.values[v];
  const int64_t id = first_register + boxing.layout.value_offset[v];
  RegisterProto mirror;
  mirror.set_id(id);
  mirror.mutable_producer()->set_task_id(first_task + boxing.layout.value_offset[v]);
  mirror.mutable_producer()->set_rank(value.device.rank.value());
  *mirror.add_slots() = TensorDescToProto(TensorDesc{plan.desc.dtype, value.region.shape()});
  mirror.mutable_remote()->set_rank(value.device.rank.value());
  mirror.set_name(absl::StrCat(graph_.tensor(src.tensor).name, ".", BoxingKindName(plan.kind), ".v", OriginalValue(boxing.layout, v), "@r",
                               value.device.rank.value()));
  builder_.AddMirror(std::move(mirror));
  MirrorFacts& facts = mirror_facts_[id];
  facts.stage = src.stage;
  facts.position = src.position;
  facts.step_rate = src.step_rate;
  if (boxing.layout.is_destination[v]) facts.summaries.emplace_back(owner, device);
}

void Lowerer::CountMirrors(const StageInfo& stages) {
  for (auto& [id, mirror] : builder_.mirrors()) {
    const MirrorFacts& facts = mirror_facts_[id];
    ConsumerSummary readers;
    for (const auto& [summary, device] : facts.summaries) {
      readers.Merge(summaries_[summary]);
      if (device < 0) continue;
      auto aliases = aliases_.find(summary);
      if (aliases == aliases_.end()) continue;
      for (const auto& [alias, layout] : aliases->second) {
        if (layout->aliased_source[device]) readers.Merge(summaries_[alias]);
      }
    }
    if (auto paced = pacing_readers_.find(id); paced != pacing_readers_.end()) {
      for (const auto& [stage, position] : paced->second) readers.Add(stage, position);
    }
    mirror.set_count(RegisterCount(stages, pieces_per_step_, options_.max_register_count, facts.stage,
                                   facts.position, facts.step_rate, readers));
  }
}

}  // namespace lower_internal
}  // namespace compiler
}  // namespace oneflow_like
