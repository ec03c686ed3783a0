#include "oneflow_like/compiler/verifier.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace oneflow_like {
namespace compiler {
namespace {

template <typename... Args>
absl::Status Broken(const Args&... args) {
  return absl::InternalError(absl::StrCat("graph verifier: ", args...));
}

class Verifier {
 public:
  Verifier(const Graph& g, const VerifierOptions& options) : g_(g), options_(options) {}

  absl::Status Run() {
    RETURN_IF_ERROR(CheckIdsAndNames());
    RETURN_IF_ERROR(CheckOrder());
    for (const OpNode& op : g_.ops()) RETURN_IF_ERROR(CheckOp(op));
    for (const TensorNode& t : g_.tensors()) RETURN_IF_ERROR(CheckTensor(t));
    if (options_.require_inferred) {
      for (const TensorNode& t : g_.tensors()) RETURN_IF_ERROR(CheckTensorInferred(t));
      for (OpId id : g_.op_order()) RETURN_IF_ERROR(CheckOpInferred(g_.op(id)));
    }
    for (const TensorNode& t : g_.tensors()) RETURN_IF_ERROR(CheckChosenTensorSbp(t));
    for (const OpNode& op : g_.ops()) RETURN_IF_ERROR(CheckChosenSignature(op));
    RETURN_IF_ERROR(CheckVariableUpdates());
    absl::Status config = ValidateJobConfig(g_);
    if (!config.ok()) return Broken(config.message());
    return absl::OkStatus();
  }

 private:
  std::string Name(TensorId id) const { return g_.Describe(id); }
  std::string Name(OpId id) const { return g_.Describe(id); }

