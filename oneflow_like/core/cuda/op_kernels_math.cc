// CUDA op kernels of matmul, matmul_batch_sum, the element-wise ops (add, sub, mul, div,
// scalar_add, scalar_mul, bias_add), the activations (relu, relu_grad, gelu, gelu_grad) and the
// reductions (reduce_sum, reduce_mean), on the kernels of matmul_kernels.h,
// elementwise_kernels.h, activation_kernels.h and reduce_kernels.h.
#include <string>
#include <vector>

#include "oneflow_like/core/cuda/activation_kernels.h"
#include "oneflow_like/core/cuda/elementwise_kernels.h"
#include "oneflow_like/core/cuda/matmul_kernels.h"
#include "oneflow_like/core/cuda/op_kernels_util.h"
#include "oneflow_like/core/cuda/reduce_kernels.h"

namespace oneflow_like {
namespace cuda {
namespace op_kernels_internal {
namespace {

// ---- matmul, matmul_batch_sum ----

CudaKernelFn MatmulKernel(bool batch_sum) {
  const std::string op = batch_sum ? "matmul_batch_sum" : "matmul";
  return [op, batch_sum](const CudaKernelContext& ctx) -> absl::Status {
    RETURN_IF_ERROR(CheckArity(op, ctx, 2, 1));
    const Tensor& a = *ctx.inputs[0];
    const Tensor& b = *ctx.inputs[1];
    Tensor& y = *ctx.outputs[0];
    if (b.dtype() != a.dtype()) {
      return OpError(op, ctx, "dtypes differ: a ", a.desc().ToString(), " and b ", b.desc().ToString());
    }
    const bool ta = ctx.attrs.Bool("transpose_a"), tb = ctx.attrs.Bool("transpose_b");
    absl::StatusOr<MatmulShape> shape = MatmulShapeOf(a.shape().dims(), b.shape().dims(), ta, tb, batch_sum);
    if (!shape.ok()) return Annotate(op, ctx, shape.status());
    std::vector<int64_t> y_dims;
    if (!batch_sum) y_dims.assign(a.shape().dims().begin(), a.shape().dims().end() - 2);
    y_dims.push_back(shape->m);
    y_dims.push_back(shape->n);
    RETURN_IF_ERROR(CheckDesc(op, ctx, "output y", y, TensorDesc{a.dtype(), Shape(y_dims)}));
    const double alpha = ctx.attrs.Float("alpha");
    return DispatchFloat(op, ctx, "a", a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      return Annotate(op, ctx,
                      batch_sum ? MatmulBatchSum<T>(ctx.cublas, *shape, alpha, a.data<T>(), b.data<T>(), y.data<T>(),
                                                    ctx.stream, MatmulOptions{ctx.allow_tf32})
                                : Matmul<T>(ctx.cublas, *shape, alpha, a.data<T>(), b.data<T>(), y.data<T>(),
                                            ctx.stream, MatmulOptions{ctx.allow_tf32}));
    });
  };
}

// ---- element-wise ----

CudaKernelFn BinaryKernel(const std::string& op, BinaryOp binary) {
  return [op, binary](const CudaKernelContext& ctx) -> absl::Status {
    RETURN_IF_ERROR(CheckArity(op, ctx, 2, 1));
    const Tensor& a = *ctx.inputs[0];
    const Tensor& b = *ctx.inputs[1];
    Tensor& y = *ctx.outputs[0];
    if (b.dtype() != a.dtype()) {
      return OpError(op, ctx, "dtypes differ: a ", a.desc().ToString(), " and b ", b.desc().ToString());
    }
    absl::StatusOr<std::vector<int64_t>> dims = BroadcastDims(a.shape().dims(), b.shape().dims());
    if (!dims.ok()) return Annotate(op, ctx, dims.status());
    RETURN_IF_ERROR(CheckDesc(op, ctx, "output y", y, TensorDesc{a.dtype(), Shape(*dims)}));
    return DispatchFloat(op, ctx, "a", a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      return Annotate(op, ctx,
                      BroadcastBinary<T>(binary, a.data<T>(), a.shape().dims(), b.data<T>(), b.shape().dims(),
                                         y.data<T>(), ctx.stream));
    });
  };
}

CudaKernelFn ScalarKernel(const std::string& op, ScalarOp scalar) {
  return [op, scalar](const CudaKernelContext& ctx) -> absl::Status {
    RETURN_IF_ERROR(CheckArity(op, ctx, 1, 1));
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    RETURN_IF_ERROR(CheckDesc(op, ctx, "output y", y, x.desc()));
    const double value = ctx.attrs.Float("value");
    return DispatchFloat(op, ctx, "x", x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      return Annotate(op, ctx, ScalarApply<T>(scalar, x.data<T>(), value, y.data<T>(), x.elem_count(), ctx.stream));
    });
  };
}

absl::Status BiasAddKernel(const CudaKernelContext& ctx) {
  const std::string op = "bias_add";
  RETURN_IF_ERROR(CheckArity(op, ctx, 2, 1));
  const Tensor& x = *ctx.inputs[0];
  const Tensor& b = *ctx.inputs[1];
  Tensor& y = *ctx.outputs[0];
  const int64_t axis_attr = ctx.attrs.Int("axis");
  absl::StatusOr<int> axis = NormalizeAxis(axis_attr, x.shape().num_axes());
  if (!axis.ok()) return OpError(op, ctx, "axis ", axis_attr, " is out of range for x ", x.desc().ToString());
  const TensorDesc b_want{x.dtype(), Shape({x.shape().dim(*axis)})};
  RETURN_IF_ERROR(CheckDesc(op, ctx, absl::StrCat("b (for axis ", *axis, " of x ", x.desc().ToString(), ")"), b,
                            b_want));
  RETURN_IF_ERROR(CheckDesc(op, ctx, "output y", y, x.desc()));
  return DispatchFloat(op, ctx, "x", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return Annotate(op, ctx, BiasAdd<T>(x.data<T>(), x.shape().dims(), *axis, b.data<T>(), y.data<T>(), ctx.stream));
  });
}

