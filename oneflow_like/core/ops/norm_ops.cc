// Norm family: layer_norm over the last axis and its gradient.
//
//   layer_norm(x[..., d], gamma[d], beta[d]) -> y[..., d], mean[...], inv_std[...]
//     mean = sum_j x_j / d,  var = sum_j (x_j - mean)^2 / d  (two passes over the row,
//     centred on x_0: accurate for a large mean and a small variance)
//     inv_std = 1 / sqrt(var + epsilon),  y_j = (x_j - mean) * inv_std * gamma_j + beta_j
//   layer_norm_grad(dy, x, mean, inv_std, gamma) -> dx, dgamma, dbeta
//     xhat = (x - mean) * inv_std,  g = dy * gamma
//     dx = inv_std * (g - mean_j(g) - xhat * mean_j(g * xhat))
//     dgamma = sum over rows of dy * xhat,  dbeta = sum over rows of dy
//
// mean and inv_std are auxiliary outputs saved for the backward pass: the gradient rule
// ignores gradients flowing into them (they are treated as not differentiable), which is what
// every framework does; check gradients with GradCheckOptions.outputs = {0}.
//
// SBP: layer_norm: x:S(a), gamma:B, beta:B -> y:S(a), mean:S(a), inv_std:S(a) for every axis a
// but the last; all B -> all B. layer_norm_grad: dy, x, mean, inv_std:S(a), gamma:B ->
// dx:S(a), dgamma:P, dbeta:P (each shard sums its rows); all B -> all B; and, as the
// gradient is linear in dy, dy:P with the rest B -> dx:P, dgamma:P, dbeta:P.
//
// Kernels: row loops (row_math.h). On the rank's intra-op threads (core/intra_op_pool.h) a
// large layer_norm splits its rows; layer_norm_grad runs its two outputs side by side: one
// thread sums dgamma / dbeta over the rows in row order (as the one-pass serial kernel does),
// the others compute dx by rows, so results are bit-identical.
#include <algorithm>
#include <cmath>

#include "oneflow_like/core/ops/builtin_ops.h"
#include "oneflow_like/core/ops/op_util.h"
#include "oneflow_like/core/ops/row_math.h"

