#include "oneflow_like/compiler/infer_pass.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace oneflow_like {
namespace compiler {
namespace {

constexpr char kPinHint[] =
    "give one SBP per mesh axis, and split only axes with at least as many elements as devices";

// "x float32[64,128] sbp=[S(0)]".
std::string TensorText(const TensorNode& t) {
  std::string s = absl::StrCat(t.name, " ", t.desc ? t.desc->ToString() : "(no desc)");
  if (t.pinned_nd_sbp) absl::StrAppend(&s, " sbp=", NdSbpText(*t.pinned_nd_sbp));
  return s;
}

// Bool attributes whose flipped value makes inference succeed: "transpose_b=true".
std::vector<std::string> FlipSuggestions(const OpNode& op, const std::vector<TensorDesc>& in) {
  std::vector<std::string> out;
  for (const AttrDef& d : op.def->attrs) {
    if (d.type != AttrType::kBool || !op.attrs.Has(d.name)) continue;
    AttrMap flipped = op.attrs;
    const bool value = !op.attrs.Bool(d.name);
    flipped.Set(d.name, value);
    if (op.def->Infer(op.name, flipped, in).ok()) out.push_back(absl::StrCat(d.name, "=", value ? "true" : "false"));
  }
  return out;
}

absl::Status InferError(const Graph& g, const OpNode& op, const std::vector<TensorDesc>& in,
                        const absl::Status& status) {
  std::vector<std::string> inputs;
  for (TensorId id : op.inputs) inputs.push_back(TensorText(g.tensor(id)));
  std::string message(status.message());
  if (!inputs.empty()) absl::StrAppend(&message, "; inputs: ", absl::StrJoin(inputs, ", "));
  std::vector<std::string> flips = FlipSuggestions(op, in);
  if (!flips.empty()) absl::StrAppend(&message, " (hint: did you mean ", absl::StrJoin(flips, " or "), "?)");
  return absl::Status(status.code(), message);
}

absl::Status CheckPin(const NdSbp& pin, const TensorNode& t, const Placement& placement, absl::string_view who) {
  absl::Status s = ValidateNdSbp(pin, t.desc->shape, placement);
  if (s.ok()) return s;
  return absl::InvalidArgumentError(absl::StrCat(who, " '", t.name, "' (", t.desc->ToString(), ") pinned to ", NdSbpText(pin),
                                                 ": ", s.message(), " (hint: ", kPinHint, ")"));
}

absl::Status CheckSourcePin(const TensorNode& t) {
  // Op outputs are checked once inferred (their desc may still be unset here).
  if (!t.is_source() || !t.pinned_nd_sbp || !t.placement || !t.desc) return absl::OkStatus();
  return CheckPin(*t.pinned_nd_sbp, t, *t.placement, t.is_variable ? "variable" : "input");
}

// Step 1: the op's placement, and that of unplaced source inputs.
absl::StatusOr<bool> InferPlacement(Graph* g, OpNode* op) {
  bool changed = false;
  if (!op->placement) {
    for (TensorId id : op->inputs) {
      if (g->tensor(id).placement) {
        op->placement = g->tensor(id).placement;
        changed = true;
        break;
      }
    }
  }
  if (!op->placement) {
    std::vector<std::string> names;
    for (TensorId id : op->inputs) names.push_back(g->tensor(id).name);
    return absl::InvalidArgumentError(absl::StrCat(
        g->Describe(op->id), ": no placement: neither the op nor its inputs (", absl::StrJoin(names, ", "),
        ") have one (hint: give ", names.empty() ? "the op" : absl::StrCat("input '", names[0], "'"),
        " a placement, e.g. placement=cpu:[0])"));
  }
  for (TensorId id : op->inputs) {
    TensorNode* t = g->mutable_tensor(id);
    if (t->placement || !t->is_source()) continue;
    t->placement = op->placement;
    changed = true;
    RETURN_IF_ERROR(CheckSourcePin(*t));
  }
  return changed;
}

}  // namespace

absl::StatusOr<bool> InferOp(Graph* g, OpId id) {
  if (!g->has_op(id)) return absl::InternalError(absl::StrCat("InferOp: no op #", id.value()));
  OpNode* op = g->mutable_op(id);
  const std::string who = g->Describe(id);
  std::vector<TensorDesc> in;
  for (TensorId t : op->inputs) {
    if (!g->tensor(t).desc) {
      return absl::InternalError(absl::StrCat(who, ": input ", g->Describe(t), " has no desc yet (infer ",
                                              g->Describe(g->tensor(t).producer), " first)"));
    }
    in.push_back(*g->tensor(t).desc);
  }
  ASSIGN_OR_RETURN(bool changed, InferPlacement(g, op));
  absl::StatusOr<std::vector<TensorDesc>> out = op->def->Infer(op->name, op->attrs, in);
  if (!out.ok()) return InferError(*g, *op, in, out.status());
  if (out->size() != op->outputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": produces ", out->size(), " outputs for these attributes, but ",
                                                   op->outputs.size(), " output names are given"));
  }
  for (size_t k = 0; k < out->size(); ++k) {
    TensorNode* t = g->mutable_tensor(op->outputs[k]);
    if (t->desc && *t->desc != (*out)[k]) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", t->name, "' is declared as ", t->desc->ToString(),
                                                     " but ", who, " infers ", (*out)[k].ToString(),
                                                     " (hint: fix the declaration or the op's inputs)"));
    }
    if (t->placement && *t->placement != *op->placement) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", t->name, "' is placed on ", t->placement->ToString(), " but its producer ", who, " runs on ",
          op->placement->ToString(), " (hint: place the op instead; consumers elsewhere get a copy by boxing)"));
    }
    if (!t->desc || !t->placement) changed = true;
    t->desc = (*out)[k];
    t->placement = op->placement;
  }
  for (const auto& [i, pin] : op->pinned_input_nd_sbp) {
    RETURN_IF_ERROR(CheckPin(pin, g->tensor(op->inputs[i]), *op->placement, absl::StrCat(who, ": input ", i)));
  }
  for (size_t k = 0; k < op->outputs.size(); ++k) {
    const TensorNode& t = g->tensor(op->outputs[k]);
    auto pin = op->pinned_output_nd_sbp.find(static_cast<int>(k));
    if (pin != op->pinned_output_nd_sbp.end()) {
      RETURN_IF_ERROR(CheckPin(pin->second, t, *op->placement, absl::StrCat(who, ": output ", k)));
      if (t.pinned_nd_sbp && *t.pinned_nd_sbp != pin->second) {
        return absl::InvalidArgumentError(absl::StrCat(who, ": output ", k, " is pinned to ", NdSbpText(pin->second),
                                                       " but tensor '", t.name, "' is pinned to ",
                                                       NdSbpText(*t.pinned_nd_sbp), " (hint: pin it once)"));
      }
    }
    if (t.pinned_nd_sbp) {
      RETURN_IF_ERROR(CheckPin(*t.pinned_nd_sbp, t, *op->placement, absl::StrCat(who, ": output ", k)));
    }
  }
  return changed;
}

