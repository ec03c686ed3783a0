#include "oneflow_like/compiler/graph.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/compiler/proto_convert.h"

namespace oneflow_like {
namespace compiler {
namespace {

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

// "expects 2 input(s) (a, b)" / "expects at least 1 input(s) (x0, ...)".
std::string ArityText(const std::vector<std::string>& names, bool variadic, absl::string_view what) {
  return absl::StrCat(variadic ? "at least " : "", names.size(), " ", what, "(s) (",
                      absl::StrJoin(names, ", "), variadic ? ", ..." : "", ")");
}

}  // namespace

int64_t PiecesPerStep(const JobConfigProto& config) {
  return std::max<int64_t>(1, config.micro_batches()) * std::max<int64_t>(1, config.gradient_accumulation_steps());
}

std::string NdSbpText(const NdSbp& nd_sbp) {
  return absl::StrCat("[", absl::StrJoin(nd_sbp.sbps(), ", ", [](std::string* out, const Sbp& s) {
                        out->append(s.ToString());
                      }), "]");
}

// ---- Lookup and naming ----

TensorId Graph::FindTensor(absl::string_view name) const {
  auto it = tensor_by_name_.find(name);
  return it == tensor_by_name_.end() ? TensorId() : it->second;
}

OpId Graph::FindOp(absl::string_view name) const {
  auto it = op_by_name_.find(name);
  return it == op_by_name_.end() ? OpId() : it->second;
}

std::string Graph::UniqueTensorName(absl::string_view base) const {
  std::string name(base);
  for (int i = 1; FindTensor(name).valid(); ++i) name = absl::StrCat(base, "_", i);
  return name;
}

std::string Graph::UniqueOpName(absl::string_view base) const {
  std::string name(base);
  for (int i = 1; FindOp(name).valid(); ++i) name = absl::StrCat(base, "_", i);
  return name;
}

absl::Status Graph::AddVariableUpdate(TensorId variable, TensorId new_value) {
  if (!has_tensor(variable) || !has_tensor(new_value)) {
    return absl::InvalidArgumentError("AddVariableUpdate: unknown tensor id");
  }
  if (!tensor(variable).is_variable) {
    return absl::InvalidArgumentError(absl::StrCat("AddVariableUpdate: ", Describe(variable), " is not a variable"));
  }
  if (tensor(new_value).is_source()) {
    return absl::InvalidArgumentError(
        absl::StrCat("AddVariableUpdate: the new value ", Describe(new_value), " of ", Describe(variable),
                     " must be an op output, not an input or variable"));
  }
  for (const VariableUpdate& u : variable_updates_) {
    if (u.variable == variable) {
      return absl::InvalidArgumentError(
          absl::StrCat("AddVariableUpdate: ", Describe(variable), " already has an update (", Describe(u.new_value), ")"));
    }
  }
  variable_updates_.push_back(VariableUpdate{variable, new_value});
  return absl::OkStatus();
}

std::string Graph::Describe(TensorId id) const {
  if (!has_tensor(id)) return absl::StrCat("tensor #", id.value());
  return absl::StrCat("tensor '", tensor(id).name, "'");
}

std::string Graph::Describe(OpId id) const {
  if (!has_op(id)) return absl::StrCat("op #", id.value());
  return absl::StrCat(op(id).type, " '", op(id).name, "'");
}

// ---- Construction ----

absl::Status Graph::CheckNewTensorName(const std::string& name, absl::string_view context) const {
  if (name.empty()) return Invalid(absl::StrCat(context, ": empty tensor name"));
  if (FindTensor(name).valid()) {
    const TensorNode& old = tensor(FindTensor(name));
    std::string where = old.is_source() ? (old.is_variable ? "a variable" : "an input")
                                        : absl::StrCat("output ", old.producer_output, " of ", Describe(old.producer));
    return Invalid(absl::StrCat(context, ": tensor name '", name, "' is already defined (as ", where,
                                "; names must be unique)"));
  }
  return absl::OkStatus();
}

TensorId Graph::NewTensor(std::string name) {
  TensorId id(num_tensors());
  TensorNode node;
  node.id = id;
  node.name = std::move(name);
  tensor_by_name_.emplace(node.name, id);
  tensors_.push_back(std::move(node));
  return id;
}

absl::StatusOr<TensorId> Graph::AddSource(SourceSpec spec) {
  const std::string context = absl::StrCat(spec.is_variable ? "variable '" : "input '", spec.name, "'");
  RETURN_IF_ERROR(CheckNewTensorName(spec.name, context));
  if (spec.desc.dtype == DataType::kInvalid) return Invalid(absl::StrCat(context, ": invalid dtype"));
  if (!spec.desc.shape.Validate().ok()) {
    return Invalid(absl::StrCat(context, ": shape ", spec.desc.shape.ToString(), " has a negative dim"));
  }
  if (!spec.is_variable && spec.frozen) {
    return Invalid(absl::StrCat(context, ": only variables can be frozen"));
  }
  TensorId id = NewTensor(spec.name);
  TensorNode& t = tensors_[id.value()];
  t.desc = spec.desc;
  t.is_variable = spec.is_variable;
  t.is_input = !spec.is_variable;
  if (spec.is_variable) t.initializer = spec.initializer;
  t.frozen = spec.frozen;
  t.placement = std::move(spec.placement);
  t.pinned_nd_sbp = std::move(spec.pinned_nd_sbp);
  return id;
}

absl::StatusOr<OpId> Graph::AddOp(OpSpec spec) {
  if (spec.name.empty()) return Invalid(absl::StrCat(spec.type, " op with an empty name"));
  absl::StatusOr<const OpDef*> found = registry_->Get(spec.type);
  if (!found.ok()) {
    return absl::Status(found.status().code(), absl::StrCat("op '", spec.name, "': ", found.status().message()));
  }
  const OpDef* def = *found;
  const std::string who = absl::StrCat(spec.type, " '", spec.name, "'");
  if (FindOp(spec.name).valid()) {
    return Invalid(absl::StrCat(who, ": op name '", spec.name, "' is already used (names must be unique)"));
  }
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    if (!has_tensor(spec.inputs[i])) {
      return Invalid(absl::StrCat(who, ": input ", i, " refers to tensor #", spec.inputs[i].value(),
                                  ", which does not exist"));
    }
  }
  const bool inputs_ok = def->variadic_inputs ? spec.inputs.size() >= def->inputs.size()
                                              : spec.inputs.size() == def->inputs.size();
  if (!inputs_ok) {
    std::vector<std::string> given;
    for (TensorId t : spec.inputs) given.push_back(tensor(t).name);
    return Invalid(absl::StrCat(who, ": expects ", ArityText(def->inputs, def->variadic_inputs, "input"),
                                ", got ", spec.inputs.size(), given.empty() ? "" : " (",
                                absl::StrJoin(given, ", "), given.empty() ? "" : ")"));
  }
  const bool outputs_ok = def->variadic_outputs ? !spec.output_names.empty()
                                                : spec.output_names.size() == def->outputs.size();
  if (!outputs_ok) {
    return Invalid(absl::StrCat(who, ": has ", ArityText(def->outputs, def->variadic_outputs, "output"),
                                ", got ", spec.output_names.size(), " output name(s) (",
                                absl::StrJoin(spec.output_names, ", "), ")"));
  }
  for (size_t i = 0; i < spec.output_names.size(); ++i) {
    RETURN_IF_ERROR(CheckNewTensorName(spec.output_names[i], who));
    for (size_t j = 0; j < i; ++j) {
      if (spec.output_names[i] == spec.output_names[j]) {
        return Invalid(absl::StrCat(who, ": output name '", spec.output_names[i], "' appears twice"));
      }
    }
  }
  ASSIGN_OR_RETURN(AttrMap attrs, def->ValidateAttrs(spec.name, spec.attrs));
  for (const auto& [index, nd_sbp] : spec.pinned_input_nd_sbp) {
    if (index < 0 || index >= static_cast<int>(spec.inputs.size())) {
      return Invalid(absl::StrCat(who, ": SBP pinned for input ", index, " but the op has ", spec.inputs.size(),
                                  " input(s)"));
    }
  }
  for (const auto& [index, nd_sbp] : spec.pinned_output_nd_sbp) {
    if (index < 0 || index >= static_cast<int>(spec.output_names.size())) {
      return Invalid(absl::StrCat(who, ": SBP pinned for output ", index, " but the op has ",
                                  spec.output_names.size(), " output(s)"));
    }
  }
  if (spec.stage < 0) return Invalid(absl::StrCat(who, ": stage ", spec.stage, " must be >= 0"));
  if (spec.insert_before.valid() && !has_op(spec.insert_before)) {
    return Invalid(absl::StrCat(who, ": insert_before names op #", spec.insert_before.value(),
                                ", which does not exist"));
  }

