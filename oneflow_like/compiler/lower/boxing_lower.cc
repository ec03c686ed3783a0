// Boxing lowering: one BoxingPlan (SSA steps on devices) -> TRANSFER, COPY, BOXING_* and
// COLLECTIVE tasks, one register per plan value (rules in lower.h). One rank builds the steps it runs and,
// for the transfers it sends, names the receiving task (AddRemoteConsumer); for the transfers
// it receives, the sender's register (a mirror).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/lower/lowering.h"

namespace oneflow_like {
namespace compiler {
namespace lower_internal {
namespace {

RegionProto ToProto(const Region& region) {
  return MakeRegion(std::vector<int64_t>(region.begin.begin(), region.begin.end()),
                    std::vector<int64_t>(region.end.begin(), region.end.end()));
}

// The smallest box holding every region of `regions` (all of the same rank, at least one).
Region BoundingBox(const std::vector<Region>& regions) {
  Region box = regions.front();
  for (const Region& r : regions) {
    for (int a = 0; a < box.num_axes(); ++a) {
      box.begin[a] = std::min(box.begin[a], r.begin[a]);
      box.end[a] = std::max(box.end[a], r.end[a]);
    }
  }
  return box;
}

// Whether `plan` is one COPY per device and nothing else (no destination reuses a source).
bool CopiesOnly(const BoxingPlan& plan) {
  if (plan.steps.empty()) return false;
  for (const BoxingStep& step : plan.steps) {
    if (step.kind != StepKind::kCopy) return false;
  }
  for (int32_t v : plan.dst_values) {
    if (v < plan.num_source_values()) return false;
  }
  return true;
}

}  // namespace

CollectiveParams CollectiveGeometry(const BoxingPlan& plan, const BoxingStep& step) {
  CollectiveParams params;
  // The geometry a backend needs (docs/plan_format.md): logical boxes of every member's input
  // and output, and the group's box (their bounding box: for a 1-D placement the whole tensor,
  // on a mesh the box shared by the devices along the collective's axis).
  for (int64_t d : plan.desc.shape.dims()) params.add_logical_dims(d);
  std::vector<Region> all_regions;
  for (size_t m = 0; m < step.group.size(); ++m) {
    const Region& in = plan.values[step.inputs[m]].region;
    const Region& out = plan.values[step.output + static_cast<int32_t>(m)].region;
    *params.add_input_regions() = ToProto(in);
    *params.add_output_regions() = ToProto(out);
    all_regions.push_back(in);
    all_regions.push_back(out);
  }
  if (!all_regions.empty()) *params.mutable_group_region() = ToProto(BoundingBox(all_regions));
  return params;
}

void Lowerer::SetIssueFields(const Value& v, CollectiveParams* params) const {
  params->set_issue_phase(IssuePhaseOf(v));
  if (params->issue_phase() != CollectiveParams::PER_PIECE) return;
  // A stage keeps as many pieces in flight as its activations' registers hold (registers.cc:
  // min(N, S - stage), capped by max_register_count); 1 without a pipeline, or when a rank works
  // for several stages (one 1F1B order per rank then would not fit every stage). The stage is
  // the one the members' ranks work for (every rank of the rank's calls then agrees).
  // Only where the constructor found that order feasible (pipeline_issue_order_).
  int64_t in_flight = 1;
  if (pipeline_issue_order_) {
    int stage = v.stage;
    if (params->ranks_size() > 0) {
      if (auto it = stage_of_rank_.find(params->ranks(0)); it != stage_of_rank_.end()) stage = it->second;
    }
    in_flight = std::min<int64_t>(pieces_per_step_, num_stages_ - stage);
    if (options_.max_register_count > 0) in_flight = std::min<int64_t>(in_flight, options_.max_register_count);
    in_flight = std::max<int64_t>(in_flight, 1);
  }
  params->set_issue_pieces_in_flight(static_cast<int32_t>(in_flight));
  // Backward: the value is made after the loss, or boxed for an op after it (a forward value
  // such as the tokens gathered for the embedding's gradient: its register has one buffer,
  // read by that backward op, so a forward slot for the call would wait for the previous
  // piece's backward -- a deadlock under the 1F1B order). Emission follows program order, so
  // "boxed for an op after the loss" is "emitted once the first such op is" (the PhaseSplit
  // boundary, registers.h).
  params->set_issue_backward(loss_position_ >= 0 && (v.position > loss_position_ || first_backward_task_ >= 0));
}

absl::StatusOr<Value> Lowerer::EmitBoxing(TensorId tensor, const Value& src, const Placement& placement,
                                          const NdSbp& nd_sbp) {
  const TensorNode& t = graph_.tensor(tensor);
  auto describe = [&] {
    return BoxingRequest{*t.desc, src.placement, src.nd_sbp, placement, nd_sbp, absl::StrCat("tensor '", t.name, "'")}
        .ToString();
  };
  if (src.origin == Origin::kBucket) {
    return absl::InternalError(absl::StrCat("lowering ", describe(), ": boxes a bucket slot"));
  }
  // values.cc names a source value's registers through src: only a value whose every register
  // is its own (copies to another device, expand.cc GetValue) may be boxed again. (Lowering one
  // rank, a plan it takes no part in is kept as counts only: then it takes no part in this one.)
  if (src.origin == Origin::kBoxed && src.boxing->complete && !CopiesOnly(src.boxing->plan)) {
    return absl::InternalError(absl::StrCat("lowering ", describe(), ": boxes a boxed value"));
  }
  ASSIGN_OR_RETURN(const CachedPlan* cached, PlanFor(tensor, src, placement, nd_sbp, /*use=*/true));
  const BoxingPlan& plan = cached->plan;
  const PlanLayout& layout = cached->layout;
  const std::string base = absl::StrCat(t.name, ".", BoxingKindName(plan.kind));
  Value result{placement, nd_sbp, src.step_rate, src.stage, src.position, true, tensor};
  result.origin = Origin::kBoxed;
  result.after_pieces = src.after_pieces;
  result.boxing = cached;
  result.src = &src;
  result.task_base = builder_.ReserveTasks(layout.num_tasks);
  result.reg_base = builder_.ReserveRegisters(layout.num_tasks);
  result.summary = NewSummary();
  const int64_t first_order = next_collective_order_;
  next_collective_order_ += layout.num_collectives;
  const int32_t num_sources = plan.num_source_values();
  auto register_of = [&](int32_t v) {
    return v < num_sources ? src.At(v).reg : result.reg_base + layout.value_offset[v];
  };
  const bool partial = builder_.partial();  // one rank or a range: local_steps only

  auto bug = [&](size_t k, const std::string& what) {
    return absl::InternalError(absl::StrCat("lowering ", describe(), ": boxing step ", k, " (",
                                            StepKindName(plan.steps[k].kind), ") ", what));
  };
  // The task of value `output` (its register: the same offset) and its register.
  auto emit = [&](TaskInfo info, int32_t output) {
    const int64_t offset = layout.value_offset[output];
    const int64_t task = builder_.AddTask(result.task_base + offset, std::move(info));
    const BoxingValue& out = plan.values[output];
    builder_.AddRegister(result.reg_base + offset, task, TensorDesc{t.desc->dtype, out.region.shape()},
                         absl::StrCat(base, ".v", OriginalValue(layout, output), "@r", out.device.rank.value()), src.step_rate);
    return task;
  };
  auto new_task = [&](TaskProto::Type type, const BoxingValue& where, const std::string& suffix) {
    return NewTask(type, where.device.rank, where.device.type, absl::StrCat(base, ".", suffix), "", src.stage,
                   src.position);
  };

  auto emit_step = [&](size_t k) -> absl::Status {
    const BoxingStep& step = plan.steps[k];
    for (int32_t in : step.inputs) {
      if (in < 0 || in >= static_cast<int32_t>(plan.values.size()) ||
          (in >= num_sources && (layout.value_step[in] < 0 || layout.value_step[in] >= static_cast<int32_t>(k)))) {
        return bug(k, absl::StrCat("reads undefined value ", in));
      }
    }
    if (step.kind == StepKind::kCollective) {
      if (step.inputs.size() != step.group.size()) return bug(k, "has one input per group member missing");
      if (step.output < 0 || step.output + step.group.size() > plan.values.size()) {
        return bug(k, "defines outputs past the plan's values");
      }
      if (step.group.empty()) return bug(k, "has an empty group");
      CollectiveParams params = CollectiveGeometry(plan, step);
      params.set_kind(static_cast<CollectiveParams::Kind>(step.collective));
      for (Rank r : step.group) params.add_ranks(r.value());
      params.set_global_order(first_order + layout.collective_index[k]);
      SetIssueFields(src, &params);
      for (size_t m = 0; m < step.group.size(); ++m) {
        if (!builder_.Emits(step.group[m].value())) continue;
        const int32_t output = step.output + static_cast<int32_t>(m);
        const BoxingValue& out = plan.values[output];
        if (plan.values[step.inputs[m]].device.rank != step.group[m] || out.device.rank != step.group[m]) {
          return bug(k, absl::StrCat("member ", m, " is not on rank ", step.group[m].value()));
        }
        TaskInfo info = new_task(TaskProto::COLLECTIVE, out, CollectiveKindName(step.collective));
        *info.proto.mutable_collective() = params;
        const int64_t task = emit(std::move(info), output);
        builder_.AddInput(task, register_of(step.inputs[m]));
      }
      return absl::OkStatus();
    }
    if (step.output < 0 || step.output >= static_cast<int32_t>(plan.values.size())) {
      return bug(k, "defines a value past the plan's values");
    }
    const BoxingValue& out = plan.values[step.output];
    if (out.device.rank != step.rank) return bug(k, "defines a value on another rank");
    if (step.kind == StepKind::kTransfer) {
      if (step.inputs.size() != 1) return bug(k, "needs exactly one input");
      const int32_t input = step.inputs[0];
      const BoxingValue& in = plan.values[input];
      if (in.device.rank != step.peer) return bug(k, "sends a value its peer does not hold");
      if (in.region != out.region) return bug(k, "moves part of a value (the planner slices first)");
      TaskInfo info = new_task(TaskProto::TRANSFER, out, absl::StrCat("from_r", step.peer.value()));
      info.proto.mutable_transfer()->set_peer_rank(step.peer.value());
      if (!builder_.Emits(step.rank.value())) {  // sent from here: the receiving task reads a local register
        info.proto.set_id(result.task_base + layout.value_offset[step.output]);
        builder_.AddRemoteConsumer(register_of(input), info);
        return absl::OkStatus();
      }
      if (!builder_.Emits(step.peer.value())) {  // received here: the sender's register is mirrored
        if (input < num_sources) {
          RETURN_IF_ERROR(AddValueMirror(src, input));
        } else {
          AddBoxingMirror(*cached, src, result.reg_base, result.task_base, result.summary, input);
        }
      }
      const int64_t task = emit(std::move(info), step.output);
      builder_.AddInput(task, register_of(input));
      return absl::OkStatus();
    }
    if (step.kind == StepKind::kCopy) {
      if (step.inputs.size() != 1) return bug(k, "needs exactly one input");
      const BoxingValue& in = plan.values[step.inputs[0]];
      if (in.device.rank != step.rank) return bug(k, "copies a value held by another rank");
      if (in.device.type == out.device.type) return bug(k, "copies between two devices of one type");
      if (in.region != out.region) return bug(k, "copies part of a value (the planner slices first)");
      // The copy runs on the device side (its H2D or D2H stream): the device that is not the host.
      const bool to_device = in.device.type == DeviceType::kCpu;
      const BoxingValue runs_on{to_device ? out.device : in.device, out.region};
      TaskInfo info = new_task(TaskProto::COPY, runs_on, to_device ? "h2d" : "d2h");
      *info.proto.mutable_copy()->mutable_from() = MakeDevice(in.device.type);
      *info.proto.mutable_copy()->mutable_to() = MakeDevice(out.device.type);
      const int64_t task = emit(std::move(info), step.output);
      builder_.AddInput(task, register_of(step.inputs[0]));
      return absl::OkStatus();
    }
    for (int32_t in : step.inputs) {
      if (plan.values[in].device.rank != step.rank) return bug(k, "reads a value held by another rank");
    }
    TaskInfo info;
    switch (step.kind) {
      case StepKind::kSlice: {
        if (step.inputs.size() != 1) return bug(k, "needs exactly one input");
        const Region& in = plan.values[step.inputs[0]].region;
        if (!in.Contains(out.region)) return bug(k, "slices outside its input");
        info = new_task(TaskProto::BOXING_SLICE, out, "slice");
        *info.proto.mutable_slice()->add_output_regions() = ToProto(RelativeTo(out.region, in));
        break;
      }
      case StepKind::kConcat:
      case StepKind::kZeros: {
        info = new_task(TaskProto::BOXING_CONCAT, out, step.kind == StepKind::kZeros ? "zeros" : "concat");
        ConcatParams* concat = info.proto.mutable_concat();
        for (int32_t in : step.inputs) {
          const Region& region = plan.values[in].region;
          if (!out.region.Contains(region)) return bug(k, "places an input outside its output");
          *concat->add_input_regions() = ToProto(RelativeTo(region, out.region));
        }
        break;
      }
      case StepKind::kAdd:
        info = new_task(TaskProto::BOXING_ADD, out, "add");
        for (int32_t in : step.inputs) {
          if (plan.values[in].region != out.region) return bug(k, "adds values of different regions");
        }
        break;
      default:
        return bug(k, "has an unknown kind");
    }
    const int64_t task = emit(std::move(info), step.output);
    for (int32_t in : step.inputs) builder_.AddInput(task, register_of(in));
    if (step.kind == StepKind::kZeros) {
      // Pace the zero fill by this rank's source shard (a control input, not read), so it
      // fires at the rate of the value being boxed.
      for (int32_t v = 0; v < num_sources; ++v) {
        if (plan.values[v].device.rank == step.rank) {
          builder_.AddControlInput(task, register_of(v));
          break;
        }
      }
    }
    return absl::OkStatus();
  };
  if (partial) {
    for (int32_t k : layout.local_steps) RETURN_IF_ERROR(emit_step(k));
  } else {
    for (size_t k = 0; k < plan.steps.size(); ++k) RETURN_IF_ERROR(emit_step(k));
  }

  if (cached->complete && plan.dst_values.size() != static_cast<size_t>(placement.num_devices())) {
    return absl::InternalError(absl::StrCat("lowering ", describe(), ": plan has ", plan.dst_values.size(),
                                            " destination values for ", placement.num_devices(), " devices"));
  }
  for (int64_t d : EmittedDevices(placement)) {
    const int32_t v = plan.dst_values[d];
    if (v < 0 || v >= static_cast<int32_t>(plan.values.size()) ||
        (v >= num_sources && layout.value_step[v] < 0) || plan.values[v].device.rank != placement.ranks()[d]) {
      return absl::InternalError(absl::StrCat("lowering ", describe(), ": destination ", d,
                                              " is not a value defined on rank ", placement.ranks()[d].value()));
    }
  }
  if (result.summary >= 0 && src.summary >= 0 &&
      std::find(layout.aliased_source.begin(), layout.aliased_source.end(), true) != layout.aliased_source.end()) {
    aliases_[src.summary].emplace_back(result.summary, &layout);  // its readers read some of src's registers
  }
  return result;
}

}  // namespace lower_internal
}  // namespace compiler
}  // namespace oneflow_like
