// Optimizer op family: sgd_update, adam_update (PyTorch semantics) and step_increment. Both are element-wise
// over the parameter, may update their state in place (OpDef::inplace_pairs: the outputs may
// alias param and the state inputs; kernels read every input element before writing it), and
// are excluded from autograd (is_optimizer, no grad rule).
//
//   sgd_update:  buf = momentum * buf + (grad + wd * param);  param -= lr * buf
//                (momentum 0 is the plain step param -= lr * (grad + wd * param)).
//   adam_update: AdamW (decoupled_weight_decay): param *= 1 - lr * wd; else grad += wd * param;
//                m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//                mhat = m / (1 - b1^t), vhat = v / (1 - b2^t) (if bias_correction, else m, v);
//                param -= lr * mhat / (sqrt(vhat) + eps), with t the int64 scalar input `step`.
//
//   step_increment: step_out = step + 1 (an int scalar step counter; the optimizer pass keeps
//                one per parameter placement so that adam_update sees t = 1, 2, ...).
//
// SBP (1-D): param, grad and every state split on the same axis, S(a) -> S(a); or all B.
// `step` is always B.
#include <cmath>

#include "oneflow_like/core/ops/builtin_ops.h"
#include "oneflow_like/core/ops/op_util.h"

namespace oneflow_like {
namespace {

using ops::OpError;

// Checks that inputs [0, num_tensors) share one float desc (param's).
absl::Status CheckSameDesc(const std::string& op, const InferContext& ctx, const std::vector<std::string>& names,
                           int num_tensors) {
  const TensorDesc& param = ctx.inputs[0];
  if (param.dtype != DataType::kFloat32 && param.dtype != DataType::kFloat64) {
    return OpError(op, ctx.op_name, "param ", param.ToString(), " must be float32 or float64");
  }
  for (int i = 1; i < num_tensors; ++i) {
    if (ctx.inputs[i] != param) {
      return OpError(op, ctx.op_name, names[i], " ", ctx.inputs[i].ToString(), " must match param ", param.ToString());
    }
  }
  return absl::OkStatus();
}

// All `num_tensors` tensors S(a) together (plus trailing B inputs such as `step`), or all B.
std::vector<SbpSignature> SameSplitSignatures(int rank, int num_tensors, int num_broadcast_inputs, int num_outputs) {
  std::vector<SbpSignature> sigs;
  for (int a : ops::SplitAxes(rank)) {
    SbpSignature s{std::vector<Sbp>(num_tensors, Sbp::Split(a)), std::vector<Sbp>(num_outputs, Sbp::Split(a))};
    for (int i = 0; i < num_broadcast_inputs; ++i) s.inputs.push_back(Sbp::Broadcast());
    sigs.push_back(std::move(s));
  }
  sigs.push_back({std::vector<Sbp>(num_tensors + num_broadcast_inputs, Sbp::Broadcast()),
                  std::vector<Sbp>(num_outputs, Sbp::Broadcast())});
  return sigs;
}

OpDef MakeSgd() {
  OpDef def;
  def.name = "sgd_update";
  def.doc = "SGD with momentum and L2 weight decay (PyTorch torch.optim.SGD, dampening 0).";
  def.inputs = {"param", "grad", "momentum_buf"};
  def.outputs = {"param_out", "momentum_buf_out"};
  def.inplace_pairs = {{0, 0}, {1, 2}};
  def.is_optimizer = true;
  def.attrs = {{"lr", AttrType::kFloat, std::nullopt, "learning rate"},
               {"momentum", AttrType::kFloat, AttrValue(0.0), "momentum factor"},
               {"weight_decay", AttrType::kFloat, AttrValue(0.0), "L2 penalty added to the gradient"}};
  def.infer = [](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> {
    RETURN_IF_ERROR(CheckSameDesc("sgd_update", ctx, {"param", "grad", "momentum_buf"}, 3));
    return std::vector<TensorDesc>{ctx.inputs[0], ctx.inputs[0]};
  };
  def.sbp = [](const AttrMap&, const std::vector<TensorDesc>& in) {
    return SameSplitSignatures(in[0].shape.num_axes(), 3, 0, 2);
  };
  def.cpu_kernel = [](const KernelContext& ctx) -> absl::Status {
    return ops::DispatchFloat(ctx.inputs[0]->dtype(), ctx.op_name, [&](auto t) {
      using T = decltype(t);
      const T* param = ctx.inputs[0]->data<T>();
      const T* grad = ctx.inputs[1]->data<T>();
      const T* buf = ctx.inputs[2]->data<T>();
      T* param_out = ctx.outputs[0]->data<T>();
      T* buf_out = ctx.outputs[1]->data<T>();
      const T lr = static_cast<T>(ctx.attrs.Float("lr"));
      const T momentum = static_cast<T>(ctx.attrs.Float("momentum"));
      const T wd = static_cast<T>(ctx.attrs.Float("weight_decay"));
      const int64_t n = ctx.inputs[0]->elem_count();
      for (int64_t i = 0; i < n; ++i) {
        const T p = param[i];
        const T b = momentum * buf[i] + (grad[i] + wd * p);
        buf_out[i] = b;
        param_out[i] = p - lr * b;
      }
      return absl::OkStatus();
    });
  };
  return def;
}

OpDef MakeAdam() {
  OpDef def;
  def.name = "adam_update";
  def.doc = "Adam / AdamW step (PyTorch torch.optim.Adam / AdamW).";
  def.inputs = {"param", "grad", "m", "v", "step"};
  def.outputs = {"param_out", "m_out", "v_out"};
  def.inplace_pairs = {{0, 0}, {1, 2}, {2, 3}};
  def.is_optimizer = true;
  def.attrs = {{"lr", AttrType::kFloat, std::nullopt, "learning rate"},
               {"beta1", AttrType::kFloat, AttrValue(0.9), "first-moment decay"},
               {"beta2", AttrType::kFloat, AttrValue(0.999), "second-moment decay"},
               {"epsilon", AttrType::kFloat, AttrValue(1e-8), "added to sqrt(vhat)"},
               {"weight_decay", AttrType::kFloat, AttrValue(0.0), "decay factor"},
               {"decoupled_weight_decay", AttrType::kBool, AttrValue(true), "true: AdamW; false: L2 into grad"},
               {"bias_correction", AttrType::kBool, AttrValue(true), "divide m, v by 1 - beta^t"}};
  def.infer = [](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> {
    RETURN_IF_ERROR(CheckSameDesc("adam_update", ctx, {"param", "grad", "m", "v"}, 4));
    const TensorDesc& step = ctx.inputs[4];
    if ((step.dtype != DataType::kInt64 && step.dtype != DataType::kInt32) || step.shape.num_axes() != 0) {
      return OpError("adam_update", ctx.op_name, "step must be an int64 scalar (shape []), got ", step.ToString());
    }
    return std::vector<TensorDesc>{ctx.inputs[0], ctx.inputs[0], ctx.inputs[0]};
  };
  def.sbp = [](const AttrMap&, const std::vector<TensorDesc>& in) {
    return SameSplitSignatures(in[0].shape.num_axes(), 4, 1, 3);
  };
  def.cpu_kernel = [](const KernelContext& ctx) -> absl::Status {
    const Tensor& step_tensor = *ctx.inputs[4];
    const int64_t step = step_tensor.dtype() == DataType::kInt64 ? step_tensor.data<int64_t>()[0]
                                                                 : step_tensor.data<int32_t>()[0];
    if (step < 1) {
      return OpError("adam_update", ctx.op_name, "step = ", step, " must be >= 1 (1-based)");
    }
    const double lr = ctx.attrs.Float("lr"), beta1 = ctx.attrs.Float("beta1"), beta2 = ctx.attrs.Float("beta2");
    const double wd = ctx.attrs.Float("weight_decay");
    const bool decoupled = ctx.attrs.Bool("decoupled_weight_decay");
    const bool bias_correction = ctx.attrs.Bool("bias_correction");
    const double m_scale = bias_correction ? 1.0 / (1.0 - std::pow(beta1, static_cast<double>(step))) : 1.0;
    const double v_scale = bias_correction ? 1.0 / (1.0 - std::pow(beta2, static_cast<double>(step))) : 1.0;
    return ops::DispatchFloat(ctx.inputs[0]->dtype(), ctx.op_name, [&](auto t) {
      using T = decltype(t);
      const T* param = ctx.inputs[0]->data<T>();
      const T* grad = ctx.inputs[1]->data<T>();
      const T* m = ctx.inputs[2]->data<T>();
      const T* v = ctx.inputs[3]->data<T>();
      T* param_out = ctx.outputs[0]->data<T>();
      T* m_out = ctx.outputs[1]->data<T>();
      T* v_out = ctx.outputs[2]->data<T>();
      const T b1 = static_cast<T>(beta1), b2 = static_cast<T>(beta2), eps = static_cast<T>(ctx.attrs.Float("epsilon"));
      const T lr_t = static_cast<T>(lr), mhat_scale = static_cast<T>(m_scale), vhat_scale = static_cast<T>(v_scale);
      const T param_scale = static_cast<T>(decoupled ? 1.0 - lr * wd : 1.0);
      const T grad_wd = static_cast<T>(decoupled ? 0.0 : wd);
      const int64_t n = ctx.inputs[0]->elem_count();
      for (int64_t i = 0; i < n; ++i) {
        const T p = param[i];
        const T g = grad[i] + grad_wd * p;
        const T mi = b1 * m[i] + (T(1) - b1) * g;
        const T vi = b2 * v[i] + (T(1) - b2) * g * g;
        m_out[i] = mi;
        v_out[i] = vi;
        param_out[i] = p * param_scale - lr_t * (mi * mhat_scale) / (std::sqrt(vi * vhat_scale) + eps);
      }
      return absl::OkStatus();
    });
  };
  return def;
}

OpDef MakeStepIncrement() {
  OpDef def;
  def.name = "step_increment";
  def.doc = "step_out = step + 1 for an int scalar step counter (runs once per step like every optimizer op).";
  def.inputs = {"step"};
  def.outputs = {"step_out"};
  def.inplace_pairs = {{0, 0}};
  def.is_optimizer = true;
  def.infer = [](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> {
    const TensorDesc& step = ctx.inputs[0];
    if ((step.dtype != DataType::kInt64 && step.dtype != DataType::kInt32) || step.shape.num_axes() != 0) {
      return OpError("step_increment", ctx.op_name, "step must be an int64 or int32 scalar (shape []), got ",
                     step.ToString());
    }
    return std::vector<TensorDesc>{step};
  };
  def.sbp = [](const AttrMap&, const std::vector<TensorDesc>&) {
    return std::vector<SbpSignature>{{{Sbp::Broadcast()}, {Sbp::Broadcast()}}};
  };
  def.cpu_kernel = [](const KernelContext& ctx) -> absl::Status {
    return ops::DispatchIndex(ctx.inputs[0]->dtype(), ctx.op_name, [&](auto t) {
      using I = decltype(t);
      ctx.outputs[0]->data<I>()[0] = static_cast<I>(ctx.inputs[0]->data<I>()[0] + 1);
      return absl::OkStatus();
    });
  };
  return def;
}

}  // namespace

absl::Status RegisterOptimizerOps(OpRegistry* registry) {
  RETURN_IF_ERROR(registry->Register(MakeSgd()));
  RETURN_IF_ERROR(registry->Register(MakeAdam()));
  RETURN_IF_ERROR(registry->Register(MakeStepIncrement()));
  return absl::OkStatus();
}

}  // namespace oneflow_like
