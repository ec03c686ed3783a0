// Loss family: sparse softmax cross-entropy (integer class labels) and its gradient.
//
//   sparse_softmax_cross_entropy(logits[..., C], labels[...]) -> loss[]
//     loss = (1 / N) * sum over label positions p of (log sum_c exp(logits[p, c]) - logits[p, labels[p]])
//     computed per row as (m - logits[label]) + log(sum_c exp(logits[c] - m)), m = the row max,
//     so it never overflows; N = the number of label positions of the LOGICAL labels tensor
//     (0 positions give loss 0).
//   sparse_softmax_cross_entropy_grad(logits, labels, dloss[]) -> dlogits
//     dlogits[p, c] = (softmax(logits[p])[c] - [c == labels[p]]) * dloss / N
// labels are int32 or int64; a label outside [0, C) is an InvalidArgument at run time naming
// the op, the label, its position and C.
//
// SBP (r = labels rank):
//   loss: logits:S(i), labels:S(i) -> loss:P for i < r (each shard sums its rows and divides
//         by the logical N from input_shards[1], so the partial losses add up to the mean);
//         B, B -> B.
//   grad: logits:S(i), labels:S(i), dloss:B -> dlogits:S(i) for i < r; B, B, B -> B; and, as
//         the gradient is linear in dloss, B, B, P -> P.
// The class axis is never split (the softmax needs the whole row).
//
// Kernels: row loops (row_math.h), rows split over the rank's intra-op threads; the loss sums
// the per-row values in row order afterwards, so results are bit-identical for any number of
// threads (core/intra_op_pool.h).
#include <cmath>
#include <vector>

#include "oneflow_like/core/ops/builtin_ops.h"
#include "oneflow_like/core/ops/op_util.h"
#include "oneflow_like/core/ops/row_math.h"

