#include "oneflow_like/compiler/autograd/grad_context.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/autograd/autograd_pass.h"
#include "oneflow_like/compiler/infer_pass.h"

namespace oneflow_like {
namespace compiler {
namespace autograd_internal {

absl::StatusOr<OpId> AddAndInfer(Graph* graph, const PendingOp& op) {
  OpSpec spec;
  spec.name = op.name;
  spec.type = op.type;
  for (const std::string& name : op.inputs) {
    const TensorId t = graph->FindTensor(name);
    if (!t.valid()) {
      return absl::InternalError(absl::StrCat("autograd: ", op.type, " '", op.name, "' reads '", name,
                                              "', which is not a tensor of the graph"));
    }
    spec.inputs.push_back(t);
  }
  spec.output_names = op.outputs;
  spec.attrs = op.attrs;
  spec.placement = op.placement;
  spec.stage = op.stage;
  spec.pinned_input_nd_sbp = op.pinned_input_nd_sbp;
  spec.pinned_output_nd_sbp = op.pinned_output_nd_sbp;
  ASSIGN_OR_RETURN(OpId id, graph->AddOp(std::move(spec)));
  RETURN_IF_ERROR(InferOp(graph, id).status());
  return id;
}

GraphGradContext::GraphGradContext(BackwardState* state, OpId op)
    : state_(state), graph_(state->graph), op_id_(op) {
  input_names_.resize(graph_->op(op).inputs.size());
  input_grads_.resize(graph_->op(op).inputs.size());
  output_names_.resize(graph_->op(op).outputs.size());
  output_grads_.resize(graph_->op(op).outputs.size());
}

const std::string& GraphGradContext::input(int i) const {
  if (!input_names_[i]) input_names_[i] = ForwardValue(op().inputs[i]);
  return *input_names_[i];
}

const std::string& GraphGradContext::output(int i) const {
  if (!output_names_[i]) output_names_[i] = ForwardValue(op().outputs[i]);
  return *output_names_[i];
}

const std::string& GraphGradContext::output_grad(int i) const {
  if (output_grads_[i]) return *output_grads_[i];
  const TensorId t = op().outputs[i];
  const std::string& grad = state_->final_grad[t.value()];
  if (!grad.empty()) {
    output_grads_[i] = grad;
    return *output_grads_[i];
  }
  // No gradient reached this output: materialize zeros.
  const TensorNode& out = graph_->tensor(t);
  PendingOp fill;
  fill.name = FreshName(absl::StrCat(out.name, "/zero_grad"));
  fill.type = "fill";
  fill.outputs = {fill.name};
  fill.attrs = AttrMap{{"shape", out.desc->shape.dims()}, {"dtype", out.desc->dtype}, {"value", 0.0}};
  pending_descs_[fill.name] = *out.desc;
  output_grads_[i] = fill.name;
  Buffer(std::move(fill));
  return *output_grads_[i];
}

bool GraphGradContext::needs_input_grad(int i) const {
  return state_->requires_grad[op().inputs[i].value()];
}

const std::string& GraphGradContext::ForwardValue(TensorId t) const {
  const TensorNode& node = graph_->tensor(t);
  if (!node.producer.valid() || !graph_->op(node.producer).recompute) return node.name;
  return CloneOf(node.producer)[node.producer_output];
}

const std::vector<std::string>& GraphGradContext::CloneOf(OpId id) const {
  auto found = state_->clone_outputs.find(id.value());
  if (found != state_->clone_outputs.end()) return found->second;
  const OpNode& original = graph_->op(id);
  PendingOp clone;
  clone.type = original.type;
  for (TensorId in : original.inputs) clone.inputs.push_back(ForwardValue(in));  // clones its producers first
  clone.name = FreshName(absl::StrCat(original.name, "/recompute"));
  for (TensorId out : original.outputs) {
    const TensorNode& node = graph_->tensor(out);
    // An output named like its op (the default) shares the clone op's name.
    clone.outputs.push_back(node.name == original.name ? clone.name : FreshName(absl::StrCat(node.name, "/recompute")));
    pending_descs_[clone.outputs.back()] = *node.desc;
  }
  clone.attrs = original.attrs;
  clone.placement = original.placement;
  clone.stage = original.stage;
  clone.pinned_input_nd_sbp = original.pinned_input_nd_sbp;
  clone.pinned_output_nd_sbp = original.pinned_output_nd_sbp;
  std::vector<std::string>& outputs = state_->clone_outputs[id.value()];
  outputs = clone.outputs;
  pending_.push_back(std::move(clone));  // not Buffer: a clone keeps the original's placement and stage
  return outputs;
}

std::string ReserveName(BackwardState* state, const std::string& base) {
  auto taken = [&](const std::string& name) {
    return state->graph->FindTensor(name).valid() || state->graph->FindOp(name).valid() ||
           state->reserved_names.count(name) > 0;
  };
  std::string name = base;
  for (int k = 1; taken(name); ++k) name = absl::StrCat(base, "_", k);
  state->reserved_names.insert(name);
  return name;
}

std::string GraphGradContext::FreshName(const std::string& base) const { return ReserveName(state_, base); }

void GraphGradContext::Buffer(PendingOp pending) const {
  pending.placement = op().placement;
  pending.stage = op().stage;
  pending_.push_back(std::move(pending));
}

absl::StatusOr<TensorDesc> GraphGradContext::DescOf(const std::string& name) const {
  auto found = pending_descs_.find(name);
  if (found != pending_descs_.end()) return found->second;
  const TensorId t = graph_->FindTensor(name);
  if (!t.valid() || !graph_->tensor(t).desc) {
    return absl::InternalError(absl::StrCat("autograd: the gradient rule of ", graph_->Describe(op_id_),
                                            " refers to unknown value '", name, "'"));
  }
  return *graph_->tensor(t).desc;
}

absl::StatusOr<std::vector<std::string>> GraphGradContext::Emit(const std::string& op_type,
                                                                const std::vector<std::string>& inputs,
                                                                const AttrMap& attrs) {
  const OpDef* def = graph_->registry().Find(op_type);
  if (def == nullptr) {
    return absl::InternalError(absl::StrCat("autograd: the gradient rule of ", graph_->Describe(op_id_),
                                            " emits unregistered op type '", op_type, "'"));
  }
  std::vector<TensorDesc> descs;
  for (const std::string& name : inputs) {
    ASSIGN_OR_RETURN(TensorDesc desc, DescOf(name));
    descs.push_back(std::move(desc));
  }
  PendingOp pending;
  pending.name = FreshName(absl::StrCat(op().name, "/grad", next_grad_op_++));
  pending.type = op_type;
  pending.inputs = inputs;
  ASSIGN_OR_RETURN(pending.attrs, def->ValidateAttrs(pending.name, attrs));
  ASSIGN_OR_RETURN(std::vector<TensorDesc> outs, def->Infer(pending.name, pending.attrs, descs));
  for (size_t j = 0; j < outs.size(); ++j) {
    std::string name = pending.name;
    if (outs.size() > 1) {
      // The OpDef's output name ("dgamma"); variadic outputs repeat the last one with an index.
      const bool named = j + 1 < def->outputs.size() || (j + 1 == def->outputs.size() && !def->variadic_outputs);
      const std::string label = def->outputs.empty() ? "out" : def->outputs[std::min(j, def->outputs.size() - 1)];
      name = FreshName(absl::StrCat(pending.name, "/", label, named ? "" : std::to_string(j)));
    }
    pending_descs_[name] = outs[j];
    emitted_outputs_.insert(name);
    pending.outputs.push_back(std::move(name));
  }
  std::vector<std::string> result = pending.outputs;
  Buffer(std::move(pending));
  return result;
}

void GraphGradContext::SetInputGrad(int i, const std::string& value) {
  if (!needs_input_grad(i)) return;  // a rule may set gradients nobody asked for; drop them
  input_grads_[i] = value;
}

absl::Status GraphGradContext::Commit() {
  const std::vector<TensorId> inputs = op().inputs;  // copied: adding ops may move the OpNode
  // Sole contributions produced by this rule take the tensor's gradient name.
  std::map<std::string, std::string> renames;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!input_grads_[i]) continue;
    const int64_t t = inputs[i].value();
    const std::string& value = *input_grads_[i];
    if (state_->expected_contributions[t] != 1 || !state_->contributions[t].empty() ||
        !emitted_outputs_.count(value) || renames.count(value)) {
      continue;
    }
    const TensorNode& node = graph_->tensor(inputs[i]);
    renames[value] = node.is_variable ? GradientName(node.name) : FreshName(GradientName(node.name));
  }
  auto renamed = [&](const std::string& name) {
    auto it = renames.find(name);
    return it == renames.end() ? name : it->second;
  };
  for (PendingOp& pending : pending_) {
    for (std::string& name : pending.inputs) name = renamed(name);
    for (std::string& name : pending.outputs) name = renamed(name);
    RETURN_IF_ERROR(AddAndInfer(graph_, pending).status());
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (input_grads_[i]) state_->contributions[inputs[i].value()].push_back(renamed(*input_grads_[i]));
  }
  pending_.clear();
  return absl::OkStatus();
}

}  // namespace autograd_internal
}  // namespace compiler
}  // namespace oneflow_like
