#include "oneflow_like/compiler/graph_builder.h"

#include "absl/strings/str_cat.h"

namespace oneflow_like {
namespace compiler {

GraphBuilder::GraphBuilder(const OpRegistry* registry, std::string job_name) : graph_(registry) {
  graph_.set_name(std::move(job_name));
}

bool GraphBuilder::Check(TensorRef t, absl::string_view what) {
  if (!status_.ok()) return false;
  if (!graph_.has_tensor(t.id)) {
    status_ = absl::InvalidArgumentError(absl::StrCat(what, ": invalid tensor handle"));
    return false;
  }
  return true;
}

TensorRef GraphBuilder::Input(const std::string& name, Shape shape, DataType dtype,
                              std::optional<Placement> placement, std::optional<NdSbp> nd_sbp) {
  if (!status_.ok()) return {};
  SourceSpec spec;
  spec.name = name;
  spec.desc = TensorDesc{dtype, std::move(shape)};
  spec.placement = std::move(placement);
  spec.pinned_nd_sbp = std::move(nd_sbp);
  absl::StatusOr<TensorId> id = graph_.AddSource(std::move(spec));
  if (!id.ok()) status_ = id.status();
  return id.ok() ? TensorRef{*id} : TensorRef{};
}

TensorRef GraphBuilder::Variable(const std::string& name, Shape shape, InitializerProto initializer,
                                 DataType dtype, std::optional<Placement> placement,
                                 std::optional<NdSbp> nd_sbp) {
  if (!status_.ok()) return {};
  SourceSpec spec;
  spec.name = name;
  spec.desc = TensorDesc{dtype, std::move(shape)};
  spec.is_variable = true;
  spec.initializer = std::move(initializer);
  spec.placement = std::move(placement);
  spec.pinned_nd_sbp = std::move(nd_sbp);
  absl::StatusOr<TensorId> id = graph_.AddSource(std::move(spec));
  if (!id.ok()) status_ = id.status();
  return id.ok() ? TensorRef{*id} : TensorRef{};
}

void GraphBuilder::Freeze(TensorRef variable) {
  if (!Check(variable, "Freeze")) return;
  TensorNode* t = graph_.mutable_tensor(variable.id);
  if (!t->is_variable) {
    status_ = absl::InvalidArgumentError(absl::StrCat("Freeze: ", graph_.Describe(t->id), " is not a variable"));
    return;
  }
  t->frozen = true;
}

std::vector<TensorRef> GraphBuilder::MultiOp(const std::string& type, const std::vector<TensorRef>& inputs,
                                             AttrMap attrs, OpOptions options) {
  if (!status_.ok()) return {};
  OpSpec spec;
  spec.type = type;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!Check(inputs[i], absl::StrCat(type, " input ", i))) return {};
    spec.inputs.push_back(inputs[i].id);
  }
  const OpDef* def = graph_.registry().Find(type);
  if (def == nullptr) {  // AddOp reports it with suggestions.
    spec.name = options.name.empty() ? type : options.name;
    spec.output_names = {spec.name};
  } else {
    spec.name = !options.name.empty()          ? options.name
                : !options.output_names.empty() ? options.output_names[0]
                                                : graph_.UniqueOpName(type);
    int count = static_cast<int>(def->outputs.size());
    if (def->variadic_outputs) count = options.num_outputs > 0 ? options.num_outputs : 1;
    if (!options.output_names.empty()) count = static_cast<int>(options.output_names.size());
    for (int i = 0; i < count; ++i) {
      if (i < static_cast<int>(options.output_names.size()) && !options.output_names[i].empty()) {
        spec.output_names.push_back(options.output_names[i]);
      } else if (count == 1) {
        spec.output_names.push_back(graph_.UniqueTensorName(spec.name));
      } else {
        std::string suffix = def->variadic_outputs ? absl::StrCat(i) : def->outputs[i];
        spec.output_names.push_back(graph_.UniqueTensorName(absl::StrCat(spec.name, ".", suffix)));
      }
    }
  }
  spec.attrs = std::move(attrs);
  spec.placement = std::move(options.placement);
  spec.stage = options.stage;
  spec.recompute = options.recompute;
  spec.pinned_input_nd_sbp = std::move(options.input_nd_sbp);
  spec.pinned_output_nd_sbp = std::move(options.output_nd_sbp);
  absl::StatusOr<OpId> id = graph_.AddOp(std::move(spec));
  if (!id.ok()) {
    status_ = id.status();
    return {};
  }
  std::vector<TensorRef> outs;
  for (TensorId t : graph_.op(*id).outputs) outs.push_back(TensorRef{t});
  return outs;
}

