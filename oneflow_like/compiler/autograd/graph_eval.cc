#include "oneflow_like/compiler/autograd/graph_eval.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "oneflow_like/core/eager.h"

namespace oneflow_like {
namespace compiler {
namespace {

absl::StatusOr<Tensor> SourceValue(const TensorNode& t, const GraphValues& feeds) {
  auto fed = feeds.find(t.name);
  if (fed != feeds.end()) {
    if (fed->second.desc() != *t.desc) {
      return absl::InvalidArgumentError(absl::StrCat("graph eval: feed for '", t.name, "' is ",
                                                     fed->second.desc().ToString(), ", expected ",
                                                     t.desc->ToString()));
    }
    return fed->second;
  }
  if (t.is_input) {
    return absl::InvalidArgumentError(
        absl::StrCat("graph eval: input '", t.name, "' ", t.desc->ToString(), " is not fed"));
  }
  double value = 0;
  switch (t.initializer.kind()) {
    case InitializerProto::ZEROS: value = 0; break;
    case InitializerProto::ONES: value = 1; break;
    case InitializerProto::CONSTANT: value = t.initializer.value(); break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("graph eval: variable '", t.name,
                                                     "' has a random initializer; feed its value"));
  }
  Tensor tensor(*t.desc);
  for (int64_t i = 0; i < tensor.elem_count(); ++i) tensor.SetFromDouble(i, value);
  return tensor;
}

}  // namespace

absl::StatusOr<GraphValues> EvaluateGraph(const Graph& graph, const GraphValues& feeds) {
  GraphValues values;
  for (const TensorNode& t : graph.tensors()) {
    if (!t.desc) {
      return absl::FailedPreconditionError(absl::StrCat("graph eval: tensor '", t.name, "' has no desc"));
    }
    if (!t.is_source()) continue;
    ASSIGN_OR_RETURN(values[t.name], SourceValue(t, feeds));
  }
  for (OpId id : graph.op_order()) {
    const OpNode& op = graph.op(id);
    std::vector<Tensor> inputs;
    for (TensorId in : op.inputs) inputs.push_back(values.at(graph.tensor(in).name));
    absl::StatusOr<std::vector<Tensor>> outputs = RunOp(graph.registry(), op.type, inputs, op.attrs);
    if (!outputs.ok()) {
      return absl::Status(outputs.status().code(),
                          absl::StrCat("graph eval: ", graph.Describe(id), ": ", outputs.status().message()));
    }
    for (size_t k = 0; k < op.outputs.size(); ++k) values[graph.tensor(op.outputs[k]).name] = (*outputs)[k];
  }
  return values;
}

GraphValues ApplyVariableUpdates(const Graph& graph, const GraphValues& values) {
  GraphValues next;
  for (const VariableUpdate& update : graph.variable_updates()) {
    next[graph.tensor(update.variable).name] = values.at(graph.tensor(update.new_value).name);
  }
  return next;
}

}  // namespace compiler
}  // namespace oneflow_like
