// Physical expansion: SOURCE / COMPUTE / SINK tasks, rate changes and variable update edges
// (rules in lower.h).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/lower/lowering.h"
#include "oneflow_like/compiler/proto_convert.h"

namespace oneflow_like {
namespace compiler {
namespace lower_internal {
namespace {

std::string At(const std::string& base, Rank rank) { return absl::StrCat(base, "@r", rank.value()); }

TensorDesc ShardDesc(const TensorDesc& logical, const NdSbp& nd_sbp, const Placement& placement, int64_t index) {
  return TensorDesc{logical.dtype, PhysicalShape(logical.shape, nd_sbp, placement.hierarchy(), index)};
}

}  // namespace

TaskInfo Lowerer::NewTask(TaskProto::Type type, Rank rank, DeviceType device, const std::string& name,
                          const std::string& op_name, int stage, int64_t position) const {
  TaskInfo info;
  info.proto.set_rank(rank.value());
  *info.proto.mutable_device() = MakeDevice(device);
  info.proto.set_type(type);
  info.proto.set_name(At(name, rank));
  info.proto.set_op_name(op_name);
  info.stage = stage;
  info.position = position;
  return info;
}

void Lowerer::EmitSources() {
  for (const TensorNode& t : graph_.tensors()) {
    if (!t.is_source()) continue;
    const Placement& placement = *t.placement;
    Value value{placement, *t.nd_sbp, multi_rate_ && t.is_variable, first_reader_stage_[t.id.value()], -1, {}};
    std::vector<int64_t>& holders = holder_tasks_[t.id.value()];
    for (int64_t d = 0; d < placement.num_devices(); ++d) {
      const Rank rank = placement.ranks()[d];
      TaskInfo info = NewTask(TaskProto::SOURCE, rank, placement.device_type(), t.name + ".source", "",
                              value.stage, -1);
      info.proto.mutable_io()->set_tensor_name(t.name);
      const int64_t task = builder_.AddTask(std::move(info));
      const int64_t reg = builder_.AddRegister(task, ShardDesc(*t.desc, value.nd_sbp, placement, d),
                                               At(t.name, rank), value.step_rate);
      value.registers.push_back(reg);
      TensorBindingProto binding;
      binding.set_tensor_name(t.name);
      binding.mutable_slot()->set_register_id(reg);
      *binding.mutable_shard() = MakeShardInfo(t.desc->shape, value.nd_sbp, placement, d);
      if (t.is_variable) {
        builder_.reg(reg).persistent = true;
        holders.push_back(task);
        binding.set_kind(TensorBindingProto::VARIABLE);
        *binding.mutable_initializer() = t.initializer;
        binding.mutable_initializer()->set_seed(
            DeriveInitializerSeed(graph_.config().seed(), t.name, t.initializer.seed()));
      } else {
        binding.set_kind(TensorBindingProto::INPUT);
      }
      bindings_.push_back(std::move(binding));
      binding_rank_.push_back(rank.value());
    }
    native_[t.id.value()] = std::move(value);
  }
}

absl::Status Lowerer::EmitOp(OpId op_id) {
  const OpNode& op = graph_.op(op_id);
  const NdSbpSignature& signature = *op.nd_sbp_signature;
  const Placement& placement = *op.placement;
  const int64_t position = position_of_op_[op_id.value()];
  bool step_rate = false;
  if (multi_rate_) {
    step_rate = op.def->is_optimizer;
    if (!step_rate && !op.inputs.empty()) {
      step_rate = std::all_of(op.inputs.begin(), op.inputs.end(),
                              [&](TensorId t) { return native_[t.value()].step_rate; });
    }
  }
  std::vector<const Value*> inputs;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    ASSIGN_OR_RETURN(const Value* v, GetValue(op.inputs[i], placement, signature.inputs[i], step_rate));
    inputs.push_back(v);
  }
  // An op without inputs (fill, e.g. the loss gradient seed; random_*) must still fire once
  // per piece: each of its tasks consumes, without reading it (a control input), a piece-rate
  // source value on its rank: an input's own register, else a variable's REPEAT.
  std::vector<int64_t> pacing(placement.num_devices(), -1);
  for (int64_t d = 0; d < placement.num_devices() && op.inputs.empty(); ++d) {
    for (bool want_input : {true, false}) {
      for (const TensorNode& t : graph_.tensors()) {
        if (pacing[d] >= 0 || !t.is_source() || t.is_variable == want_input) continue;
        const Value& native = native_[t.id.value()];
        const std::vector<Rank>& ranks = native.placement.ranks();
        const auto at = std::find(ranks.begin(), ranks.end(), placement.ranks()[d]);
        if (at == ranks.end()) continue;
        ASSIGN_OR_RETURN(const Value* paced, GetValue(t.id, native.placement, native.nd_sbp, /*step_rate=*/false));
        pacing[d] = paced->registers[at - ranks.begin()];
      }
    }
    // No source on this rank (e.g. the loss gradient's seed on a pipeline's or a placement's
    // last ranks that hold only activations): the latest piece-rate value produced on this rank
    // before this op paces it (the loss itself, for the seed).
    int64_t best_position = -1;
    for (const TensorNode& t : graph_.tensors()) {
      if (pacing[d] >= 0 && best_position < 0) break;
      if (t.is_source()) continue;
      const Value& produced = native_[t.id.value()];
      if (produced.registers.empty() || produced.step_rate || produced.position >= position ||
          produced.position <= best_position) {
        continue;
      }
      const std::vector<Rank>& ranks = produced.placement.ranks();
      const auto at = std::find(ranks.begin(), ranks.end(), placement.ranks()[d]);
      if (at == ranks.end()) continue;
      pacing[d] = produced.registers[at - ranks.begin()];
      best_position = produced.position;
    }
    if (pacing[d] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("op '", op.name, "' (", op.type, ") has no inputs and rank ",
                                                     placement.ranks()[d].value(),
                                                     " holds no input or variable to pace its firings (hint: place "
                                                     "it on ranks that hold an input or a variable)"));
    }
  }
  std::vector<Value> outputs(op.outputs.size());
  for (size_t j = 0; j < op.outputs.size(); ++j) {
    outputs[j] = Value{placement, signature.outputs[j], step_rate, op.stage, position, {}};
  }
  ComputeParams params;
  params.set_op_type(op.type);
  for (const auto& [name, value] : op.attrs.values()) (*params.mutable_attrs())[name] = AttrValueToProto(value);
  for (int64_t d = 0; d < placement.num_devices(); ++d) {
    const Rank rank = placement.ranks()[d];
    TaskInfo info = NewTask(TaskProto::COMPUTE, rank, placement.device_type(), op.name, op.name, op.stage, position);
    ComputeParams* compute = info.proto.mutable_compute();
    *compute = params;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      *compute->add_input_shards() =
          MakeShardInfo(graph_.tensor(op.inputs[i]).desc->shape, signature.inputs[i], placement, d);
    }
    for (size_t j = 0; j < op.outputs.size(); ++j) {
      *compute->add_output_shards() =
          MakeShardInfo(graph_.tensor(op.outputs[j]).desc->shape, signature.outputs[j], placement, d);
    }
    const int64_t task = builder_.AddTask(std::move(info));
    for (const Value* v : inputs) builder_.AddInput(task, v->registers[d], v->SlotOf(d));
    if (pacing[d] >= 0) builder_.AddControlInput(task, pacing[d]);
    for (size_t j = 0; j < op.outputs.size(); ++j) {
      const TensorNode& out = graph_.tensor(op.outputs[j]);
      outputs[j].registers.push_back(builder_.AddRegister(
          task, ShardDesc(*out.desc, signature.outputs[j], placement, d), At(out.name, rank), step_rate));
    }
  }
  for (size_t j = 0; j < op.outputs.size(); ++j) native_[op.outputs[j].value()] = std::move(outputs[j]);
  return absl::OkStatus();
}