  OpId id(num_ops());
  OpNode node;
  node.id = id;
  node.name = spec.name;
  node.type = spec.type;
  node.def = def;
  node.attrs = std::move(attrs);
  node.inputs = spec.inputs;
  node.placement = std::move(spec.placement);
  node.stage = spec.stage;
  node.recompute = spec.recompute;
  node.pinned_input_nd_sbp = std::move(spec.pinned_input_nd_sbp);
  node.pinned_output_nd_sbp = std::move(spec.pinned_output_nd_sbp);
  for (size_t i = 0; i < spec.output_names.size(); ++i) {
    TensorId out = NewTensor(spec.output_names[i]);
    tensors_[out.value()].producer = id;
    tensors_[out.value()].producer_output = static_cast<int>(i);
    node.outputs.push_back(out);
  }
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    tensors_[node.inputs[i].value()].consumers.push_back(TensorUse{id, static_cast<int>(i)});
  }
  op_by_name_.emplace(node.name, id);
  ops_.push_back(std::move(node));
  if (spec.insert_before.valid()) {
    op_order_.insert(std::find(op_order_.begin(), op_order_.end(), spec.insert_before), id);
  } else {
    op_order_.push_back(id);
  }
  return id;
}

absl::Status Graph::ReplaceInput(OpId op_id, int index, TensorId tensor_id) {
  if (!has_op(op_id)) return absl::InternalError(absl::StrCat("ReplaceInput: no op #", op_id.value()));
  OpNode& node = ops_[op_id.value()];
  if (index < 0 || index >= static_cast<int>(node.inputs.size()) || !has_tensor(tensor_id)) {
    return absl::InternalError(absl::StrCat("ReplaceInput: ", Describe(op_id), " has no input ", index,
                                            " or ", Describe(tensor_id), " does not exist"));
  }
  std::vector<TensorUse>& old_uses = tensors_[node.inputs[index].value()].consumers;
  old_uses.erase(std::remove(old_uses.begin(), old_uses.end(), TensorUse{op_id, index}), old_uses.end());
  node.inputs[index] = tensor_id;
  tensors_[tensor_id.value()].consumers.push_back(TensorUse{op_id, index});
  return absl::OkStatus();
}