  // Each update names a variable (once) and an op output; once inferred, the descs agree.
  absl::Status CheckVariableUpdates() {
    std::vector<bool> seen(g_.num_tensors(), false);
    for (const VariableUpdate& u : g_.variable_updates()) {
      if (!g_.has_tensor(u.variable) || !g_.has_tensor(u.new_value)) return Broken("variable update with a dangling id");
      const TensorNode& var = g_.tensor(u.variable);
      const TensorNode& value = g_.tensor(u.new_value);
      if (!var.is_variable) return Broken("variable update of ", Name(u.variable), ", which is not a variable");
      if (value.is_source()) return Broken("variable update of ", Name(u.variable), " from source ", Name(u.new_value));
      if (seen[u.variable.value()]) return Broken(Name(u.variable), " has two variable updates");
      seen[u.variable.value()] = true;
      if (options_.require_inferred && var.desc && value.desc && !(*var.desc == *value.desc)) {
        return Broken("variable update of ", Name(u.variable), " (", var.desc->ToString(), ") from ",
                      Name(u.new_value), " (", value.desc->ToString(), "): descs differ");
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckIdsAndNames() {
    for (int64_t i = 0; i < g_.num_tensors(); ++i) {
      const TensorNode& t = g_.tensors()[i];
      if (t.id.value() != i) return Broken("tensor '", t.name, "' at index ", i, " has id ", t.id.value());
      if (t.name.empty()) return Broken("tensor #", i, " has an empty name");
      if (g_.FindTensor(t.name) != t.id) {
        return Broken("tensor name '", t.name, "' (#", i, ") is not unique or not indexed (lookup gives #",
                      g_.FindTensor(t.name).value(), ")");
      }
    }
    for (int64_t i = 0; i < g_.num_ops(); ++i) {
      const OpNode& op = g_.ops()[i];
      if (op.id.value() != i) return Broken("op '", op.name, "' at index ", i, " has id ", op.id.value());
      if (op.name.empty()) return Broken("op #", i, " has an empty name");
      if (g_.FindOp(op.name) != op.id) {
        return Broken("op name '", op.name, "' (#", i, ") is not unique or not indexed (lookup gives #",
                      g_.FindOp(op.name).value(), ")");
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckOrder() {
    position_.assign(g_.num_ops(), -1);
    const std::vector<OpId>& order = g_.op_order();
    for (size_t p = 0; p < order.size(); ++p) {
      if (!g_.has_op(order[p])) return Broken("the program order lists op #", order[p].value(), ", which does not exist");
      if (position_[order[p].value()] >= 0) return Broken("the program order lists ", Name(order[p]), " twice");
      position_[order[p].value()] = static_cast<int64_t>(p);
    }
    for (const OpNode& op : g_.ops()) {
      if (position_[op.id.value()] < 0) return Broken(Name(op.id), " is missing from the program order");
    }
    return absl::OkStatus();
  }

  absl::Status CheckOp(const OpNode& op) {
    const std::string who = Name(op.id);
    if (op.def == nullptr || op.def != g_.registry().Find(op.type)) {
      return Broken(who, " does not point to the registered OpDef of '", op.type, "'");
    }
    const OpDef& def = *op.def;
    const size_t n_in = def.inputs.size(), n_out = def.outputs.size();
    if (def.variadic_inputs ? op.inputs.size() < n_in : op.inputs.size() != n_in) {
      return Broken(who, " has ", op.inputs.size(), " inputs but its OpDef expects ", n_in);
    }
    if (def.variadic_outputs ? op.outputs.empty() : op.outputs.size() != n_out) {
      return Broken(who, " has ", op.outputs.size(), " outputs but its OpDef declares ", n_out);
    }
    if (op.stage < 0) return Broken(who, " has negative stage ", op.stage);
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const TensorId in = op.inputs[i];
      if (!g_.has_tensor(in)) {
        return Broken(who, " input ", i, " refers to tensor #", in.value(), ", which does not exist (dangling input)");
      }
      const TensorNode& t = g_.tensor(in);
      const auto uses = std::count(t.consumers.begin(), t.consumers.end(), TensorUse{op.id, static_cast<int>(i)});
      if (uses != 1) {
        return Broken("asymmetric link: ", who, " reads ", Name(in), " as input ", i, " but the tensor lists that use ",
                      uses, " times");
      }
      if (!t.is_source() && g_.has_op(t.producer) && position_[t.producer.value()] >= position_[op.id.value()]) {
        return Broken(who, " reads ", Name(in), " before its producer ", Name(t.producer),
                      " runs (the program order is not topological)");
      }
    }
    for (size_t k = 0; k < op.outputs.size(); ++k) {
      const TensorId out = op.outputs[k];
      if (!g_.has_tensor(out)) return Broken(who, " output ", k, " refers to tensor #", out.value(), ", which does not exist");
      const TensorNode& t = g_.tensor(out);
      if (t.producer != op.id || t.producer_output != static_cast<int>(k)) {
        return Broken("asymmetric link: ", who, " lists ", Name(out), " as output ", k, " but the tensor says it is output ",
                      t.producer_output, " of ", Name(t.producer));
      }
    }
    for (const auto& [i, pin] : op.pinned_input_nd_sbp) {
      if (i < 0 || i >= static_cast<int>(op.inputs.size())) return Broken(who, " pins the SBP of missing input ", i);
    }
    for (const auto& [i, pin] : op.pinned_output_nd_sbp) {
      if (i < 0 || i >= static_cast<int>(op.outputs.size())) return Broken(who, " pins the SBP of missing output ", i);
    }
    return absl::OkStatus();
  }

  absl::Status CheckTensor(const TensorNode& t) {
    const std::string who = Name(t.id);
    if (t.is_input && t.is_variable) return Broken(who, " is both an input and a variable");
    if (t.is_source() && t.producer.valid()) {
      return Broken(who, " is ", t.is_input ? "an input" : "a variable", " but has producer ", Name(t.producer));
    }
    if (!t.is_source()) {
      if (!g_.has_op(t.producer)) {
        return Broken(who, " has no producer and is neither an input nor a variable (dangling tensor)");
      }
      const OpNode& p = g_.op(t.producer);
      if (t.producer_output < 0 || t.producer_output >= static_cast<int>(p.outputs.size()) ||
          p.outputs[t.producer_output] != t.id) {
        return Broken("asymmetric link: ", who, " says it is output ", t.producer_output, " of ", Name(p.id),
                      ", which does not list it there");
      }
    }
    for (const TensorUse& use : t.consumers) {
      if (!g_.has_op(use.op)) return Broken(who, " lists a use by op #", use.op.value(), ", which does not exist");
      const OpNode& c = g_.op(use.op);
      if (use.input_index < 0 || use.input_index >= static_cast<int>(c.inputs.size()) ||
          c.inputs[use.input_index] != t.id) {
        return Broken("asymmetric link: ", who, " lists a use by ", Name(c.id), " input ", use.input_index,
                      ", but that input does not read it");
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckPin(const NdSbp& pin, const TensorNode& t, const Placement& placement, absl::string_view what) {
    absl::Status s = ValidateNdSbp(pin, t.desc->shape, placement);
    if (!s.ok()) return Broken(what, " pinned to ", NdSbpText(pin), " is invalid: ", s.message());
    return absl::OkStatus();
  }

  absl::Status CheckTensorInferred(const TensorNode& t) {
    const std::string who = Name(t.id);
    if (!t.desc) return Broken(who, " has no desc (run the infer pass)");
    if (!t.placement) return Broken(who, " has no placement (run the infer pass)");
    if (t.pinned_nd_sbp) RETURN_IF_ERROR(CheckPin(*t.pinned_nd_sbp, t, *t.placement, who));
    return absl::OkStatus();
  }

  absl::Status CheckOpInferred(const OpNode& op) {
    const std::string who = Name(op.id);
    if (!op.placement) return Broken(who, " has no placement (run the infer pass)");
    std::vector<TensorDesc> in;
    for (TensorId id : op.inputs) in.push_back(*g_.tensor(id).desc);
    absl::StatusOr<std::vector<TensorDesc>> out = op.def->Infer(op.name, op.attrs, in);
    if (!out.ok()) return Broken(who, " no longer infers from its inputs: ", out.status().message());
    if (out->size() != op.outputs.size()) {
      return Broken(who, " infers ", out->size(), " outputs but has ", op.outputs.size());
    }
    for (size_t k = 0; k < out->size(); ++k) {
      const TensorNode& t = g_.tensor(op.outputs[k]);
      if (*t.desc != (*out)[k]) {
        return Broken(Name(t.id), " has desc ", t.desc->ToString(), " but ", who, " infers ", (*out)[k].ToString(),
                      " for output ", k, " from its inputs");
      }
      if (*t.placement != *op.placement) {
        return Broken(Name(t.id), " is on ", t.placement->ToString(), " but its producer ", who, " is on ",
                      op.placement->ToString());
      }
    }
    for (const auto& [i, pin] : op.pinned_input_nd_sbp) {
      RETURN_IF_ERROR(CheckPin(pin, g_.tensor(op.inputs[i]), *op.placement, absl::StrCat(who, " input ", i)));
    }
    for (const auto& [k, pin] : op.pinned_output_nd_sbp) {
      RETURN_IF_ERROR(CheckPin(pin, g_.tensor(op.outputs[k]), *op.placement, absl::StrCat(who, " output ", k)));
    }
    return absl::OkStatus();
  }

  absl::Status CheckChosenTensorSbp(const TensorNode& t) {
    if (!t.nd_sbp) return absl::OkStatus();
    if (!t.placement || t.nd_sbp->num_axes() != t.placement->num_hierarchy_axes()) {
      return Broken(Name(t.id), " has chosen SBP ", NdSbpText(*t.nd_sbp), " which does not fit its placement ",
                    t.placement ? t.placement->ToString() : "(none)");
    }
    if (t.pinned_nd_sbp && *t.pinned_nd_sbp != *t.nd_sbp) {
      return Broken(Name(t.id), " has chosen SBP ", NdSbpText(*t.nd_sbp), " but is pinned to ",
                    NdSbpText(*t.pinned_nd_sbp));
    }
    return absl::OkStatus();
  }

  absl::Status CheckChosenSignature(const OpNode& op) {
    const std::string who = Name(op.id);
    if (!op.nd_sbp_signature) return absl::OkStatus();
    const NdSbpSignature& sig = *op.nd_sbp_signature;
    if (sig.inputs.size() != op.inputs.size() || sig.outputs.size() != op.outputs.size()) {
      return Broken(who, " has a chosen signature with ", sig.inputs.size(), " inputs and ", sig.outputs.size(),
                    " outputs for an op with ", op.inputs.size(), " and ", op.outputs.size());
    }
    if (!op.placement) return Broken(who, " has a chosen signature but no placement");
    const int axes = op.placement->num_hierarchy_axes();
    auto check = [&](const std::vector<NdSbp>& chosen, const std::map<int, NdSbp>& pins, absl::string_view what) {
      for (size_t i = 0; i < chosen.size(); ++i) {
        if (chosen[i].num_axes() != axes) {
          return Broken(who, " chose ", NdSbpText(chosen[i]), " for ", what, " ", i, " but its placement ",
                        op.placement->ToString(), " has ", axes, " hierarchy axes");
        }
        auto pin = pins.find(static_cast<int>(i));
        if (pin != pins.end() && pin->second != chosen[i]) {
          return Broken(who, " chose ", NdSbpText(chosen[i]), " for ", what, " ", i, " but it is pinned to ",
                        NdSbpText(pin->second));
        }
      }
      return absl::OkStatus();
    };
    RETURN_IF_ERROR(check(sig.inputs, op.pinned_input_nd_sbp, "input"));
    return check(sig.outputs, op.pinned_output_nd_sbp, "output");
  }

  const Graph& g_;
  const VerifierOptions& options_;
  std::vector<int64_t> position_;  // op id -> index in the program order
};

}  // namespace

absl::Status VerifyGraph(const Graph& graph, const VerifierOptions& options) {
  return Verifier(graph, options).Run();
}

}  // namespace compiler
}  // namespace oneflow_like
