// Gradient buckets: the optimizer's data-parallel gradient collectives grouped into a few large
// calls, in the order backward produces the gradients (rules in lower.h, the task format in
// docs/plan_format.md "Buckets").
#include <algorithm>
#include <map>
#include <tuple>

#include "absl/container/flat_hash_set.h"

#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/lower/lowering.h"

namespace oneflow_like {
namespace compiler {
namespace lower_internal {
namespace {

int64_t Volume(const RegionProto& r) {
  int64_t v = 1;
  for (int a = 0; a < r.begin_size(); ++a) v *= r.end(a) - r.begin(a);
  return v;
}

// One gradient an optimizer reads through a bucketable boxing.
struct Gradient {
  TensorId tensor;
  Placement placement;  // the optimizer's layout
  NdSbp nd_sbp;
  const CachedPlan* boxing = nullptr;
  const Value* src = nullptr;  // what is boxed: the producer's value (accumulated when pieces_per_step > 1)
  std::vector<Value::BucketStep> steps;  // by step of its plan: the bucket holding it
};

struct Bucket {
  std::vector<Rank> group;
  CollectiveKind kind = CollectiveKind::kAllReduce;
  std::vector<std::pair<size_t, size_t>> parts;  // (gradient, step of its plan)
  int64_t bytes = 0;
};

}  // namespace

absl::Status Lowerer::EmitGradientBuckets(int64_t first_optimizer_position) {
  if (options_.bucket_bytes <= 0) return absl::OkStatus();
  std::vector<Gradient> gradients;
  absl::flat_hash_set<ValueKey> seen;
  for (OpId id : graph_.op_order()) {
    const OpNode& op = graph_.op(id);
    if (!op.def->is_optimizer) continue;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const TensorId tensor = op.inputs[i];
      const Value& native = native_[tensor.value()];
      if (graph_.tensor(tensor).is_source() || !native.defined || native.position >= first_optimizer_position) {
        continue;
      }
      const NdSbp& nd_sbp = op.nd_sbp_signature->inputs[i];
      if (native.placement == *op.placement && native.nd_sbp == nd_sbp) continue;  // no boxing
      ValueKey key{tensor.value(), *op.placement, nd_sbp, multi_rate_};
      if (values_.count(key) > 0 || !seen.insert(key).second) continue;
      ASSIGN_OR_RETURN(const CachedPlan* cached, PlanFor(tensor, native, *op.placement, nd_sbp, /*use=*/false));
      if (!cached->layout.collectives_only) continue;
      Gradient g{tensor, *op.placement, nd_sbp, cached, &native, {}};
      if (multi_rate_ && !native.step_rate) {  // sum the micro-batches first, in the producer's layout
        ASSIGN_OR_RETURN(g.src, GetValue(tensor, native.placement, native.nd_sbp, /*step_rate=*/true));
      }
      g.steps.resize(cached->plan.steps.size());
      gradients.push_back(std::move(g));
    }
  }
  // Production order: backward makes the last layers' gradients first.
  std::stable_sort(gradients.begin(), gradients.end(), [](const Gradient& a, const Gradient& b) {
    return a.src->position < b.src->position;
  });

  std::vector<Bucket> buckets;
  std::vector<size_t> closed;  // bucket indices in the order they fill up
  std::map<std::tuple<std::vector<Rank>, CollectiveKind, DataType>, size_t> open;
  for (size_t g = 0; g < gradients.size(); ++g) {
    const BoxingPlan& plan = gradients[g].boxing->plan;
    for (size_t k = 0; k < plan.steps.size(); ++k) {
      const BoxingStep& step = plan.steps[k];
      const auto key = std::make_tuple(step.group, step.collective, plan.desc.dtype);
      auto it = open.find(key);
      if (it == open.end()) {
        it = open.emplace(key, buckets.size()).first;
        buckets.push_back(Bucket{step.group, step.collective, {}, 0});
      }
      Bucket& bucket = buckets[it->second];
      bucket.parts.emplace_back(g, k);
      bucket.bytes += gradients[g].boxing->layout.group_volume[k] * SizeOf(plan.desc.dtype);
      if (bucket.bytes >= options_.bucket_bytes) {
        closed.push_back(it->second);
        open.erase(it);
      }
    }
  }
  for (size_t b = 0; b < buckets.size(); ++b) {  // the rest, in the order they were opened
    if (std::find(closed.begin(), closed.end(), b) == closed.end()) closed.push_back(b);
  }