// ---- Config ----

absl::Status ValidateJobConfig(const Graph& graph) {
  const JobConfigProto& c = graph.config();
  if (c.micro_batches() < 0 || c.gradient_accumulation_steps() < 0) {
    return Invalid(absl::StrCat("config: micro_batches (", c.micro_batches(), ") and gradient_accumulation_steps (",
                                c.gradient_accumulation_steps(), ") must be >= 0"));
  }
  if (c.zero_stage() < 0 || c.zero_stage() > 2) {
    return Invalid(absl::StrCat("config: zero_stage ", c.zero_stage(), " is not supported (0, 1 or 2)"));
  }
  if (c.loss().empty() != !c.has_optimizer()) {
    return Invalid(c.loss().empty() ? "config: an optimizer is set but no loss (hint: use train(loss, optimizer=...))"
                                    : absl::StrCat("config: loss '", c.loss(), "' is set but no optimizer"));
  }
  std::optional<Placement> first;  // stage_placements[0]
  for (int s = 0; s < c.stage_placements_size(); ++s) {
    absl::StatusOr<Placement> p = Placement::FromProto(c.stage_placements(s));
    if (!p.ok()) return Invalid(absl::StrCat("config: stage_placements[", s, "]: ", p.status().message()));
    if (!first) first = *p;
    if (p->num_hierarchy_axes() != first->num_hierarchy_axes()) {
      return Invalid(absl::StrCat("config: stage_placements[", s, "] ", p->ToString(), " has ",
                                  p->num_hierarchy_axes(), " hierarchy axes but stage_placements[0] ",
                                  first->ToString(), " has ", first->num_hierarchy_axes(),
                                  " (hint: give every stage a mesh of the same rank; SBPs have one entry per axis)"));
    }
  }
  if (!c.loss().empty()) {
    if (!graph.FindTensor(c.loss()).valid()) {
      return Invalid(absl::StrCat("config: loss '", c.loss(), "' is not a tensor of the graph"));
    }
    if (!(c.optimizer().learning_rate() > 0)) {
      return Invalid(absl::StrCat("config: the optimizer's learning rate must be > 0, got ",
                                  c.optimizer().learning_rate()));
    }
  }
  return absl::OkStatus();
}

// ---- Proto conversion ----