namespace oneflow_like {
namespace {

namespace rm = ops::row_math;
using ops::OpError;

constexpr char kLayerNorm[] = "layer_norm";
constexpr char kLayerNormGrad[] = "layer_norm_grad";

bool IsFloat(DataType t) { return t == DataType::kFloat32 || t == DataType::kFloat64; }

// x.shape[:-1]
Shape RowShape(const Shape& x) {
  return Shape(std::vector<int64_t>(x.dims().begin(), x.dims().end() - 1));
}

// ---- row loops (pure arithmetic; multiversioned by OL_ROW_KERNEL) ----

// sum of (x - c).
template <typename T>
inline T SumDiff(const T* __restrict x, T c, int64_t n) {
  T acc[rm::kLanes] = {};
  int64_t i = 0;
  for (; i + rm::kLanes <= n; i += rm::kLanes) {
    for (int k = 0; k < rm::kLanes; ++k) acc[k] += x[i + k] - c;
  }
  T s = rm::ReduceLanes(acc);
  for (; i < n; ++i) s += x[i] - c;
  return s;
}

// sum of ((x - shift) - c)^2.
template <typename T>
inline T SumSquaredDiff(const T* __restrict x, T shift, T c, int64_t n) {
  T acc[rm::kLanes] = {};
  int64_t i = 0;
  for (; i + rm::kLanes <= n; i += rm::kLanes) {
    for (int k = 0; k < rm::kLanes; ++k) {
      const T v = (x[i + k] - shift) - c;
      acc[k] += v * v;
    }
  }
  T s = rm::ReduceLanes(acc);
  for (; i < n; ++i) s += ((x[i] - shift) - c) * ((x[i] - shift) - c);
  return s;
}

// y = ((x - shift) - c) * inv_std * gamma + beta.
template <typename T>
inline void NormalizeRow(const T* __restrict x, T shift, T c, T inv_std, const T* __restrict gamma,
                         const T* __restrict beta, T* __restrict y, int64_t n) {
  int64_t i = 0;
  for (; i + rm::kLanes <= n; i += rm::kLanes) {
    for (int k = 0; k < rm::kLanes; ++k) {
      y[i + k] = ((x[i + k] - shift) - c) * inv_std * gamma[i + k] + beta[i + k];
    }
  }
  for (; i < n; ++i) y[i] = ((x[i] - shift) - c) * inv_std * gamma[i] + beta[i];
}

// Rows are centred on their first entry: x - shift is exact for entries close to it, and the
// small centred mean c keeps its digits, so a row like 1000 +- 0.01 normalizes accurately in
// float32 (with mean = shift + c rounded only for the `mean` output). Rows [begin, end).
template <typename T>
OL_ROW_KERNEL void LayerNormRows(const T* x, const T* gamma, const T* beta, T epsilon, T* y, T* mean, T* inv_std,
                                 int64_t begin, int64_t end, int64_t d) {
  const T inv_d = d > 0 ? T(1) / static_cast<T>(d) : T(0);
  for (int64_t r = begin; r < end; ++r) {
    const T* xr = x + r * d;
    const T shift = d > 0 ? xr[0] : T(0);
    const T c = SumDiff(xr, shift, d) * inv_d;
    const T var = SumSquaredDiff(xr, shift, c, d) * inv_d;
    const T is = T(1) / std::sqrt(var + epsilon);
    NormalizeRow(xr, shift, c, is, gamma, beta, y + r * d, d);
    mean[r] = shift + c;
    inv_std[r] = is;
  }
}

// Returns {sum(g), sum(g * xhat)} with g = dy * gamma, xhat = (x - mean) * inv_std.
template <typename T>
inline void GradSums(const T* __restrict dy, const T* __restrict x, const T* __restrict gamma, T mean, T inv_std,
                     int64_t n, T* sum_g, T* sum_gx) {
  T acc_g[rm::kLanes] = {}, acc_gx[rm::kLanes] = {};
  int64_t i = 0;
  for (; i + rm::kLanes <= n; i += rm::kLanes) {
    for (int k = 0; k < rm::kLanes; ++k) {
      const T g = dy[i + k] * gamma[i + k];
      acc_g[k] += g;
      acc_gx[k] += g * ((x[i + k] - mean) * inv_std);
    }
  }
  T sg = rm::ReduceLanes(acc_g), sgx = rm::ReduceLanes(acc_gx);
  for (; i < n; ++i) {
    const T g = dy[i] * gamma[i];
    sg += g;
    sgx += g * ((x[i] - mean) * inv_std);
  }
  *sum_g = sg;
  *sum_gx = sgx;
}

// dx = inv_std * (g - a - xhat * b); dgamma += dy * xhat; dbeta += dy.
template <typename T>
inline void GradRow(const T* __restrict dy, const T* __restrict x, const T* __restrict gamma, T mean, T inv_std,
                    T a, T b, T* __restrict dx, T* __restrict dgamma, T* __restrict dbeta, int64_t n) {
  int64_t i = 0;
  for (; i + rm::kLanes <= n; i += rm::kLanes) {
    for (int k = 0; k < rm::kLanes; ++k) {
      const T xhat = (x[i + k] - mean) * inv_std;
      dx[i + k] = inv_std * (dy[i + k] * gamma[i + k] - a - xhat * b);
      dgamma[i + k] += dy[i + k] * xhat;
      dbeta[i + k] += dy[i + k];
    }
  }
  for (; i < n; ++i) {
    const T xhat = (x[i] - mean) * inv_std;
    dx[i] = inv_std * (dy[i] * gamma[i] - a - xhat * b);
    dgamma[i] += dy[i] * xhat;
    dbeta[i] += dy[i];
  }
}

template <typename T>
OL_ROW_KERNEL void LayerNormGradRows(const T* dy, const T* x, const T* mean, const T* inv_std, const T* gamma, T* dx,
                                     T* dgamma, T* dbeta, int64_t rows, int64_t d) {
  std::fill(dgamma, dgamma + d, T(0));
  std::fill(dbeta, dbeta + d, T(0));
  const T inv_d = d > 0 ? T(1) / static_cast<T>(d) : T(0);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t off = r * d;
    T sum_g, sum_gx;
    GradSums(dy + off, x + off, gamma, mean[r], inv_std[r], d, &sum_g, &sum_gx);
    GradRow(dy + off, x + off, gamma, mean[r], inv_std[r], sum_g * inv_d, sum_gx * inv_d, dx + off, dgamma, dbeta, d);
  }
}

// The same results in two passes that run side by side: dx for rows [begin, end) ...
template <typename T>
inline void GradDxRow(const T* __restrict dy, const T* __restrict x, const T* __restrict gamma, T mean, T inv_std,
                      T a, T b, T* __restrict dx, int64_t n) {
  int64_t i = 0;
  for (; i + rm::kLanes <= n; i += rm::kLanes) {
    for (int k = 0; k < rm::kLanes; ++k) {
      const T xhat = (x[i + k] - mean) * inv_std;
      dx[i + k] = inv_std * (dy[i + k] * gamma[i + k] - a - xhat * b);
    }
  }
  for (; i < n; ++i) {
    const T xhat = (x[i] - mean) * inv_std;
    dx[i] = inv_std * (dy[i] * gamma[i] - a - xhat * b);
  }
}
template <typename T>
OL_ROW_KERNEL void LayerNormGradDxRows(const T* dy, const T* x, const T* mean, const T* inv_std, const T* gamma,
                                       T* dx, int64_t begin, int64_t end, int64_t d) {
  const T inv_d = d > 0 ? T(1) / static_cast<T>(d) : T(0);
  for (int64_t r = begin; r < end; ++r) {
    const int64_t off = r * d;
    T sum_g, sum_gx;
    GradSums(dy + off, x + off, gamma, mean[r], inv_std[r], d, &sum_g, &sum_gx);
    GradDxRow(dy + off, x + off, gamma, mean[r], inv_std[r], sum_g * inv_d, sum_gx * inv_d, dx + off, d);
  }
}

// ... and dgamma, dbeta, each column summed over the rows in row order as above.
template <typename T>
inline void GradParamRow(const T* __restrict dy, const T* __restrict x, T mean, T inv_std, T* __restrict dgamma,
                         T* __restrict dbeta, int64_t n) {
  int64_t i = 0;
  for (; i + rm::kLanes <= n; i += rm::kLanes) {
    for (int k = 0; k < rm::kLanes; ++k) {
      const T xhat = (x[i + k] - mean) * inv_std;
      dgamma[i + k] += dy[i + k] * xhat;
      dbeta[i + k] += dy[i + k];
    }
  }
  for (; i < n; ++i) {
    const T xhat = (x[i] - mean) * inv_std;
    dgamma[i] += dy[i] * xhat;
    dbeta[i] += dy[i];
  }
}
template <typename T>
OL_ROW_KERNEL void LayerNormGradParams(const T* dy, const T* x, const T* mean, const T* inv_std, T* dgamma, T* dbeta,
                                       int64_t rows, int64_t d) {
  std::fill(dgamma, dgamma + d, T(0));
  std::fill(dbeta, dbeta + d, T(0));
  for (int64_t r = 0; r < rows; ++r) GradParamRow(dy + r * d, x + r * d, mean[r], inv_std[r], dgamma, dbeta, d);
}

// ---- op definitions ----

absl::Status CheckX(const std::string& op, const std::string& name, const TensorDesc& x) {
  if (!IsFloat(x.dtype) || x.shape.num_axes() < 1) {
    return OpError(op, name, "x must be a float32 or float64 tensor with at least one axis, got ", x.ToString());
  }
  return absl::OkStatus();
}

// `param` (gamma or beta) must be [d] of x's dtype.
absl::Status CheckParam(const std::string& op, const std::string& name, const char* what, const TensorDesc& param,
                        const TensorDesc& x) {
  const int64_t d = x.shape.dim(x.shape.num_axes() - 1);
  if (param.dtype != x.dtype || param.shape != Shape{d}) {
    return OpError(op, name, what, " ", param.ToString(), " must be ", DataTypeName(x.dtype), "[", d,
                   "] (the last axis of x ", x.ToString(), ")");
  }
  return absl::OkStatus();
}

// mean or inv_std must be x.shape[:-1] of x's dtype.
absl::Status CheckRowStat(const std::string& op, const std::string& name, const char* what, const TensorDesc& stat,
                          const TensorDesc& x) {
  const TensorDesc want{x.dtype, RowShape(x.shape)};
  if (stat != want) {
    return OpError(op, name, what, " ", stat.ToString(), " must be ", want.ToString(), " (x ", x.ToString(),
                   " without its last axis)");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TensorDesc>> InferLayerNorm(const InferContext& ctx) {
  const TensorDesc& x = ctx.inputs[0];
  RETURN_IF_ERROR(CheckX(kLayerNorm, ctx.op_name, x));
  RETURN_IF_ERROR(CheckParam(kLayerNorm, ctx.op_name, "gamma", ctx.inputs[1], x));
  RETURN_IF_ERROR(CheckParam(kLayerNorm, ctx.op_name, "beta", ctx.inputs[2], x));
  const double epsilon = ctx.attrs.Float("epsilon");
  if (!(epsilon >= 0)) {
    return OpError(kLayerNorm, ctx.op_name, "epsilon must be >= 0, got ", epsilon);
  }
  const TensorDesc stat{x.dtype, RowShape(x.shape)};
  return std::vector<TensorDesc>{x, stat, stat};
}

absl::StatusOr<std::vector<TensorDesc>> InferLayerNormGrad(const InferContext& ctx) {
  const TensorDesc& x = ctx.inputs[1];
  RETURN_IF_ERROR(CheckX(kLayerNormGrad, ctx.op_name, x));
  if (ctx.inputs[0] != x) {
    return OpError(kLayerNormGrad, ctx.op_name, "dy ", ctx.inputs[0].ToString(), " must match x ", x.ToString());
  }
  RETURN_IF_ERROR(CheckRowStat(kLayerNormGrad, ctx.op_name, "mean", ctx.inputs[2], x));
  RETURN_IF_ERROR(CheckRowStat(kLayerNormGrad, ctx.op_name, "inv_std", ctx.inputs[3], x));
  RETURN_IF_ERROR(CheckParam(kLayerNormGrad, ctx.op_name, "gamma", ctx.inputs[4], x));
  return std::vector<TensorDesc>{x, ctx.inputs[4], ctx.inputs[4]};
}

// The kernels re-check physical shapes (a shard's shapes come from the plan, not from Infer).
absl::Status LayerNormKernel(const KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  const std::vector<TensorDesc> in = {x.desc(), ctx.inputs[1]->desc(), ctx.inputs[2]->desc()};
  InferContext ictx{ctx.op_name, ctx.attrs, in};
  ASSIGN_OR_RETURN(std::vector<TensorDesc> want, InferLayerNorm(ictx));
  for (size_t k = 0; k < want.size(); ++k) {
    if (ctx.outputs[k]->desc() != want[k]) {
      return OpError(kLayerNorm, ctx.op_name, "output ", k, " is ", ctx.outputs[k]->desc().ToString(),
                     ", expected ", want[k].ToString());
    }
  }
  const int64_t d = x.shape().dim(x.shape().num_axes() - 1);
  const int64_t rows = x.shape().Count(0, x.shape().num_axes() - 1);
  return ops::DispatchFloat(x.dtype(), kLayerNorm, [&](auto tag) {
    using T = decltype(tag);
    ParallelFor(ctx.intra_op_pool, rows, d, [&](int64_t b, int64_t e) {
      LayerNormRows<T>(x.data<T>(), ctx.inputs[1]->data<T>(), ctx.inputs[2]->data<T>(),
                       static_cast<T>(ctx.attrs.Float("epsilon")), ctx.outputs[0]->data<T>(),
                       ctx.outputs[1]->data<T>(), ctx.outputs[2]->data<T>(), b, e, d);
    });
    return absl::OkStatus();
  });
}

absl::Status LayerNormGradKernel(const KernelContext& ctx) {
  std::vector<TensorDesc> in;
  for (const Tensor* t : ctx.inputs) in.push_back(t->desc());
  InferContext ictx{ctx.op_name, ctx.attrs, in};
  ASSIGN_OR_RETURN(std::vector<TensorDesc> want, InferLayerNormGrad(ictx));
  for (size_t k = 0; k < want.size(); ++k) {
    if (ctx.outputs[k]->desc() != want[k]) {
      return OpError(kLayerNormGrad, ctx.op_name, "output ", k, " is ", ctx.outputs[k]->desc().ToString(),
                     ", expected ", want[k].ToString());
    }
  }
  const Shape& xs = ctx.inputs[1]->shape();
  const int64_t d = xs.dim(xs.num_axes() - 1);
  const int64_t rows = xs.Count(0, xs.num_axes() - 1);
  return ops::DispatchFloat(in[1].dtype, kLayerNormGrad, [&](auto tag) {
    using T = decltype(tag);
    const T *dy = ctx.inputs[0]->data<T>(), *x = ctx.inputs[1]->data<T>(), *mean = ctx.inputs[2]->data<T>();
    const T *inv_std = ctx.inputs[3]->data<T>(), *gamma = ctx.inputs[4]->data<T>();
    T *dx = ctx.outputs[0]->data<T>(), *dgamma = ctx.outputs[1]->data<T>(), *dbeta = ctx.outputs[2]->data<T>();
    IntraOpPool* pool = ctx.intra_op_pool;
    if (!WorthSplitting(pool, rows, d)) {
      LayerNormGradRows<T>(dy, x, mean, inv_std, gamma, dx, dgamma, dbeta, rows, d);  // one fused pass
      return absl::OkStatus();
    }
    // Part 0: dgamma and dbeta (every column, rows in order); parts 1..: dx for a range of rows.
    const int64_t dx_parts = pool->num_threads() - 1, per = (rows + dx_parts - 1) / dx_parts;
    ParallelForChunks(pool, dx_parts + 1, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        if (p == 0) {
          LayerNormGradParams<T>(dy, x, mean, inv_std, dgamma, dbeta, rows, d);
        } else {
          const int64_t b = (p - 1) * per, e = std::min(rows, p * per);
          if (b < e) LayerNormGradDxRows<T>(dy, x, mean, inv_std, gamma, dx, b, e, d);
        }
      }
    });
    return absl::OkStatus();
  });
}

std::vector<SbpSignature> LayerNormSbp(const AttrMap&, const std::vector<TensorDesc>& in) {
  const Sbp b = Sbp::Broadcast();
  std::vector<SbpSignature> sigs;
  for (int a : ops::SplitAxes(in[0].shape.num_axes(), /*exclude_last=*/1)) {
    const Sbp s = Sbp::Split(a);
    sigs.push_back({{s, b, b}, {s, s, s}});
  }
  sigs.push_back({{b, b, b}, {b, b, b}});
  return sigs;
}

std::vector<SbpSignature> LayerNormGradSbp(const AttrMap&, const std::vector<TensorDesc>& in) {
  const Sbp b = Sbp::Broadcast(), p = Sbp::PartialSum();
  std::vector<SbpSignature> sigs;
  for (int a : ops::SplitAxes(in[1].shape.num_axes(), /*exclude_last=*/1)) {
    const Sbp s = Sbp::Split(a);
    sigs.push_back({{s, s, s, s, b}, {s, p, p}});
  }
  sigs.push_back({{b, b, b, b, b}, {b, b, b}});
  sigs.push_back({{p, b, b, b, b}, {p, p, p}});
  return sigs;
}

absl::Status LayerNormGradRule(GradContext* ctx) {
  const bool any = ctx->needs_input_grad(0) || ctx->needs_input_grad(1) || ctx->needs_input_grad(2);
  if (!any) return absl::OkStatus();
  // Gradients into mean / inv_std (outputs 1, 2) are ignored: they are auxiliary outputs.
  ASSIGN_OR_RETURN(std::vector<std::string> grads,
                   ctx->Emit(kLayerNormGrad, {ctx->output_grad(0), ctx->input(0), ctx->output(1), ctx->output(2),
                                              ctx->input(1)},
                             {}));
  for (int i = 0; i < 3; ++i) {
    if (ctx->needs_input_grad(i)) ctx->SetInputGrad(i, grads[i]);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterNormOps(OpRegistry* registry) {
  OpDef fwd;
  fwd.name = kLayerNorm;
  fwd.doc = "normalizes x over its last axis, then scales by gamma and shifts by beta; also returns the "
            "per-row mean and 1/sqrt(var + epsilon) for the backward pass";
  fwd.inputs = {"x", "gamma", "beta"};
  fwd.outputs = {"y", "mean", "inv_std"};
  fwd.attrs = {{"epsilon", AttrType::kFloat, AttrValue(1e-5), "added to the variance"}};
  fwd.infer = InferLayerNorm;
  fwd.sbp = LayerNormSbp;
  fwd.grad = LayerNormGradRule;
  fwd.cost = [](const AttrMap&, const std::vector<TensorDesc>& in, const std::vector<TensorDesc>& out) {
    return OpCost{8.0 * static_cast<double>(in[0].shape.elem_count()), ops::TotalBytes(in) + ops::TotalBytes(out)};
  };
  fwd.cpu_kernel = LayerNormKernel;
  RETURN_IF_ERROR(registry->Register(std::move(fwd)));

  OpDef bwd;
  bwd.name = kLayerNormGrad;
  bwd.doc = "gradient of layer_norm with respect to x, gamma and beta";
  bwd.inputs = {"dy", "x", "mean", "inv_std", "gamma"};
  bwd.outputs = {"dx", "dgamma", "dbeta"};
  bwd.infer = InferLayerNormGrad;
  bwd.sbp = LayerNormGradSbp;
  bwd.cost = [](const AttrMap&, const std::vector<TensorDesc>& in, const std::vector<TensorDesc>& out) {
    return OpCost{12.0 * static_cast<double>(in[0].shape.elem_count()), ops::TotalBytes(in) + ops::TotalBytes(out)};
  };
  bwd.cpu_kernel = LayerNormGradKernel;
  return registry->Register(std::move(bwd));
}

}  // namespace oneflow_like
