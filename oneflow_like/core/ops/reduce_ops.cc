// Reduce op family: reduce_sum, reduce_mean (over `axes`, [] = all; `keepdims`) and
// broadcast_to (numpy rules), the pair that gradient rules use to undo each other.
//
// SBP (1-D), x[2,5,3] reduce_sum(axes=[1]) -> y[2,3]:
//   y:S(0) <- x:S(0)   y:S(1) <- x:S(2)   (kept axes renumbered after removing reduced ones)
//   y:P    <- x:S(1)   (each shard sums its part of the reduced axis)
//   y:P <- x:P         y:B <- x:B
// reduce_mean is the same; under x:S(reduced) every shard divides by the LOGICAL reduced size
// (KernelContext::input_shards[0].logical_shape), so the partial results sum to the mean.
// broadcast_to x[5,1] -> y[4,5,3]: y:S(1) <- x:S(0) (non-broadcast axis), y:S(0)/S(2) <- x:B
// (broadcast axes: every shard expands the whole x), B -> B, P -> P.
//
// Kernel: runs of kept / reduced axes are merged, so the inner loop either accumulates a whole
// row into y (y[k] += x[k]: the bias gradient, reducing the leading axes) or sums a contiguous
// run (row_math::Sum: 16 partial sums, vectorized; more accurate than one running sum). On the
// rank's intra-op threads an outer kept axis, or the columns of a bias gradient, are split;
// each output element keeps its serial summation order (bit-identical; core/intra_op_pool.h).
#include <algorithm>

#include "absl/strings/str_join.h"
#include "oneflow_like/core/ops/builtin_ops.h"
#include "oneflow_like/core/ops/op_util.h"
#include "oneflow_like/core/ops/row_math.h"