namespace {

// Parses the optional placement / SBP fields of a job message.
absl::StatusOr<std::optional<Placement>> OptionalPlacement(bool has, const PlacementProto& proto,
                                                           absl::string_view who) {
  if (!has) return std::optional<Placement>();
  absl::StatusOr<Placement> p = Placement::FromProto(proto);
  if (!p.ok()) return Invalid(absl::StrCat(who, ": bad placement: ", p.status().message()));
  return std::optional<Placement>(*std::move(p));
}

absl::StatusOr<NdSbp> NdSbpFromProto(const NdSbpProto& proto, absl::string_view who) {
  absl::StatusOr<NdSbp> s = NdSbp::FromProto(proto);
  if (!s.ok()) return Invalid(absl::StrCat(who, ": bad SBP: ", s.status().message()));
  if (s->num_axes() == 0) return Invalid(absl::StrCat(who, ": empty SBP (give one per mesh axis)"));
  return *std::move(s);
}

absl::Status AddOpFromProto(const OpProto& p, const absl::flat_hash_map<std::string, int>& producer_index,
                            int index, Graph* g) {
  const std::string who = absl::StrCat(p.type(), " '", p.name(), "'");
  OpSpec spec;
  spec.name = p.name();
  spec.type = p.type();
  for (const std::string& in : p.inputs()) {
    TensorId t = g->FindTensor(in);
    const bool defined = t.valid() && (g->tensor(t).is_source() || g->tensor(t).producer.valid());
    if (!defined) {
      auto it = producer_index.find(in);
      if (it != producer_index.end() && it->second >= index) {
        return Invalid(absl::StrCat(who, ": input '", in, "' is used before it is produced (by op #", it->second,
                                    "; ops must be listed in program order)"));
      }
      return Invalid(absl::StrCat(who, ": unknown input tensor '", in, "'"));
    }
    spec.inputs.push_back(t);
  }
  for (const std::string& out : p.outputs()) spec.output_names.push_back(out);
  for (const auto& [key, value] : p.attrs()) {
    absl::StatusOr<AttrValue> v = AttrValueFromProto(value);
    if (!v.ok()) return Invalid(absl::StrCat(who, ": attribute '", key, "': ", v.status().message()));
    spec.attrs.Set(key, *std::move(v));
  }
  ASSIGN_OR_RETURN(spec.placement, OptionalPlacement(p.has_placement(), p.placement(), who));
  for (const auto& [i, s] : p.input_nd_sbp()) {
    ASSIGN_OR_RETURN(spec.pinned_input_nd_sbp[i], NdSbpFromProto(s, absl::StrCat(who, " input ", i)));
  }
  for (const auto& [i, s] : p.output_nd_sbp()) {
    ASSIGN_OR_RETURN(spec.pinned_output_nd_sbp[i], NdSbpFromProto(s, absl::StrCat(who, " output ", i)));
  }
  spec.stage = p.stage();
  spec.recompute = p.recompute();
  return g->AddOp(std::move(spec)).status();
}

}  // namespace