TensorRef GraphBuilder::Op(const std::string& type, const std::vector<TensorRef>& inputs, AttrMap attrs,
                           OpOptions options) {
  std::vector<TensorRef> outs = MultiOp(type, inputs, std::move(attrs), std::move(options));
  return outs.empty() ? TensorRef{} : outs[0];
}

void GraphBuilder::Output(TensorRef tensor) {
  if (Check(tensor, "Output")) graph_.mutable_tensor(tensor.id)->is_output = true;
}

void GraphBuilder::Train(TensorRef loss, OptimizerProto optimizer) {
  if (!Check(loss, "Train")) return;
  graph_.mutable_config()->set_loss(graph_.tensor(loss.id).name);
  *graph_.mutable_config()->mutable_optimizer() = std::move(optimizer);
}

absl::StatusOr<Graph> GraphBuilder::Build() && {
  RETURN_IF_ERROR(status_);
  RETURN_IF_ERROR(ValidateJobConfig(graph_));
  return std::move(graph_);
}

// ---- Initializers and optimizers ----

InitializerProto ZerosInit() {
  InitializerProto p;
  p.set_kind(InitializerProto::ZEROS);
  return p;
}

InitializerProto OnesInit() {
  InitializerProto p;
  p.set_kind(InitializerProto::ONES);
  return p;
}

InitializerProto ConstantInit(double value) {
  InitializerProto p;
  p.set_kind(InitializerProto::CONSTANT);
  p.set_value(value);
  return p;
}

InitializerProto UniformInit(double low, double high) {
  InitializerProto p;
  p.set_kind(InitializerProto::UNIFORM);
  p.set_low(low);
  p.set_high(high);
  return p;
}

InitializerProto NormalInit(double stddev, double mean) {
  InitializerProto p;
  p.set_kind(InitializerProto::NORMAL);
  p.set_stddev(stddev);
  p.set_mean(mean);
  return p;
}

InitializerProto PortableInit(double stddev, uint64_t stream, uint64_t seed) {
  InitializerProto p;
  p.set_kind(InitializerProto::PORTABLE_UNIFORM);
  p.set_stddev(stddev);
  p.set_stream(stream);
  p.set_portable_seed(seed);
  return p;
}

OptimizerProto SgdOptimizer(double learning_rate, double momentum, double weight_decay) {
  OptimizerProto p;
  p.set_kind(OptimizerProto::SGD);
  p.set_learning_rate(learning_rate);
  p.set_momentum(momentum);
  p.set_weight_decay(weight_decay);
  return p;
}

OptimizerProto AdamOptimizer(double learning_rate, double weight_decay) {
  OptimizerProto p;
  p.set_kind(OptimizerProto::ADAM);
  p.set_learning_rate(learning_rate);
  p.set_weight_decay(weight_decay);
  return p;
}

OptimizerProto AdamWOptimizer(double learning_rate, double weight_decay) {
  OptimizerProto p = AdamOptimizer(learning_rate, weight_decay);
  p.set_kind(OptimizerProto::ADAMW);
  return p;
}

}  // namespace compiler
}  // namespace oneflow_like
