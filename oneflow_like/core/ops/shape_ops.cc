// Shape op family: reshape, transpose, slice, slice_grad, concat, split, identity. Kernels move
// raw bytes (any dtype) with ops::CopyStrided, a large copy split over the rank's intra-op
// threads; each runs on one shard and uses the PHYSICAL shapes of its tensors plus the
// ShardInfo offsets where the logical attrs (begin/end) need them.
//
// SBP (1-D), examples:
//   reshape [6,4] -> [2,3,4]:  y:S(2) <- x:S(1) (the split axis maps exactly: same dim, same
//                              prefix product); x:S(0) has no exact image (6 -> 2x3), so none.
//   transpose perm=[2,0,1]:    y:S(j) <- x:S(perm[j])
//   slice / slice_grad:        S(a) on axes the slice does not cut
//   concat / split:            S(a) on every axis but the concat/split axis
//   all:                       B -> B, P -> P (the ops are linear)
#include <numeric>

#include "absl/strings/str_join.h"
#include "oneflow_like/core/ops/builtin_ops.h"
#include "oneflow_like/core/ops/op_util.h"

namespace oneflow_like {
namespace {

using ops::OpError;

std::vector<SbpSignature> BroadcastAndPartial(int num_inputs, int num_outputs) {
  return {{std::vector<Sbp>(num_inputs, Sbp::Broadcast()), std::vector<Sbp>(num_outputs, Sbp::Broadcast())},
          {std::vector<Sbp>(num_inputs, Sbp::PartialSum()), std::vector<Sbp>(num_outputs, Sbp::PartialSum())}};
}

// Whole-buffer byte copy (reshape, identity).
absl::Status CopyKernel(const KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  Tensor* y = ctx.outputs[0];
  CHECK_EQ(x.byte_size(), y->byte_size()) << ctx.op_name;
  if (x.raw_data() != y->raw_data()) {
    ops::CopyBytesParallel(ctx.intra_op_pool, y->raw_data(), x.raw_data(), x.byte_size());
  }
  return absl::OkStatus();
}

// ---- reshape ----

absl::StatusOr<Shape> ResolveReshape(const std::string& op_name, const Shape& in, const std::vector<int64_t>& spec) {
  std::vector<int64_t> dims = spec;
  int infer_axis = -1;
  int64_t known = 1;
  for (int a = 0; a < static_cast<int>(dims.size()); ++a) {
    if (dims[a] == -1 && infer_axis < 0) {
      infer_axis = a;
    } else if (dims[a] < 0) {
      return OpError("reshape", op_name, "invalid target shape [", absl::StrJoin(spec, ","), "] for input ",
                     in.ToString(), " (dims must be >= 0, with at most one -1)");
    } else {
      known *= dims[a];
    }
  }
  if (infer_axis >= 0) {
    if (known == 0 || in.elem_count() % known != 0) {
      return OpError("reshape", op_name, "cannot reshape input ", in.ToString(), " (", in.elem_count(),
                     " elements) to [", absl::StrJoin(spec, ","), "]: the -1 dim cannot be inferred");
    }
    dims[infer_axis] = in.elem_count() / known;
  }
  Shape out(std::move(dims));
  if (out.elem_count() != in.elem_count()) {
    return OpError("reshape", op_name, "cannot reshape input ", in.ToString(), " (", in.elem_count(),
                   " elements) to ", out.ToString(), " (", out.elem_count(),
                   " elements); the element counts must match");
  }
  return out;
}

OpDef MakeReshape() {
  OpDef def;
  def.name = "reshape";
  def.doc = "Same elements, new shape (row-major); one target dim may be -1 (inferred).";
  def.inputs = {"x"};
  def.outputs = {"y"};
  def.attrs = {{"shape", AttrType::kInts, std::nullopt, "target shape; one dim may be -1"}};
  def.inplace_pairs = {{0, 0}};
  def.infer = [](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> {
    ASSIGN_OR_RETURN(Shape out, ResolveReshape(ctx.op_name, ctx.inputs[0].shape, ctx.attrs.Ints("shape")));
    return std::vector<TensorDesc>{{ctx.inputs[0].dtype, std::move(out)}};
  };
  def.sbp = [](const AttrMap& attrs, const std::vector<TensorDesc>& in) {
    const Shape& xs = in[0].shape;
    auto ys_or = ResolveReshape("", xs, attrs.Ints("shape"));
    CHECK(ys_or.ok()) << ys_or.status();
    const Shape& ys = *ys_or;
    std::vector<SbpSignature> sigs;
    // S(i) -> S(j) when the elements before axis i and before axis j are the same blocks and the
    // split dims are equal: then every balanced part of x is exactly the same part of y.
    for (int i = 0; i < xs.num_axes(); ++i) {
      for (int j = 0; j < ys.num_axes(); ++j) {
        if (xs.Count(0, i) == ys.Count(0, j) && xs[i] == ys[j]) {
          sigs.push_back({{Sbp::Split(i)}, {Sbp::Split(j)}});
          break;
        }
      }
    }
    for (auto& s : BroadcastAndPartial(1, 1)) sigs.push_back(std::move(s));
    return sigs;
  };
  def.grad = [](GradContext* g) {
    return ops::SetInputGradFromOp(g, "reshape", {{"shape", g->input_desc(0).shape.dims()}});
  };
  def.cpu_kernel = CopyKernel;
  return def;
}

// ---- identity ----

OpDef MakeIdentity() {
  OpDef def;
  def.name = "identity";
  def.doc = "y = x (a copy).";
  def.inputs = {"x"};
  def.outputs = {"y"};
  def.inplace_pairs = {{0, 0}};
  def.infer = [](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> {
    return std::vector<TensorDesc>{ctx.inputs[0]};
  };
  def.sbp = [](const AttrMap&, const std::vector<TensorDesc>& in) {
    std::vector<SbpSignature> sigs;
    for (int a : ops::SplitAxes(in[0].shape.num_axes())) sigs.push_back({{Sbp::Split(a)}, {Sbp::Split(a)}});
    for (auto& s : BroadcastAndPartial(1, 1)) sigs.push_back(std::move(s));
    return sigs;
  };
  def.grad = [](GradContext* g) { return ops::SetInputGradFromOp(g, "identity"); };
  def.cpu_kernel = CopyKernel;
  return def;
}

// ---- transpose ----

absl::Status CheckPerm(const std::string& op_name, const Shape& in, const std::vector<int64_t>& perm) {
  const int rank = in.num_axes();
  std::vector<bool> seen(rank, false);
  bool ok = static_cast<int>(perm.size()) == rank;
  for (size_t j = 0; ok && j < perm.size(); ++j) {
    ok = perm[j] >= 0 && perm[j] < rank && !seen[perm[j]];
    if (ok) seen[perm[j]] = true;
  }
  if (!ok) {
    return OpError("transpose", op_name, "perm [", absl::StrJoin(perm, ","), "] is not a permutation of the ",
                   rank, " axes of input ", in.ToString());
  }
  return absl::OkStatus();
}

OpDef MakeTranspose() {
  OpDef def;
  def.name = "transpose";
  def.doc = "y axis j = x axis perm[j].";
  def.inputs = {"x"};
  def.outputs = {"y"};
  def.attrs = {{"perm", AttrType::kInts, std::nullopt, "a permutation of the input axes"}};
  def.infer = [](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> {
    const TensorDesc& x = ctx.inputs[0];
    const std::vector<int64_t>& perm = ctx.attrs.Ints("perm");
    RETURN_IF_ERROR(CheckPerm(ctx.op_name, x.shape, perm));
    std::vector<int64_t> dims;
    for (int64_t p : perm) dims.push_back(x.shape[static_cast<int>(p)]);
    return std::vector<TensorDesc>{{x.dtype, Shape(std::move(dims))}};
  };
  def.sbp = [](const AttrMap& attrs, const std::vector<TensorDesc>&) {
    const std::vector<int64_t>& perm = attrs.Ints("perm");
    std::vector<SbpSignature> sigs;
    for (size_t j = 0; j < perm.size(); ++j) {
      sigs.push_back({{Sbp::Split(static_cast<int>(perm[j]))}, {Sbp::Split(static_cast<int>(j))}});
    }
    for (auto& s : BroadcastAndPartial(1, 1)) sigs.push_back(std::move(s));
    return sigs;
  };
  def.grad = [](GradContext* g) {
    const std::vector<int64_t>& perm = g->attrs().Ints("perm");
    std::vector<int64_t> inverse(perm.size());
    for (size_t j = 0; j < perm.size(); ++j) inverse[perm[j]] = static_cast<int64_t>(j);
    return ops::SetInputGradFromOp(g, "transpose", {{"perm", inverse}});
  };
  def.cpu_kernel = [](const KernelContext& ctx) -> absl::Status {
    const Tensor& x = *ctx.inputs[0];
    Tensor* y = ctx.outputs[0];
    const std::vector<int64_t>& perm = ctx.attrs.Ints("perm");
    const std::vector<int64_t> x_strides = x.shape().Strides();
    std::vector<int64_t> src_strides;
    for (int64_t p : perm) src_strides.push_back(x_strides[p]);
    ops::CopyStridedParallel(ctx.intra_op_pool, y->shape().dims(), SizeOf(x.dtype()), y->raw_data(),
                             y->shape().Strides(), x.raw_data(), src_strides);
    return absl::OkStatus();
  };
  return def;
}

// ---- slice / slice_grad ----

struct SliceBounds {
  std::vector<int64_t> begin, end;  // normalized: 0 <= begin <= end <= dim
};

// Negative bounds count from the end (python style); no step.
absl::StatusOr<SliceBounds> NormalizeSlice(const std::string& op, const std::string& op_name, const Shape& shape,
                                           const std::vector<int64_t>& begin, const std::vector<int64_t>& end) {
  const int rank = shape.num_axes();
  if (static_cast<int>(begin.size()) != rank || static_cast<int>(end.size()) != rank) {
    return OpError(op, op_name, "begin [", absl::StrJoin(begin, ","), "] and end [", absl::StrJoin(end, ","),
                   "] need one entry per axis of ", shape.ToString());
  }
  SliceBounds b{begin, end};
  for (int a = 0; a < rank; ++a) {
    if (b.begin[a] < 0) b.begin[a] += shape[a];
    if (b.end[a] < 0) b.end[a] += shape[a];
    if (b.begin[a] < 0 || b.begin[a] > b.end[a] || b.end[a] > shape[a]) {
      return OpError(op, op_name, "slice [", begin[a], ", ", end[a], ") of axis ", a, " is out of range for shape ",
                     shape.ToString(), " (need 0 <= begin <= end <= dim; negative values count from the end)");
    }
  }
  return b;
}

SliceBounds NormalizeSliceOrDie(const AttrMap& attrs, const Shape& shape) {
  auto b = NormalizeSlice("slice", "", shape, attrs.Ints("begin"), attrs.Ints("end"));
  CHECK(b.ok()) << b.status();
  return *std::move(b);
}

// S(a) on every axis the slice keeps whole; B; P.
std::vector<SbpSignature> SliceSignatures(const Shape& full, const SliceBounds& b) {
  std::vector<SbpSignature> sigs;
  for (int a = 0; a < full.num_axes(); ++a) {
    if (b.begin[a] == 0 && b.end[a] == full[a]) sigs.push_back({{Sbp::Split(a)}, {Sbp::Split(a)}});
  }
  for (auto& s : BroadcastAndPartial(1, 1)) sigs.push_back(std::move(s));
  return sigs;
}

std::vector<int64_t> OffsetOf(const std::vector<ShardInfo>& shards, int i, const Shape& physical) {
  return static_cast<int>(shards.size()) > i ? shards[i].offset : std::vector<int64_t>(physical.num_axes(), 0);
}

// Element offset of the block that starts at per-axis `index` in a tensor of `shape`.
int64_t FlatOffset(const Shape& shape, const std::vector<int64_t>& index) {
  const std::vector<int64_t> strides = shape.Strides();
  int64_t off = 0;
  for (int a = 0; a < shape.num_axes(); ++a) off += index[a] * strides[a];
  return off;
}

OpDef MakeSlice() {
  OpDef def;
  def.name = "slice";
  def.doc = "y = x[begin[0]:end[0], begin[1]:end[1], ...] (negative bounds count from the end).";
  def.inputs = {"x"};
  def.outputs = {"y"};
  def.attrs = {{"begin", AttrType::kInts, std::nullopt, "start per axis"},
               {"end", AttrType::kInts, std::nullopt, "end (exclusive) per axis"}};
  def.infer = [](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> {
    const TensorDesc& x = ctx.inputs[0];
    ASSIGN_OR_RETURN(SliceBounds b,
                     NormalizeSlice("slice", ctx.op_name, x.shape, ctx.attrs.Ints("begin"), ctx.attrs.Ints("end")));
    std::vector<int64_t> dims;
    for (int a = 0; a < x.shape.num_axes(); ++a) dims.push_back(b.end[a] - b.begin[a]);
    return std::vector<TensorDesc>{{x.dtype, Shape(std::move(dims))}};
  };
  def.sbp = [](const AttrMap& attrs, const std::vector<TensorDesc>& in) {
    return SliceSignatures(in[0].shape, NormalizeSliceOrDie(attrs, in[0].shape));
  };
  def.grad = [](GradContext* g) {
    return ops::SetInputGradFromOp(g, "slice_grad", {{"like_shape", g->input_desc(0).shape.dims()},
                                                     {"begin", g->attrs().Ints("begin")},
                                                     {"end", g->attrs().Ints("end")}});
  };
  def.cpu_kernel = [](const KernelContext& ctx) -> absl::Status {
    const Tensor& x = *ctx.inputs[0];
    Tensor* y = ctx.outputs[0];
    const Shape& logical = ctx.input_shards.empty() ? x.shape() : ctx.input_shards[0].logical_shape;
    const SliceBounds b = NormalizeSliceOrDie(ctx.attrs, logical);
    const std::vector<int64_t> x_off = OffsetOf(ctx.input_shards, 0, x.shape());
    const std::vector<int64_t> y_off = OffsetOf(ctx.output_shards, 0, y->shape());
    std::vector<int64_t> start(x.shape().num_axes());
    for (int a = 0; a < x.shape().num_axes(); ++a) start[a] = y_off[a] + b.begin[a] - x_off[a];
    if (y->elem_count() == 0) return absl::OkStatus();
    const int64_t esize = SizeOf(x.dtype());
    const char* src = static_cast<const char*>(x.raw_data()) + FlatOffset(x.shape(), start) * esize;
    ops::CopyStridedParallel(ctx.intra_op_pool, y->shape().dims(), esize, y->raw_data(), y->shape().Strides(), src,
                             x.shape().Strides());
    return absl::OkStatus();
  };
  return def;
}

OpDef MakeSliceGrad() {
  OpDef def;
  def.name = "slice_grad";
  def.doc = "dx = zeros(like_shape) with dy placed at [begin, end).";
  def.inputs = {"dy"};
  def.outputs = {"dx"};
  def.attrs = {{"like_shape", AttrType::kInts, std::nullopt, "shape of the sliced tensor"},
               {"begin", AttrType::kInts, std::nullopt, "start per axis"},
               {"end", AttrType::kInts, std::nullopt, "end (exclusive) per axis"}};
  def.infer = [](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> {
    const TensorDesc& dy = ctx.inputs[0];
    const Shape like(ctx.attrs.Ints("like_shape"));
    ASSIGN_OR_RETURN(SliceBounds b,
                     NormalizeSlice("slice_grad", ctx.op_name, like, ctx.attrs.Ints("begin"), ctx.attrs.Ints("end")));
    std::vector<int64_t> dims;
    for (int a = 0; a < like.num_axes(); ++a) dims.push_back(b.end[a] - b.begin[a]);
    if (Shape(dims) != dy.shape) {
      return OpError("slice_grad", ctx.op_name, "dy shape ", dy.shape.ToString(), " does not match the slice ",
                     Shape(dims).ToString(), " of like_shape ", like.ToString());
    }
    return std::vector<TensorDesc>{{dy.dtype, like}};
  };
  def.sbp = [](const AttrMap& attrs, const std::vector<TensorDesc>&) {
    const Shape like(attrs.Ints("like_shape"));
    return SliceSignatures(like, NormalizeSliceOrDie(attrs, like));
  };
  def.grad = [](GradContext* g) {
    return ops::SetInputGradFromOp(g, "slice", {{"begin", g->attrs().Ints("begin")}, {"end", g->attrs().Ints("end")}});
  };
  def.cpu_kernel = [](const KernelContext& ctx) -> absl::Status {
    const Tensor& dy = *ctx.inputs[0];
    Tensor* dx = ctx.outputs[0];
    const SliceBounds b = NormalizeSliceOrDie(ctx.attrs, Shape(ctx.attrs.Ints("like_shape")));
    const std::vector<int64_t> dy_off = OffsetOf(ctx.input_shards, 0, dy.shape());
    const std::vector<int64_t> dx_off = OffsetOf(ctx.output_shards, 0, dx->shape());
    std::vector<int64_t> start(dx->shape().num_axes());
    for (int a = 0; a < dx->shape().num_axes(); ++a) start[a] = dy_off[a] + b.begin[a] - dx_off[a];
    std::memset(dx->raw_data(), 0, dx->byte_size());
    if (dy.elem_count() == 0) return absl::OkStatus();
    const int64_t esize = SizeOf(dy.dtype());
    char* dst = static_cast<char*>(dx->raw_data()) + FlatOffset(dx->shape(), start) * esize;
    ops::CopyStridedParallel(ctx.intra_op_pool, dy.shape().dims(), esize, dst, dx->shape().Strides(), dy.raw_data(),
                             dy.shape().Strides());
    return absl::OkStatus();
  };
  return def;
}

// ---- concat / split ----

// Signatures for ops that join or cut along `axis`: S(a) everywhere for a != axis; B; P.
std::vector<SbpSignature> JoinSignatures(int rank, int axis, int num_inputs, int num_outputs) {
  std::vector<SbpSignature> sigs;
  for (int a = 0; a < rank; ++a) {
    if (a == axis) continue;
    sigs.push_back({std::vector<Sbp>(num_inputs, Sbp::Split(a)), std::vector<Sbp>(num_outputs, Sbp::Split(a))});
  }
  for (auto& s : BroadcastAndPartial(num_inputs, num_outputs)) sigs.push_back(std::move(s));
  return sigs;
}

int AxisOrDie(const AttrMap& attrs, int rank) {
  auto a = NormalizeAxis(attrs.Int("axis"), rank);
  CHECK(a.ok()) << a.status();
  return *a;
}

OpDef MakeConcat() {
  OpDef def;
  def.name = "concat";
  def.doc = "Joins x0, x1, ... along `axis` (all other dims equal).";
  def.inputs = {"x"};
  def.variadic_inputs = true;
  def.outputs = {"y"};
  def.attrs = {{"axis", AttrType::kInt, std::nullopt, "axis to join along (negative counts from the end)"}};
  def.infer = [](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> {
    const TensorDesc& x0 = ctx.inputs[0];
    auto axis_or = NormalizeAxis(ctx.attrs.Int("axis"), x0.shape.num_axes());
    if (!axis_or.ok()) {
      return OpError("concat", ctx.op_name, "axis ", ctx.attrs.Int("axis"), " is out of range for input 0 ",
                     x0.ToString());
    }
    const int axis = *axis_or;
    Shape out = x0.shape;
    for (size_t i = 1; i < ctx.inputs.size(); ++i) {
      const TensorDesc& xi = ctx.inputs[i];
      bool ok = xi.dtype == x0.dtype && xi.shape.num_axes() == x0.shape.num_axes();
      for (int a = 0; ok && a < x0.shape.num_axes(); ++a) ok = a == axis || xi.shape[a] == x0.shape[a];
      if (!ok) {
        return OpError("concat", ctx.op_name, "input ", i, " ", xi.ToString(), " does not match input 0 ",
                       x0.ToString(), " (same dtype and all dims equal except axis ", axis, ")");
      }
      out.set_dim(axis, out[axis] + xi.shape[axis]);
    }
    return std::vector<TensorDesc>{{x0.dtype, out}};
  };
  def.sbp = [](const AttrMap& attrs, const std::vector<TensorDesc>& in) {
    const int rank = in[0].shape.num_axes();
    return JoinSignatures(rank, AxisOrDie(attrs, rank), static_cast<int>(in.size()), 1);
  };
  def.grad = [](GradContext* g) -> absl::Status {
    const int axis = AxisOrDie(g->attrs(), g->input_desc(0).shape.num_axes());
    std::vector<int64_t> sizes;
    for (int i = 0; i < g->num_inputs(); ++i) sizes.push_back(g->input_desc(i).shape[axis]);
    ASSIGN_OR_RETURN(std::vector<std::string> dxs,
                     g->Emit("split", {g->output_grad(0)}, {{"axis", int64_t{axis}}, {"sizes", sizes}}));
    for (int i = 0; i < g->num_inputs(); ++i) {
      if (g->needs_input_grad(i)) g->SetInputGrad(i, dxs[i]);
    }
    return absl::OkStatus();
  };
  def.cpu_kernel = [](const KernelContext& ctx) -> absl::Status {
    Tensor* y = ctx.outputs[0];
    const int axis = AxisOrDie(ctx.attrs, y->shape().num_axes());
    const int64_t esize = SizeOf(y->dtype());
    const std::vector<int64_t> y_strides = y->shape().Strides();
    int64_t pos = 0;
    for (const Tensor* x : ctx.inputs) {
      char* dst = static_cast<char*>(y->raw_data()) + pos * y_strides[axis] * esize;
      if (x->elem_count() > 0) {
        ops::CopyStridedParallel(ctx.intra_op_pool, x->shape().dims(), esize, dst, y_strides, x->raw_data(),
                                 x->shape().Strides());
      }
      pos += x->shape()[axis];
    }
    return absl::OkStatus();
  };
  return def;
}

OpDef MakeSplit() {
  OpDef def;
  def.name = "split";
  def.doc = "Cuts x along `axis` into parts of `sizes` (which sum to the dim).";
  def.inputs = {"x"};
  def.outputs = {"y"};
  def.variadic_outputs = true;
  def.attrs = {{"axis", AttrType::kInt, std::nullopt, "axis to cut (negative counts from the end)"},
               {"sizes", AttrType::kInts, std::nullopt, "size of each output along axis"}};
  def.infer = [](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> {
    const TensorDesc& x = ctx.inputs[0];
    auto axis_or = NormalizeAxis(ctx.attrs.Int("axis"), x.shape.num_axes());
    if (!axis_or.ok()) {
      return OpError("split", ctx.op_name, "axis ", ctx.attrs.Int("axis"), " is out of range for input ", x.ToString());
    }
    const std::vector<int64_t>& sizes = ctx.attrs.Ints("sizes");
    int64_t total = 0;
    bool ok = !sizes.empty();
    for (int64_t s : sizes) {
      ok = ok && s >= 0;
      total += s;
    }
    if (!ok || total != x.shape[*axis_or]) {
      return OpError("split", ctx.op_name, "sizes [", absl::StrJoin(sizes, ","), "] must be non-negative and sum to ",
                     x.shape[*axis_or], " (dim ", *axis_or, " of input ", x.shape.ToString(), ")");
    }
    std::vector<TensorDesc> outs;
    for (int64_t s : sizes) {
      Shape part = x.shape;
      part.set_dim(*axis_or, s);
      outs.push_back({x.dtype, part});
    }
    return outs;
  };
  def.sbp = [](const AttrMap& attrs, const std::vector<TensorDesc>& in) {
    const int rank = in[0].shape.num_axes();
    return JoinSignatures(rank, AxisOrDie(attrs, rank), 1, static_cast<int>(attrs.Ints("sizes").size()));
  };
  def.grad = [](GradContext* g) -> absl::Status {
    if (!g->needs_input_grad(0)) return absl::OkStatus();
    std::vector<std::string> dys;
    for (int k = 0; k < g->num_outputs(); ++k) dys.push_back(g->output_grad(k));
    ASSIGN_OR_RETURN(std::string dx, g->EmitOne("concat", dys, {{"axis", g->attrs().Int("axis")}}));
    g->SetInputGrad(0, dx);
    return absl::OkStatus();
  };
  def.cpu_kernel = [](const KernelContext& ctx) -> absl::Status {
    const Tensor& x = *ctx.inputs[0];
    const int axis = AxisOrDie(ctx.attrs, x.shape().num_axes());
    const int64_t esize = SizeOf(x.dtype());
    const std::vector<int64_t> x_strides = x.shape().Strides();
    int64_t pos = 0;
    for (Tensor* y : ctx.outputs) {
      const char* src = static_cast<const char*>(x.raw_data()) + pos * x_strides[axis] * esize;
      if (y->elem_count() > 0) {
        ops::CopyStridedParallel(ctx.intra_op_pool, y->shape().dims(), esize, y->raw_data(), y->shape().Strides(), src,
                                 x_strides);
      }
      pos += y->shape()[axis];
    }
    return absl::OkStatus();
  };
  return def;
}

}  // namespace

absl::Status RegisterShapeOps(OpRegistry* registry) {
  RETURN_IF_ERROR(registry->Register(MakeReshape()));
  RETURN_IF_ERROR(registry->Register(MakeTranspose()));
  RETURN_IF_ERROR(registry->Register(MakeSlice()));
  RETURN_IF_ERROR(registry->Register(MakeSliceGrad()));
  RETURN_IF_ERROR(registry->Register(MakeConcat()));
  RETURN_IF_ERROR(registry->Register(MakeSplit()));
  RETURN_IF_ERROR(registry->Register(MakeIdentity()));
  return absl::OkStatus();
}

}  // namespace oneflow_like
