// CUDA op kernels of the ops that move or generate data: reshape, identity, transpose, slice,
// slice_grad, concat, split, broadcast_to (copy_kernels.h: raw bytes of any dtype), cast, fill
// (misc_kernels.h), random_uniform, random_normal, dropout, dropout_grad (random_kernels.h: each
// shard generates its part of the logical tensor, from the ShardInfo as on the CPU).
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "oneflow_like/core/cuda/copy_kernels.h"
#include "oneflow_like/core/cuda/misc_kernels.h"
#include "oneflow_like/core/cuda/op_kernels_util.h"
#include "oneflow_like/core/cuda/random_kernels.h"

namespace oneflow_like {
namespace cuda {
namespace op_kernels_internal {
namespace {

// ---- reshape, identity: a byte copy ----

CudaKernelFn CopyKernel(const std::string& op) {
  return [op](const CudaKernelContext& ctx) -> absl::Status {
    RETURN_IF_ERROR(CheckArity(op, ctx, 1, 1));
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    if (y.dtype() != x.dtype() || y.elem_count() != x.elem_count()) {
      return OpError(op, ctx, "output ", y.desc().ToString(), " does not hold the elements of x ", x.desc().ToString());
    }
    return Annotate(op, ctx, CopyBytes(y.raw_data(), x.raw_data(), x.byte_size(), ctx.stream));
  };
}

// ---- transpose ----

absl::Status TransposeKernel(const CudaKernelContext& ctx) {
  const std::string op = "transpose";
  RETURN_IF_ERROR(CheckArity(op, ctx, 1, 1));
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = *ctx.outputs[0];
  const std::vector<int64_t>& perm = ctx.attrs.Ints("perm");
  const int rank = x.shape().num_axes();
  std::vector<bool> seen(rank, false);
  std::vector<int64_t> y_dims;
  for (int64_t p : perm) {
    if (static_cast<int>(perm.size()) != rank || p < 0 || p >= rank || seen[p]) {
      return OpError(op, ctx, "perm [", absl::StrJoin(perm, ","), "] is not a permutation of the axes of x ",
                     x.desc().ToString());
    }
    seen[p] = true;
    y_dims.push_back(x.shape().dim(static_cast<int>(p)));
  }
  if (static_cast<int>(perm.size()) != rank) {
    return OpError(op, ctx, "perm [", absl::StrJoin(perm, ","), "] is not a permutation of the axes of x ",
                   x.desc().ToString());
  }
  RETURN_IF_ERROR(CheckDesc(op, ctx, "output y", y, TensorDesc{x.dtype(), Shape(y_dims)}));
  return Annotate(op, ctx,
                  Transpose(x.raw_data(), x.shape().dims(), perm, SizeOf(x.dtype()), y.raw_data(), ctx.stream));
}

// ---- slice, slice_grad ----

// begin / end of every axis of `shape`, negative values counting from the end (as the CPU op).
absl::Status NormalizeSlice(const std::string& op, const CudaKernelContext& ctx, const Shape& shape,
                            std::vector<int64_t>* begin, std::vector<int64_t>* end) {
  const std::vector<int64_t>& b_attr = ctx.attrs.Ints("begin");
  const std::vector<int64_t>& e_attr = ctx.attrs.Ints("end");
  const int rank = shape.num_axes();
  if (static_cast<int>(b_attr.size()) != rank || static_cast<int>(e_attr.size()) != rank) {
    return OpError(op, ctx, "begin [", absl::StrJoin(b_attr, ","), "] and end [", absl::StrJoin(e_attr, ","),
                   "] need one entry per axis of ", shape.ToString());
  }
  *begin = b_attr;
  *end = e_attr;
  for (int a = 0; a < rank; ++a) {
    if ((*begin)[a] < 0) (*begin)[a] += shape[a];
    if ((*end)[a] < 0) (*end)[a] += shape[a];
    if ((*begin)[a] < 0 || (*begin)[a] > (*end)[a] || (*end)[a] > shape[a]) {
      return OpError(op, ctx, "slice [", b_attr[a], ", ", e_attr[a], ") of axis ", a, " is out of range for shape ",
                     shape.ToString(), " (need 0 <= begin <= end <= dim; negative values count from the end)");
    }
  }
  return absl::OkStatus();
}

// Where the physical `inner` tensor starts inside the physical `outer` one: per axis
// inner_offset + begin - outer_offset (the CPU kernels' rule; offsets from the ShardInfos).
std::vector<int64_t> StartOf(const std::vector<int64_t>& inner_offset, const std::vector<int64_t>& begin,
                             const std::vector<int64_t>& outer_offset) {
  std::vector<int64_t> start(begin.size());
  for (size_t a = 0; a < begin.size(); ++a) start[a] = inner_offset[a] + begin[a] - outer_offset[a];
  return start;
}

absl::Status SliceKernel(const CudaKernelContext& ctx) {
  const std::string op = "slice";
  RETURN_IF_ERROR(CheckArity(op, ctx, 1, 1));
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = *ctx.outputs[0];
  const Shape& logical = ctx.input_shards.empty() ? x.shape() : ctx.input_shards[0].logical_shape;
  std::vector<int64_t> begin, end;
  RETURN_IF_ERROR(NormalizeSlice(op, ctx, logical, &begin, &end));
  if (y.dtype() != x.dtype() || y.shape().num_axes() != x.shape().num_axes()) {
    return OpError(op, ctx, "output ", y.desc().ToString(), " does not match x ", x.desc().ToString());
  }
  const std::vector<int64_t> start =
      StartOf(OffsetOf(ctx.output_shards, 0, y.shape()), begin, OffsetOf(ctx.input_shards, 0, x.shape()));
  return Annotate(op, ctx,
                  Slice(x.raw_data(), x.shape().dims(), start, y.shape().dims(), SizeOf(x.dtype()), y.raw_data(),
                        ctx.stream));
}

absl::Status SliceGradKernel(const CudaKernelContext& ctx) {
  const std::string op = "slice_grad";
  RETURN_IF_ERROR(CheckArity(op, ctx, 1, 1));
  const Tensor& dy = *ctx.inputs[0];
  Tensor& dx = *ctx.outputs[0];
  const Shape like(ctx.attrs.Ints("like_shape"));
  std::vector<int64_t> begin, end;
  RETURN_IF_ERROR(NormalizeSlice(op, ctx, like, &begin, &end));
  if (dx.dtype() != dy.dtype() || dx.shape().num_axes() != like.num_axes() ||
      dy.shape().num_axes() != like.num_axes()) {
    return OpError(op, ctx, "dy ", dy.desc().ToString(), " and output ", dx.desc().ToString(),
                   " do not match like_shape ", like.ToString());
  }
  const std::vector<int64_t> start =
      StartOf(OffsetOf(ctx.input_shards, 0, dy.shape()), begin, OffsetOf(ctx.output_shards, 0, dx.shape()));
  return Annotate(op, ctx,
                  SliceGrad(dy.raw_data(), dy.shape().dims(), start, dx.shape().dims(), SizeOf(dy.dtype()),
                            dx.raw_data(), ctx.stream));
}

// ---- concat, split ----

absl::StatusOr<int> AxisOf(const std::string& op, const CudaKernelContext& ctx, const Tensor& t,
                           const std::string& what) {
  const int64_t axis = ctx.attrs.Int("axis");
  absl::StatusOr<int> a = NormalizeAxis(axis, t.shape().num_axes());
  if (!a.ok()) return OpError(op, ctx, "axis ", axis, " is out of range for ", what, " ", t.desc().ToString());
  return *a;
}

absl::Status ConcatKernel(const CudaKernelContext& ctx) {
  const std::string op = "concat";
  RETURN_IF_ERROR(CheckArity(op, ctx, 1, 1, /*variadic_inputs=*/true));
  Tensor& y = *ctx.outputs[0];
  ASSIGN_OR_RETURN(const int axis, AxisOf(op, ctx, y, "output"));
  std::vector<const void*> inputs;
  std::vector<std::vector<int64_t>> dims;
  std::vector<int64_t> y_dims = y.shape().dims();
  y_dims[axis] = 0;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const Tensor& x = *ctx.inputs[i];
    if (x.dtype() != y.dtype() || x.shape().num_axes() != y.shape().num_axes()) {
      return OpError(op, ctx, "input ", i, " ", x.desc().ToString(), " does not match output ", y.desc().ToString());
    }
    inputs.push_back(x.raw_data());
    dims.push_back(x.shape().dims());
    y_dims[axis] += x.shape().dim(axis);
  }
  RETURN_IF_ERROR(CheckDesc(op, ctx, "output y", y, TensorDesc{y.dtype(), Shape(y_dims)}));
  return Annotate(op, ctx, Concat(inputs, dims, axis, SizeOf(y.dtype()), y.raw_data(), ctx.stream));
}

absl::Status SplitKernel(const CudaKernelContext& ctx) {
  const std::string op = "split";
  RETURN_IF_ERROR(CheckArity(op, ctx, 1, 1, /*variadic_inputs=*/false, /*variadic_outputs=*/true));
  const Tensor& x = *ctx.inputs[0];
  ASSIGN_OR_RETURN(const int axis, AxisOf(op, ctx, x, "input"));
  std::vector<void*> outputs;
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    Tensor& y = *ctx.outputs[i];
    std::vector<int64_t> want = x.shape().dims();
    want[axis] = y.shape().num_axes() == x.shape().num_axes() ? y.shape().dim(axis) : -1;
    if (want[axis] < 0 || y.desc() != TensorDesc{x.dtype(), Shape(want)}) {
      return OpError(op, ctx, "output ", i, " ", y.desc().ToString(), " is not a part of x ", x.desc().ToString(),
                     " along axis ", axis);
    }
    outputs.push_back(y.raw_data());
    sizes.push_back(want[axis]);
  }
  return Annotate(op, ctx, Split(x.raw_data(), x.shape().dims(), axis, outputs, sizes, SizeOf(x.dtype()), ctx.stream));
}

// ---- broadcast_to ----

absl::Status BroadcastToKernel(const CudaKernelContext& ctx) {
  const std::string op = "broadcast_to";
  RETURN_IF_ERROR(CheckArity(op, ctx, 1, 1));
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = *ctx.outputs[0];
  if (y.dtype() != x.dtype()) {
    return OpError(op, ctx, "output ", y.desc().ToString(), " does not match x ", x.desc().ToString());
  }
  // Physical shapes: a shard's dim of 1 repeats like a broadcast axis, as on the CPU.
  return Annotate(op, ctx,
                  BroadcastTo(x.raw_data(), x.shape().dims(), y.shape().dims(), SizeOf(x.dtype()), y.raw_data(),
                              ctx.stream));
}

// ---- cast, fill ----

absl::Status CastKernel(const CudaKernelContext& ctx) {
  const std::string op = "cast";
  RETURN_IF_ERROR(CheckArity(op, ctx, 1, 1));
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = *ctx.outputs[0];
  const DataType to = ctx.attrs.Dtype("dtype");
  RETURN_IF_ERROR(CheckDesc(op, ctx, "output y", y, TensorDesc{to, x.shape()}));
  return Annotate(op, ctx, Cast(x.dtype(), x.raw_data(), to, y.raw_data(), x.elem_count(), ctx.stream));
}

absl::Status FillKernel(const CudaKernelContext& ctx) {
  const std::string op = "fill";
  RETURN_IF_ERROR(CheckArity(op, ctx, 0, 1));
  Tensor& y = *ctx.outputs[0];
  if (y.dtype() != ctx.attrs.Dtype("dtype")) {
    return OpError(op, ctx, "output ", y.desc().ToString(), " is not of dtype ",
                   DataTypeName(ctx.attrs.Dtype("dtype")));
  }
  return Annotate(op, ctx, Fill(y.dtype(), ctx.attrs.Float("value"), y.raw_data(), y.elem_count(), ctx.stream));
}

// ---- random_uniform, random_normal, dropout, dropout_grad ----

CudaKernelFn RandomKernel(bool normal) {
  const std::string op = normal ? "random_normal" : "random_uniform";
  return [op, normal](const CudaKernelContext& ctx) -> absl::Status {
    RETURN_IF_ERROR(CheckArity(op, ctx, 0, 1));
    Tensor& y = *ctx.outputs[0];
    if (y.dtype() != ctx.attrs.Dtype("dtype")) {
      return OpError(op, ctx, "output ", y.desc().ToString(), " is not of dtype ",
                     DataTypeName(ctx.attrs.Dtype("dtype")));
    }
    const uint64_t seed = static_cast<uint64_t>(ctx.attrs.Int("seed"));
    // The output shard's place in the logical tensor: each shard makes its part of it.
    const ShardPosition position = PositionOf(ctx.output_shards, 0, y.shape());
    if (normal) {
      const double mean = ctx.attrs.Float("mean"), stddev = ctx.attrs.Float("std");
      if (!(stddev >= 0)) return OpError(op, ctx, "std must be >= 0, got ", stddev);
      return Annotate(op, ctx, RandomNormal(y.dtype(), position, seed, mean, stddev, y.raw_data(), ctx.stream));
    }
    const double low = ctx.attrs.Float("low"), high = ctx.attrs.Float("high");
    if (!(low <= high)) return OpError(op, ctx, "low must be <= high, got low ", low, " and high ", high);
    return Annotate(op, ctx, RandomUniform(y.dtype(), position, seed, low, high, y.raw_data(), ctx.stream));
  };
}

CudaKernelFn DropoutKernel(const std::string& op) {
  return [op](const CudaKernelContext& ctx) -> absl::Status {
    RETURN_IF_ERROR(CheckArity(op, ctx, 1, 1));
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    RETURN_IF_ERROR(CheckDesc(op, ctx, "output", y, x.desc()));
    const double p = ctx.attrs.Float("p");
    if (!(p >= 0.0 && p < 1.0)) {
      return OpError(op, ctx, "p = ", p, " is out of range [0, 1) for input ", x.desc().ToString());
    }
    const uint64_t seed = static_cast<uint64_t>(ctx.attrs.Int("seed"));
    // The mask of logical element L: the INPUT shard's position, as the CPU kernel.
    const ShardPosition position = PositionOf(ctx.input_shards, 0, x.shape());
    return DispatchFloat(op, ctx, "input", x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      return Annotate(op, ctx, Dropout<T>(x.data<T>(), position, p, seed, y.data<T>(), ctx.stream));
    });
  };
}

}  // namespace

