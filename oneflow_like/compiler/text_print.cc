// Printing half of text_format.h.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/compiler/text_format.h"
#include "oneflow_like/compiler/text_value.h"

namespace oneflow_like {
namespace compiler {
namespace {

using text_internal::FormatDouble;
using text_internal::NameText;
using text_internal::QuoteString;

// Large 1-D placements over consecutive ranks print as a range ("cpu:0-511").
std::string PlacementText(const Placement& p) {
  const std::vector<Rank>& r = p.ranks();
  bool consecutive = p.num_hierarchy_axes() == 1 && r.size() > 8;
  for (size_t i = 1; consecutive && i < r.size(); ++i) consecutive = r[i].value() == r[i - 1].value() + 1;
  if (!consecutive) return p.ToString();
  return absl::StrCat(DeviceTypeName(p.device_type()), ":", r.front().value(), "-", r.back().value());
}

std::string AttrText(const AttrValue& v) {
  switch (TypeOf(v)) {
    case AttrType::kFloat: return FormatDouble(std::get<double>(v));
    case AttrType::kString: return QuoteString(std::get<std::string>(v));
    case AttrType::kFloats:
      return absl::StrCat("[", absl::StrJoin(std::get<std::vector<double>>(v), ",", [](std::string* out, double d) {
                            out->append(FormatDouble(d));
                          }), "]");
    default: return AttrValueToString(v);  // ints, bools, int lists and dtypes print as they parse
  }
}

std::string InitializerText(const InitializerProto& init) {
  std::vector<std::string> args;
  std::string kind;
  switch (init.kind()) {
    case InitializerProto::ONES: kind = "ones"; break;
    case InitializerProto::CONSTANT:
      kind = "constant";
      args = {FormatDouble(init.value())};
      break;
    case InitializerProto::UNIFORM:
      kind = "uniform";
      args = {FormatDouble(init.low()), FormatDouble(init.high())};
      break;
    case InitializerProto::NORMAL:
      kind = "normal";
      args = {FormatDouble(init.stddev())};
      if (init.mean() != 0) args.push_back(FormatDouble(init.mean()));
      break;
    case InitializerProto::PORTABLE_UNIFORM:  // its seed is portable_seed (the Philox key is unused)
      kind = "portable";
      args = {FormatDouble(init.stddev()), absl::StrCat(init.stream())};
      if (init.portable_seed() != 0) args.push_back(absl::StrCat("seed=", init.portable_seed()));
      return absl::StrCat(kind, "(", absl::StrJoin(args, ", "), ")");
    default: kind = "zeros"; break;
  }
  if (init.seed() != 0) args.push_back(absl::StrCat("seed=", init.seed()));
  return args.empty() ? kind : absl::StrCat(kind, "(", absl::StrJoin(args, ", "), ")");
}

// "[[S(0)], _]": one entry per index in [0, count), `_` where nothing is pinned.
std::string PinListText(const std::map<int, NdSbp>& pins, int count) {
  std::vector<std::string> entries;
  for (int i = 0; i < count; ++i) {
    auto it = pins.find(i);
    entries.push_back(it == pins.end() ? "_" : NdSbpText(it->second));
  }
  return absl::StrCat("[", absl::StrJoin(entries, ", "), "]");
}

std::string ConfigLine(const Graph& g) {
  const JobConfigProto& c = g.config();
  std::vector<std::string> args;
  if (!g.name().empty()) args.push_back(absl::StrCat("name=", QuoteString(g.name())));
  if (c.micro_batches() != 0) args.push_back(absl::StrCat("micro_batches=", c.micro_batches()));
  if (c.gradient_accumulation_steps() != 0) {
    args.push_back(absl::StrCat("gradient_accumulation_steps=", c.gradient_accumulation_steps()));
  }
  if (c.zero_stage() != 0) args.push_back(absl::StrCat("zero_stage=", c.zero_stage()));
  if (c.seed() != 0) args.push_back(absl::StrCat("seed=", c.seed()));
  if (c.stage_placements_size() > 0) {
    std::vector<std::string> stages;
    for (const PlacementProto& proto : c.stage_placements()) {
      absl::StatusOr<Placement> p = Placement::FromProto(proto);
      stages.push_back(p.ok() ? PlacementText(*p) : "<invalid placement>");
    }
    args.push_back(absl::StrCat("stages=[", absl::StrJoin(stages, ", "), "]"));
  }
  return args.empty() ? "" : absl::StrCat("config(", absl::StrJoin(args, ", "), ")");
}

std::string OptimizerText(const OptimizerProto& o) {
  std::vector<std::string> args = {absl::StrCat("lr=", FormatDouble(o.learning_rate()))};
  if (o.weight_decay() != 0) args.push_back(absl::StrCat("weight_decay=", FormatDouble(o.weight_decay())));
  std::string kind = "sgd";
  if (o.kind() == OptimizerProto::SGD) {
    if (o.momentum() != 0) args.push_back(absl::StrCat("momentum=", FormatDouble(o.momentum())));
  } else {
    kind = o.kind() == OptimizerProto::ADAM ? "adam" : "adamw";
    if (o.has_beta1()) args.push_back(absl::StrCat("beta1=", FormatDouble(o.beta1())));
    if (o.has_beta2()) args.push_back(absl::StrCat("beta2=", FormatDouble(o.beta2())));
    if (o.has_epsilon()) args.push_back(absl::StrCat("epsilon=", FormatDouble(o.epsilon())));
    if (o.has_bias_correction()) {
      args.push_back(absl::StrCat("bias_correction=", o.bias_correction() ? "true" : "false"));
    }
  }
  return absl::StrCat(kind, "(", absl::StrJoin(args, ", "), ")");
}

std::string SourceLine(const TensorNode& t) {
  std::vector<std::string> args = {absl::StrCat("shape=", t.desc->shape.ToString())};
  if (t.desc->dtype != DataType::kFloat32) args.push_back(absl::StrCat("dtype=", DataTypeName(t.desc->dtype)));
  if (t.is_variable) {
    args.push_back(absl::StrCat("init=", InitializerText(t.initializer)));
    if (t.frozen) args.push_back("frozen=true");
  }
  std::string line = absl::StrCat(NameText(t.name), " = ", t.is_variable ? "variable" : "input", "(",
                                  absl::StrJoin(args, ", "), ")");
  if (t.placement) absl::StrAppend(&line, " placement=", PlacementText(*t.placement));
  if (t.pinned_nd_sbp) absl::StrAppend(&line, " sbp=", NdSbpText(*t.pinned_nd_sbp));
  return line;
}

std::string OpLine(const Graph& g, const OpNode& op) {
  std::vector<std::string> outputs, args;
  for (TensorId out : op.outputs) outputs.push_back(NameText(g.tensor(out).name));
  for (TensorId in : op.inputs) args.push_back(NameText(g.tensor(in).name));
  for (const AttrDef& d : op.def->attrs) {
    auto it = op.attrs.values().find(d.name);
    if (it == op.attrs.values().end()) continue;
    if (d.default_value.has_value() && *d.default_value == it->second) continue;
    args.push_back(absl::StrCat(d.name, "=", AttrText(it->second)));
  }
  std::string line = absl::StrCat(absl::StrJoin(outputs, ", "), " = ", op.type, "(", absl::StrJoin(args, ", "), ")");
  if (op.name != g.tensor(op.outputs[0]).name) absl::StrAppend(&line, " name=", NameText(op.name));
  if (op.placement) absl::StrAppend(&line, " placement=", PlacementText(*op.placement));
  if (op.stage != 0) absl::StrAppend(&line, " stage=", op.stage);
  if (op.recompute) absl::StrAppend(&line, " recompute=true");
  const int n_in = static_cast<int>(op.inputs.size()), n_out = static_cast<int>(op.outputs.size());
  if (!op.pinned_input_nd_sbp.empty()) absl::StrAppend(&line, " in_sbp=", PinListText(op.pinned_input_nd_sbp, n_in));
  if (!op.pinned_output_nd_sbp.empty()) {
    absl::StrAppend(&line, " out_sbp=", PinListText(op.pinned_output_nd_sbp, n_out));
  }
  std::map<int, NdSbp> tensor_pins;
  for (int i = 0; i < n_out; ++i) {
    const TensorNode& t = g.tensor(op.outputs[i]);
    if (t.pinned_nd_sbp) tensor_pins.emplace(i, *t.pinned_nd_sbp);
  }
  if (n_out == 1 && !tensor_pins.empty()) absl::StrAppend(&line, " sbp=", NdSbpText(tensor_pins[0]));
  if (n_out > 1 && !tensor_pins.empty()) absl::StrAppend(&line, " sbp=", PinListText(tensor_pins, n_out));
  return line;
}

}  // namespace

std::string PrintGraph(const Graph& graph) {
  std::string out;
  auto emit = [&out](const std::string& line) {
    if (!line.empty()) absl::StrAppend(&out, line, "\n");
  };
  emit(ConfigLine(graph));
  for (const TensorNode& t : graph.tensors()) {
    if (t.is_source()) emit(SourceLine(t));
  }
  for (OpId id : graph.op_order()) emit(OpLine(graph, graph.op(id)));
  std::vector<std::string> outputs;
  for (const TensorNode& t : graph.tensors()) {
    if (t.is_output) outputs.push_back(NameText(t.name));
  }
  if (!outputs.empty()) emit(absl::StrCat("output(", absl::StrJoin(outputs, ", "), ")"));
  const JobConfigProto& c = graph.config();
  if (!c.loss().empty()) {
    emit(absl::StrCat("train(", NameText(c.loss()), ", optimizer=", OptimizerText(c.optimizer()), ")"));
  }
  return out;
}

}  // namespace compiler
}  // namespace oneflow_like
