// Parsing half of text_format.h.
#include <algorithm>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "oneflow_like/compiler/text_format.h"
#include "oneflow_like/compiler/text_args.h"
#include "oneflow_like/compiler/text_value.h"

namespace oneflow_like {
namespace compiler {
namespace {

using text_internal::AsBool;
using text_internal::AsDataType;
using text_internal::AsInt;
using text_internal::AsName;
using text_internal::Bind;
using text_internal::DidYouMean;
using text_internal::LineScanner;
using text_internal::ParseInitializer;
using text_internal::ParseOptimizer;
using text_internal::ParsePinList;
using text_internal::ParseSbpText;
using text_internal::TextValue;
using text_internal::ToAttrValue;
using Kind = TextValue::Kind;

constexpr char kPlacementHint[] = "e.g. placement=cpu:[0,1,2,3], cpu:[[0,1],[2,3]] or cpu:0-3";

struct Lhs {
  std::string name;
  int column = 0;
};

// An option after the call: placement=..., sbp=..., stage=... `raw` holds the text of
// bracketed values (placements, SBPs); `value` the others.
struct Option {
  int column = 0;
  std::string raw;
  TextValue value;
};
using Options = std::map<std::string, Option>;

class Parser {
 public:
  explicit Parser(const OpRegistry& registry) : registry_(registry), graph_(&registry) {}

  absl::Status Line(absl::string_view text, int number);
  absl::StatusOr<Graph> Finish() && {
    RETURN_IF_ERROR(ValidateJobConfig(graph_));
    return std::move(graph_);
  }

 private:
  absl::StatusOr<Options> ParseOptions(LineScanner& s, const std::vector<std::string>& allowed);
  absl::StatusOr<TensorId> TensorArg(const LineScanner& s, const TextValue& v, absl::string_view context);
  absl::Status CheckNewTensor(const LineScanner& s, const Lhs& lhs);
  absl::Status Placed(const LineScanner& s, const Options& options, std::optional<Placement>* placement);
  absl::Status Source(LineScanner& s, const std::vector<Lhs>& lhs, const TextValue& call);
  absl::Status Op(LineScanner& s, const std::vector<Lhs>& lhs, const TextValue& call);
  absl::Status Keyword(LineScanner& s, const TextValue& call);