namespace oneflow_like {
namespace {

using ops::OpError;
namespace row_math = ops::row_math;

// y[k] += x[k] for k in [0, n): fixed 16-wide blocks, which GCC vectorizes at -O2.
template <typename T>
void AccumulateRow(const T* __restrict x, T* __restrict y, int64_t n) {
  int64_t k = 0;
  for (; k + row_math::kLanes <= n; k += row_math::kLanes) {
    for (int j = 0; j < row_math::kLanes; ++j) y[k + j] += x[k + j];
  }
  for (; k < n; ++k) y[k] += x[k];
}

// Calls fn(T{}) for float32/float64/int32/int64.
template <typename Fn>
absl::Status DispatchNumeric(DataType dtype, const std::string& what, Fn&& fn) {
  switch (dtype) {
    case DataType::kInt32: return fn(int32_t{});
    case DataType::kInt64: return fn(int64_t{});
    default: return ops::DispatchFloat(dtype, what, fn);
  }
}

// Reduced-axis mask from the `axes` attr ([] = all); errors name the op.
absl::StatusOr<std::vector<bool>> ReducedMask(const std::string& op, const std::string& op_name,
                                              const std::vector<int64_t>& axes, const Shape& shape) {
  const int rank = shape.num_axes();
  std::vector<bool> mask(rank, axes.empty());
  for (int64_t axis : axes) {
    if (axis < -rank || axis >= rank) {
      return OpError(op, op_name, "axis ", axis, " out of range for input shape ", shape.ToString(),
                     " (valid: [", -rank, ", ", rank, "))");
    }
    const int a = static_cast<int>(axis < 0 ? axis + rank : axis);
    if (mask[a]) {
      return OpError(op, op_name, "axis ", axis, " listed twice in axes [", absl::StrJoin(axes, ","), "]");
    }
    mask[a] = true;
  }
  return mask;
}

// REQUIRES: `attrs` validated and ReducedMask succeeds (kernels, SBP and grad rules run after Infer).
std::vector<bool> ReducedMaskOrDie(const AttrMap& attrs, const Shape& shape) {
  auto mask = ReducedMask("reduce", "", attrs.Ints("axes"), shape);
  CHECK(mask.ok()) << mask.status();
  return *mask;
}

Shape ReducedShape(const Shape& shape, const std::vector<bool>& mask, bool keepdims) {
  std::vector<int64_t> dims;
  for (int a = 0; a < shape.num_axes(); ++a) {
    if (!mask[a]) {
      dims.push_back(shape[a]);
    } else if (keepdims) {
      dims.push_back(1);
    }
  }
  return Shape(std::move(dims));
}

// x's axes with size-1 axes dropped and runs of kept / reduced axes merged.
struct MergedAxes {
  std::vector<int64_t> dims;
  std::vector<bool> reduced;
};

MergedAxes MergeAxes(const Shape& x_shape, const std::vector<bool>& mask) {
  MergedAxes m;
  for (int a = 0; a < x_shape.num_axes(); ++a) {
    if (x_shape[a] == 1) continue;
    if (!m.dims.empty() && m.reduced.back() == mask[a]) {
      m.dims.back() *= x_shape[a];
    } else {
      m.dims.push_back(x_shape[a]);
      m.reduced.push_back(mask[a]);
    }
  }
  return m;
}

// y += the sum of x over the reduced axes of `dims` (non-empty; x contiguous; y in the
// layout of the kept axes): the inner loop is either y[k] += x[k] or a plain sum.
template <typename T>
void SumReduceNest(const T* x, const std::vector<int64_t>& dims, const std::vector<bool>& reduced, T* y) {
  const int n = static_cast<int>(dims.size());
  std::vector<int64_t> y_strides(n, 0);
  int64_t acc = 1;
  for (int a = n - 1; a >= 0; --a) {
    if (!reduced[a]) {
      y_strides[a] = acc;
      acc *= dims[a];
    }
  }
  const int64_t inner = dims[n - 1];
  const bool inner_reduced = reduced[n - 1];
  std::vector<int64_t> idx(n, 0);
  int64_t x_off = 0, y_off = 0;
  while (true) {
    const T* xp = x + x_off;
    T* yp = y + y_off;
    if (inner_reduced) {
      yp[0] += row_math::Sum(xp, inner);
    } else {
      AccumulateRow(xp, yp, inner);
    }
    x_off += inner;
    int a = n - 2;
    for (; a >= 0; --a) {
      ++idx[a];
      y_off += y_strides[a];
      if (idx[a] < dims[a]) break;
      y_off -= idx[a] * y_strides[a];
      idx[a] = 0;
    }
    if (a < 0) break;
  }
}

// A column part of a column sum reads a run of this many elements per row: narrower parts read
// memory too scattered to gain (measured: [1024, 1024] on two threads no faster than one).
constexpr int64_t kMinColumnPart = 1024;

// y (keepdims layout, y_count elements) = sum of x over the masked axes, x contiguous. On the
// intra-op threads, each output element is still summed by one thread in the serial order:
// an outer kept axis is split (disjoint outputs), or for a wide x[R, C] summed over R (the
// bias gradient) the columns are.
template <typename T>
void SumReduce(const T* x, const Shape& x_shape, const std::vector<bool>& mask, T* y, int64_t y_count,
               IntraOpPool* pool) {
  std::fill(y, y + y_count, T(0));
  if (x_shape.elem_count() == 0) return;
  const MergedAxes m = MergeAxes(x_shape, mask);
  if (m.dims.empty()) {
    y[0] = x[0];
    return;
  }
  const int64_t total = x_shape.elem_count();
  if (!m.reduced[0] && m.dims.size() > 1) {  // split the outer kept axis
    const int64_t outer = m.dims[0], x_step = total / outer, y_step = y_count / outer;
    ParallelFor(pool, outer, x_step, [&](int64_t b, int64_t e) {
      std::vector<int64_t> dims = m.dims;
      dims[0] = e - b;
      SumReduceNest(x + b * x_step, dims, m.reduced, y + b * y_step);
    });
  } else if (m.dims.size() == 2 && m.reduced[0] && pool != nullptr &&
             m.dims[1] >= kMinColumnPart * pool->num_threads()) {  // x[R, C] -> y[C]: split the columns
    const int64_t r = m.dims[0], c = m.dims[1];
    ParallelForPerThread(pool, c, r, [&](int64_t c0, int64_t c1) {
      for (int64_t i = 0; i < r; ++i) AccumulateRow(x + i * c + c0, y + c0, c1 - c0);
    }, row_math::kLanes);
  } else {
    SumReduceNest(x, m.dims, m.reduced, y);
  }
}

const Shape& InputLogicalShape(const KernelContext& ctx) {
  return ctx.input_shards.empty() ? ctx.inputs[0]->shape() : ctx.input_shards[0].logical_shape;
}

OpDef MakeReduceOp(const std::string& name, bool mean) {
  OpDef def;
  def.name = name;
  def.doc = mean ? "Mean over `axes` ([] = all axes)." : "Sum over `axes` ([] = all axes).";
  def.inputs = {"x"};
  def.outputs = {"y"};
  def.attrs = {{"axes", AttrType::kInts, AttrValue(std::vector<int64_t>{}), "axes to reduce; [] = all"},
               {"keepdims", AttrType::kBool, AttrValue(false), "keep reduced axes with size 1"}};
  def.infer = [name, mean](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> {
    const TensorDesc& x = ctx.inputs[0];
    if (mean ? !(x.dtype == DataType::kFloat32 || x.dtype == DataType::kFloat64)
             : !(x.dtype == DataType::kFloat32 || x.dtype == DataType::kFloat64 ||
                 x.dtype == DataType::kInt32 || x.dtype == DataType::kInt64)) {
      return OpError(name, ctx.op_name, "unsupported dtype ", DataTypeName(x.dtype), " for input ",
                     x.ToString(), mean ? " (expected float32/float64)" : " (expected float or int)");
    }
    ASSIGN_OR_RETURN(std::vector<bool> mask, ReducedMask(name, ctx.op_name, ctx.attrs.Ints("axes"), x.shape));
    return std::vector<TensorDesc>{{x.dtype, ReducedShape(x.shape, mask, ctx.attrs.Bool("keepdims"))}};
  };
  def.sbp = [](const AttrMap& attrs, const std::vector<TensorDesc>& in) {
    const std::vector<bool> mask = ReducedMaskOrDie(attrs, in[0].shape);
    const bool keepdims = attrs.Bool("keepdims");
    std::vector<SbpSignature> sigs;
    int out_axis = 0;
    for (int a = 0; a < in[0].shape.num_axes(); ++a) {
      if (mask[a]) {
        sigs.push_back({{Sbp::Split(a)}, {Sbp::PartialSum()}});
        if (keepdims) ++out_axis;
      } else {
        sigs.push_back({{Sbp::Split(a)}, {Sbp::Split(out_axis++)}});
      }
    }
    sigs.push_back({{Sbp::PartialSum()}, {Sbp::PartialSum()}});
    sigs.push_back({{Sbp::Broadcast()}, {Sbp::Broadcast()}});
    return sigs;
  };
  def.grad = [mean](GradContext* g) -> absl::Status {
    if (!g->needs_input_grad(0)) return absl::OkStatus();
    const Shape& x_shape = g->input_desc(0).shape;
    const std::vector<bool> mask = ReducedMaskOrDie(g->attrs(), x_shape);
    const Shape kept = ReducedShape(x_shape, mask, /*keepdims=*/true);
    std::string dy = g->output_grad(0);
    if (g->output_desc(0).shape != kept) {
      ASSIGN_OR_RETURN(dy, g->EmitOne("reshape", {dy}, {{"shape", kept.dims()}}));
    }
    ASSIGN_OR_RETURN(std::string dx, g->EmitOne("broadcast_to", {dy}, {{"shape", x_shape.dims()}}));
    if (mean) {
      const int64_t n = x_shape.elem_count() / std::max<int64_t>(kept.elem_count(), 1);
      ASSIGN_OR_RETURN(dx, g->EmitOne("scalar_mul", {dx}, {{"value", 1.0 / static_cast<double>(std::max<int64_t>(n, 1))}}));
    }
    g->SetInputGrad(0, dx);
    return absl::OkStatus();
  };
  def.cost = [](const AttrMap&, const std::vector<TensorDesc>& in, const std::vector<TensorDesc>& out) {
    return OpCost{static_cast<double>(in[0].shape.elem_count()), ops::TotalBytes(in) + ops::TotalBytes(out)};
  };
  def.cpu_kernel = [name, mean](const KernelContext& ctx) -> absl::Status {
    const Tensor& x = *ctx.inputs[0];
    Tensor* y = ctx.outputs[0];
    const std::vector<bool> mask = ReducedMaskOrDie(ctx.attrs, x.shape());
    return DispatchNumeric(x.dtype(), name, [&](auto t) -> absl::Status {
      using T = decltype(t);
      SumReduce<T>(x.data<T>(), x.shape(), mask, y->data<T>(), y->elem_count(), ctx.intra_op_pool);
      if (mean) {
        // Divide by the logical reduced size: correct for whole tensors and for x:S(reduced) -> P.
        const Shape& logical = InputLogicalShape(ctx);
        int64_t n = 1;
        for (int a = 0; a < logical.num_axes(); ++a) {
          if (mask[a]) n *= logical[a];
        }
        const T scale = T(1) / static_cast<T>(std::max<int64_t>(n, 1));
        row_math::Scale(y->data<T>(), scale, y->elem_count());
      }
      return absl::OkStatus();
    });
  };
  return def;
}

// ---- broadcast_to ----

// For each output axis: the input axis it comes from, or -1 for a new leading axis.
int SourceAxis(int out_axis, int in_rank, int out_rank) { return out_axis - (out_rank - in_rank); }

OpDef MakeBroadcastTo() {
  OpDef def;
  def.name = "broadcast_to";
  def.doc = "Expands x to `shape` with numpy broadcasting (size-1 and missing leading axes repeat).";
  def.inputs = {"x"};
  def.outputs = {"y"};
  def.attrs = {{"shape", AttrType::kInts, std::nullopt, "target shape"}};
  def.infer = [](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> {
    const TensorDesc& x = ctx.inputs[0];
    const Shape target(ctx.attrs.Ints("shape"));
    const int nx = x.shape.num_axes(), ny = target.num_axes();
    bool ok = nx <= ny && target.Validate().ok();
    for (int j = 0; ok && j < ny; ++j) {
      const int a = SourceAxis(j, nx, ny);
      if (a >= 0 && x.shape[a] != 1 && x.shape[a] != target[j]) ok = false;
    }
    if (!ok) {
      return OpError("broadcast_to", ctx.op_name, "cannot broadcast input shape ", x.shape.ToString(),
                     " to ", target.ToString(),
                     " (numpy rules: align trailing axes; each input dim must be 1 or equal the target)");
    }
    return std::vector<TensorDesc>{{x.dtype, target}};
  };
  def.sbp = [](const AttrMap& attrs, const std::vector<TensorDesc>& in) {
    const Shape& xs = in[0].shape;
    const Shape target(attrs.Ints("shape"));
    const int nx = xs.num_axes(), ny = target.num_axes();
    std::vector<SbpSignature> sigs;
    for (int j = 0; j < ny; ++j) {
      const int a = SourceAxis(j, nx, ny);
      if (a >= 0 && xs[a] == target[j]) {
        sigs.push_back({{Sbp::Split(a)}, {Sbp::Split(j)}});
      } else {
        sigs.push_back({{Sbp::Broadcast()}, {Sbp::Split(j)}});  // a broadcast axis: expand locally
      }
    }
    sigs.push_back({{Sbp::PartialSum()}, {Sbp::PartialSum()}});
    sigs.push_back({{Sbp::Broadcast()}, {Sbp::Broadcast()}});
    return sigs;
  };
  def.grad = [](GradContext* g) -> absl::Status {
    if (!g->needs_input_grad(0)) return absl::OkStatus();
    const Shape& xs = g->input_desc(0).shape;
    const Shape& ys = g->output_desc(0).shape;
    const int nx = xs.num_axes(), ny = ys.num_axes();
    std::vector<int64_t> axes;
    std::vector<int64_t> kept_dims;
    for (int j = 0; j < ny; ++j) {
      const int a = SourceAxis(j, nx, ny);
      if (a < 0 || (xs[a] == 1 && ys[j] != 1)) {
        axes.push_back(j);
      } else {
        kept_dims.push_back(ys[j]);
      }
    }
    std::string dx = g->output_grad(0);
    if (!axes.empty()) {
      ASSIGN_OR_RETURN(dx, g->EmitOne("reduce_sum", {dx}, {{"axes", axes}, {"keepdims", false}}));
    }
    if (Shape(kept_dims) != xs) {
      ASSIGN_OR_RETURN(dx, g->EmitOne("reshape", {dx}, {{"shape", xs.dims()}}));
    } else if (axes.empty()) {
      ASSIGN_OR_RETURN(dx, g->EmitOne("identity", {dx}));
    }
    g->SetInputGrad(0, dx);
    return absl::OkStatus();
  };
  def.cpu_kernel = [](const KernelContext& ctx) -> absl::Status {
    const Tensor& x = *ctx.inputs[0];
    Tensor* y = ctx.outputs[0];
    const Shape& xs = x.shape();
    const Shape& ys = y->shape();
    const int nx = xs.num_axes(), ny = ys.num_axes();
    const std::vector<int64_t> x_strides = xs.Strides();
    std::vector<int64_t> src_strides(ny, 0);
    for (int j = 0; j < ny; ++j) {
      const int a = SourceAxis(j, nx, ny);
      // A physical dim of 1 repeats (a broadcast axis, or a size-1 shard of a split axis).
      if (a >= 0 && xs[a] != 1) src_strides[j] = x_strides[a];
    }
    ops::CopyStrided(ys.dims(), SizeOf(x.dtype()), y->raw_data(), ys.Strides(), x.raw_data(), src_strides);
    return absl::OkStatus();
  };
  return def;
}

}  // namespace

absl::Status RegisterReduceOps(OpRegistry* registry) {
  RETURN_IF_ERROR(registry->Register(MakeReduceOp("reduce_sum", /*mean=*/false)));
  RETURN_IF_ERROR(registry->Register(MakeReduceOp("reduce_mean", /*mean=*/true)));
  RETURN_IF_ERROR(registry->Register(MakeBroadcastTo()));
  return absl::OkStatus();
}

}  // namespace oneflow_like
