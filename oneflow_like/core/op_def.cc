#include "oneflow_like/core/op_def.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace oneflow_like {
namespace {

template <typename T>
std::string JoinToString(const std::vector<T>& v) {
  std::vector<std::string> parts;
  for (const auto& x : v) parts.push_back(x.ToString());
  return absl::StrJoin(parts, ", ");
}

}  // namespace

std::string SbpSignature::ToString() const {
  return absl::StrCat(JoinToString(inputs), " -> ", JoinToString(outputs));
}
std::string NdSbpSignature::ToString() const {
  return absl::StrCat(JoinToString(inputs), " -> ", JoinToString(outputs));
}

std::vector<NdSbpSignature> DeriveNdSignatures(const std::vector<SbpSignature>& one_d, int num_mesh_axes) {
  std::vector<NdSbpSignature> result;
  if (one_d.empty() || num_mesh_axes <= 0) return result;
  const size_t n_in = one_d[0].inputs.size(), n_out = one_d[0].outputs.size();
  std::vector<size_t> pick(num_mesh_axes, 0);
  while (true) {
    NdSbpSignature sig;
    for (size_t i = 0; i < n_in; ++i) {
      std::vector<Sbp> sbps;
      for (int a = 0; a < num_mesh_axes; ++a) sbps.push_back(one_d[pick[a]].inputs[i]);
      sig.inputs.emplace_back(std::move(sbps));
    }
    for (size_t i = 0; i < n_out; ++i) {
      std::vector<Sbp> sbps;
      for (int a = 0; a < num_mesh_axes; ++a) sbps.push_back(one_d[pick[a]].outputs[i]);
      sig.outputs.emplace_back(std::move(sbps));
    }
    result.push_back(std::move(sig));
    int a = num_mesh_axes - 1;
    while (a >= 0 && ++pick[a] == one_d.size()) pick[a--] = 0;
    if (a < 0) break;
  }
  return result;
}

absl::StatusOr<std::string> GradContext::EmitOne(const std::string& op_type,
                                                 const std::vector<std::string>& inputs,
                                                 const AttrMap& attrs) {
  ASSIGN_OR_RETURN(std::vector<std::string> outs, Emit(op_type, inputs, attrs));
  if (outs.size() != 1) {
    return absl::InternalError(absl::StrCat("EmitOne(", op_type, ") produced ", outs.size(), " outputs"));
  }
  return outs[0];
}

absl::StatusOr<AttrMap> OpDef::ValidateAttrs(const std::string& op_name, const AttrMap& attrs) const {
  AttrMap out;
  for (const auto& [k, v] : attrs.values()) {
    const AttrDef* def = nullptr;
    for (const AttrDef& d : this->attrs) {
      if (d.name == k) def = &d;
    }
    if (def == nullptr) {
      std::vector<std::string> known;
      for (const AttrDef& d : this->attrs) known.push_back(d.name);
      return absl::InvalidArgumentError(absl::StrCat(name, " '", op_name, "': unknown attribute '", k,
                                                     "' (known: ", absl::StrJoin(known, ", "), ")"));
    }
    AttrValue value = v;
    // An integer literal is accepted where a float is expected.
    if (def->type == AttrType::kFloat && TypeOf(v) == AttrType::kInt) {
      value = static_cast<double>(std::get<int64_t>(v));
    }
    if (def->type == AttrType::kFloats && TypeOf(v) == AttrType::kInts) {
      const auto& ints = std::get<std::vector<int64_t>>(v);
      value = std::vector<double>(ints.begin(), ints.end());
    }
    if (TypeOf(value) != def->type) {
      return absl::InvalidArgumentError(absl::StrCat(name, " '", op_name, "': attribute '", k, "' must be ",
                                                     AttrTypeName(def->type), ", got ",
                                                     AttrTypeName(TypeOf(v)), " ", AttrValueToString(v)));
    }
    out.Set(k, std::move(value));
  }
  for (const AttrDef& d : this->attrs) {
    if (out.Has(d.name)) continue;
    if (!d.default_value.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " '", op_name, "': missing required attribute '", d.name, "' (",
                       AttrTypeName(d.type), ")"));
    }
    out.Set(d.name, *d.default_value);
  }
  return out;
}

absl::StatusOr<std::vector<TensorDesc>> OpDef::Infer(const std::string& op_name, const AttrMap& attrs,
                                                     const std::vector<TensorDesc>& input_descs) const {
  const size_t n = inputs.size();
  bool count_ok = variadic_inputs ? input_descs.size() >= n : input_descs.size() == n;
  if (!count_ok) {
    return absl::InvalidArgumentError(absl::StrCat(name, " '", op_name, "': expects ",
                                                   variadic_inputs ? "at least " : "", n, " input(s) (",
                                                   absl::StrJoin(inputs, ", "), "), got ",
                                                   input_descs.size()));
  }
  InferContext ctx{op_name, attrs, input_descs};
  return infer(ctx);
}

OpCost OpDef::Cost(const AttrMap& attrs, const std::vector<TensorDesc>& in,
                   const std::vector<TensorDesc>& out) const {
  if (cost) return cost(attrs, in, out);
  OpCost c;
  for (const auto& d : in) c.bytes_moved += static_cast<double>(d.byte_size());
  for (const auto& d : out) c.bytes_moved += static_cast<double>(d.byte_size());
  return c;
}

}  // namespace oneflow_like
