#include "oneflow_like/core/testing/op_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "oneflow_like/core/eager.h"
#include "oneflow_like/core/ops/builtin_ops.h"
#include "oneflow_like/core/shard_simulator.h"

namespace oneflow_like {
namespace testing {
namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::string MultiIndex(const Shape& shape, int64_t flat) {
  return absl::StrCat("[", absl::StrJoin(UnravelIndex(shape, flat), ","), "]");
}

// Byte patterns for output buffers: the default poison (NaN / 0x5A, see the header) and a
// second one (0xA5 everywhere: finite floats, other integers) that ExpectWritesEveryOutput
// compares against.
enum class Poison { kDefault, kAlternate };

Tensor Poisoned(const TensorDesc& desc, Poison poison) {
  Tensor t(desc);
  const int byte = poison == Poison::kAlternate ? 0xA5 : IsFloatingPoint(desc.dtype) ? 0xFF : 0x5A;
  if (t.byte_size() > 0) std::memset(t.raw_data(), byte, t.byte_size());
  return t;
}

absl::StatusOr<std::vector<Tensor>> RunPoisoned(const OpRegistry& registry, const std::string& op_type,
                                                const std::vector<Tensor>& inputs, const AttrMap& attrs,
                                                const std::vector<ShardInfo>& input_shards,
                                                const std::vector<TensorDesc>& output_descs,
                                                const std::vector<ShardInfo>& output_shards, Poison poison) {
  std::vector<Tensor> outputs;
  for (const TensorDesc& d : output_descs) outputs.push_back(Poisoned(d, poison));
  RETURN_IF_ERROR(RunKernel(registry, op_type, inputs, attrs, input_shards, &outputs, output_shards));
  return outputs;
}

// Eager autograd context: values live in a name -> Tensor map; emitted ops run immediately.
class EagerGradContext : public GradContext {
 public:
  EagerGradContext(const OpTest* test, const AttrMap& attrs, const std::vector<Tensor>& inputs,
                   const std::vector<Tensor>& outputs, const std::vector<Tensor>& output_grads,
                   const std::vector<bool>& needs_grad)
      : test_(test), attrs_(attrs), needs_grad_(needs_grad), input_grads_(inputs.size()) {
    for (size_t i = 0; i < inputs.size(); ++i) input_names_.push_back(Put("in" + std::to_string(i), inputs[i]));
    for (size_t i = 0; i < outputs.size(); ++i) {
      output_names_.push_back(Put("out" + std::to_string(i), outputs[i]));
      grad_names_.push_back(Put("dout" + std::to_string(i), output_grads[i]));
    }
    for (const Tensor& t : inputs) input_descs_.push_back(t.desc());
    for (const Tensor& t : outputs) output_descs_.push_back(t.desc());
  }

  const AttrMap& attrs() const override { return attrs_; }
  int num_inputs() const override { return static_cast<int>(input_names_.size()); }
  int num_outputs() const override { return static_cast<int>(output_names_.size()); }
  const std::string& input(int i) const override { return input_names_[i]; }
  const std::string& output(int i) const override { return output_names_[i]; }
  const TensorDesc& input_desc(int i) const override { return input_descs_[i]; }
  const TensorDesc& output_desc(int i) const override { return output_descs_[i]; }
  const std::string& output_grad(int i) const override { return grad_names_[i]; }
  bool needs_input_grad(int i) const override { return needs_grad_[i]; }

  absl::StatusOr<std::vector<std::string>> Emit(const std::string& op_type, const std::vector<std::string>& inputs,
                                                const AttrMap& attrs) override {
    std::vector<Tensor> args;
    for (const std::string& name : inputs) {
      auto it = values_.find(name);
      if (it == values_.end()) {
        return absl::InternalError(absl::StrCat("grad rule emitted ", op_type, " with unknown value '", name, "'"));
      }
      args.push_back(it->second);
    }
    ASSIGN_OR_RETURN(std::vector<Tensor> outs, test_->Run(op_type, args, attrs));
    std::vector<std::string> names;
    for (Tensor& t : outs) names.push_back(Put(absl::StrCat("t", next_id_++), std::move(t)));
    return names;
  }
  void SetInputGrad(int i, const std::string& value) override { input_grads_[i] = values_.at(value); }

  const std::vector<Tensor>& input_grads() const { return input_grads_; }