  for (size_t n = 0; n < closed.size(); ++n) {
    const Bucket& bucket = buckets[closed[n]];
    const bool scatter = bucket.kind == CollectiveKind::kReduceScatter;
    const int64_t members = static_cast<int64_t>(bucket.group.size());
    const int64_t first_task = builder_.ReserveTasks(members);
    const int64_t first_register = builder_.ReserveRegisters(members);
    const int64_t order = next_collective_order_++;
    int64_t position = -1;
    for (size_t p = 0; p < bucket.parts.size(); ++p) {
      const auto& [g, k] = bucket.parts[p];
      gradients[g].steps[k] = Value::BucketStep{first_task, first_register, static_cast<int32_t>(p)};
      position = std::max(position, gradients[g].src->position);
    }
    std::vector<int64_t> emitted;  // members built here
    for (int64_t m = 0; m < members; ++m) {
      if (builder_.Emits(bucket.group[m].value())) emitted.push_back(m);
    }
    if (emitted.empty()) continue;
    CollectiveParams params;
    params.set_kind(static_cast<CollectiveParams::Kind>(bucket.kind));
    for (Rank r : bucket.group) params.add_ranks(r.value());
    params.set_global_order(order);
    SetIssueFields(*gradients[bucket.parts.front().first].src, &params);
    for (const auto& part : bucket.parts) {  // parts of one rate; the latest phase of any of them
      params.set_issue_phase(std::max(params.issue_phase(), IssuePhaseOf(*gradients[part.first].src)));
    }
    int64_t staging = 0;
    for (const auto& [g, k] : bucket.parts) {
      const BoxingPlan& plan = gradients[g].boxing->plan;
      *params.add_parts() = CollectiveGeometry(plan, plan.steps[k]);
      staging += Volume(params.parts().rbegin()->group_region());
    }
    const Value& first = *gradients[bucket.parts.front().first].src;
    const DataType dtype = gradients[bucket.parts.front().first].boxing->plan.desc.dtype;
    const std::string name = absl::StrCat("grad_bucket", n, ".", CollectiveKindName(bucket.kind));
    for (int64_t m : emitted) {
      TaskInfo info = NewTask(TaskProto::COLLECTIVE, bucket.group[m], first.placement.device_type(), name, "",
                              first.stage, position);
      *info.proto.mutable_collective() = params;
      const int64_t task = builder_.AddTask(first_task + m, std::move(info));
      const int64_t reg = first_register + m;
      for (size_t p = 0; p < bucket.parts.size(); ++p) {
        const auto& [g, k] = bucket.parts[p];
        const BoxingPlan& plan = gradients[g].boxing->plan;
        const BoxingStep& step = plan.steps[k];
        const TensorDesc desc{dtype, plan.values[step.output + static_cast<int32_t>(m)].region.shape()};
        if (p == 0) {
          builder_.AddRegister(reg, task, desc, absl::StrCat("grad_bucket", n, "@r", bucket.group[m].value()),
                               first.step_rate);
        } else {
          builder_.AddSlot(reg, desc);
        }
        const RegRef in = gradients[g].src->At(step.inputs[m]);  // a source value: a device of src
        builder_.AddInput(task, in.reg, in.slot);
      }
      if (scatter) builder_.AddSlot(reg, TensorDesc{dtype, Shape({staging})});
    }
  }

  for (Gradient& gradient : gradients) {
    const BoxingPlan& plan = gradient.boxing->plan;
    Value result{gradient.placement, gradient.nd_sbp, gradient.src->step_rate, gradient.src->stage,
                 gradient.src->position, true, gradient.tensor};
    result.origin = Origin::kBucket;
    result.after_pieces = gradient.src->after_pieces;
    result.boxing = gradient.boxing;
    result.bucket = std::move(gradient.steps);
    result.summary = NewSummary();
    for (int64_t d : EmittedDevices(gradient.placement)) {
      const int32_t v = plan.dst_values[d];
      if (v < 0 || v >= static_cast<int32_t>(plan.values.size()) || gradient.boxing->layout.value_step[v] < 0) {
        return absl::InternalError(absl::StrCat("lowering: bucketed gradient '", graph_.tensor(gradient.tensor).name,
                                                "' has no bucket slot for device ", d));
      }
    }
    ASSIGN_OR_RETURN(const CachedPlan* counted,  // counts the use (kAuto), as the whole boxing would
                     PlanFor(gradient.tensor, *gradient.src, gradient.placement, gradient.nd_sbp, /*use=*/true));
    (void)counted;
    values_.emplace(ValueKey{gradient.tensor.value(), gradient.placement, gradient.nd_sbp, multi_rate_},
                    std::move(result));
  }
  return absl::OkStatus();
}

}  // namespace lower_internal
}  // namespace compiler
}  // namespace oneflow_like
