// Optimizer op family: sgd_update, sgd_plain_update, adam_update (PyTorch semantics) and step_increment. Both are element-wise
// over the parameter, may update their state in place (OpDef::inplace_pairs: the outputs may
// alias param and the state inputs; kernels read every input element before writing it), and
// are excluded from autograd (is_optimizer, no grad rule).
//
//   sgd_update:  buf = momentum * buf + (grad + wd * param);  param -= lr * buf
//                (momentum 0 is the plain step param -= lr * (grad + wd * param), as torch's
//                SGD without momentum: the buffer is then not read, and momentum_buf_out is
//                zero-filled, or left as it is when it shares momentum_buf's memory).
//   sgd_plain_update: param -= lr * (grad + wd * param), no state (what the optimizer pass uses
//                at momentum 0, so a plain SGD job carries no dead buffer).
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
//
// Kernels: element-wise loops in fixed 16-wide blocks (GCC vectorizes those at -O2, see
// row_math.h) marked `#pragma GCC ivdep`: an output may alias its in-place input, which is fine
// because element i is read before it is written and no other element is touched. The float32
// Adam loop (sqrt and division per element) is also compiled for AVX2 / AVX-512 (OL_ROW_KERNEL).
// A large parameter is split into contiguous chunks over the rank's intra-op threads (the same
// per-element arithmetic: bit-identical; core/intra_op_pool.h).
#include <algorithm>
#include <cmath>

#include "oneflow_like/core/ops/builtin_ops.h"
#include "oneflow_like/core/ops/op_util.h"
#include "oneflow_like/core/ops/row_math.h"

namespace oneflow_like {
namespace {

using ops::OpError;

constexpr int kBlock = 16;

// param_out = param - lr * (grad + wd * param) (SGD without momentum).
template <typename T>
void SgdPlainLoop(const T* param, const T* grad, T* param_out, T lr, T wd, int64_t n) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
#pragma GCC ivdep
    for (int k = 0; k < kBlock; ++k) {
      const T p = param[i + k];
      param_out[i + k] = p - lr * (grad[i + k] + wd * p);
    }
  }
  for (; i < n; ++i) {
    const T p = param[i];
    param_out[i] = p - lr * (grad[i] + wd * p);
  }
}

// buf_out = momentum * buf + (grad + wd * param); param_out = param - lr * buf_out.
template <typename T>
void SgdMomentumLoop(const T* param, const T* grad, const T* buf, T* param_out, T* buf_out, T lr, T momentum,
                     T wd, int64_t n) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
#pragma GCC ivdep
    for (int k = 0; k < kBlock; ++k) {
      const T p = param[i + k];
      const T b = momentum * buf[i + k] + (grad[i + k] + wd * p);
      buf_out[i + k] = b;
      param_out[i + k] = p - lr * b;
    }
  }
  for (; i < n; ++i) {
    const T p = param[i];
    const T b = momentum * buf[i] + (grad[i] + wd * p);
    buf_out[i] = b;
    param_out[i] = p - lr * b;
  }
}

// The per-element constants of one Adam step (see the file comment).
template <typename T>
struct AdamScalars {
  T b1, b2, eps, lr, mhat_scale, vhat_scale, param_scale, grad_wd;
};

template <typename T>
inline void AdamElement(const T* param, const T* grad, const T* m, const T* v, T* param_out, T* m_out, T* v_out,
                        const AdamScalars<T>& c, int64_t i) {
  const T p = param[i];
  const T g = grad[i] + c.grad_wd * p;
  const T mi = c.b1 * m[i] + (T(1) - c.b1) * g;
  const T vi = c.b2 * v[i] + (T(1) - c.b2) * g * g;
  m_out[i] = mi;
  v_out[i] = vi;
  param_out[i] = p * c.param_scale - c.lr * (mi * c.mhat_scale) / (std::sqrt(vi * c.vhat_scale) + c.eps);
}

template <typename T>
inline void AdamLoop(const T* param, const T* grad, const T* m, const T* v, T* param_out, T* m_out, T* v_out,
                     const AdamScalars<T>& c, int64_t n) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
