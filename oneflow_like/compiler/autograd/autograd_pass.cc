#include "oneflow_like/compiler/autograd/autograd_pass.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/autograd/grad_context.h"

namespace oneflow_like {
namespace compiler {

using autograd_internal::AddAndInfer;
using autograd_internal::BackwardState;
using autograd_internal::GraphGradContext;
using autograd_internal::PendingOp;
using autograd_internal::ReserveName;

std::string GradientName(absl::string_view tensor_name) { return absl::StrCat(tensor_name, "/grad"); }

TensorId GradientOf(const Graph& graph, TensorId variable) {
  if (!graph.has_tensor(variable)) return TensorId();
  const TensorId grad = graph.FindTensor(GradientName(graph.tensor(variable).name));
  if (!grad.valid() || graph.tensor(grad).is_source()) return TensorId();
  return grad;
}

namespace {

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError("autograd: " + message); }

// Checks the loss and returns it; an invalid id means "already differentiated".
absl::StatusOr<TensorId> CheckLoss(const Graph& graph) {
  const JobConfigProto& config = graph.config();
  if (config.loss().empty()) {
    return Invalid(absl::StrCat("job '", graph.name(), "' has an optimizer but no loss tensor (hint: ",
                                "train(loss, optimizer=...) names the scalar to minimize)"));
  }
  if (!config.has_optimizer()) {
    return Invalid(absl::StrCat("loss '", config.loss(), "' is set but no optimizer (hint: train(",
                                config.loss(), ", optimizer=sgd(lr=...)))"));
  }
  const TensorId loss = graph.FindTensor(config.loss());
  if (!loss.valid()) return Invalid(absl::StrCat("loss '", config.loss(), "' is not a tensor of the graph"));
  for (const TensorNode& t : graph.tensors()) {
    if (!t.desc) {
      return absl::FailedPreconditionError(
          absl::StrCat("autograd: tensor '", t.name, "' has no desc (run the infer pass first)"));
    }
  }
  const TensorDesc& desc = *graph.tensor(loss).desc;
  if (!IsFloatingPoint(desc.dtype) || desc.shape.num_axes() != 0) {
    return Invalid(absl::StrCat("loss '", config.loss(), "' must be a floating-point scalar (shape []), got ",
                                desc.ToString(), " (hint: reduce it with reduce_mean)"));
  }
  const TensorId seed = graph.FindTensor(GradientName(config.loss()));
  if (seed.valid()) {
    const TensorNode& node = graph.tensor(seed);
    if (node.producer.valid() && graph.op(node.producer).type == "fill") return TensorId();
    return Invalid(absl::StrCat("tensor '", node.name, "' clashes with the name of the loss gradient (hint: rename it)"));
  }
  return loss;
}

// Marks what needs gradients (forward) and which ops are active (backward from the loss);
// returns the active ops in reverse program order.
std::vector<OpId> AnalyzeGraph(const Graph& graph, TensorId loss, BackwardState* state) {
  const int64_t n = graph.num_tensors();
  state->requires_grad.assign(n, false);
  state->expected_contributions.assign(n, 0);
  state->contributions.assign(n, {});
  state->final_grad.assign(n, "");
  for (const TensorNode& t : graph.tensors()) {
    if (t.is_variable && !t.frozen && IsFloatingPoint(t.desc->dtype)) state->requires_grad[t.id.value()] = true;
  }
  auto differentiable = [&](const OpNode& op) { return op.def->grad && !op.def->is_optimizer; };
  for (OpId id : graph.op_order()) {
    const OpNode& op = graph.op(id);
    if (!differentiable(op)) continue;
    const bool any = std::any_of(op.inputs.begin(), op.inputs.end(),
                                 [&](TensorId t) { return state->requires_grad[t.value()]; });
    for (TensorId out : op.outputs) {
      state->requires_grad[out.value()] = any && IsFloatingPoint(graph.tensor(out).desc->dtype);
    }
  }
  std::vector<bool> reaches(n, false);
  reaches[loss.value()] = true;
  std::vector<OpId> active;
  for (auto it = graph.op_order().rbegin(); it != graph.op_order().rend(); ++it) {
    const OpNode& op = graph.op(*it);
    if (!differentiable(op)) continue;
    const bool has_grad = std::any_of(op.outputs.begin(), op.outputs.end(), [&](TensorId t) {
      return reaches[t.value()] && state->requires_grad[t.value()];
    });
    if (!has_grad) continue;
    for (TensorId in : op.inputs) {
      if (!state->requires_grad[in.value()]) continue;
      reaches[in.value()] = true;
      ++state->expected_contributions[in.value()];
    }
    active.push_back(*it);
  }
  return active;
}

// Sums the contributions to tensor `t` with a chain of `add` ops; the last one is named
// `final_name`. REQUIRES: at least two contributions.
absl::Status SumContributions(BackwardState* state, TensorId t, const std::string& final_name,
                              const std::optional<Placement>& placement, int stage) {
  const std::vector<std::string>& terms = state->contributions[t.value()];
  const std::string base = GradientName(state->graph->tensor(t).name);
  std::string sum = terms[0];
  for (size_t k = 1; k < terms.size(); ++k) {
    PendingOp add;
    add.name = k + 1 == terms.size() ? final_name : ReserveName(state, absl::StrCat(base, "_partial", k));
    add.type = "add";
    add.inputs = {sum, terms[k]};
    add.outputs = {add.name};
    add.placement = placement;
    add.stage = stage;
    RETURN_IF_ERROR(AddAndInfer(state->graph, add).status());
    sum = add.name;
  }
  state->final_grad[t.value()] = sum;
  return absl::OkStatus();
}

// Gives every trainable variable with contributions its gradient tensor "<variable>/grad".
absl::Status FinalizeVariableGradients(BackwardState* state, int64_t num_original_tensors) {
  Graph* graph = state->graph;
  for (int64_t i = 0; i < num_original_tensors; ++i) {
    const TensorId t(i);
    const std::vector<std::string>& terms = state->contributions[i];
    if (!graph->tensor(t).is_variable || terms.empty()) continue;
    const std::string name = GradientName(graph->tensor(t).name);
    const OpId last = graph->tensor(graph->FindTensor(terms.back())).producer;
    const int stage = last.valid() ? graph->op(last).stage : 0;
    if (terms.size() > 1) {
      RETURN_IF_ERROR(SumContributions(state, t, name, graph->tensor(t).placement, stage));
    } else if (terms[0] != name) {  // a rule passed another tensor through: copy it
      PendingOp copy{name, "identity", {terms[0]}, {name}, {}, graph->tensor(t).placement, stage, {}, {}};
      RETURN_IF_ERROR(AddAndInfer(graph, copy).status());
    }
    state->final_grad[i] = name;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<bool> AutogradPass::Run(Graph* graph) {
  const JobConfigProto& config = graph->config();
  if (!config.has_optimizer() && config.loss().empty()) return false;  // inference job
  ASSIGN_OR_RETURN(const TensorId loss, CheckLoss(*graph));
  if (!loss.valid()) return false;  // already differentiated

  BackwardState state(graph);
  const int64_t num_original_tensors = graph->num_tensors();
  const std::vector<OpId> active = AnalyzeGraph(*graph, loss, &state);
  if (!state.requires_grad[loss.value()]) {
    return Invalid(absl::StrCat("loss '", config.loss(), "' does not depend on any trainable variable (every ",
                                "variable it reads is frozen, or it reads none), so there is nothing to train"));
  }
  state.reserved_names.insert(GradientName(config.loss()));
  for (const TensorNode& t : graph->tensors()) {
    if (!t.is_variable || state.expected_contributions[t.id.value()] == 0) continue;
    const std::string name = GradientName(t.name);
    if (graph->FindTensor(name).valid() || graph->FindOp(name).valid()) {
      return Invalid(absl::StrCat("the name '", name, "' of variable '", t.name,
                                  "''s gradient is already used in the graph (hint: rename that tensor or op)"));
    }
    state.reserved_names.insert(name);
  }

  // The seed d(loss) = 1 / pieces_per_step.
  const TensorNode& loss_node = graph->tensor(loss);
  const DataType loss_dtype = loss_node.desc->dtype;
  PendingOp seed;
  seed.name = GradientName(loss_node.name);
  seed.type = "fill";
  seed.outputs = {seed.name};
  seed.attrs = AttrMap{{"shape", std::vector<int64_t>{}}, {"dtype", loss_dtype},
                       {"value", 1.0 / static_cast<double>(PiecesPerStep(config))}};
  seed.placement = loss_node.placement;
  seed.stage = loss_node.producer.valid() ? graph->op(loss_node.producer).stage : 0;
  RETURN_IF_ERROR(AddAndInfer(graph, seed).status());
  state.final_grad[loss.value()] = seed.name;

  for (OpId id : active) {
    const std::vector<TensorId> outputs = graph->op(id).outputs;
    for (TensorId out : outputs) {
      if (!state.final_grad[out.value()].empty()) continue;
      const std::vector<std::string>& terms = state.contributions[out.value()];
      if (terms.size() == 1) state.final_grad[out.value()] = terms[0];
      if (terms.size() < 2) continue;
      const std::string name = ReserveName(&state, GradientName(graph->tensor(out).name));
      RETURN_IF_ERROR(SumContributions(&state, out, name, graph->op(id).placement, graph->op(id).stage));
    }
    GraphGradContext context(&state, id);
    const absl::Status rule = graph->op(id).def->grad(&context);
    if (!rule.ok()) {
      return absl::Status(rule.code(), absl::StrCat("autograd: differentiating ", graph->Describe(id), ": ",
                                                    rule.message()));
    }
    RETURN_IF_ERROR(context.Commit());
  }
  RETURN_IF_ERROR(FinalizeVariableGradients(&state, num_original_tensors));
  return true;
}

}  // namespace compiler
}  // namespace oneflow_like
