// Misc op family: cast, fill, random_uniform, random_normal, dropout, dropout_grad.
//
// Random ops are layout independent: the value at logical element L depends only on (seed, L)
// (Philox, random.h), and each kernel locates its shard through the KernelContext ShardInfo, so
// any SBP produces the same logical tensor as a single device. Dropout keeps element L when
// PhiloxUniform(seed, L) >= p and scales kept values by 1 / (1 - p); dropout_grad applies the
// same mask to dy.
//
// SBP (1-D): cast S(a)/B, and P -> P between floating types (a linear map up to rounding);
// fill/random_*: y:S(a) or y:B (no inputs); dropout(_grad): S(a)/B (never P).
#include <cmath>
#include <limits>
#include <type_traits>

#include "oneflow_like/core/ops/builtin_ops.h"
#include "oneflow_like/core/ops/op_util.h"
#include "oneflow_like/core/random.h"

namespace oneflow_like {
namespace {

using ops::OpError;

// Calls fn(T{}) for every concrete dtype (bfloat16/float16 as their storage structs).
template <typename Fn>
absl::Status DispatchAny(DataType dtype, const std::string& what, Fn&& fn) {
  switch (dtype) {
    case DataType::kFloat32: return fn(float{});
    case DataType::kFloat64: return fn(double{});
    case DataType::kInt32: return fn(int32_t{});
    case DataType::kInt64: return fn(int64_t{});
    case DataType::kBool: return fn(bool{});
    case DataType::kBFloat16: return fn(BFloat16{});
    case DataType::kFloat16: return fn(Float16{});
    case DataType::kInvalid: break;
  }
  return absl::InvalidArgumentError(absl::StrCat(what, ": unsupported dtype ", DataTypeName(dtype)));
}

// ---- element conversion ----
// Integer/bool <-> integer/bool converts exactly; anything involving a floating type goes through
// double. float -> int truncates toward zero and saturates (NaN -> 0); x -> bool is x != 0.

template <typename T>
double ToDouble(T v) { return static_cast<double>(v); }
double ToDouble(BFloat16 v) { return BFloat16ToFloat(v.bits); }
double ToDouble(Float16 v) { return HalfToFloat(v.bits); }

template <typename T>
T FromDouble(double v) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    return BFloat16{FloatToBFloat16(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<T, Float16>) {
    return Float16{FloatToHalf(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else if constexpr (std::is_integral_v<T>) {
    if (std::isnan(v)) return 0;
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    if (v <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
    return static_cast<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

template <typename Src, typename Dst>
Dst Convert(Src v) {
  if constexpr (std::is_integral_v<Src> && std::is_same_v<Dst, bool>) {
    return v != 0;
  } else if constexpr (std::is_integral_v<Src> && std::is_integral_v<Dst>) {
    return static_cast<Dst>(v);
  } else {
    return FromDouble<Dst>(ToDouble(v));
  }
}

ShardInfo ShardOf(const std::vector<ShardInfo>& shards, int i, const Shape& physical) {
  return static_cast<int>(shards.size()) > i ? shards[i] : ShardInfo::Whole(physical);
}

std::vector<SbpSignature> SplitOrBroadcast(int rank, int num_inputs) {
  std::vector<SbpSignature> sigs;
  for (int a : ops::SplitAxes(rank)) {
    sigs.push_back({std::vector<Sbp>(num_inputs, Sbp::Split(a)), {Sbp::Split(a)}});
  }
  sigs.push_back({std::vector<Sbp>(num_inputs, Sbp::Broadcast()), {Sbp::Broadcast()}});
  return sigs;
}

// ---- cast ----

OpDef MakeCast() {
  OpDef def;
  def.name = "cast";
  def.doc = "Converts x to `dtype` (bfloat16/float16 round to nearest even; x -> bool is x != 0).";
  def.inputs = {"x"};
  def.outputs = {"y"};
  def.attrs = {{"dtype", AttrType::kDataType, std::nullopt, "target dtype"}};
  def.infer = [](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> {
    const DataType to = ctx.attrs.Dtype("dtype");
    if (to == DataType::kInvalid || ctx.inputs[0].dtype == DataType::kInvalid) {
      return OpError("cast", ctx.op_name, "cannot cast ", ctx.inputs[0].ToString(), " to ", DataTypeName(to),
                     " (dtypes: float32, float64, int32, int64, bool, bfloat16, float16)");
    }
    return std::vector<TensorDesc>{{to, ctx.inputs[0].shape}};
  };
  def.sbp = [](const AttrMap& attrs, const std::vector<TensorDesc>& in) {
    std::vector<SbpSignature> sigs = SplitOrBroadcast(in[0].shape.num_axes(), 1);
    if (IsFloatingPoint(in[0].dtype) && IsFloatingPoint(attrs.Dtype("dtype"))) {
      sigs.push_back({{Sbp::PartialSum()}, {Sbp::PartialSum()}});
    }
    return sigs;
  };
  def.grad = [](GradContext* g) {
    const DataType from = g->input_desc(0).dtype;
    if (!IsFloatingPoint(from) || !IsFloatingPoint(g->output_desc(0).dtype)) return absl::OkStatus();
    return ops::SetInputGradFromOp(g, "cast", {{"dtype", from}});
  };
  def.cpu_kernel = [](const KernelContext& ctx) -> absl::Status {
    const Tensor& x = *ctx.inputs[0];
    Tensor* y = ctx.outputs[0];
    return DispatchAny(x.dtype(), ctx.op_name, [&](auto s) {
      using Src = decltype(s);
      return DispatchAny(y->dtype(), ctx.op_name, [&](auto d) {
        using Dst = decltype(d);
        const Src* xp = static_cast<const Src*>(x.raw_data());
        Dst* yp = static_cast<Dst*>(y->raw_data());
        const int64_t n = x.elem_count();
        for (int64_t i = 0; i < n; ++i) yp[i] = Convert<Src, Dst>(xp[i]);
        return absl::OkStatus();
      });
    });
  };
  return def;
}

// ---- fill / random_uniform / random_normal (no inputs) ----

absl::StatusOr<Shape> GeneratedShape(const std::string& op, const InferContext& ctx) {
  Shape shape(ctx.attrs.Ints("shape"));
  if (!shape.Validate().ok()) {
    return OpError(op, ctx.op_name, "invalid shape ", shape.ToString(), " (dims must be >= 0)");
  }
  return shape;
}

OpDef MakeGenerator(const std::string& name, const std::string& doc) {
  OpDef def;
  def.name = name;
  def.doc = doc;
  def.outputs = {"y"};
  def.sbp = [](const AttrMap& attrs, const std::vector<TensorDesc>&) {
    return SplitOrBroadcast(static_cast<int>(attrs.Ints("shape").size()), 0);
  };
  return def;
}

OpDef MakeFill() {
  OpDef def = MakeGenerator("fill", "y = value everywhere.");
  def.attrs = {{"shape", AttrType::kInts, std::nullopt, "output shape"},
               {"dtype", AttrType::kDataType, AttrValue(DataType::kFloat32), "output dtype"},
               {"value", AttrType::kFloat, AttrValue(0.0), "fill value (converted like cast)"}};
  def.infer = [](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> {
    ASSIGN_OR_RETURN(Shape shape, GeneratedShape("fill", ctx));
    if (ctx.attrs.Dtype("dtype") == DataType::kInvalid) {
      return OpError("fill", ctx.op_name, "invalid dtype for output ", shape.ToString());
    }
    return std::vector<TensorDesc>{{ctx.attrs.Dtype("dtype"), shape}};
  };
  def.cpu_kernel = [](const KernelContext& ctx) -> absl::Status {
    Tensor* y = ctx.outputs[0];
    return DispatchAny(y->dtype(), ctx.op_name, [&](auto t) {
      using T = decltype(t);
      const T v = FromDouble<T>(ctx.attrs.Float("value"));
      T* yp = static_cast<T*>(y->raw_data());
      std::fill(yp, yp + y->elem_count(), v);
      return absl::OkStatus();
    });
  };
  return def;
}

OpDef MakeRandom(bool normal) {
  const std::string name = normal ? "random_normal" : "random_uniform";
  OpDef def = MakeGenerator(name, normal ? "y ~ Normal(mean, std), Philox(seed, logical index)."
                                         : "y ~ Uniform[low, high), Philox(seed, logical index).");
  def.is_random = true;
  def.attrs = {{"shape", AttrType::kInts, std::nullopt, "output shape"},
               {"dtype", AttrType::kDataType, AttrValue(DataType::kFloat32), "floating output dtype"},
               {"seed", AttrType::kInt, AttrValue(int64_t{0}), "Philox key"}};
  if (normal) {
    def.attrs.push_back({"mean", AttrType::kFloat, AttrValue(0.0), "mean"});
    def.attrs.push_back({"std", AttrType::kFloat, AttrValue(1.0), "standard deviation (>= 0)"});
  } else {
    def.attrs.push_back({"low", AttrType::kFloat, AttrValue(0.0), "lower bound (inclusive)"});
    def.attrs.push_back({"high", AttrType::kFloat, AttrValue(1.0), "upper bound (exclusive)"});
  }
  def.infer = [name, normal](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> {
    ASSIGN_OR_RETURN(Shape shape, GeneratedShape(name, ctx));
    const DataType dtype = ctx.attrs.Dtype("dtype");
    if (!IsFloatingPoint(dtype)) {
      return OpError(name, ctx.op_name, "dtype ", DataTypeName(dtype), " is not floating point (output ",
                     shape.ToString(), "; use float32, float64, bfloat16 or float16)");
    }
    if (normal ? !(ctx.attrs.Float("std") >= 0) : !(ctx.attrs.Float("low") <= ctx.attrs.Float("high"))) {
      return OpError(name, ctx.op_name, normal ? "std must be >= 0" : "low must be <= high", ", got attrs ",
                     ctx.attrs.ToString());
    }
    return std::vector<TensorDesc>{{dtype, shape}};
  };
  def.cpu_kernel = [normal](const KernelContext& ctx) -> absl::Status {
    Tensor* y = ctx.outputs[0];
    const ShardInfo info = ShardOf(ctx.output_shards, 0, y->shape());
    const uint64_t seed = static_cast<uint64_t>(ctx.attrs.Int("seed"));
    if (normal) {
      FillNormal(y, info.logical_shape, info.offset, seed, ctx.attrs.Float("mean"), ctx.attrs.Float("std"));
    } else {
      FillUniform(y, info.logical_shape, info.offset, seed, ctx.attrs.Float("low"), ctx.attrs.Float("high"));
    }
    return absl::OkStatus();
  };
  return def;
}

// ---- dropout / dropout_grad ----

OpDef MakeDropout(bool grad) {
  const std::string name = grad ? "dropout_grad" : "dropout";
  OpDef def;
  def.name = name;
  def.doc = grad ? "dx = dy * mask / (1 - p), the mask of dropout with the same p and seed."
                 : "y = x * mask / (1 - p), mask[L] = PhiloxUniform(seed, L) >= p for logical index L.";
  def.inputs = {grad ? "dy" : "x"};
  def.outputs = {grad ? "dx" : "y"};
  def.is_random = true;
  def.inplace_pairs = {{0, 0}};
  def.attrs = {{"p", AttrType::kFloat, std::nullopt, "drop probability in [0, 1)"},
               {"seed", AttrType::kInt, AttrValue(int64_t{0}), "Philox key"}};
  def.infer = [name](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> {
    const double p = ctx.attrs.Float("p");
    if (!(p >= 0.0 && p < 1.0)) {
      return OpError(name, ctx.op_name, "p = ", p, " is out of range [0, 1) for input ", ctx.inputs[0].ToString());
    }
    const DataType dtype = ctx.inputs[0].dtype;
    if (dtype != DataType::kFloat32 && dtype != DataType::kFloat64) {
      return OpError(name, ctx.op_name, "unsupported input ", ctx.inputs[0].ToString(), " (expected float32/float64)");
    }
    return std::vector<TensorDesc>{ctx.inputs[0]};
  };
  def.sbp = [](const AttrMap&, const std::vector<TensorDesc>& in) {
    return SplitOrBroadcast(in[0].shape.num_axes(), 1);
  };
  def.grad = [](GradContext* g) {
    return ops::SetInputGradFromOp(g, "dropout_grad", {{"p", g->attrs().Float("p")}, {"seed", g->attrs().Int("seed")}});
  };
  def.cpu_kernel = [name](const KernelContext& ctx) -> absl::Status {
    const Tensor& x = *ctx.inputs[0];
    Tensor* y = ctx.outputs[0];
    const ShardInfo info = ShardOf(ctx.input_shards, 0, x.shape());
    const double p = ctx.attrs.Float("p");
    const uint64_t seed = static_cast<uint64_t>(ctx.attrs.Int("seed"));
    return ops::DispatchFloat(x.dtype(), name, [&](auto t) {
      using T = decltype(t);
      const T* xp = x.data<T>();
      T* yp = y->data<T>();
      const T scale = static_cast<T>(1.0 / (1.0 - p));
      ForEachLogicalIndex(x.shape(), info.logical_shape, info.offset, [&](int64_t i, int64_t logical) {
        yp[i] = PhiloxUniform(seed, static_cast<uint64_t>(logical)) >= p ? xp[i] * scale : T(0);
      });
      return absl::OkStatus();
    });
  };
  return def;
}

}  // namespace

absl::Status RegisterMiscOps(OpRegistry* registry) {
  RETURN_IF_ERROR(registry->Register(MakeCast()));
  RETURN_IF_ERROR(registry->Register(MakeFill()));
  RETURN_IF_ERROR(registry->Register(MakeRandom(/*normal=*/false)));
  RETURN_IF_ERROR(registry->Register(MakeRandom(/*normal=*/true)));
  RETURN_IF_ERROR(registry->Register(MakeDropout(/*grad=*/false)));
  RETURN_IF_ERROR(registry->Register(MakeDropout(/*grad=*/true)));
  return absl::OkStatus();
}

}  // namespace oneflow_like
