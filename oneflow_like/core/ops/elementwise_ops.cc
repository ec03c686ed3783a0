// Element-wise arithmetic: add, sub, mul, div (numpy broadcasting), scalar_add, scalar_mul,
// bias_add.
//
// Broadcasting (numpy): shapes are aligned at the last axis; along each axis the dims must be
// equal or one of them 1 (or missing), and the output takes the larger. Example:
//   add(a[4096,1024], b[1024]) -> y[4096,1024];  mul(a[5,1,7], b[3,1]) -> y[5,3,7].
//
// SBP signatures (R = output rank; "the broadcast side" is an operand whose dim is 1 or missing):
//   add/sub/mul/div  for each output axis i: S(i) on every operand that has the full dim there,
//                    B on the broadcast side -> Y:S(i);   B,B -> B
//   add/sub          P,P -> P            mul  P,B -> P and B,P -> P          div  P,B -> P
//   scalar_add       S(i) -> S(i), B -> B (no P: the constant would be added once per part)
//   scalar_mul       S(i) -> S(i), B -> B, P -> P
//   bias_add(x, b)   x:S(i), b:B -> S(i) for i != axis;  x:S(axis), b:S(0) -> S(axis);
//                    B,B -> B;  P,P -> P (each part adds its part of the bias)
//
// Gradients are expressed with registered ops: a broadcast operand's gradient is the output
// gradient summed (reduce_sum) over the broadcast axes and reshaped to the operand's shape.
//
// Kernels: the operand strides are computed against the output shape (stride 0 on broadcast
// axes), size-1 axes are dropped and adjacent axes that are contiguous for both operands are
// merged, so same-shape inputs become one flat loop and [N,C] + [C] becomes N rows of C. The
// innermost loop has specializations for stride (1,1), (1,0) and (0,1), written as fixed 8-wide
// blocks on __restrict pointers so that GCC vectorizes them at -O2. The output may be the same
// buffer as an input of the same shape (in-place), never a partial overlap. A large output is
// split over the rank's intra-op threads (by output rows, a single row by elements; the same
// arithmetic per element, so results are bit-identical; core/intra_op_pool.h).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_like/core/ops/builtin_ops.h"
#include "oneflow_like/core/ops/op_util.h"

