#include "oneflow_like/compiler/text_args.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace oneflow_like {
namespace compiler {
namespace text_internal {
namespace {

using Kind = TextValue::Kind;
constexpr char kSbpHint[] = "write S(axis), B or P per mesh axis, e.g. sbp=[S(0), B]";

}  // namespace

// Binds the arguments of `call` to `params`: positional ones in order, then key=value.
// Returns one entry per param (nullptr = not given).
absl::StatusOr<std::vector<const TextValue*>> Bind(const LineScanner& s, const TextValue& call,
                                                   const std::vector<std::string>& params) {
  std::vector<const TextValue*> bound(params.size(), nullptr);
  size_t next = 0;
  for (const TextValue& a : call.items) {
    size_t index = params.size();
    if (a.key.empty()) {
      if (next >= params.size()) {
        return s.Error(a.column, absl::StrCat(call.text, "(...) takes at most ", params.size(), " argument(s) (",
                                              absl::StrJoin(params, ", "), ")"));
      }
      index = next++;
    } else {
      for (size_t i = 0; i < params.size(); ++i) {
        if (params[i] == a.key) index = i;
      }
      if (index == params.size()) {
        std::string hint = DidYouMean(a.key, params);
        return s.Error(a.key_column, absl::StrCat(call.text, "(...) has no argument '", a.key, "'"),
                       hint.empty() ? absl::StrCat("its arguments are ", absl::StrJoin(params, ", ")) : hint);
      }
    }
    if (bound[index] != nullptr) {
      return s.Error(a.key.empty() ? a.column : a.key_column,
                     absl::StrCat("argument '", params[index], "' of ", call.text, "(...) is given twice"));
    }
    bound[index] = &a;
  }
  return bound;
}

absl::StatusOr<double> AsDouble(const LineScanner& s, const TextValue& v, absl::string_view what) {
  if (!v.is_number()) return s.Error(v.column, absl::StrCat(what, " must be a number, got ", v.Describe()));
  return v.number();
}

absl::StatusOr<int64_t> AsInt(const LineScanner& s, const TextValue& v, absl::string_view what, int64_t min) {
  if (v.kind != Kind::kInt) return s.Error(v.column, absl::StrCat(what, " must be an integer, got ", v.Describe()));
  if (v.i < min) return s.Error(v.column, absl::StrCat(what, " must be >= ", min, ", got ", v.i));
  return v.i;
}

absl::StatusOr<bool> AsBool(const LineScanner& s, const TextValue& v, absl::string_view what) {
  if (v.kind != Kind::kBool) return s.Error(v.column, absl::StrCat(what, " must be true or false, got ", v.Describe()));
  return v.b;
}

absl::StatusOr<std::string> AsName(const LineScanner& s, const TextValue& v, absl::string_view what) {
  if (v.kind != Kind::kName && v.kind != Kind::kString) {
    return s.Error(v.column, absl::StrCat(what, " must be a name, got ", v.Describe()));
  }
  return v.text;
}

absl::StatusOr<DataType> AsDataType(const LineScanner& s, const TextValue& v) {
  absl::StatusOr<DataType> dtype = v.kind == Kind::kName ? ParseDataType(v.text) : absl::InvalidArgumentError("");
  if (!dtype.ok()) {
    return s.Error(v.column, absl::StrCat("unknown dtype ", v.Describe()),
                   "dtypes are float32, float64, int32, int64, bool, bfloat16, float16");
  }
  return *dtype;
}

absl::StatusOr<AttrValue> ToAttrValue(const LineScanner& s, const TextValue& v) {
  switch (v.kind) {
    case Kind::kInt: return AttrValue(v.i);
    case Kind::kFloat: return AttrValue(v.f);
    case Kind::kBool: return AttrValue(v.b);
    case Kind::kString: return AttrValue(v.text);
    case Kind::kName: {
      absl::StatusOr<DataType> dtype = ParseDataType(v.text);
      if (dtype.ok()) return AttrValue(*dtype);
      return s.Error(v.column, absl::StrCat("'", v.text, "' is not a value for attribute '", v.key, "'"),
                     absl::StrCat("strings need quotes: ", v.key, "=\"", v.text, "\""));
    }
    case Kind::kList: {
      bool all_int = true;
      for (const TextValue& item : v.items) {
        if (!item.is_number()) {
          return s.Error(item.column, absl::StrCat("attribute '", v.key, "': list items must be numbers, got ",
                                                   item.Describe()));
        }
        all_int = all_int && item.kind == Kind::kInt;
      }
      if (all_int) {
        std::vector<int64_t> ints;
        for (const TextValue& item : v.items) ints.push_back(item.i);
        return AttrValue(std::move(ints));
      }
      std::vector<double> floats;
      for (const TextValue& item : v.items) floats.push_back(item.number());
      return AttrValue(std::move(floats));
    }
    case Kind::kCall: break;
    case Kind::kPlacement:
      return s.Error(v.column, absl::StrCat("attribute '", v.key, "' cannot be a placement (", v.text, ")"));
  }
  return s.Error(v.column, absl::StrCat("attribute '", v.key, "' cannot be a call (", v.Describe(), ")"));
}

absl::StatusOr<NdSbp> ParseSbpText(const LineScanner& s, int column, absl::string_view text, absl::string_view key) {
  absl::StatusOr<NdSbp> nd_sbp = NdSbp::Parse(text);
  if (!nd_sbp.ok()) {
    return s.Error(column, absl::StrCat("bad SBP '", text, "' in ", key, "=: ", nd_sbp.status().message()), kSbpHint);
  }
  return *nd_sbp;
}

// "[[S(0)], _, [B]]": one entry per input/output, `_` = free.
absl::StatusOr<std::map<int, NdSbp>> ParsePinList(const LineScanner& s, const std::string& key, int column,
                                                  const std::string& raw, int count, absl::string_view what) {
  const std::string example = absl::StrCat(key, "=[[S(0)]", count > 1 ? ", _" : "", "]");
  absl::StatusOr<std::vector<std::string>> parts = text_internal::SplitBracketedList(raw);
  if (!parts.ok()) {
    return s.Error(column, absl::StrCat("bad ", key, "=: ", parts.status().message()),
                   absl::StrCat("give one entry per ", what, ", `_` for free, e.g. ", example));
  }
  if (static_cast<int>(parts->size()) != count) {
    return s.Error(column, absl::StrCat(key, "= has ", parts->size(), " entries but the op has ", count, " ", what,
                                          "(s)"),
                   absl::StrCat("give one entry per ", what, ", `_` for free, e.g. ", example));
  }
  std::map<int, NdSbp> pins;
  for (int i = 0; i < count; ++i) {
    if ((*parts)[i] == "_") continue;
    ASSIGN_OR_RETURN(pins[i], ParseSbpText(s, column, (*parts)[i], key));
  }
  return pins;
}

absl::StatusOr<InitializerProto> ParseInitializer(const LineScanner& s, const TextValue& v) {
  const std::map<std::string, std::vector<std::string>> params = {{"zeros", {"seed"}},
                                                                  {"ones", {"seed"}},
                                                                  {"constant", {"value", "seed"}},
                                                                  {"uniform", {"low", "high", "seed"}},
                                                                  {"normal", {"std", "mean", "seed"}},
                                                                  {"portable", {"std", "stream", "seed"}}};
  auto it = params.find(v.text);
  if ((v.kind != Kind::kName && v.kind != Kind::kCall) || it == params.end()) {
    std::vector<std::string> kinds;
    for (const auto& [k, _] : params) kinds.push_back(k);
    std::string hint = v.kind == Kind::kName || v.kind == Kind::kCall ? DidYouMean(v.text, kinds) : "";
    return s.Error(v.column, absl::StrCat("unknown initializer ", v.Describe()),
                   hint.empty() ? "use zeros, ones, constant(v), uniform(low, high), normal(std[, mean]) or "
                                                "portable(std, stream[, seed])"
                                              : hint);
  }
  ASSIGN_OR_RETURN(std::vector<const TextValue*> args, Bind(s, v, it->second));
  const bool two_required = v.text == "uniform" || v.text == "portable";
  const size_t required = two_required ? 2 : (v.text == "zeros" || v.text == "ones") ? 0 : 1;
  std::vector<double> numbers;
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == nullptr) {
      if (i < required) {
        return s.Error(v.column, absl::StrCat(v.text, "(...) needs ", it->second[i], " (",
                                              absl::StrJoin(it->second.begin(), it->second.end() - 1, ", "), ")"));
      }
      numbers.push_back(0.0);
      continue;
    }
    ASSIGN_OR_RETURN(double x, AsDouble(s, *args[i], it->second[i]));
    numbers.push_back(x);
  }
  InitializerProto init;
  if (v.text == "zeros") init.set_kind(InitializerProto::ZEROS);
  if (v.text == "ones") init.set_kind(InitializerProto::ONES);
  if (v.text == "constant") {
    init.set_kind(InitializerProto::CONSTANT);
    init.set_value(numbers[0]);
  }
  if (v.text == "uniform") {
    init.set_kind(InitializerProto::UNIFORM);
    init.set_low(numbers[0]);
    init.set_high(numbers[1]);
  }
  if (v.text == "normal") {
    init.set_kind(InitializerProto::NORMAL);
    init.set_stddev(numbers[0]);
    init.set_mean(numbers[1]);
  }
  if (v.text == "portable") {  // torch_gpt.py's portable init; `seed` is its generator seed
    init.set_kind(InitializerProto::PORTABLE_UNIFORM);
    init.set_stddev(numbers[0]);
    ASSIGN_OR_RETURN(int64_t stream, AsInt(s, *args[1], "stream", 0));
    init.set_stream(static_cast<uint64_t>(stream));
  }
  if (args.back() != nullptr) {
    ASSIGN_OR_RETURN(int64_t seed, AsInt(s, *args.back(), "seed", 0));
    if (init.kind() == InitializerProto::PORTABLE_UNIFORM) {
      init.set_portable_seed(static_cast<uint64_t>(seed));
    } else {
      init.set_seed(static_cast<uint64_t>(seed));
    }
  }
  return init;
}