absl::Status Lowerer::EmitSinks() {
  for (const TensorNode& t : graph_.tensors()) {
    if (!t.is_output) continue;
    ASSIGN_OR_RETURN(const Value* v, GetValue(t.id, *t.placement, *t.nd_sbp, /*step_rate=*/false));
    const Placement& placement = v->placement;
    for (int64_t d = 0; d < placement.num_devices(); ++d) {
      const Rank rank = placement.ranks()[d];
      TaskInfo info = NewTask(TaskProto::SINK, rank, placement.device_type(), t.name + ".sink", "", v->stage,
                              v->position);
      info.proto.mutable_io()->set_tensor_name(t.name);
      const int64_t task = builder_.AddTask(std::move(info));
      builder_.AddInput(task, v->registers[d], v->SlotOf(d));
      TensorBindingProto binding;
      binding.set_tensor_name(t.name);
      binding.set_kind(TensorBindingProto::OUTPUT);
      binding.mutable_slot()->set_register_id(v->registers[d]);
      binding.mutable_slot()->set_slot(v->SlotOf(d));
      *binding.mutable_shard() = MakeShardInfo(t.desc->shape, v->nd_sbp, placement, d);
      bindings_.push_back(std::move(binding));
      binding_rank_.push_back(rank.value());
    }
  }
  return absl::OkStatus();
}