 private:
  std::string Put(const std::string& name, Tensor t) {
    values_[name] = std::move(t);
    return name;
  }
  const OpTest* test_;
  AttrMap attrs_;
  std::vector<bool> needs_grad_;
  std::map<std::string, Tensor> values_;
  std::vector<std::string> input_names_, output_names_, grad_names_;
  std::vector<TensorDesc> input_descs_, output_descs_;
  std::vector<Tensor> input_grads_;
  int next_id_ = 0;
};

Tensor Converted(const Tensor& t, DataType dtype) {
  Tensor out(dtype, t.shape());
  for (int64_t i = 0; i < t.elem_count(); ++i) out.SetFromDouble(i, t.GetAsDouble(i));
  return out;
}

double WeightedSum(const std::vector<Tensor>& outs, const std::vector<Tensor>& weights) {
  double l = 0;
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!weights[k].defined()) continue;
    for (int64_t e = 0; e < outs[k].elem_count(); ++e) l += outs[k].GetAsDouble(e) * weights[k].GetAsDouble(e);
  }
  return l;
}

}  // namespace

Tensor RandomTensor(DataType dtype, const Shape& shape, uint64_t seed, double low, double high) {
  Tensor t(dtype, shape);
  uint64_t state = seed * 0x2545F4914F6CDD1DULL + 1;
  for (int64_t i = 0; i < t.elem_count(); ++i) {
    double u = static_cast<double>(SplitMix64(state) >> 11) * (1.0 / 9007199254740992.0);
    double v = low + (high - low) * u;
    if (IsInteger(dtype) || dtype == DataType::kBool) v = std::floor(v);
    t.SetFromDouble(i, v);
  }
  return t;
}

Tensor TensorFromDoubles(DataType dtype, const Shape& shape, const std::vector<double>& values) {
  Tensor t(dtype, shape);
  CHECK_EQ(static_cast<int64_t>(values.size()), t.elem_count()) << shape.ToString();
  for (int64_t i = 0; i < t.elem_count(); ++i) t.SetFromDouble(i, values[i]);
  return t;
}

Tensor ToDouble(const Tensor& t) { return Converted(t, DataType::kFloat64); }
Tensor ToFloat(const Tensor& t) { return Converted(t, DataType::kFloat32); }

void ExpectTensorNear(const Tensor& actual, const Tensor& expected, double rtol, double atol,
                      const std::string& what) {
  ASSERT_EQ(actual.shape(), expected.shape())
      << what << ": shape " << actual.shape().ToString() << " vs expected " << expected.shape().ToString();
  int reported = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < actual.elem_count(); ++i) {
    double a = actual.GetAsDouble(i), e = expected.GetAsDouble(i);
    bool ok = std::abs(a - e) <= atol + rtol * std::abs(e) || (std::isnan(a) && std::isnan(e)) ||
              (std::isinf(a) && a == e);
    if (!ok) {
      ++bad;
      if (reported++ < 5) {
        ADD_FAILURE() << what << ": mismatch at " << MultiIndex(actual.shape(), i) << ": got " << a
                      << ", expected " << e << " (rtol " << rtol << ", atol " << atol << ")";
      }
    }
  }
  if (bad > 5) ADD_FAILURE() << what << ": " << bad << " mismatching elements in total";
}

Tensor PoisonedTensor(const TensorDesc& desc) { return Poisoned(desc, Poison::kDefault); }

void ExpectInvalidArgument(const absl::Status& status, const std::vector<std::string>& fragments) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  const std::string message(status.message());
  for (const std::string& f : fragments) {
    EXPECT_NE(message.find(f), std::string::npos) << "'" << f << "' missing from: " << status;
  }
}

std::vector<int64_t> UnravelIndex(const Shape& shape, int64_t flat) {
  std::vector<int64_t> index(shape.num_axes());
  for (int a = shape.num_axes() - 1; a >= 0; --a) {
    index[a] = shape.dim(a) == 0 ? 0 : flat % shape.dim(a);
    flat = shape.dim(a) == 0 ? 0 : flat / shape.dim(a);
  }
  return index;
}

int64_t RavelIndex(const Shape& shape, const std::vector<int64_t>& index) {
  int64_t flat = 0;
  for (int a = 0; a < shape.num_axes(); ++a) flat = flat * shape.dim(a) + index[a];
  return flat;
}

bool HasSignature(const std::vector<SbpSignature>& signatures, const SbpSignature& signature) {
  return std::find(signatures.begin(), signatures.end(), signature) != signatures.end();
}

OpTest::OpTest() {
  absl::Status s = RegisterBuiltinOps(&registry_);
  CHECK(s.ok()) << s;
}