namespace oneflow_like {
namespace {

namespace rm = ops::row_math;
using ops::OpError;

constexpr char kLoss[] = "sparse_softmax_cross_entropy";
constexpr char kLossGrad[] = "sparse_softmax_cross_entropy_grad";

bool IsFloat(DataType t) { return t == DataType::kFloat32 || t == DataType::kFloat64; }
bool IsIndex(DataType t) { return t == DataType::kInt32 || t == DataType::kInt64; }

// ---- row loops (pure arithmetic; multiversioned by OL_ROW_KERNEL) ----

// row_loss[r] = (m - x[label]) + log(sum exp(x - m)) for rows [begin, end). REQUIRES: labels
// in [0, classes).
template <typename T, typename I>
OL_ROW_KERNEL void CrossEntropyRows(const T* logits, const I* labels, int64_t begin, int64_t end, int64_t classes,
                                    T* row_loss) {
  for (int64_t r = begin; r < end; ++r) {
    const T* x = logits + r * classes;
    const T m = rm::Max(x, classes);
    const T s = rm::ExpShiftSum(x, m, classes);
    row_loss[r] = (m - x[labels[r]]) + std::log(s);
  }
}

// dlogits = (softmax(x) - onehot(label)) * scale for rows [begin, end). REQUIRES: labels in
// [0, classes).
template <typename T, typename I>
OL_ROW_KERNEL void CrossEntropyGradRows(const T* logits, const I* labels, T scale, T* dlogits, int64_t begin,
                                        int64_t end, int64_t classes) {
  for (int64_t r = begin; r < end; ++r) {
    const T* x = logits + r * classes;
    T* dx = dlogits + r * classes;
    const T m = rm::Max(x, classes);
    const T s = rm::ExpShiftStore(x, m, dx, classes);
    rm::Scale(dx, scale / s, classes);
    dx[labels[r]] -= scale;
  }
}

// ---- shared checks ----

absl::Status CheckLogitsLabels(const char* op, const std::string& name, const TensorDesc& logits,
                               const TensorDesc& labels) {
  if (!IsFloat(logits.dtype) || logits.shape.num_axes() < 1) {
    return OpError(op, name, "logits must be a float32 or float64 [..., C] tensor, got ", logits.ToString());
  }
  if (!IsIndex(labels.dtype)) {
    return OpError(op, name, "labels must be int32 or int64, got ", labels.ToString());
  }
  const std::vector<int64_t>& d = logits.shape.dims();
  if (Shape(std::vector<int64_t>(d.begin(), d.end() - 1)) != labels.shape) {
    return OpError(op, name, "labels ", labels.ToString(), " must have the shape of logits ", logits.ToString(),
                   " without its class axis; hint: one integer class id per row of logits");
  }
  return absl::OkStatus();
}

template <typename I>
absl::Status CheckLabels(const char* op, const std::string& name, const I* labels, int64_t n, int64_t classes) {
  for (int64_t p = 0; p < n; ++p) {
    if (labels[p] < 0 || labels[p] >= classes) {
      return OpError(op, name, "label ", static_cast<int64_t>(labels[p]), " at position ", p,
                     " is out of range [0, ", classes, ") (C = ", classes, " classes)");
    }
  }
  return absl::OkStatus();
}

// N: the element count of the logical labels tensor (input 1).
int64_t LogicalCount(const KernelContext& ctx) {
  if (ctx.input_shards.size() > 1) return ctx.input_shards[1].logical_shape.elem_count();
  return ctx.inputs[1]->elem_count();
}

// ---- sparse_softmax_cross_entropy ----

absl::StatusOr<std::vector<TensorDesc>> InferLoss(const InferContext& ctx) {
  RETURN_IF_ERROR(CheckLogitsLabels(kLoss, ctx.op_name, ctx.inputs[0], ctx.inputs[1]));
  return std::vector<TensorDesc>{{ctx.inputs[0].dtype, Shape{}}};
}

absl::Status LossKernel(const KernelContext& ctx) {
  const Tensor& logits = *ctx.inputs[0];
  const Tensor& labels = *ctx.inputs[1];
  Tensor& loss = *ctx.outputs[0];
  RETURN_IF_ERROR(CheckLogitsLabels(kLoss, ctx.op_name, logits.desc(), labels.desc()));
  if (loss.desc() != TensorDesc{logits.dtype(), Shape{}}) {
    return OpError(kLoss, ctx.op_name, "output ", loss.desc().ToString(), " must be a ", DataTypeName(logits.dtype()),
                   " scalar");
  }
  const int64_t classes = logits.shape().dim(logits.shape().num_axes() - 1);
  const int64_t rows = labels.elem_count();
  const int64_t n = LogicalCount(ctx);
  return ops::DispatchFloat(logits.dtype(), kLoss, [&](auto ftag) {
    using T = decltype(ftag);
    return ops::DispatchIndex(labels.dtype(), kLoss, [&](auto itag) -> absl::Status {
      using I = decltype(itag);
      RETURN_IF_ERROR(CheckLabels(kLoss, ctx.op_name, labels.data<I>(), rows, classes));
      // Rows in parallel, then their sum in row order (in double): the same for any threads.
      std::vector<T> row_loss(static_cast<size_t>(rows));
      ParallelFor(ctx.intra_op_pool, rows, classes, [&](int64_t b, int64_t e) {
        CrossEntropyRows<T, I>(logits.data<T>(), labels.data<I>(), b, e, classes, row_loss.data());
      });
      double total = 0;
      for (const T v : row_loss) total += static_cast<double>(v);
      loss.data<T>()[0] = static_cast<T>(n > 0 ? total / static_cast<double>(n) : 0.0);
      return absl::OkStatus();
    });
  });
}

std::vector<SbpSignature> LossSbp(const AttrMap&, const std::vector<TensorDesc>& in) {
  std::vector<SbpSignature> sigs;
  for (int i = 0; i < in[1].shape.num_axes(); ++i) {
    sigs.push_back({{Sbp::Split(i), Sbp::Split(i)}, {Sbp::PartialSum()}});
  }
  sigs.push_back({{Sbp::Broadcast(), Sbp::Broadcast()}, {Sbp::Broadcast()}});
  return sigs;
}

absl::Status LossGradRule(GradContext* ctx) {
  if (!ctx->needs_input_grad(0)) return absl::OkStatus();  // labels have no gradient
  ASSIGN_OR_RETURN(std::string dlogits, ctx->EmitOne(kLossGrad, {ctx->input(0), ctx->input(1), ctx->output_grad(0)}));
  ctx->SetInputGrad(0, dlogits);
  return absl::OkStatus();
}

// ---- sparse_softmax_cross_entropy_grad ----

absl::StatusOr<std::vector<TensorDesc>> InferLossGrad(const InferContext& ctx) {
  RETURN_IF_ERROR(CheckLogitsLabels(kLossGrad, ctx.op_name, ctx.inputs[0], ctx.inputs[1]));
  const TensorDesc want{ctx.inputs[0].dtype, Shape{}};
  if (ctx.inputs[2] != want) {
    return OpError(kLossGrad, ctx.op_name, "dloss ", ctx.inputs[2].ToString(), " must be a scalar ", want.ToString(),
                   " (the loss is a mean)");
  }
  return std::vector<TensorDesc>{ctx.inputs[0]};
}

absl::Status LossGradKernel(const KernelContext& ctx) {
  const Tensor& logits = *ctx.inputs[0];
  const Tensor& labels = *ctx.inputs[1];
  const Tensor& dloss = *ctx.inputs[2];
  Tensor& dlogits = *ctx.outputs[0];
  const std::vector<TensorDesc> in = {logits.desc(), labels.desc(), dloss.desc()};
  InferContext ictx{ctx.op_name, ctx.attrs, in};
  ASSIGN_OR_RETURN(std::vector<TensorDesc> want, InferLossGrad(ictx));
  if (dlogits.desc() != want[0]) {
    return OpError(kLossGrad, ctx.op_name, "output ", dlogits.desc().ToString(), " must match logits ",
                   want[0].ToString());
  }
  const int64_t classes = logits.shape().dim(logits.shape().num_axes() - 1);
  const int64_t rows = labels.elem_count();
  const int64_t n = LogicalCount(ctx);
  return ops::DispatchFloat(logits.dtype(), kLossGrad, [&](auto ftag) {
    using T = decltype(ftag);
    return ops::DispatchIndex(labels.dtype(), kLossGrad, [&](auto itag) -> absl::Status {
      using I = decltype(itag);
      RETURN_IF_ERROR(CheckLabels(kLossGrad, ctx.op_name, labels.data<I>(), rows, classes));
      const T scale = n > 0 ? dloss.data<T>()[0] / static_cast<T>(n) : T(0);
      ParallelFor(ctx.intra_op_pool, rows, classes, [&](int64_t b, int64_t e) {
        CrossEntropyGradRows<T, I>(logits.data<T>(), labels.data<I>(), scale, dlogits.data<T>(), b, e, classes);
      });
      return absl::OkStatus();
    });
  });
}

std::vector<SbpSignature> LossGradSbp(const AttrMap&, const std::vector<TensorDesc>& in) {
  const Sbp b = Sbp::Broadcast();
  std::vector<SbpSignature> sigs;
  for (int i = 0; i < in[1].shape.num_axes(); ++i) {
    const Sbp s = Sbp::Split(i);
    sigs.push_back({{s, s, b}, {s}});
  }
  sigs.push_back({{b, b, b}, {b}});
  sigs.push_back({{b, b, Sbp::PartialSum()}, {Sbp::PartialSum()}});
  return sigs;
}

}  // namespace

absl::Status RegisterLossOps(OpRegistry* registry) {
  OpDef fwd;
  fwd.name = kLoss;
  fwd.doc = "mean over label positions of -log softmax(logits)[label], with integer class labels";
  fwd.inputs = {"logits", "labels"};
  fwd.outputs = {"loss"};
  fwd.infer = InferLoss;
  fwd.sbp = LossSbp;
  fwd.grad = LossGradRule;
  fwd.cost = [](const AttrMap&, const std::vector<TensorDesc>& in, const std::vector<TensorDesc>& out) {
    return OpCost{5.0 * static_cast<double>(in[0].shape.elem_count()), ops::TotalBytes(in) + ops::TotalBytes(out)};
  };
  fwd.cpu_kernel = LossKernel;
  RETURN_IF_ERROR(registry->Register(std::move(fwd)));

  OpDef bwd;
  bwd.name = kLossGrad;
  bwd.doc = "gradient of sparse_softmax_cross_entropy: (softmax(logits) - onehot(labels)) * dloss / N";
  bwd.inputs = {"logits", "labels", "dloss"};
  bwd.outputs = {"dlogits"};
  bwd.infer = InferLossGrad;
  bwd.sbp = LossGradSbp;
  bwd.cost = [](const AttrMap&, const std::vector<TensorDesc>& in, const std::vector<TensorDesc>& out) {
    return OpCost{6.0 * static_cast<double>(in[0].shape.elem_count()), ops::TotalBytes(in) + ops::TotalBytes(out)};
  };
  bwd.cpu_kernel = LossGradKernel;
  return registry->Register(std::move(bwd));
}

}  // namespace oneflow_like
