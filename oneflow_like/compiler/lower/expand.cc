// Physical expansion: SOURCE / COMPUTE / SINK tasks, rate changes and variable update edges
// (rules in lower.h). Every emission reserves its ids for all devices and builds the tasks of
// EmittedDevices (all of them for the whole plan, the lowered rank's for one rank).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/lower/lowering.h"
#include "oneflow_like/compiler/proto_convert.h"

namespace oneflow_like {
namespace compiler {
namespace lower_internal {

TaskInfo Lowerer::NewTask(TaskProto::Type type, Rank rank, DeviceType device, const std::string& name,
                          const std::string& op_name, int stage, int64_t position) const {
  TaskInfo info;
  info.proto.set_rank(rank.value());
  *info.proto.mutable_device() = MakeDevice(device);
  info.proto.set_type(type);
  info.proto.set_name(RankName(name, rank));
  info.proto.set_op_name(op_name);
  info.stage = stage;
  info.position = position;
  return info;
}

std::vector<int64_t> Lowerer::EmittedDevices(const Placement& placement) const {
  std::vector<int64_t> devices;
  if (!builder_.partial()) {
    devices.resize(placement.num_devices());
    for (int64_t d = 0; d < placement.num_devices(); ++d) devices[d] = d;
  } else if (builder_.num_ranks() == 1) {
    if (const int64_t d = placement.IndexOf(Rank(builder_.first_rank())); d >= 0) devices.push_back(d);
  } else {
    const std::vector<Rank>& ranks = placement.ranks();
    for (int64_t d = 0; d < static_cast<int64_t>(ranks.size()); ++d) {
      if (builder_.Emits(ranks[d].value())) devices.push_back(d);
    }
  }
  return devices;
}

bool Lowerer::Touches(const Placement& placement) const {
  if (!builder_.partial()) return true;
  if (builder_.num_ranks() == 1) return placement.Contains(Rank(builder_.first_rank()));
  const std::vector<Rank>& ranks = placement.ranks();
  return std::any_of(ranks.begin(), ranks.end(), [&](Rank r) { return builder_.Emits(r.value()); });
}

int32_t Lowerer::NewSummary() {
  if (!builder_.partial()) return -1;  // only mirrors need them
  summaries_.emplace_back();
  return static_cast<int32_t>(summaries_.size() - 1);
}

void Lowerer::EmitSources() {
  for (const TensorNode& t : graph_.tensors()) {
    if (!t.is_source()) continue;
    const Placement& placement = *t.placement;
    const int64_t n = placement.num_devices();
    Value value{placement, *t.nd_sbp, multi_rate_ && t.is_variable, first_reader_stage_[t.id.value()], -1, true, t.id};
    value.task_base = builder_.ReserveTasks(n);
    value.reg_base = builder_.ReserveRegisters(n);
    value.summary = NewSummary();
    holder_tasks_[t.id.value()] = value.task_base;
    for (int64_t d : EmittedDevices(placement)) {
      const Rank rank = placement.ranks()[d];
      TaskInfo info = NewTask(TaskProto::SOURCE, rank, placement.device_type(), t.name + ".source", "",
                              value.stage, -1);
      info.proto.mutable_io()->set_tensor_name(t.name);
      const int64_t task = builder_.AddTask(value.task_base + d, std::move(info));
      const int64_t reg = builder_.AddRegister(value.reg_base + d, task, ShardDesc(*t.desc, value.nd_sbp, placement, d),
                                               RankName(t.name, rank), value.step_rate);
      TensorBindingProto binding;
      binding.set_tensor_name(t.name);
      binding.mutable_slot()->set_register_id(reg);
      *binding.mutable_shard() = MakeShardInfo(t.desc->shape, value.nd_sbp, placement, d);
      if (t.is_variable) {
        builder_.reg(reg).persistent = true;
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
    if (v->summary >= 0) summaries_[v->summary].Add(op.stage, position);
  }
  // An op without inputs (fill, e.g. the loss gradient seed; random_*) must still fire once
  // per piece: each of its tasks consumes, without reading it, a register pacing it (pacing.cc).
  std::vector<int64_t> pacing;
  bool paced_after_pieces = false;
  if (op.inputs.empty()) {
    ASSIGN_OR_RETURN(pacing, PacingRegisters(op, position, &paced_after_pieces));
  }
  const int64_t n = placement.num_devices();
  const int64_t num_outputs = static_cast<int64_t>(op.outputs.size());
  const int64_t first_task = builder_.ReserveTasks(n);
  const int64_t first_register = builder_.ReserveRegisters(n * num_outputs);
  std::vector<Value> outputs(op.outputs.size());
  for (size_t j = 0; j < op.outputs.size(); ++j) {
    outputs[j] = Value{placement, signature.outputs[j], step_rate, op.stage, position, true, op.outputs[j]};
    outputs[j].task_base = first_task;
    outputs[j].reg_base = first_register + static_cast<int64_t>(j);
    outputs[j].reg_stride = num_outputs;
    outputs[j].summary = NewSummary();
    outputs[j].after_pieces = paced_after_pieces ||
                              std::any_of(inputs.begin(), inputs.end(), [](const Value* v) { return v->after_pieces; });
  }
  const std::vector<int64_t> devices = EmittedDevices(placement);
  ComputeParams params;
  if (!devices.empty()) {
    params.set_op_type(op.type);
    for (const auto& [name, value] : op.attrs.values()) (*params.mutable_attrs())[name] = AttrValueToProto(value);
  }
  for (int64_t d : devices) {
    const Rank rank = placement.ranks()[d];
    TaskInfo info = NewTask(TaskProto::COMPUTE, rank, placement.device_type(), op.name, op.name, op.stage, position);
    info.side_stream = side_stream_op_[op.id.value()];
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
    const int64_t task = builder_.AddTask(first_task + d, std::move(info));
    for (const Value* v : inputs) {
      const RegRef ref = v->At(d);
      builder_.AddInput(task, ref.reg, ref.slot);
    }
    if (!pacing.empty()) builder_.AddControlInput(task, pacing[d]);
    for (size_t j = 0; j < op.outputs.size(); ++j) {
      const TensorNode& out = graph_.tensor(op.outputs[j]);
      builder_.AddRegister(first_register + d * num_outputs + static_cast<int64_t>(j), task,
                           ShardDesc(*out.desc, signature.outputs[j], placement, d), RankName(out.name, rank),
                           step_rate);
    }
  }
  for (size_t j = 0; j < op.outputs.size(); ++j) native_[op.outputs[j].value()] = std::move(outputs[j]);
  return absl::OkStatus();
}

absl::Status Lowerer::EmitSinks() {
  for (const TensorNode& t : graph_.tensors()) {
    if (!t.is_output) continue;
    // The user fetches host memory: an output on a device is copied to its ranks' hosts first
    // (a COPY per device, device -> host), the sinks run there.
    const Placement host = t.placement->device_type() == DeviceType::kCpu
                               ? *t.placement
                               : *Placement::Create(DeviceType::kCpu, t.placement->ranks(), t.placement->hierarchy());
    ASSIGN_OR_RETURN(const Value* v, GetValue(t.id, host, *t.nd_sbp, /*step_rate=*/false));
    const Placement& placement = v->placement;
    const int64_t first_task = builder_.ReserveTasks(placement.num_devices());
    for (int64_t d : EmittedDevices(placement)) {
      const Rank rank = placement.ranks()[d];
      TaskInfo info = NewTask(TaskProto::SINK, rank, placement.device_type(), t.name + ".sink", "", v->stage,
                              v->position);
      info.proto.mutable_io()->set_tensor_name(t.name);
      const int64_t task = builder_.AddTask(first_task + d, std::move(info));
      const RegRef ref = v->At(d);
      builder_.AddInput(task, ref.reg, ref.slot);
      TensorBindingProto binding;
      binding.set_tensor_name(t.name);
      binding.set_kind(TensorBindingProto::OUTPUT);
      binding.mutable_slot()->set_register_id(ref.reg);
      binding.mutable_slot()->set_slot(ref.slot);
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
    const int64_t first_holder = holder_tasks_[update.variable.value()];
    for (int64_t d : EmittedDevices(*variable.placement)) {
      const RegRef ref = v->At(d);
      builder_.AddInput(first_holder + d, ref.reg, ref.slot);
      builder_.reg(ref.reg).held_across_steps = true;
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
  const bool other_device_same_ranks = native.placement.device_type() != placement.device_type() &&
                                       native.placement.ranks() == placement.ranks() &&
                                       native.placement.hierarchy() == placement.hierarchy();
  if (step_rate == native.step_rate && other_device_same_ranks && native.nd_sbp != nd_sbp) {
    // To the other device of the same ranks in the producer's layout first (COPY tasks shared by
    // every layout read there), then boxed on that device.
    ASSIGN_OR_RETURN(const Value* copied, GetValue(tensor, placement, native.nd_sbp, step_rate));
    ASSIGN_OR_RETURN(result, EmitBoxing(tensor, *copied, placement, nd_sbp));
  } else if (step_rate == native.step_rate) {
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
  const int64_t n = in.placement.num_devices();
  Value out{in.placement, in.nd_sbp, /*step_rate=*/!repeat, in.stage, in.position, true, tensor};
  out.origin = repeat ? Origin::kRepeat : Origin::kAccumulate;
  out.after_pieces = !repeat || in.after_pieces;
  out.task_base = builder_.ReserveTasks(n);
  out.reg_base = builder_.ReserveRegisters(n);
  out.summary = NewSummary();
  for (int64_t d : EmittedDevices(in.placement)) {
    const Rank rank = in.placement.ranks()[d];
    TaskInfo info = NewTask(type, rank, in.placement.device_type(),
                            absl::StrCat(t.name, repeat ? ".repeat" : ".accumulate"), "", in.stage, in.position);
    info.proto.mutable_count()->set_count(pieces_per_step_);
    const int64_t task = builder_.AddTask(out.task_base + d, std::move(info));
    const RegRef ref = in.At(d);
    builder_.AddInput(task, ref.reg, ref.slot);
    const TensorDesc desc = ShardDesc(*t.desc, in.nd_sbp, in.placement, d);
    builder_.AddRegister(out.reg_base + d, task, desc, RankName(absl::StrCat(t.name, OriginSuffix(out.origin)), rank),
                         out.step_rate);
  }
  return out;
}

}  // namespace lower_internal
}  // namespace compiler
}  // namespace oneflow_like