absl::StatusOr<std::vector<Tensor>> OpTest::Run(const std::string& op_type, const std::vector<Tensor>& inputs,
                                                const AttrMap& attrs) const {
  ASSIGN_OR_RETURN(std::vector<TensorDesc> out_descs, InferOutputs(registry_, op_type, inputs, attrs));
  return RunPoisoned(registry_, op_type, inputs, attrs, {}, out_descs, {}, Poison::kDefault);
}

absl::StatusOr<std::vector<Tensor>> OpTest::RunShard(const std::string& op_type, const std::vector<Tensor>& inputs,
                                                     const AttrMap& attrs, const std::vector<ShardInfo>& input_shards,
                                                     const std::vector<TensorDesc>& output_descs,
                                                     const std::vector<ShardInfo>& output_shards) const {
  return RunPoisoned(registry_, op_type, inputs, attrs, input_shards, output_descs, output_shards, Poison::kDefault);
}

std::vector<Tensor> OpTest::RunOk(const std::string& op_type, const std::vector<Tensor>& inputs,
                                  const AttrMap& attrs) const {
  auto outs = Run(op_type, inputs, attrs);
  EXPECT_TRUE(outs.ok()) << op_type << " " << attrs.ToString() << ": " << outs.status();
  return outs.ok() ? *std::move(outs) : std::vector<Tensor>{};
}

Tensor OpTest::RunOne(const std::string& op_type, const std::vector<Tensor>& inputs, const AttrMap& attrs) const {
  std::vector<Tensor> outs = RunOk(op_type, inputs, attrs);
  return outs.empty() ? Tensor() : outs[0];
}

absl::StatusOr<std::vector<Tensor>> OpTest::RunInPlace(const std::string& op_type, const std::vector<Tensor>& inputs,
                                                       const AttrMap& attrs) const {
  ASSIGN_OR_RETURN(const OpDef* def, registry_.Get(op_type));
  ASSIGN_OR_RETURN(std::vector<TensorDesc> out_descs, InferOutputs(registry_, op_type, inputs, attrs));
  std::vector<Tensor> outputs;
  for (const TensorDesc& d : out_descs) outputs.push_back(PoisonedTensor(d));
  for (const auto& [out, in] : def->inplace_pairs) {
    if (out < static_cast<int>(outputs.size()) && in < static_cast<int>(inputs.size()) &&
        outputs[out].desc() == inputs[in].desc()) {
      outputs[out] = inputs[in];  // shares the buffer
    }
  }
  RETURN_IF_ERROR(RunKernel(registry_, op_type, inputs, attrs, {}, &outputs, {}));
  return outputs;
}

void OpTest::ExpectRunFails(const std::string& op, const std::vector<Tensor>& inputs, const AttrMap& attrs,
                            const std::vector<std::string>& fragments) const {
  SCOPED_TRACE(absl::StrCat("ExpectRunFails(", op, " ", attrs.ToString(), ")"));
  std::vector<std::string> all = fragments;
  all.insert(all.begin(), op + " '");
  ExpectInvalidArgument(Run(op, inputs, attrs).status(), all);
}

void OpTest::ExpectWritesEveryOutput(const std::string& op_type, const std::vector<Tensor>& inputs,
                                     const AttrMap& attrs) const {
  auto descs = InferOutputs(registry_, op_type, inputs, attrs);
  ASSERT_TRUE(descs.ok()) << descs.status();
  auto first = RunPoisoned(registry_, op_type, inputs, attrs, {}, *descs, {}, Poison::kDefault);
  auto second = RunPoisoned(registry_, op_type, inputs, attrs, {}, *descs, {}, Poison::kAlternate);
  ASSERT_TRUE(first.ok() && second.ok()) << first.status() << " / " << second.status();
  for (size_t k = 0; k < descs->size(); ++k) {
    const Tensor &a = (*first)[k], &b = (*second)[k];
    if (a.byte_size() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()) == 0) continue;
    const int64_t size = SizeOf(a.dtype());
    int64_t e = 0;
    while (std::memcmp(static_cast<const char*>(a.raw_data()) + e * size,
                       static_cast<const char*>(b.raw_data()) + e * size, size) == 0) {
      ++e;
    }
    ADD_FAILURE() << op_type << " output " << k << " " << a.desc().ToString() << " depends on the buffer's old "
                  << "contents (an element the kernel does not write?): first at " << MultiIndex(a.shape(), e)
                  << ": " << a.GetAsDouble(e) << " over NaN/0x5A poison vs " << b.GetAsDouble(e)
                  << " over 0xA5 poison";
  }
}