absl::Status Lowerer::EmitUpdates() {
  for (const VariableUpdate& update : graph_.variable_updates()) {
    const TensorNode& variable = graph_.tensor(update.variable);
    ASSIGN_OR_RETURN(const Value* v,
                     GetValue(update.new_value, *variable.placement, *variable.nd_sbp, multi_rate_));
    const std::vector<int64_t>& holders = holder_tasks_[update.variable.value()];
    for (size_t d = 0; d < holders.size(); ++d) {
      builder_.AddInput(holders[d], v->registers[d], v->SlotOf(d));
      builder_.reg(v->registers[d]).held_across_steps = true;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<const Value*> Lowerer::GetValue(TensorId tensor, const Placement& placement, const NdSbp& nd_sbp,
                                               bool step_rate) {
  const Value& native = native_[tensor.value()];
  if (!multi_rate_) step_rate = false;
  if (native.placement == placement && native.nd_sbp == nd_sbp && native.step_rate == step_rate) return &native;
  ValueKey key{tensor.value(), placement, nd_sbp, step_rate};
  auto it = values_.find(key);
  if (it != values_.end()) return &it->second;
  Value result;
  if (step_rate == native.step_rate) {
    ASSIGN_OR_RETURN(result, EmitBoxing(tensor, native, placement, nd_sbp));
  } else if (native.step_rate) {  // step -> piece: box at step rate, then repeat
    ASSIGN_OR_RETURN(const Value* boxed, GetValue(tensor, placement, nd_sbp, /*step_rate=*/true));
    result = EmitRateChange(tensor, *boxed, TaskProto::REPEAT);
  } else if (native.placement == placement && native.nd_sbp == nd_sbp) {  // piece -> step, same layout
    result = EmitRateChange(tensor, native, TaskProto::ACCUMULATE);
  } else {  // piece -> step: accumulate in the producer's layout, then box at step rate
    ASSIGN_OR_RETURN(const Value* summed, GetValue(tensor, native.placement, native.nd_sbp, /*step_rate=*/true));
    ASSIGN_OR_RETURN(result, EmitBoxing(tensor, *summed, placement, nd_sbp));
  }
  return &values_.emplace(std::move(key), std::move(result)).first->second;
}

Value Lowerer::EmitRateChange(TensorId tensor, const Value& in, TaskProto::Type type) {
  const TensorNode& t = graph_.tensor(tensor);
  const bool repeat = type == TaskProto::REPEAT;
  Value out{in.placement, in.nd_sbp, /*step_rate=*/!repeat, in.stage, in.position, {}};
  for (int64_t d = 0; d < in.placement.num_devices(); ++d) {
    const Rank rank = in.placement.ranks()[d];
    TaskInfo info = NewTask(type, rank, in.placement.device_type(),
                            absl::StrCat(t.name, repeat ? ".repeat" : ".accumulate"), "", in.stage, in.position);
    info.proto.mutable_count()->set_count(pieces_per_step_);
    const int64_t task = builder_.AddTask(std::move(info));
    builder_.AddInput(task, in.registers[d], in.SlotOf(d));
    const TensorDesc desc = ShardDesc(*t.desc, in.nd_sbp, in.placement, d);
    out.registers.push_back(builder_.AddRegister(
        task, desc, At(absl::StrCat(t.name, repeat ? ".repeated" : ".accumulated"), rank), out.step_rate));
  }
  return out;
}

}  // namespace lower_internal
}  // namespace compiler
}  // namespace oneflow_like