  const OpRegistry& registry_;
  Graph graph_;
  std::map<std::string, int> tensor_line_, op_line_;  // where names were defined
  int train_line_ = 0, config_line_ = 0;
};

absl::StatusOr<Options> Parser::ParseOptions(LineScanner& s, const std::vector<std::string>& allowed) {
  Options options;
  while (!s.AtEnd()) {
    const int column = s.column();
    ASSIGN_OR_RETURN(std::string key, s.Name("an option like placement=... or the end of the line"));
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string hint = DidYouMean(key, allowed);
      return s.Error(column, absl::StrCat("unknown option '", key, "'"),
                     hint.empty() ? absl::StrCat("options here: ", absl::StrJoin(allowed, "=, "), "=") : hint);
    }
    if (options.count(key)) return s.Error(column, absl::StrCat("option '", key, "' is given twice"));
    RETURN_IF_ERROR(s.Expect('=', absl::StrCat("after option '", key, "'")));
    Option& o = options[key];
    s.SkipSpace();
    o.column = s.column();
    if (key == "placement" || absl::EndsWith(key, "sbp")) {
      o.raw = s.Span();
      if (o.raw.empty()) return s.Error(o.column, absl::StrCat("option '", key, "' has no value"));
    } else {
      ASSIGN_OR_RETURN(o.value, s.Value());
    }
  }
  return options;
}

absl::StatusOr<TensorId> Parser::TensorArg(const LineScanner& s, const TextValue& v, absl::string_view context) {
  if (v.kind != Kind::kName && v.kind != Kind::kString) {
    return s.Error(v.column, absl::StrCat("argument ", v.Describe(), " of ", context, " is not a tensor name"),
                   "inputs are tensor names; attributes are key=value, e.g. transpose_b=true");
  }
  TensorId id = graph_.FindTensor(v.text);
  if (!id.valid()) {
    std::vector<std::string> names;
    for (const TensorNode& t : graph_.tensors()) names.push_back(t.name);
    std::string hint = DidYouMean(v.text, names);
    return s.Error(v.column, absl::StrCat("unknown tensor '", v.text, "'"),
                   hint.empty() ? "tensors must be defined on an earlier line before they are used" : hint);
  }
  return id;
}

absl::Status Parser::CheckNewTensor(const LineScanner& s, const Lhs& lhs) {
  if (!graph_.FindTensor(lhs.name).valid()) return absl::OkStatus();
  return s.Error(lhs.column, absl::StrCat("duplicate tensor name '", lhs.name, "' (already defined on line ",
                                          tensor_line_[lhs.name], ")"),
                 "every tensor is defined once; pick a new name");
}

absl::Status Parser::Placed(const LineScanner& s, const Options& options, std::optional<Placement>* placement) {
  auto it = options.find("placement");
  if (it == options.end()) return absl::OkStatus();
  absl::StatusOr<Placement> p = Placement::Parse(it->second.raw);
  if (!p.ok()) {
    return s.Error(it->second.column, absl::StrCat("bad placement '", it->second.raw, "': ", p.status().message()),
                   kPlacementHint);
  }
  *placement = *std::move(p);
  return absl::OkStatus();
}

// config(..., stages=[cpu:[0,1], cpu:[2,3]]): one placement per pipeline stage.
absl::Status StagePlacements(const LineScanner& s, const TextValue& list, JobConfigProto* config) {
  constexpr char kHint[] = "one placement per pipeline stage, e.g. stages=[cpu:[0,1], cpu:[2,3]]";
  if (list.kind != Kind::kList || list.items.empty()) {
    return s.Error(list.column, absl::StrCat("stages must be a non-empty list of placements, got ", list.Describe()),
                   kHint);
  }
  for (const TextValue& item : list.items) {
    if (item.kind != Kind::kPlacement) {
      return s.Error(item.column, absl::StrCat("stages: ", item.Describe(), " is not a placement"), kHint);
    }
    absl::StatusOr<Placement> p = Placement::Parse(item.text);
    if (!p.ok()) {
      return s.Error(item.column, absl::StrCat("bad placement '", item.text, "': ", p.status().message()),
                     kPlacementHint);
    }
    *config->add_stage_placements() = p->ToProto();
  }
  return absl::OkStatus();
}

absl::Status Parser::Source(LineScanner& s, const std::vector<Lhs>& lhs, const TextValue& call) {
  const bool variable = call.text == "variable";
  if (lhs.size() != 1) return s.Error(lhs[1].column, absl::StrCat(call.text, "(...) defines exactly one tensor"));
  RETURN_IF_ERROR(CheckNewTensor(s, lhs[0]));
  std::vector<std::string> params = {"shape", "dtype"};
  if (variable) params.insert(params.end(), {"init", "frozen"});
  ASSIGN_OR_RETURN(std::vector<const TextValue*> args, Bind(s, call, params));
  SourceSpec spec;
  spec.name = lhs[0].name;
  spec.is_variable = variable;
  if (args[0] == nullptr) {
    return s.Error(call.column, absl::StrCat(call.text, " '", spec.name, "' needs a shape"), "e.g. shape=[64,128]");
  }
  const TextValue& shape = *args[0];
  if (shape.kind != Kind::kList) return s.Error(shape.column, "shape must be a list like [64,128]");
  std::vector<int64_t> dims;
  for (const TextValue& d : shape.items) {
    ASSIGN_OR_RETURN(int64_t dim, AsInt(s, d, "a shape dim", 0));
    dims.push_back(dim);
  }
  spec.desc.shape = Shape(std::move(dims));
  if (args[1] != nullptr) {
    ASSIGN_OR_RETURN(spec.desc.dtype, AsDataType(s, *args[1]));
  }
  if (variable) {
    spec.initializer.set_kind(InitializerProto::ZEROS);
    if (args[2] != nullptr) {
      ASSIGN_OR_RETURN(spec.initializer, ParseInitializer(s, *args[2]));
    }
    if (args[3] != nullptr) {
      ASSIGN_OR_RETURN(spec.frozen, AsBool(s, *args[3], "frozen"));
    }
  }
  ASSIGN_OR_RETURN(Options options, ParseOptions(s, {"placement", "sbp"}));
  RETURN_IF_ERROR(Placed(s, options, &spec.placement));
  if (options.count("sbp")) {
    ASSIGN_OR_RETURN(spec.pinned_nd_sbp, ParseSbpText(s, options["sbp"].column, options["sbp"].raw, "sbp"));
  }
  absl::StatusOr<TensorId> id = graph_.AddSource(std::move(spec));
  if (!id.ok()) return s.Error(lhs[0].column, id.status().message());
  tensor_line_[lhs[0].name] = s.line_number();
  return absl::OkStatus();
}

absl::Status Parser::Op(LineScanner& s, const std::vector<Lhs>& lhs, const TextValue& call) {
  const OpDef* def = registry_.Find(call.text);
  if (def == nullptr) {
    std::string hint = DidYouMean(call.text, registry_.Names());
    return s.Error(call.column, absl::StrCat("unknown op '", call.text, "'"),
                   hint.empty() ? "the registered ops are listed in docs/ops_contract.md" : hint);
  }
  OpSpec spec;
  spec.type = call.text;
  const TextValue* first_key = nullptr;
  for (const TextValue& a : call.items) {
    if (a.key.empty()) {
      if (first_key != nullptr) {
        return s.Error(a.column, "positional argument after key=value arguments", "input tensors come first");
      }
      ASSIGN_OR_RETURN(TensorId t, TensorArg(s, a, call.text));
      spec.inputs.push_back(t);
      continue;
    }
    if (first_key == nullptr) first_key = &a;
    std::vector<std::string> known;
    for (const AttrDef& d : def->attrs) known.push_back(d.name);
    if (std::find(known.begin(), known.end(), a.key) == known.end()) {
      std::string hint = DidYouMean(a.key, known);
      return s.Error(a.key_column, absl::StrCat(call.text, " has no attribute '", a.key, "'"),
                     !hint.empty()    ? hint
                     : known.empty() ? std::string("it takes no attributes")
                                      : absl::StrCat("its attributes are ", absl::StrJoin(known, ", ")));
    }
    if (spec.attrs.Has(a.key)) return s.Error(a.key_column, absl::StrCat("attribute '", a.key, "' is given twice"));
    ASSIGN_OR_RETURN(AttrValue v, ToAttrValue(s, a));
    spec.attrs.Set(a.key, std::move(v));
  }
  const size_t n_in = def->inputs.size();
  if (def->variadic_inputs ? spec.inputs.size() < n_in : spec.inputs.size() != n_in) {
    return s.Error(call.column, absl::StrCat(call.text, " takes ", def->variadic_inputs ? "at least " : "", n_in,
                                             " input(s) (", absl::StrJoin(def->inputs, ", "), "), got ",
                                             spec.inputs.size()),
                   "inputs are positional tensor names; attributes are key=value");
  }
  if (!def->variadic_outputs && lhs.size() != def->outputs.size()) {
    std::vector<std::string> names = {lhs[0].name};
    for (size_t i = 1; i < def->outputs.size(); ++i) names.push_back(absl::StrCat(lhs[0].name, "_", def->outputs[i]));
    return s.Error(lhs[0].column, absl::StrCat(call.text, " has ", def->outputs.size(), " output(s) (",
                                               absl::StrJoin(def->outputs, ", "), ") but ", lhs.size(),
                                               " name(s) are given"),
                   absl::StrCat("write `", absl::StrJoin(names, ", "), " = ", call.text, "(...)`"));
  }
  for (size_t i = 0; i < lhs.size(); ++i) {
    RETURN_IF_ERROR(CheckNewTensor(s, lhs[i]));
    for (size_t j = 0; j < i; ++j) {
      if (lhs[i].name == lhs[j].name) {
        return s.Error(lhs[i].column, absl::StrCat("output name '", lhs[i].name, "' appears twice"));
      }
    }
    spec.output_names.push_back(lhs[i].name);
  }
  ASSIGN_OR_RETURN(Options options,
                   ParseOptions(s, {"name", "placement", "stage", "recompute", "sbp", "in_sbp", "out_sbp"}));
  spec.name = lhs[0].name;
  int name_column = lhs[0].column;
  if (options.count("name")) {
    name_column = options["name"].column;
    ASSIGN_OR_RETURN(spec.name, AsName(s, options["name"].value, "name"));
  }
  if (graph_.FindOp(spec.name).valid()) {
    return s.Error(name_column, absl::StrCat("duplicate op name '", spec.name, "' (already used on line ",
                                             op_line_[spec.name], ")"),
                   "give this op another name with name=...");
  }
  RETURN_IF_ERROR(Placed(s, options, &spec.placement));
  if (options.count("stage")) {
    ASSIGN_OR_RETURN(int64_t stage, AsInt(s, options["stage"].value, "stage", 0));
    spec.stage = static_cast<int>(stage);
  }
  if (options.count("recompute")) {
    ASSIGN_OR_RETURN(spec.recompute, AsBool(s, options["recompute"].value, "recompute"));
  }
  if (options.count("in_sbp")) {
    ASSIGN_OR_RETURN(spec.pinned_input_nd_sbp, ParsePinList(s, "in_sbp", options["in_sbp"].column, options["in_sbp"].raw,
                                                            static_cast<int>(spec.inputs.size()), "input"));
  }
  const int n_out = static_cast<int>(lhs.size());
  if (options.count("out_sbp")) {
    ASSIGN_OR_RETURN(spec.pinned_output_nd_sbp, ParsePinList(s, "out_sbp", options["out_sbp"].column, options["out_sbp"].raw, n_out, "output"));
  }
  std::map<int, NdSbp> tensor_pins;
  if (options.count("sbp") && n_out == 1) {
    ASSIGN_OR_RETURN(tensor_pins[0], ParseSbpText(s, options["sbp"].column, options["sbp"].raw, "sbp"));
  } else if (options.count("sbp")) {
    ASSIGN_OR_RETURN(tensor_pins, ParsePinList(s, "sbp", options["sbp"].column, options["sbp"].raw, n_out, "output"));
  }
  absl::StatusOr<OpId> id = graph_.AddOp(std::move(spec));
  if (!id.ok()) {
    int column = call.column;  // point at the attribute the message is about, if any
    for (const TextValue& a : call.items) {
      if (!a.key.empty() && absl::StrContains(id.status().message(), absl::StrCat("'", a.key, "'"))) {
        column = a.key_column;
      }
    }
    return s.Error(column, id.status().message());
  }
  const OpNode& node = graph_.op(*id);
  for (const auto& [i, pin] : tensor_pins) graph_.mutable_tensor(node.outputs[i])->pinned_nd_sbp = pin;
  for (const Lhs& l : lhs) tensor_line_[l.name] = s.line_number();
  op_line_[node.name] = s.line_number();
  return absl::OkStatus();
}

absl::Status Parser::Keyword(LineScanner& s, const TextValue& call) {
  if (call.text == "output") {
    for (const TextValue& a : call.items) {
      if (!a.key.empty()) return s.Error(a.key_column, "output(...) takes tensor names only");
      ASSIGN_OR_RETURN(TensorId t, TensorArg(s, a, "output"));
      graph_.mutable_tensor(t)->is_output = true;
    }
    if (call.items.empty()) return s.Error(call.column, "output() needs at least one tensor");
  } else if (call.text == "train") {
    if (train_line_ > 0) return s.Error(call.column, absl::StrCat("train(...) is already given on line ", train_line_));
    ASSIGN_OR_RETURN(std::vector<const TextValue*> args, Bind(s, call, {"loss", "optimizer"}));
    if (args[0] == nullptr || args[1] == nullptr) {
      return s.Error(call.column, "train(...) needs a loss and an optimizer",
                     "e.g. train(loss, optimizer=adamw(lr=1e-3))");
    }
    ASSIGN_OR_RETURN(TensorId loss, TensorArg(s, *args[0], "train"));
    ASSIGN_OR_RETURN(*graph_.mutable_config()->mutable_optimizer(), ParseOptimizer(s, *args[1]));
    graph_.mutable_config()->set_loss(graph_.tensor(loss).name);
    train_line_ = s.line_number();
  } else if (call.text == "config") {
    if (config_line_ > 0) return s.Error(call.column, absl::StrCat("config(...) is already given on line ", config_line_));
    const std::vector<std::string> params = {"name",       "micro_batches", "gradient_accumulation_steps",
                                             "zero_stage", "seed",          "stages"};
    ASSIGN_OR_RETURN(std::vector<const TextValue*> args, Bind(s, call, params));
    JobConfigProto* c = graph_.mutable_config();
    if (args[0] != nullptr) {
      if (args[0]->kind != Kind::kString) return s.Error(args[0]->column, "the job name must be a \"string\"");
      graph_.set_name(args[0]->text);
    }
    int64_t v[5] = {0, 0, 0, 0, 0};  // the integer params
    for (int i = 1; i < 5; ++i) {
      if (args[i] != nullptr) {
        ASSIGN_OR_RETURN(v[i], AsInt(s, *args[i], params[i], 0));
      }
    }
    c->set_micro_batches(static_cast<int32_t>(v[1]));
    c->set_gradient_accumulation_steps(static_cast<int32_t>(v[2]));
    c->set_zero_stage(static_cast<int32_t>(v[3]));
    c->set_seed(static_cast<uint64_t>(v[4]));
    if (args[5] != nullptr) RETURN_IF_ERROR(StagePlacements(s, *args[5], c));
    config_line_ = s.line_number();
  } else {
    const bool is_op = registry_.Find(call.text) != nullptr || call.text == "input" || call.text == "variable";
    return s.Error(call.column, absl::StrCat(is_op ? "'" : "unknown statement '", call.text, "'",
                                             is_op ? " needs names for its outputs" : ""),
                   is_op ? absl::StrCat("write `y = ", call.text, "(...)`")
                         : "statements are `names = op(...)`, output(...), train(...) and config(...)");
  }
  if (!s.AtEnd()) {
    return s.Error(s.column(), absl::StrCat("unexpected text after ", call.text, "(...)"), "comments start with #");
  }
  return absl::OkStatus();
}

absl::Status Parser::Line(absl::string_view text, int number) {
  LineScanner s(text, number);
  if (s.AtEnd()) return absl::OkStatus();
  std::vector<Lhs> lhs;
  lhs.push_back(Lhs{"", s.column()});
  ASSIGN_OR_RETURN(lhs[0].name, s.Name("a statement like `y = relu(x)`"));
  if (s.Peek() == '(') {  // output(...), train(...), config(...)
    TextValue call;
    call.kind = Kind::kCall;
    call.text = lhs[0].name;
    call.column = lhs[0].column;
    RETURN_IF_ERROR(s.Expect('(', ""));
    ASSIGN_OR_RETURN(call.items, s.CallArgs());
    return Keyword(s, call);
  }
  while (s.TryConsume(',')) {
    s.SkipSpace();
    lhs.push_back(Lhs{"", s.column()});
    ASSIGN_OR_RETURN(lhs.back().name, s.Name("an output name"));
  }
  RETURN_IF_ERROR(s.Expect('=', absl::StrCat("after '", lhs.back().name, "'")));
  s.SkipSpace();
  ASSIGN_OR_RETURN(TextValue call, s.Value());
  if (call.kind != Kind::kCall) {
    return s.Error(call.column, absl::StrCat("expected an op call after '=', found ", call.Describe()),
                   "e.g. y = relu(x)");
  }
  if (call.text == "input" || call.text == "variable") return Source(s, lhs, call);
  if (call.text == "output" || call.text == "train" || call.text == "config") {
    return s.Error(call.column, absl::StrCat(call.text, "(...) is a statement of its own and defines no tensor"));
  }
  return Op(s, lhs, call);
}

}  // namespace

absl::StatusOr<Graph> ParseGraph(absl::string_view text, const OpRegistry& registry) {
  Parser parser(registry);
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    RETURN_IF_ERROR(parser.Line(line, number));
  }
  return std::move(parser).Finish();
}

}  // namespace compiler
}  // namespace oneflow_like