namespace oneflow_like {
namespace {

using ops::OpError;

constexpr int kBlock = 8;

// ---- broadcasting ----

// The broadcast output shape of a and b, or an error naming the op, both shapes and the axis.
absl::StatusOr<Shape> BroadcastShape(const std::string& op, const std::string& op_name, const TensorDesc& a,
                                     const TensorDesc& b) {
  const int r = std::max(a.shape.num_axes(), b.shape.num_axes());
  std::vector<int64_t> dims(r);
  for (int i = 0; i < r; ++i) {
    const int ia = i - (r - a.shape.num_axes()), ib = i - (r - b.shape.num_axes());
    const int64_t da = ia >= 0 ? a.shape.dim(ia) : 1, db = ib >= 0 ? b.shape.dim(ib) : 1;
    if (da != db && da != 1 && db != 1) {
      return OpError(op, op_name, "shapes are not broadcastable: a ", a.ToString(), " and b ", b.ToString(),
                     " differ at axis ", i - r, " (", da, " vs ", db,
                     "); dims must be equal or 1, aligned from the last axis");
    }
    dims[i] = da == 1 ? db : da;
  }
  return Shape(std::move(dims));
}

// Strides of `in` (row-major) against `out`'s axes: 0 where `in` broadcasts.
std::vector<int64_t> BroadcastStrides(const Shape& in, const Shape& out) {
  const int r = out.num_axes(), offset = r - in.num_axes();
  std::vector<int64_t> strides(r, 0);
  int64_t s = 1;
  for (int i = r - 1; i >= offset; --i) {
    const int64_t d = in.dim(i - offset);
    strides[i] = (d == 1 && out.dim(i) != 1) ? 0 : s;
    s *= d;
  }
  return strides;
}

// A loop nest over the output with per-operand strides, coalesced (see the file comment).
struct LoopNest {
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides;  // one vector per operand
};

LoopNest MakeLoopNest(const std::vector<Shape>& in, const Shape& out) {
  LoopNest nest;
  nest.strides.resize(in.size());
  std::vector<std::vector<int64_t>> full;
  for (const Shape& s : in) full.push_back(BroadcastStrides(s, out));
  for (int i = 0; i < out.num_axes(); ++i) {
    const int64_t d = out.dim(i);
    if (d == 1) continue;
    bool merge = !nest.dims.empty();
    for (size_t k = 0; k < in.size() && merge; ++k) merge = nest.strides[k].back() == full[k][i] * d;
    if (merge) {
      nest.dims.back() *= d;
      for (size_t k = 0; k < in.size(); ++k) nest.strides[k].back() = full[k][i];
    } else {
      nest.dims.push_back(d);
      for (size_t k = 0; k < in.size(); ++k) nest.strides[k].push_back(full[k][i]);
    }
  }
  if (nest.dims.empty()) {  // a single element
    nest.dims.push_back(1);
    for (auto& s : nest.strides) s.push_back(0);
  }
  return nest;
}

struct AddOp {
  template <typename T>
  T operator()(T a, T b) const {
    return a + b;
  }
};
struct SubOp {
  template <typename T>
  T operator()(T a, T b) const {
    return a - b;
  }
};
struct MulOp {
  template <typename T>
  T operator()(T a, T b) const {
    return a * b;
  }
};
struct DivOp {
  template <typename T>
  T operator()(T a, T b) const {
    return a / b;
  }
};

// y[i] = op(a[i * sa], b[i * sb]) for i in [0, n).
template <typename T, typename Op>
void InnerLoop(Op op, const T* __restrict a, int64_t sa, const T* __restrict b, int64_t sb, T* __restrict y,
               int64_t n) {
  int64_t i = 0;
  if (sa == 1 && sb == 1) {
    for (; i + kBlock <= n; i += kBlock) {
      for (int k = 0; k < kBlock; ++k) y[i + k] = op(a[i + k], b[i + k]);
    }
    for (; i < n; ++i) y[i] = op(a[i], b[i]);
  } else if (sa == 1 && sb == 0) {
    const T bv = b[0];
    for (; i + kBlock <= n; i += kBlock) {
      for (int k = 0; k < kBlock; ++k) y[i + k] = op(a[i + k], bv);
    }
    for (; i < n; ++i) y[i] = op(a[i], bv);
  } else if (sa == 0 && sb == 1) {
    const T av = a[0];
    for (; i + kBlock <= n; i += kBlock) {
      for (int k = 0; k < kBlock; ++k) y[i + k] = op(av, b[i + k]);
    }
    for (; i < n; ++i) y[i] = op(av, b[i]);
  } else {
    for (; i < n; ++i) y[i] = op(a[i * sa], b[i * sb]);
  }
}

// Rows [row_begin, row_end) of the nest (a row = its innermost axis) of y = op(a, b).
template <typename T, typename Op>
void BroadcastRows(Op op, const LoopNest& nest, const T* pa, const T* pb, T* py, int64_t row_begin,
                   int64_t row_end) {
  const int inner_axis = static_cast<int>(nest.dims.size()) - 1;
  const int64_t inner = nest.dims[inner_axis];
  const std::vector<int64_t>& as = nest.strides[0];
  const std::vector<int64_t>& bs = nest.strides[1];
  std::vector<int64_t> index(inner_axis, 0);
  int64_t ao = 0, bo = 0;
  for (int64_t d = inner_axis - 1, rest = row_begin; d >= 0; --d) {  // the outer index of row_begin
    index[d] = rest % nest.dims[d];
    rest /= nest.dims[d];
    ao += index[d] * as[d];
    bo += index[d] * bs[d];
  }
  for (int64_t row = row_begin; row < row_end; ++row) {
    InnerLoop(op, pa + ao, as[inner_axis], pb + bo, bs[inner_axis], py + row * inner, inner);
    for (int d = inner_axis - 1; d >= 0; --d) {  // odometer over the outer axes
      ao += as[d];
      bo += bs[d];
      if (++index[d] < nest.dims[d]) break;
      ao -= as[d] * nest.dims[d];
      bo -= bs[d] * nest.dims[d];
      index[d] = 0;
    }
  }
}

// A large output is split over the intra-op threads: by rows, or a single row by elements.
template <typename T, typename Op>
void BroadcastBinary(Op op, const Tensor& a, const Tensor& b, Tensor* y, IntraOpPool* pool) {
  if (y->elem_count() == 0) return;
  const LoopNest nest = MakeLoopNest({a.shape(), b.shape()}, y->shape());
  const int inner_axis = static_cast<int>(nest.dims.size()) - 1;
  const int64_t inner = nest.dims[inner_axis];
  const int64_t rows = y->elem_count() / inner;
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* py = y->data<T>();
  if (rows == 1) {
    const int64_t sa = nest.strides[0][inner_axis], sb = nest.strides[1][inner_axis];
    ParallelFor(pool, inner, 1, [&](int64_t s, int64_t e) {
      InnerLoop(op, pa + s * sa, sa, pb + s * sb, sb, py + s, e - s);
    }, kBlock);
    return;
  }
  ParallelFor(pool, rows, inner, [&](int64_t r0, int64_t r1) { BroadcastRows(op, nest, pa, pb, py, r0, r1); });
}

// ---- op definitions ----

absl::Status CheckFloat(const std::string& op, const std::string& op_name, const std::string& what,
                        const TensorDesc& d) {
  if (d.dtype == DataType::kFloat32 || d.dtype == DataType::kFloat64) return absl::OkStatus();
  return OpError(op, op_name, "input ", what, " ", d.ToString(), " must be float32 or float64");
}

InferFn BinaryInfer(const std::string& op) {
  return [op](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> {
    const TensorDesc& a = ctx.inputs[0];
    const TensorDesc& b = ctx.inputs[1];
    RETURN_IF_ERROR(CheckFloat(op, ctx.op_name, "a", a));
    if (a.dtype != b.dtype) {
      return OpError(op, ctx.op_name, "dtypes differ: a ", a.ToString(), " and b ", b.ToString(),
                     " (insert a cast)");
    }
    ASSIGN_OR_RETURN(Shape shape, BroadcastShape(op, ctx.op_name, a, b));
    return std::vector<TensorDesc>{{a.dtype, std::move(shape)}};
  };
}

enum class PartialRule { kBoth, kEither, kFirst };  // add/sub, mul, div

SbpFn BinarySbp(PartialRule partial) {
  return [partial](const AttrMap&, const std::vector<TensorDesc>& in) {
    const Shape& a = in[0].shape;
    const Shape& b = in[1].shape;
    const int r = std::max(a.num_axes(), b.num_axes());
    const Sbp B = Sbp::Broadcast(), P = Sbp::PartialSum();
    std::vector<SbpSignature> sigs;
    for (int i = 0; i < r; ++i) {
      const int ia = i - (r - a.num_axes()), ib = i - (r - b.num_axes());
      const int64_t da = ia >= 0 ? a.dim(ia) : 1, db = ib >= 0 ? b.dim(ib) : 1;
      const int64_t d = da == 1 ? db : da;
      // An operand that has the full dim is split with the output; a broadcasting one is B.
      const Sbp sa = (ia >= 0 && da == d) ? Sbp::Split(ia) : B;
      const Sbp sb = (ib >= 0 && db == d) ? Sbp::Split(ib) : B;
      sigs.push_back({{sa, sb}, {Sbp::Split(i)}});
    }
    sigs.push_back({{B, B}, {B}});
    if (partial == PartialRule::kBoth) sigs.push_back({{P, P}, {P}});
    if (partial != PartialRule::kBoth) sigs.push_back({{P, B}, {P}});
    if (partial == PartialRule::kEither) sigs.push_back({{B, P}, {P}});
    return sigs;
  };
}

template <typename Op>
KernelFn BinaryKernel(const std::string& op, Op fn) {
  return [op, fn](const KernelContext& ctx) -> absl::Status {
    return ops::DispatchFloat(ctx.inputs[0]->dtype(), op, [&](auto zero) {
      BroadcastBinary<decltype(zero)>(fn, *ctx.inputs[0], *ctx.inputs[1], ctx.outputs[0], ctx.intra_op_pool);
      return absl::OkStatus();
    });
  };
}

OpCost ElementCost(const AttrMap&, const std::vector<TensorDesc>& in, const std::vector<TensorDesc>& out) {
  OpCost c;
  c.flops = static_cast<double>(out[0].shape.elem_count());
  c.bytes_moved = ops::TotalBytes(in) + ops::TotalBytes(out);
  return c;
}

// `value` (of shape `from`, the output shape) summed over the axes along which `to` was
// broadcast, then reshaped to `to`. Returns `value` itself when no reduction is needed.
absl::StatusOr<std::string> SumToShape(GradContext* ctx, const std::string& value, const Shape& from,
                                       const Shape& to) {
  if (from == to) return value;
  const int r = from.num_axes(), offset = r - to.num_axes();
  std::vector<int64_t> axes, kept;
  for (int i = 0; i < r; ++i) {
    if (i < offset || (to.dim(i - offset) == 1 && from.dim(i) != 1)) {
      axes.push_back(i);
    } else {
      kept.push_back(from.dim(i));
    }
  }
  std::string out = value;
  if (!axes.empty()) {
    ASSIGN_OR_RETURN(out, ctx->EmitOne("reduce_sum", {out}, {{"axes", axes}, {"keepdims", false}}));
  }
  if (kept != to.dims()) {
    ASSIGN_OR_RETURN(out, ctx->EmitOne("reshape", {out}, {{"shape", to.dims()}}));
  }
  return out;
}

// Sets the gradient of input i to SumToShape(g) (scaled by `scale` when it is not 1).
absl::Status SetReducedGrad(GradContext* ctx, int i, const std::string& g, double scale = 1.0) {
  ASSIGN_OR_RETURN(std::string r, SumToShape(ctx, g, ctx->output_desc(0).shape, ctx->input_desc(i).shape));
  if (scale != 1.0) {
    ASSIGN_OR_RETURN(r, ctx->EmitOne("scalar_mul", {r}, {{"value", scale}}));
  }
  ctx->SetInputGrad(i, r);
  return absl::OkStatus();
}

absl::Status AddSubGrad(GradContext* ctx, bool sub) {
  const std::string& dy = ctx->output_grad(0);
  if (ctx->needs_input_grad(0)) RETURN_IF_ERROR(SetReducedGrad(ctx, 0, dy));
  if (ctx->needs_input_grad(1)) RETURN_IF_ERROR(SetReducedGrad(ctx, 1, dy, sub ? -1.0 : 1.0));
  return absl::OkStatus();
}

absl::Status MulGrad(GradContext* ctx) {
  const std::string& dy = ctx->output_grad(0);
  for (int i : {0, 1}) {
    if (!ctx->needs_input_grad(i)) continue;
    ASSIGN_OR_RETURN(std::string g, ctx->EmitOne("mul", {dy, ctx->input(1 - i)}));
    RETURN_IF_ERROR(SetReducedGrad(ctx, i, g));
  }
  return absl::OkStatus();
}

// y = a / b:  da = dy / b;  db = -dy * a / b^2 = -(dy * y) / b.
absl::Status DivGrad(GradContext* ctx) {
  const std::string& dy = ctx->output_grad(0);
  const std::string& b = ctx->input(1);
  if (ctx->needs_input_grad(0)) {
    ASSIGN_OR_RETURN(std::string g, ctx->EmitOne("div", {dy, b}));
    RETURN_IF_ERROR(SetReducedGrad(ctx, 0, g));
  }
  if (ctx->needs_input_grad(1)) {
    ASSIGN_OR_RETURN(std::string dy_y, ctx->EmitOne("mul", {dy, ctx->output(0)}));
    ASSIGN_OR_RETURN(std::string g, ctx->EmitOne("div", {dy_y, b}));
    RETURN_IF_ERROR(SetReducedGrad(ctx, 1, g, -1.0));
  }
  return absl::OkStatus();
}

absl::Status RegisterBinary(OpRegistry* registry, const std::string& name, const std::string& doc,
                            PartialRule partial, GradFn grad, KernelFn kernel) {
  OpDef def;
  def.name = name;
  def.doc = doc;
  def.inputs = {"a", "b"};
  def.outputs = {"y"};
  def.infer = BinaryInfer(name);
  def.sbp = BinarySbp(partial);
  def.grad = std::move(grad);
  def.cost = ElementCost;
  def.cpu_kernel = std::move(kernel);
  return registry->Register(std::move(def));
}

// ---- scalar ops and bias_add ----

template <typename T, typename Op>
void ScalarLoop(Op op, const T* __restrict x, T v, T* __restrict y, int64_t n) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (int k = 0; k < kBlock; ++k) y[i + k] = op(x[i + k], v);
  }
  for (; i < n; ++i) y[i] = op(x[i], v);
}

absl::Status RegisterScalar(OpRegistry* registry, const std::string& name, bool allow_partial) {
  const bool is_add = name == "scalar_add";
  OpDef def;
  def.name = name;
  def.doc = is_add ? "y = x + value" : "y = x * value";
  def.inputs = {"x"};
  def.outputs = {"y"};
  def.attrs = {{"value", AttrType::kFloat, std::nullopt, "the scalar"}};
  def.inplace_pairs = {{0, 0}};
  def.infer = [name](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> {
    RETURN_IF_ERROR(CheckFloat(name, ctx.op_name, "x", ctx.inputs[0]));
    return std::vector<TensorDesc>{ctx.inputs[0]};
  };
  def.sbp = [allow_partial](const AttrMap&, const std::vector<TensorDesc>& in) {
    std::vector<SbpSignature> sigs;
    for (int a : ops::SplitAxes(in[0].shape.num_axes())) sigs.push_back({{Sbp::Split(a)}, {Sbp::Split(a)}});
    sigs.push_back({{Sbp::Broadcast()}, {Sbp::Broadcast()}});
    if (allow_partial) sigs.push_back({{Sbp::PartialSum()}, {Sbp::PartialSum()}});
    return sigs;
  };
  def.grad = [is_add](GradContext* ctx) -> absl::Status {
    if (!ctx->needs_input_grad(0)) return absl::OkStatus();
    if (is_add) {
      ctx->SetInputGrad(0, ctx->output_grad(0));
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(std::string dx, ctx->EmitOne("scalar_mul", {ctx->output_grad(0)},
                                                  {{"value", ctx->attrs().Float("value")}}));
    ctx->SetInputGrad(0, dx);
    return absl::OkStatus();
  };
  def.cost = ElementCost;
  def.cpu_kernel = [name, is_add](const KernelContext& ctx) -> absl::Status {
    const double value = ctx.attrs.Float("value");
    return ops::DispatchFloat(ctx.inputs[0]->dtype(), name, [&](auto zero) {
      using T = decltype(zero);
      const T* x = ctx.inputs[0]->data<T>();
      T* y = ctx.outputs[0]->data<T>();
      ParallelFor(ctx.intra_op_pool, ctx.outputs[0]->elem_count(), 1, [&](int64_t b, int64_t e) {
        if (is_add) {
          ScalarLoop(AddOp(), x + b, static_cast<T>(value), y + b, e - b);
        } else {
          ScalarLoop(MulOp(), x + b, static_cast<T>(value), y + b, e - b);
        }
      }, kBlock);
      return absl::OkStatus();
    });
  };
  return registry->Register(std::move(def));
}

// y[o, c, i] = x[o, c, i] + b[c] over x viewed as [outer, channels, inner].
template <typename T>
void BiasAddLoop(const T* __restrict x, const T* __restrict b, T* __restrict y, int64_t outer,
                 int64_t channels, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o) {
    const int64_t base = o * channels * inner;
    if (inner == 1) {
      InnerLoop(AddOp(), x + base, 1, b, 1, y + base, channels);
    } else {
      for (int64_t c = 0; c < channels; ++c) {
        InnerLoop(AddOp(), x + base + c * inner, 1, b + c, 0, y + base + c * inner, inner);
      }
    }
  }
}

absl::Status RegisterBiasAdd(OpRegistry* registry) {
  OpDef def;
  def.name = "bias_add";
  def.doc = "y = x + b broadcast along `axis` (b is 1-D with x.shape[axis] elements)";
  def.inputs = {"x", "b"};
  def.outputs = {"y"};
  def.attrs = {{"axis", AttrType::kInt, AttrValue(int64_t{-1}), "the channel axis of x"}};
  def.inplace_pairs = {{0, 0}};
  def.infer = [](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> {
    const TensorDesc& x = ctx.inputs[0];
    const TensorDesc& b = ctx.inputs[1];
    RETURN_IF_ERROR(CheckFloat("bias_add", ctx.op_name, "x", x));
    const int64_t axis_attr = ctx.attrs.Int("axis");
    auto axis = NormalizeAxis(axis_attr, x.shape.num_axes());
    if (!axis.ok()) {
      return OpError("bias_add", ctx.op_name, "axis ", axis_attr, " is out of range for x ", x.ToString());
    }
    if (b.dtype != x.dtype || b.shape.num_axes() != 1 || b.shape.dim(0) != x.shape.dim(*axis)) {
      return OpError("bias_add", ctx.op_name, "b ", b.ToString(), " must be ", DataTypeName(x.dtype), "[",
                     x.shape.dim(*axis), "] to match axis ", *axis, " of x ", x.ToString());
    }
    return std::vector<TensorDesc>{x};
  };
  def.sbp = [](const AttrMap& attrs, const std::vector<TensorDesc>& in) {
    const int r = in[0].shape.num_axes();
    const int axis = *NormalizeAxis(attrs.Int("axis"), r);
    std::vector<SbpSignature> sigs;
    for (int a : ops::SplitAxes(r)) {
      sigs.push_back({{Sbp::Split(a), a == axis ? Sbp::Split(0) : Sbp::Broadcast()}, {Sbp::Split(a)}});
    }
    sigs.push_back({{Sbp::Broadcast(), Sbp::Broadcast()}, {Sbp::Broadcast()}});
    sigs.push_back({{Sbp::PartialSum(), Sbp::PartialSum()}, {Sbp::PartialSum()}});
    return sigs;
  };
  def.grad = [](GradContext* ctx) -> absl::Status {
    const std::string& dy = ctx->output_grad(0);
    if (ctx->needs_input_grad(0)) ctx->SetInputGrad(0, dy);
    if (ctx->needs_input_grad(1)) {
      const int r = ctx->input_desc(0).shape.num_axes();
      const int axis = *NormalizeAxis(ctx->attrs().Int("axis"), r);
      std::vector<int64_t> axes;
      for (int a = 0; a < r; ++a) {
        if (a != axis) axes.push_back(a);
      }
      std::string db = dy;
      if (!axes.empty()) {
        ASSIGN_OR_RETURN(db, ctx->EmitOne("reduce_sum", {dy}, {{"axes", axes}, {"keepdims", false}}));
      }
      ctx->SetInputGrad(1, db);
    }
    return absl::OkStatus();
  };
  def.cost = ElementCost;
  def.cpu_kernel = [](const KernelContext& ctx) -> absl::Status {
    const Tensor& x = *ctx.inputs[0];
    const int axis = *NormalizeAxis(ctx.attrs.Int("axis"), x.shape().num_axes());
    return ops::DispatchFloat(x.dtype(), "bias_add", [&](auto zero) {
      using T = decltype(zero);
      const int64_t outer = x.shape().Count(0, axis), channels = x.shape().dim(axis);
      const int64_t inner = x.shape().Count(axis + 1);
      const T* px = x.data<T>();
      const T* pb = ctx.inputs[1]->data<T>();
      T* py = ctx.outputs[0]->data<T>();
      if (outer > 1) {  // split the outer rows
        ParallelFor(ctx.intra_op_pool, outer, channels * inner, [&](int64_t o0, int64_t o1) {
          BiasAddLoop(px + o0 * channels * inner, pb, py + o0 * channels * inner, o1 - o0, channels, inner);
        });
      } else {  // split the channels
        ParallelFor(ctx.intra_op_pool, channels, inner, [&](int64_t c0, int64_t c1) {
          BiasAddLoop(px + c0 * inner, pb + c0, py + c0 * inner, int64_t{1}, c1 - c0, inner);
        });
      }
      return absl::OkStatus();
    });
  };
  return registry->Register(std::move(def));
}

}  // namespace

absl::Status RegisterElementwiseOps(OpRegistry* registry) {
  RETURN_IF_ERROR(RegisterBinary(
      registry, "add", "y = a + b (numpy broadcasting)", PartialRule::kBoth,
      [](GradContext* ctx) { return AddSubGrad(ctx, /*sub=*/false); }, BinaryKernel("add", AddOp())));
  RETURN_IF_ERROR(RegisterBinary(
      registry, "sub", "y = a - b (numpy broadcasting)", PartialRule::kBoth,
      [](GradContext* ctx) { return AddSubGrad(ctx, /*sub=*/true); }, BinaryKernel("sub", SubOp())));
  RETURN_IF_ERROR(RegisterBinary(registry, "mul", "y = a * b (numpy broadcasting)", PartialRule::kEither,
                                 MulGrad, BinaryKernel("mul", MulOp())));
  RETURN_IF_ERROR(RegisterBinary(registry, "div", "y = a / b (numpy broadcasting)", PartialRule::kFirst,
                                 DivGrad, BinaryKernel("div", DivOp())));
  RETURN_IF_ERROR(RegisterScalar(registry, "scalar_add", /*allow_partial=*/false));
  RETURN_IF_ERROR(RegisterScalar(registry, "scalar_mul", /*allow_partial=*/true));
  return RegisterBiasAdd(registry);
}

}  // namespace oneflow_like