absl::Status AddDataKernels(CudaKernelTable* table) {
  RETURN_IF_ERROR(table->Add("reshape", CopyKernel("reshape")));
  RETURN_IF_ERROR(table->Add("identity", CopyKernel("identity")));
  RETURN_IF_ERROR(table->Add("transpose", TransposeKernel));
  RETURN_IF_ERROR(table->Add("slice", SliceKernel));
  RETURN_IF_ERROR(table->Add("slice_grad", SliceGradKernel));
  RETURN_IF_ERROR(table->Add("concat", ConcatKernel));
  RETURN_IF_ERROR(table->Add("split", SplitKernel));
  RETURN_IF_ERROR(table->Add("broadcast_to", BroadcastToKernel));
  RETURN_IF_ERROR(table->Add("cast", CastKernel));
  RETURN_IF_ERROR(table->Add("fill", FillKernel));
  RETURN_IF_ERROR(table->Add("random_uniform", RandomKernel(/*normal=*/false)));
  RETURN_IF_ERROR(table->Add("random_normal", RandomKernel(/*normal=*/true)));
  RETURN_IF_ERROR(table->Add("dropout", DropoutKernel("dropout")));
  RETURN_IF_ERROR(table->Add("dropout_grad", DropoutKernel("dropout_grad")));
  return absl::OkStatus();
}

}  // namespace op_kernels_internal
}  // namespace cuda
}  // namespace oneflow_like