#pragma GCC ivdep
    for (int k = 0; k < kBlock; ++k) AdamElement(param, grad, m, v, param_out, m_out, v_out, c, i + k);
  }
  for (; i < n; ++i) AdamElement(param, grad, m, v, param_out, m_out, v_out, c, i);
}
OL_ROW_KERNEL void AdamLoop(const float* param, const float* grad, const float* m, const float* v,
                            float* param_out, float* m_out, float* v_out, const AdamScalars<float>& c,
                            int64_t n) {
  AdamLoop<float>(param, grad, m, v, param_out, m_out, v_out, c, n);
}

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
      ParallelFor(ctx.intra_op_pool, ctx.inputs[0]->elem_count(), 1, [&](int64_t b, int64_t e) {
        if (momentum == T(0)) {
          SgdPlainLoop(param + b, grad + b, param_out + b, lr, wd, e - b);
          if (buf_out != buf) std::fill(buf_out + b, buf_out + e, T(0));
        } else {
          SgdMomentumLoop(param + b, grad + b, buf + b, param_out + b, buf_out + b, lr, momentum, wd, e - b);
        }
      }, kBlock);
      return absl::OkStatus();
    });
  };
  return def;
}

OpDef MakeSgdPlain() {
  OpDef def;
  def.name = "sgd_plain_update";
  def.doc = "SGD without momentum: param -= lr * (grad + wd * param) (torch.optim.SGD, momentum 0); no state.";
  def.inputs = {"param", "grad"};
  def.outputs = {"param_out"};
  def.inplace_pairs = {{0, 0}};
  def.is_optimizer = true;
  def.attrs = {{"lr", AttrType::kFloat, std::nullopt, "learning rate"},
               {"weight_decay", AttrType::kFloat, AttrValue(0.0), "L2 penalty added to the gradient"}};
  def.infer = [](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> {
    RETURN_IF_ERROR(CheckSameDesc("sgd_plain_update", ctx, {"param", "grad"}, 2));
    return std::vector<TensorDesc>{ctx.inputs[0]};
  };
  def.sbp = [](const AttrMap&, const std::vector<TensorDesc>& in) {
    return SameSplitSignatures(in[0].shape.num_axes(), 2, 0, 1);
  };
  def.cpu_kernel = [](const KernelContext& ctx) -> absl::Status {
    return ops::DispatchFloat(ctx.inputs[0]->dtype(), ctx.op_name, [&](auto t) {
      using T = decltype(t);
      const T* param = ctx.inputs[0]->data<T>();
      const T* grad = ctx.inputs[1]->data<T>();
      T* param_out = ctx.outputs[0]->data<T>();
      const T lr = static_cast<T>(ctx.attrs.Float("lr")), wd = static_cast<T>(ctx.attrs.Float("weight_decay"));
      ParallelFor(ctx.intra_op_pool, ctx.inputs[0]->elem_count(), 1, [&](int64_t b, int64_t e) {
        SgdPlainLoop(param + b, grad + b, param_out + b, lr, wd, e - b);
      }, kBlock);
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
      AdamScalars<T> c;
      c.b1 = static_cast<T>(beta1);
      c.b2 = static_cast<T>(beta2);
      c.eps = static_cast<T>(ctx.attrs.Float("epsilon"));
      c.lr = static_cast<T>(lr);
      c.mhat_scale = static_cast<T>(m_scale);
      c.vhat_scale = static_cast<T>(v_scale);
      c.param_scale = static_cast<T>(decoupled ? 1.0 - lr * wd : 1.0);
      c.grad_wd = static_cast<T>(decoupled ? 0.0 : wd);
      ParallelFor(ctx.intra_op_pool, ctx.inputs[0]->elem_count(), 1, [&](int64_t b, int64_t e) {
        AdamLoop(param + b, grad + b, m + b, v + b, param_out + b, m_out + b, v_out + b, c, e - b);
      }, kBlock);
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
  RETURN_IF_ERROR(registry->Register(MakeSgdPlain()));
  RETURN_IF_ERROR(registry->Register(MakeAdam()));
  RETURN_IF_ERROR(registry->Register(MakeStepIncrement()));
  return absl::OkStatus();
}

}  // namespace oneflow_like