absl::StatusOr<OptimizerProto> ParseOptimizer(const LineScanner& s, const TextValue& v) {
  const bool sgd = v.text == "sgd", adam = v.text == "adam" || v.text == "adamw";
  if (v.kind != Kind::kCall || (!sgd && !adam)) {
    return s.Error(v.column, absl::StrCat("unknown optimizer ", v.Describe()),
                   "use sgd(lr=..., momentum=...), adam(lr=...) or adamw(lr=..., weight_decay=...)");
  }
  std::vector<std::string> params = {"lr", "weight_decay"};
  if (sgd) params.push_back("momentum");
  if (adam) params.insert(params.end(), {"beta1", "beta2", "epsilon", "bias_correction"});
  ASSIGN_OR_RETURN(std::vector<const TextValue*> args, Bind(s, v, params));
  if (args[0] == nullptr) return s.Error(v.column, absl::StrCat(v.text, "(...) needs lr=<learning rate>"));
  OptimizerProto opt;
  opt.set_kind(sgd ? OptimizerProto::SGD : v.text == "adam" ? OptimizerProto::ADAM : OptimizerProto::ADAMW);
  for (size_t i = 0; i < params.size(); ++i) {
    if (args[i] == nullptr) continue;
    const std::string& p = params[i];
    if (p == "bias_correction") {
      ASSIGN_OR_RETURN(bool b, AsBool(s, *args[i], p));
      opt.set_bias_correction(b);
      continue;
    }
    ASSIGN_OR_RETURN(double x, AsDouble(s, *args[i], p));
    if (p == "lr") opt.set_learning_rate(x);
    if (p == "weight_decay") opt.set_weight_decay(x);
    if (p == "momentum") opt.set_momentum(x);
    if (p == "beta1") opt.set_beta1(x);
    if (p == "beta2") opt.set_beta2(x);
    if (p == "epsilon") opt.set_epsilon(x);
  }
  return opt;
}

}  // namespace text_internal
}  // namespace compiler
}  // namespace oneflow_like