// ---- activations ----

absl::StatusOr<GeluApproximation> ApproximationOf(const std::string& op, const CudaKernelContext& ctx) {
  const std::string& a = ctx.attrs.String("approximate");
  if (a == "tanh") return GeluApproximation::kTanh;
  if (a == "none") return GeluApproximation::kExact;
  return OpError(op, ctx, "approximate must be \"tanh\" or \"none\" (exact erf form), got \"", a, "\"");
}

// relu, gelu: y = f(x).
CudaKernelFn UnaryKernel(const std::string& op) {
  return [op](const CudaKernelContext& ctx) -> absl::Status {
    RETURN_IF_ERROR(CheckArity(op, ctx, 1, 1));
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    RETURN_IF_ERROR(CheckDesc(op, ctx, "output y", y, x.desc()));
    GeluApproximation approximation = GeluApproximation::kTanh;
    if (op == "gelu") {
      ASSIGN_OR_RETURN(approximation, ApproximationOf(op, ctx));
    }
    return DispatchFloat(op, ctx, "x", x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const int64_t n = x.elem_count();
      return Annotate(op, ctx,
                      op == "gelu" ? Gelu<T>(approximation, x.data<T>(), y.data<T>(), n, ctx.stream)
                                   : Relu<T>(x.data<T>(), y.data<T>(), n, ctx.stream));
    });
  };
}

// relu_grad(dy, y), gelu_grad(dy, x): dx of dy's desc.
CudaKernelFn UnaryGradKernel(const std::string& op) {
  return [op](const CudaKernelContext& ctx) -> absl::Status {
    RETURN_IF_ERROR(CheckArity(op, ctx, 2, 1));
    const Tensor& dy = *ctx.inputs[0];
    const Tensor& other = *ctx.inputs[1];
    Tensor& dx = *ctx.outputs[0];
    RETURN_IF_ERROR(CheckDesc(op, ctx, op == "gelu_grad" ? "x" : "y", other, dy.desc()));
    RETURN_IF_ERROR(CheckDesc(op, ctx, "output dx", dx, dy.desc()));
    GeluApproximation approximation = GeluApproximation::kTanh;
    if (op == "gelu_grad") {
      ASSIGN_OR_RETURN(approximation, ApproximationOf(op, ctx));
    }
    return DispatchFloat(op, ctx, "dy", dy.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const int64_t n = dy.elem_count();
      return Annotate(op, ctx,
                      op == "gelu_grad"
                          ? GeluGrad<T>(approximation, dy.data<T>(), other.data<T>(), dx.data<T>(), n, ctx.stream)
                          : ReluGrad<T>(dy.data<T>(), other.data<T>(), dx.data<T>(), n, ctx.stream));
    });
  };
}

// ---- reductions ----