absl::StatusOr<bool> InferPass::Run(Graph* g) {
  for (const TensorNode& t : g->tensors()) RETURN_IF_ERROR(CheckSourcePin(t));
  bool changed = false;
  for (OpId id : g->op_order()) {
    ASSIGN_OR_RETURN(bool op_changed, InferOp(g, id));
    changed = changed || op_changed;
  }
  for (const TensorNode& t : g->tensors()) {
    if (t.is_source() && !t.placement) {
      return absl::InvalidArgumentError(absl::StrCat(t.is_variable ? "variable '" : "input '", t.name,
                                                     "' has no placement and no consumer to take one from (hint: "
                                                     "give it a placement, e.g. placement=cpu:[0])"));
    }
  }
  const std::string& loss = g->config().loss();
  if (!loss.empty()) {
    const TensorId id = g->FindTensor(loss);
    if (!id.valid()) return absl::InvalidArgumentError(absl::StrCat("loss '", loss, "' is not a tensor of the graph"));
    const TensorNode& t = g->tensor(id);
    if (t.desc->shape.num_axes() != 0 || !IsFloatingPoint(t.desc->dtype)) {
      return absl::InvalidArgumentError(absl::StrCat("loss '", loss, "' must be a floating-point scalar, got ",
                                                     t.desc->ToString(), " (hint: reduce it, e.g. ", loss,
                                                     "_mean = reduce_mean(", loss, "))"));
    }
  }
  return changed;
}

}  // namespace compiler
}  // namespace oneflow_like