std::vector<SbpSignature> OpTest::SbpSignatures(const std::string& op_type, const std::vector<TensorDesc>& inputs,
                                                const AttrMap& attrs) const {
  auto def = registry_.Get(op_type);
  EXPECT_TRUE(def.ok()) << def.status();
  if (!def.ok()) return {};
  auto full = (*def)->ValidateAttrs(op_type, attrs);
  EXPECT_TRUE(full.ok()) << full.status();
  if (!full.ok()) return {};
  return (*def)->sbp(*full, inputs);
}

absl::StatusOr<std::vector<Tensor>> OpTest::RunGrad(const std::string& op_type, const std::vector<Tensor>& inputs,
                                                    const AttrMap& attrs, const std::vector<Tensor>& output_grads,
                                                    const std::vector<bool>& needs_grad) const {
  ASSIGN_OR_RETURN(const OpDef* def, registry_.Get(op_type));
  if (!def->grad) return absl::InvalidArgumentError(absl::StrCat(op_type, " has no gradient rule"));
  ASSIGN_OR_RETURN(AttrMap full, def->ValidateAttrs(op_type, attrs));
  ASSIGN_OR_RETURN(std::vector<Tensor> outputs, Run(op_type, inputs, full));
  EagerGradContext ctx(this, full, inputs, outputs, output_grads, needs_grad);
  RETURN_IF_ERROR(def->grad(&ctx));
  return ctx.input_grads();
}

void OpTest::ExpectGradientsMatch(const std::string& op_type, const std::vector<Tensor>& inputs,
                                  const AttrMap& attrs, const GradCheckOptions& options) const {
  auto outs_or = Run(op_type, inputs, attrs);
  ASSERT_TRUE(outs_or.ok()) << outs_or.status();
  const std::vector<Tensor>& outs = *outs_or;
  std::vector<int> out_ids = options.outputs;
  if (out_ids.empty()) {
    for (size_t k = 0; k < outs.size(); ++k) {
      if (IsFloatingPoint(outs[k].dtype())) out_ids.push_back(static_cast<int>(k));
    }
  }
  std::vector<int> in_ids = options.inputs;
  if (in_ids.empty()) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (IsFloatingPoint(inputs[i].dtype())) in_ids.push_back(static_cast<int>(i));
    }
  }
  ASSERT_FALSE(in_ids.empty()) << op_type << ": no floating input to check";
  // Weights R_k (defined for selected outputs); output grads = R_k, zeros elsewhere.
  std::vector<Tensor> weights(outs.size()), dys;
  for (int k : out_ids) weights[k] = RandomTensor(outs[k].dtype(), outs[k].shape(), options.seed + k, -1, 1);
  for (size_t k = 0; k < outs.size(); ++k) dys.push_back(weights[k].defined() ? weights[k] : Tensor(outs[k].desc()));
  std::vector<bool> needs(inputs.size(), false);
  for (int i : in_ids) needs[i] = true;
  auto grads_or = RunGrad(op_type, inputs, attrs, dys, needs);
  ASSERT_TRUE(grads_or.ok()) << grads_or.status();
  for (int i : in_ids) {
    const Tensor& analytic = (*grads_or)[i];
    ASSERT_TRUE(analytic.defined()) << op_type << ": gradient rule produced no gradient for input " << i;
    ASSERT_EQ(analytic.desc(), inputs[i].desc()) << op_type << ": gradient of input " << i << " has the wrong desc";
    Tensor numeric(inputs[i].desc());
    std::vector<Tensor> perturbed = inputs;
    perturbed[i] = inputs[i].Clone();
    for (int64_t e = 0; e < inputs[i].elem_count(); ++e) {
      double x0 = inputs[i].GetAsDouble(e);
      perturbed[i].SetFromDouble(e, x0 + options.eps);
      auto plus = Run(op_type, perturbed, attrs);
      perturbed[i].SetFromDouble(e, x0 - options.eps);
      auto minus = Run(op_type, perturbed, attrs);
      perturbed[i].SetFromDouble(e, x0);
      ASSERT_TRUE(plus.ok() && minus.ok());
      numeric.SetFromDouble(e, (WeightedSum(*plus, weights) - WeightedSum(*minus, weights)) / (2 * options.eps));
    }
    ExpectTensorNear(analytic, numeric, options.rtol, options.atol,
                     absl::StrCat(op_type, " d/d(input ", i, ") analytic vs numerical"));
  }
}