CudaKernelFn ReduceKernel(const std::string& op, bool mean) {
  return [op, mean](const CudaKernelContext& ctx) -> absl::Status {
    RETURN_IF_ERROR(CheckArity(op, ctx, 1, 1));
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    const int rank = x.shape().num_axes();
    const std::vector<int64_t>& axes = ctx.attrs.Ints("axes");
    std::vector<bool> reduced(rank, axes.empty());
    for (int64_t axis : axes) {
      if (axis < -rank || axis >= rank) {
        return OpError(op, ctx, "axis ", axis, " out of range for input shape ", x.shape().ToString(), " (valid: [",
                       -rank, ", ", rank, "))");
      }
      const int a = static_cast<int>(axis < 0 ? axis + rank : axis);
      if (reduced[a]) return OpError(op, ctx, "axis ", axis, " listed twice in axes");
      reduced[a] = true;
    }
    const bool keepdims = ctx.attrs.Bool("keepdims");
    std::vector<int64_t> y_dims;
    for (int a = 0; a < rank; ++a) {
      if (!reduced[a]) {
        y_dims.push_back(x.shape().dim(a));
      } else if (keepdims) {
        y_dims.push_back(1);
      }
    }
    RETURN_IF_ERROR(CheckDesc(op, ctx, "output y", y, TensorDesc{x.dtype(), Shape(y_dims)}));
    if (!mean && (x.dtype() == DataType::kInt32 || x.dtype() == DataType::kInt64)) {
      if (x.dtype() == DataType::kInt32) {
        return Annotate(op, ctx, ReduceSum<int32_t>(x.data<int32_t>(), x.shape().dims(), reduced, y.data<int32_t>(),
                                                    ctx.stream));
      }
      return Annotate(op, ctx, ReduceSum<int64_t>(x.data<int64_t>(), x.shape().dims(), reduced, y.data<int64_t>(),
                                                  ctx.stream));
    }
    // reduce_mean divides by the LOGICAL reduced size (x:S(reduced axis) -> y:P sums to the mean).
    const Shape& logical = ctx.input_shards.empty() ? x.shape() : ctx.input_shards[0].logical_shape;
    if (logical.num_axes() != rank) {
      return OpError(op, ctx, "input shard's logical shape ", logical.ToString(), " does not match x ",
                     x.desc().ToString());
    }
    int64_t logical_count = 1;
    for (int a = 0; a < rank; ++a) {
      if (reduced[a]) logical_count *= logical.dim(a);
    }
    return DispatchFloat(op, ctx, "x", x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      return Annotate(op, ctx,
                      mean ? ReduceMean<T>(x.data<T>(), x.shape().dims(), reduced, logical_count, y.data<T>(),
                                           ctx.stream)
                           : ReduceSum<T>(x.data<T>(), x.shape().dims(), reduced, y.data<T>(), ctx.stream));
    });
  };
}

}  // namespace

absl::Status AddMathKernels(CudaKernelTable* table) {
  RETURN_IF_ERROR(table->Add("matmul", MatmulKernel(/*batch_sum=*/false)));
  RETURN_IF_ERROR(table->Add("matmul_batch_sum", MatmulKernel(/*batch_sum=*/true)));
  RETURN_IF_ERROR(table->Add("add", BinaryKernel("add", BinaryOp::kAdd)));
  RETURN_IF_ERROR(table->Add("sub", BinaryKernel("sub", BinaryOp::kSub)));
  RETURN_IF_ERROR(table->Add("mul", BinaryKernel("mul", BinaryOp::kMul)));
  RETURN_IF_ERROR(table->Add("div", BinaryKernel("div", BinaryOp::kDiv)));
  RETURN_IF_ERROR(table->Add("scalar_add", ScalarKernel("scalar_add", ScalarOp::kAdd)));
  RETURN_IF_ERROR(table->Add("scalar_mul", ScalarKernel("scalar_mul", ScalarOp::kMul)));
  RETURN_IF_ERROR(table->Add("bias_add", BiasAddKernel));
  RETURN_IF_ERROR(table->Add("relu", UnaryKernel("relu")));
  RETURN_IF_ERROR(table->Add("gelu", UnaryKernel("gelu")));
  RETURN_IF_ERROR(table->Add("relu_grad", UnaryGradKernel("relu_grad")));
  RETURN_IF_ERROR(table->Add("gelu_grad", UnaryGradKernel("gelu_grad")));
  RETURN_IF_ERROR(table->Add("reduce_sum", ReduceKernel("reduce_sum", /*mean=*/false)));
  RETURN_IF_ERROR(table->Add("reduce_mean", ReduceKernel("reduce_mean", /*mean=*/true)));
  return absl::OkStatus();
}

}  // namespace op_kernels_internal
}  // namespace cuda
}  // namespace oneflow_like