absl::StatusOr<Graph> Graph::FromJobProto(const JobProto& job, const OpRegistry& registry) {
  Graph g(&registry);
  g.name_ = job.name();
  g.config_ = job.config();
  absl::flat_hash_map<std::string, int> producer_index;  // tensor name -> index of its op
  for (int i = 0; i < job.ops_size(); ++i) {
    for (const std::string& out : job.ops(i).outputs()) producer_index.emplace(out, i);
  }
  // Listed non-source tensors are applied to the op outputs once the ops created them.
  std::vector<const LogicalTensorProto*> listed_outputs;
  absl::flat_hash_map<std::string, int> listed_count;
  for (const LogicalTensorProto& t : job.tensors()) {
    const std::string who = absl::StrCat("tensor '", t.name(), "'");
    if (t.is_input() && t.is_variable()) return Invalid(absl::StrCat(who, ": both an input and a variable"));
    if (t.has_initializer() && !t.is_variable()) {
      return Invalid(absl::StrCat(who, ": an initializer is only allowed on a variable"));
    }
    if (t.frozen() && !t.is_variable()) return Invalid(absl::StrCat(who, ": only variables can be frozen"));
    const bool produced = producer_index.count(t.name()) > 0;
    if (t.is_input() || t.is_variable()) {
      if (produced) {
        return Invalid(absl::StrCat(who, ": is ", t.is_input() ? "an input" : "a variable",
                                    " but also produced by op '", job.ops(producer_index[t.name()]).name(), "'"));
      }
      if (!t.has_desc()) return Invalid(absl::StrCat(who, ": inputs and variables need a desc (dtype and shape)"));
      SourceSpec spec;
      spec.name = t.name();
      absl::StatusOr<TensorDesc> desc = TensorDescFromProto(t.desc());
      if (!desc.ok()) return Invalid(absl::StrCat(who, ": ", desc.status().message()));
      spec.desc = *desc;
      spec.is_variable = t.is_variable();
      spec.initializer = t.initializer();
      spec.frozen = t.frozen();
      ASSIGN_OR_RETURN(spec.placement, OptionalPlacement(t.has_placement(), t.placement(), who));
      if (t.has_nd_sbp()) {
        ASSIGN_OR_RETURN(spec.pinned_nd_sbp, NdSbpFromProto(t.nd_sbp(), who));
      }
      ASSIGN_OR_RETURN(TensorId id, g.AddSource(std::move(spec)));
      g.tensors_[id.value()].is_output = t.is_output();
    } else {
      if (!produced) {
        return Invalid(absl::StrCat(who, ": no op produces it and it is neither an input nor a variable"));
      }
      if (++listed_count[t.name()] > 1) return Invalid(absl::StrCat(who, ": listed twice (names must be unique)"));
      listed_outputs.push_back(&t);
    }
  }
  for (int i = 0; i < job.ops_size(); ++i) {
    RETURN_IF_ERROR(AddOpFromProto(job.ops(i), producer_index, i, &g));
  }
  for (const LogicalTensorProto* proto : listed_outputs) {
    TensorNode& t = g.tensors_[g.FindTensor(proto->name()).value()];
    const std::string who = absl::StrCat("tensor '", proto->name(), "'");
    if (proto->has_desc()) {
      absl::StatusOr<TensorDesc> desc = TensorDescFromProto(proto->desc());
      if (!desc.ok()) return Invalid(absl::StrCat(who, ": ", desc.status().message()));
      t.desc = *desc;
    }
    ASSIGN_OR_RETURN(t.placement, OptionalPlacement(proto->has_placement(), proto->placement(), who));
    if (proto->has_nd_sbp()) {
      ASSIGN_OR_RETURN(t.pinned_nd_sbp, NdSbpFromProto(proto->nd_sbp(), who));
    }
    t.is_output = proto->is_output();
  }
  RETURN_IF_ERROR(ValidateJobConfig(g));
  return g;
}

JobProto Graph::ToJobProto() const {
  JobProto job;
  job.set_name(name_);
  *job.mutable_config() = config_;
  auto add_tensor = [&](const TensorNode& t) {
    LogicalTensorProto* p = job.add_tensors();
    p->set_name(t.name);
    if (t.desc) *p->mutable_desc() = TensorDescToProto(*t.desc);
    if (t.placement) *p->mutable_placement() = t.placement->ToProto();
    if (t.pinned_nd_sbp) *p->mutable_nd_sbp() = t.pinned_nd_sbp->ToProto();
    p->set_is_variable(t.is_variable);
    if (t.is_variable) *p->mutable_initializer() = t.initializer;
    p->set_frozen(t.frozen);
    p->set_is_input(t.is_input);
    p->set_is_output(t.is_output);
  };
  for (const TensorNode& t : tensors_) {
    if (t.is_source()) add_tensor(t);
  }
  for (OpId id : op_order_) {
    const OpNode& node = op(id);
    for (TensorId out : node.outputs) add_tensor(tensor(out));
    OpProto* p = job.add_ops();
    p->set_name(node.name);
    p->set_type(node.type);
    for (TensorId in : node.inputs) p->add_inputs(tensor(in).name);
    for (TensorId out : node.outputs) p->add_outputs(tensor(out).name);
    for (const auto& [key, value] : node.attrs.values()) (*p->mutable_attrs())[key] = AttrValueToProto(value);
    if (node.placement) *p->mutable_placement() = node.placement->ToProto();
    for (const auto& [i, s] : node.pinned_input_nd_sbp) (*p->mutable_input_nd_sbp())[i] = s.ToProto();
    for (const auto& [i, s] : node.pinned_output_nd_sbp) (*p->mutable_output_nd_sbp())[i] = s.ToProto();
    p->set_stage(node.stage);
    p->set_recompute(node.recompute);
  }
  return job;
}

}  // namespace compiler
}  // namespace oneflow_like
