// CUDA op kernels of the optimizer ops: sgd_update, sgd_plain_update, adam_update and
// step_increment (optimizer_kernels.h). Outputs may alias their in-place inputs
// (OpDef::inplace_pairs). adam_update reads the step counter on the device; a step < 1, an
// error on the CPU, leaves the outputs unwritten here (optimizer_kernels.h).
#include <string>
#include <vector>

#include "oneflow_like/core/cuda/op_kernels_util.h"
#include "oneflow_like/core/cuda/optimizer_kernels.h"

namespace oneflow_like {
namespace cuda {
namespace op_kernels_internal {
namespace {

// Inputs 1..num_same-1 and every output have param's (input 0's) desc; param is float32/64.
absl::Status CheckSameDescs(const std::string& op, const CudaKernelContext& ctx, const std::vector<std::string>& names,
                            int num_same) {
  const Tensor& param = *ctx.inputs[0];
  if (param.dtype() != DataType::kFloat32 && param.dtype() != DataType::kFloat64) {
    return OpError(op, ctx, "param ", param.desc().ToString(), " must be float32 or float64");
  }
  for (int i = 1; i < num_same; ++i) RETURN_IF_ERROR(CheckDesc(op, ctx, names[i], *ctx.inputs[i], param.desc()));
  for (size_t o = 0; o < ctx.outputs.size(); ++o) {
    RETURN_IF_ERROR(CheckDesc(op, ctx, absl::StrCat("output ", o), *ctx.outputs[o], param.desc()));
  }
  return absl::OkStatus();
}

absl::Status CheckStep(const std::string& op, const CudaKernelContext& ctx, const Tensor& step) {
  if ((step.dtype() != DataType::kInt64 && step.dtype() != DataType::kInt32) || step.shape().num_axes() != 0) {
    return OpError(op, ctx, "step must be an int64 or int32 scalar (shape []), got ", step.desc().ToString());
  }
  return absl::OkStatus();
}

absl::Status SgdKernel(const CudaKernelContext& ctx) {
  const std::string op = "sgd_update";
  RETURN_IF_ERROR(CheckArity(op, ctx, 3, 2));
  RETURN_IF_ERROR(CheckSameDescs(op, ctx, {"param", "grad", "momentum_buf"}, 3));
  SgdOptions options;
  options.lr = ctx.attrs.Float("lr");
  options.momentum = ctx.attrs.Float("momentum");
  options.weight_decay = ctx.attrs.Float("weight_decay");
  return DispatchFloat(op, ctx, "param", ctx.inputs[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    return Annotate(op, ctx,
                    SgdUpdate<T>(ctx.inputs[0]->data<T>(), ctx.inputs[1]->data<T>(), ctx.inputs[2]->data<T>(),
                                 ctx.inputs[0]->elem_count(), options, ctx.outputs[0]->data<T>(),
                                 ctx.outputs[1]->data<T>(), ctx.stream));
  });
}

absl::Status SgdPlainKernel(const CudaKernelContext& ctx) {
  const std::string op = "sgd_plain_update";
  RETURN_IF_ERROR(CheckArity(op, ctx, 2, 1));
  RETURN_IF_ERROR(CheckSameDescs(op, ctx, {"param", "grad"}, 2));
  SgdOptions options;
  options.lr = ctx.attrs.Float("lr");
  options.weight_decay = ctx.attrs.Float("weight_decay");
  return DispatchFloat(op, ctx, "param", ctx.inputs[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    return Annotate(op, ctx,
                    SgdPlainUpdate<T>(ctx.inputs[0]->data<T>(), ctx.inputs[1]->data<T>(), ctx.inputs[0]->elem_count(),
                                      options, ctx.outputs[0]->data<T>(), ctx.stream));
  });
}

// Inputs (param, grad, m, v, step) -> (param_out, m_out, v_out).
absl::Status AdamKernel(const CudaKernelContext& ctx) {
  const std::string op = "adam_update";
  RETURN_IF_ERROR(CheckArity(op, ctx, 5, 3));
  RETURN_IF_ERROR(CheckSameDescs(op, ctx, {"param", "grad", "m", "v"}, 4));
  const Tensor& step = *ctx.inputs[4];
  RETURN_IF_ERROR(CheckStep(op, ctx, step));
  AdamOptions options;
  options.lr = ctx.attrs.Float("lr");
  options.beta1 = ctx.attrs.Float("beta1");
  options.beta2 = ctx.attrs.Float("beta2");
  options.epsilon = ctx.attrs.Float("epsilon");
  options.weight_decay = ctx.attrs.Float("weight_decay");
  options.decoupled_weight_decay = ctx.attrs.Bool("decoupled_weight_decay");
  options.bias_correction = ctx.attrs.Bool("bias_correction");
  return DispatchFloat(op, ctx, "param", ctx.inputs[0]->dtype(), [&](auto ftag) {
    using T = decltype(ftag);
    return DispatchIndex(op, ctx, "step", step.dtype(), [&](auto itag) {
      using I = decltype(itag);
      return Annotate(op, ctx,
                      AdamUpdate<T, I>(ctx.inputs[0]->data<T>(), ctx.inputs[1]->data<T>(), ctx.inputs[2]->data<T>(),
                                       ctx.inputs[3]->data<T>(), step.data<I>(), ctx.inputs[0]->elem_count(), options,
                                       ctx.outputs[0]->data<T>(), ctx.outputs[1]->data<T>(),
                                       ctx.outputs[2]->data<T>(), ctx.stream));
    });
  });
}

absl::Status StepIncrementKernel(const CudaKernelContext& ctx) {
  const std::string op = "step_increment";
  RETURN_IF_ERROR(CheckArity(op, ctx, 1, 1));
  const Tensor& step = *ctx.inputs[0];
  RETURN_IF_ERROR(CheckStep(op, ctx, step));
  RETURN_IF_ERROR(CheckDesc(op, ctx, "output step_out", *ctx.outputs[0], step.desc()));
  return DispatchIndex(op, ctx, "step", step.dtype(), [&](auto tag) {
    using I = decltype(tag);
    return Annotate(op, ctx, StepIncrement<I>(step.data<I>(), ctx.outputs[0]->data<I>(), ctx.stream));
  });
}

}  // namespace

absl::Status AddOptimizerKernels(CudaKernelTable* table) {
  RETURN_IF_ERROR(table->Add("sgd_update", SgdKernel));
  RETURN_IF_ERROR(table->Add("sgd_plain_update", SgdPlainKernel));
  RETURN_IF_ERROR(table->Add("adam_update", AdamKernel));
  RETURN_IF_ERROR(table->Add("step_increment", StepIncrementKernel));
  return absl::OkStatus();
}

}  // namespace op_kernels_internal
}  // namespace cuda
}  // namespace oneflow_like