int OpTest::ExpectAllSbpSignaturesMatch(const std::string& op_type, const std::vector<Tensor>& inputs,
                                        const AttrMap& attrs, const SbpCheckOptions& options) const {
  auto def_or = registry_.Get(op_type);
  EXPECT_TRUE(def_or.ok()) << def_or.status();
  if (!def_or.ok()) return 0;
  const OpDef* def = *def_or;
  auto full_or = def->ValidateAttrs(op_type, attrs);
  EXPECT_TRUE(full_or.ok()) << full_or.status();
  if (!full_or.ok()) return 0;
  const AttrMap& full = *full_or;
  auto logical_or = Run(op_type, inputs, full);
  EXPECT_TRUE(logical_or.ok()) << logical_or.status();
  if (!logical_or.ok()) return 0;
  const std::vector<Tensor>& logical = *logical_or;
  ExpectWritesEveryOutput(op_type, inputs, full);
  std::vector<TensorDesc> in_descs;
  for (const Tensor& t : inputs) in_descs.push_back(t.desc());
  std::vector<SbpSignature> one_d = def->sbp(full, in_descs);
  int checked = 0;
  for (const std::vector<int64_t>& hierarchy : options.hierarchies) {
    int64_t n = 1;
    for (int64_t h : hierarchy) n *= h;
    std::vector<Rank> ranks;
    for (int64_t r = 0; r < n; ++r) ranks.emplace_back(static_cast<int32_t>(r));
    auto placement_or = Placement::Create(DeviceType::kCpu, ranks, hierarchy);
    EXPECT_TRUE(placement_or.ok()) << placement_or.status();
    if (!placement_or.ok()) continue;
    for (const NdSbpSignature& sig : DeriveNdSignatures(one_d, static_cast<int>(hierarchy.size()))) {
      const std::string where = absl::StrCat(op_type, " signature [", sig.ToString(), "] on hierarchy [",
                                             absl::StrJoin(hierarchy, ","), "]");
      EXPECT_EQ(sig.inputs.size(), inputs.size()) << where;
      EXPECT_EQ(sig.outputs.size(), logical.size()) << where;
      if (sig.inputs.size() != inputs.size() || sig.outputs.size() != logical.size()) continue;
      bool valid = true;
      for (size_t i = 0; i < inputs.size() && valid; ++i) {
        valid = ValidateNdSbp(sig.inputs[i], inputs[i].shape(), *placement_or).ok();
      }
      for (size_t k = 0; k < logical.size() && valid; ++k) {
        valid = ValidateNdSbp(sig.outputs[k], logical[k].shape(), *placement_or).ok();
      }
      if (!valid) continue;  // e.g. more parts than elements on a split axis
      std::vector<std::vector<Tensor>> in_shards;
      for (size_t i = 0; i < inputs.size(); ++i) {
        auto shards = ShardTensor(inputs[i], sig.inputs[i], hierarchy, options.seed + 31 * i);
        EXPECT_TRUE(shards.ok()) << where << ": " << shards.status();
        if (!shards.ok()) return checked;
        in_shards.push_back(*std::move(shards));
      }
      std::vector<std::vector<Tensor>> out_shards(logical.size());
      bool ran = true;
      for (int64_t d = 0; d < n && ran; ++d) {
        std::vector<Tensor> args;
        std::vector<ShardInfo> in_infos, out_infos;
        std::vector<TensorDesc> out_descs;
        for (size_t i = 0; i < inputs.size(); ++i) {
          args.push_back(in_shards[i][d]);
          in_infos.push_back({inputs[i].shape(), GetShardSlice(inputs[i].shape(), sig.inputs[i], hierarchy, d).offset});
        }
        for (size_t k = 0; k < logical.size(); ++k) {
          ShardSlice s = GetShardSlice(logical[k].shape(), sig.outputs[k], hierarchy, d);
          out_descs.push_back({logical[k].dtype(), s.shape});
          out_infos.push_back({logical[k].shape(), s.offset});
        }
        auto outs = RunShard(op_type, args, full, in_infos, out_descs, out_infos);
        EXPECT_TRUE(outs.ok()) << where << ", device " << d << ": " << outs.status();
        if (!outs.ok()) {
          ran = false;
          break;
        }
        for (size_t k = 0; k < logical.size(); ++k) out_shards[k].push_back((*outs)[k]);
      }
      if (!ran) continue;
      for (size_t k = 0; k < logical.size(); ++k) {
        auto assembled = AssembleTensor(out_shards[k], logical[k].shape(), sig.outputs[k], hierarchy,
                                        options.atol + options.rtol);
        EXPECT_TRUE(assembled.ok()) << where << ", output " << k << ": " << assembled.status();
        if (!assembled.ok()) continue;
        ExpectTensorNear(*assembled, logical[k], options.rtol, options.atol,
                         absl::StrCat(where, ", output ", k));
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, options.min_signatures) << op_type << ": too few SBP signatures could be checked";
  return checked;
}

}  // namespace testing
}  // namespace oneflow_like
