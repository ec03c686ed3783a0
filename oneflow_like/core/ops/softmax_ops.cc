// Softmax family, over the last axis: softmax, log_softmax and their gradients.
//
//   softmax(x)_j          = exp(x_j - m) / s,   m = max_k x_k,  s = sum_k exp(x_k - m)
//   log_softmax(x)_j      = (x_j - m) - log(s)
//   softmax_grad(y, dy)     = y * (dy - sum_k y_k dy_k)
//   log_softmax_grad(y, dy) = dy - exp(y) * sum_k dy_k
//
// causal=true (x[..., q, k], rank >= 2): key j > query i is masked, i.e. row i keeps keys
// [0, min(k, i + 1)). Masked outputs are 0 (softmax) or -inf (log_softmax); gradients there
// are 0 and dy there is ignored. i is the LOGICAL query index (this shard's offset along
// axis -2 plus the local index), so the mask is right when the query axis is split.
//
// SBP (x, or y and dy alike): S(a) -> S(a) for every axis a except the last (rows are
// independent; with causal, splitting the query axis -2 is fine because the mask uses logical
// indices; the key axis -1 is never split); B -> B. The gradients are linear in dy, so they
// also take y:B, dy:P -> dx:P.
//
// Kernels: row loops (row_math.h); a large shard's rows are split over the rank's intra-op
// threads, whole rows per thread, so results are bit-identical (core/intra_op_pool.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "oneflow_like/core/ops/builtin_ops.h"
#include "oneflow_like/core/ops/op_util.h"
#include "oneflow_like/core/ops/row_math.h"

namespace oneflow_like {
namespace {

namespace rm = ops::row_math;
using ops::OpError;

bool IsFloat(DataType t) { return t == DataType::kFloat32 || t == DataType::kFloat64; }

// The rows of the last axis of one shard. With causal, row r is the logical query
// q_offset + r % q_dim and keeps its first min(cols, query + 1) entries.
struct Rows {
  int64_t count = 0;
  int64_t cols = 0;
  bool causal = false;
  int64_t q_dim = 1;
  int64_t q_offset = 0;

  int64_t Valid(int64_t r) const {
    if (!causal) return cols;
    return std::min(cols, q_offset + r % q_dim + 1);
  }
};

// REQUIRES: rank >= 1, and rank >= 2 when causal (checked by the callers).
Rows MakeRows(const Shape& shape, const ShardInfo* shard, bool causal) {
  const int rank = shape.num_axes();
  Rows rows;
  rows.cols = shape.dim(rank - 1);
  rows.count = shape.Count(0, rank - 1);
  rows.causal = causal;
  if (causal) {
    rows.q_dim = std::max<int64_t>(shape.dim(rank - 2), 1);
    rows.q_offset = shard != nullptr && static_cast<int>(shard->offset.size()) == rank ? shard->offset[rank - 2] : 0;
  }
  return rows;
}

// ---- row loops (pure arithmetic; multiversioned by OL_ROW_KERNEL) ----

// y = (x - m) - log_s: subtracting the max first keeps outputs near 0 accurate.
template <typename T>
inline void LogSoftmaxRow(const T* __restrict x, T m, T log_s, T* __restrict y, int64_t n) {
  int64_t i = 0;
  for (; i + rm::kLanes <= n; i += rm::kLanes) {
    for (int k = 0; k < rm::kLanes; ++k) y[i + k] = (x[i + k] - m) - log_s;
  }
  for (; i < n; ++i) y[i] = (x[i] - m) - log_s;
}

// ---- causal rows: whole blocks with masked lanes ----
// A causal row keeps its first n entries, n = query + 1, mostly not a multiple of kLanes: the
// plain row loops would run n % kLanes entries (and whole rows shorter than kLanes) as scalar
// code, with a scalar exp each. The masked loops below run whole kLanes blocks over [0, full)
// instead, full = n rounded up to a block but within the row's whole blocks (MaskedEnd), where
// entries at n and beyond are read (they are in the row) but count as masked whatever their
// values; entries in [full, n) (only where the row length is not a multiple of kLanes) run as
// a scalar tail. Masked lanes join the lane sums as exact zeros; the lanes are then reduced
// pairwise (row_math::ReduceLanesPairwise: at ~64 entries a row, the serial reduction of the
// plain loops took longer than the row's exps). So results differ from the plain loops' only
// in the order of the sums.

int64_t MaskedEnd(int64_t n, int64_t cols) {
  return std::min((n + rm::kLanes - 1) / rm::kLanes * rm::kLanes, cols / rm::kLanes * rm::kLanes);
}

// max(x[0..n)) over whole blocks up to `full`.
template <typename T>
inline T MaskedMax(const T* __restrict x, int64_t n, int64_t full) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  T acc[rm::kLanes];
  for (int k = 0; k < rm::kLanes; ++k) acc[k] = kNegInf;
  int64_t i = 0;
  for (; i < full; i += rm::kLanes) {
    for (int k = 0; k < rm::kLanes; ++k) {
      const T xk = x[i + k];  // loaded unconditionally: a conditional load keeps the loop scalar
      const T v = i + k < n ? xk : kNegInf;
      acc[k] = v > acc[k] ? v : acc[k];
    }
  }
  T m = rm::MaxLanesPairwise(acc);
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// y[i] = exp(x[i] - shift) for i < n, 0 for masked entries in [n, full); returns the sum.
template <typename T>
inline T MaskedExpShiftStore(const T* __restrict x, T shift, T* __restrict y, int64_t n, int64_t full) {
  T acc[rm::kLanes] = {};
  int64_t i = 0;
  for (; i < full; i += rm::kLanes) {
    for (int k = 0; k < rm::kLanes; ++k) {
      const T e = rm::Exp(x[i + k] - shift);
      const T v = i + k < n ? e : T(0);
      y[i + k] = v;
      acc[k] += v;
    }
  }
  T s = rm::ReduceLanesPairwise(acc);
  for (; i < n; ++i) {
    const T e = rm::Exp(x[i] - shift);
    y[i] = e;
    s += e;
  }
  return s;
}

// sum of exp(x[i] - shift) for i < n.
template <typename T>
inline T MaskedExpShiftSum(const T* __restrict x, T shift, int64_t n, int64_t full) {
  T acc[rm::kLanes] = {};
  int64_t i = 0;
  for (; i < full; i += rm::kLanes) {
    for (int k = 0; k < rm::kLanes; ++k) {
      const T e = rm::Exp(x[i + k] - shift);
      acc[k] += i + k < n ? e : T(0);
    }
  }
  T s = rm::ReduceLanesPairwise(acc);
  for (; i < n; ++i) s += rm::Exp(x[i] - shift);
  return s;
}

// sum of y[i] * dy[i] for i < n.
template <typename T>
inline T MaskedDot(const T* __restrict y, const T* __restrict dy, int64_t n, int64_t full) {
  T acc[rm::kLanes] = {};
  int64_t i = 0;
  for (; i < full; i += rm::kLanes) {
    for (int k = 0; k < rm::kLanes; ++k) {
      const T p = y[i + k] * dy[i + k];
      acc[k] += i + k < n ? p : T(0);
    }
  }
  T s = rm::ReduceLanesPairwise(acc);
  for (; i < n; ++i) s += y[i] * dy[i];
  return s;
}

// dx = y * (dy - d) for i < n, 0 for masked entries in [n, full).
template <typename T>
inline void MaskedSoftmaxGradRow(const T* __restrict y, const T* __restrict dy, T d, T* __restrict dx, int64_t n,
                                 int64_t full) {
  int64_t i = 0;
  for (; i < full; i += rm::kLanes) {
    for (int k = 0; k < rm::kLanes; ++k) {
      const T v = y[i + k] * (dy[i + k] - d);
      dx[i + k] = i + k < n ? v : T(0);
    }
  }
  for (; i < n; ++i) dx[i] = y[i] * (dy[i] - d);
}

// Rows [begin, end).
template <typename T>
OL_ROW_KERNEL void SoftmaxRows(const T* x, T* y, Rows rows, int64_t begin, int64_t end, bool log) {
  const T masked = log ? -std::numeric_limits<T>::infinity() : T(0);
  for (int64_t r = begin; r < end; ++r) {
    const T* xr = x + r * rows.cols;
    T* yr = y + r * rows.cols;
    const int64_t n = rows.Valid(r);
    if (rows.causal) {
      const int64_t full = MaskedEnd(n, rows.cols);
      const T m = MaskedMax(xr, n, full);
      if (log) {
        LogSoftmaxRow(xr, m, std::log(MaskedExpShiftSum(xr, m, n, full)), yr, n);
        std::fill(yr + n, yr + rows.cols, masked);
      } else {
        // Only the kept entries are scaled: a NaN sum (a row of -inf scores) must leave the
        // masked entries exactly 0.
        rm::Scale(yr, T(1) / MaskedExpShiftStore(xr, m, yr, n, full), n);
        std::fill(yr + n, yr + rows.cols, masked);
      }
      continue;
    }
    const T m = rm::Max(xr, n);
    if (log) {
      LogSoftmaxRow(xr, m, std::log(rm::ExpShiftSum(xr, m, n)), yr, n);
    } else {
      const T s = rm::ExpShiftStore(xr, m, yr, n);
      rm::Scale(yr, T(1) / s, n);
    }
  }
}

// dx = y * (dy - d).
template <typename T>
inline void SoftmaxGradRow(const T* __restrict y, const T* __restrict dy, T d, T* __restrict dx, int64_t n) {
  int64_t i = 0;
  for (; i + rm::kLanes <= n; i += rm::kLanes) {
    for (int k = 0; k < rm::kLanes; ++k) dx[i + k] = y[i + k] * (dy[i + k] - d);
  }
  for (; i < n; ++i) dx[i] = y[i] * (dy[i] - d);
}

// dx = dy - exp(y) * s.
template <typename T>
inline void LogSoftmaxGradRow(const T* __restrict y, const T* __restrict dy, T s, T* __restrict dx, int64_t n) {
  int64_t i = 0;
  for (; i + rm::kLanes <= n; i += rm::kLanes) {
    for (int k = 0; k < rm::kLanes; ++k) dx[i + k] = dy[i + k] - rm::Exp(y[i + k]) * s;
  }
  for (; i < n; ++i) dx[i] = dy[i] - rm::Exp(y[i]) * s;
}

// Rows [begin, end).
template <typename T>
OL_ROW_KERNEL void SoftmaxGradRows(const T* y, const T* dy, T* dx, Rows rows, int64_t begin, int64_t end, bool log) {
  for (int64_t r = begin; r < end; ++r) {
    const int64_t off = r * rows.cols;
    const int64_t n = rows.Valid(r);
    int64_t written = n;
    if (log) {
      LogSoftmaxGradRow(y + off, dy + off, rm::Sum(dy + off, n), dx + off, n);
    } else if (rows.causal) {
      const int64_t full = MaskedEnd(n, rows.cols);
      MaskedSoftmaxGradRow(y + off, dy + off, MaskedDot(y + off, dy + off, n, full), dx + off, n, full);
      written = std::max(n, full);
    } else {
      SoftmaxGradRow(y + off, dy + off, rm::Dot(y + off, dy + off, n), dx + off, n);
    }
    std::fill(dx + off + written, dx + off + rows.cols, T(0));
  }
}

// ---- op definitions ----

absl::Status CheckRowInput(const std::string& op, const std::string& name, const std::string& what,
                           const TensorDesc& d, bool causal) {
  if (!IsFloat(d.dtype)) {
    return OpError(op, name, what, " must be float32 or float64, got ", d.ToString());
  }
  if (d.shape.num_axes() < 1) {
    return OpError(op, name, what, " must have at least one axis (the op runs over the last axis), got ",
                   d.ToString());
  }
  if (causal && d.shape.num_axes() < 2) {
    return OpError(op, name, "causal=true needs ", what, " of rank >= 2 ([..., q, k]), got ", d.ToString(),
                   "; hint: add a query axis or set causal=false");
  }
  return absl::OkStatus();
}

std::vector<SbpSignature> RowSignatures(int rank, int num_inputs, bool linear_in_last_input) {
  std::vector<SbpSignature> sigs;
  for (int a : ops::SplitAxes(rank, /*exclude_last=*/1)) {
    sigs.push_back({std::vector<Sbp>(num_inputs, Sbp::Split(a)), {Sbp::Split(a)}});
  }
  sigs.push_back({std::vector<Sbp>(num_inputs, Sbp::Broadcast()), {Sbp::Broadcast()}});
  if (linear_in_last_input) {
    std::vector<Sbp> in(num_inputs, Sbp::Broadcast());
    in.back() = Sbp::PartialSum();
    sigs.push_back({in, {Sbp::PartialSum()}});
  }
  return sigs;
}

OpDef MakeSoftmaxDef(const std::string& op, bool log) {
  OpDef def;
  def.name = op;
  def.doc = log ? "log(softmax(x)) over the last axis, computed stably as x - max - log(sum(exp(x - max)))"
                : "exp(x - max) / sum(exp(x - max)) over the last axis";
  def.inputs = {"x"};
  def.outputs = {"y"};
  def.attrs = {{"causal", AttrType::kBool, AttrValue(false),
                "mask key j > query i on the last two axes [.., q, k] (logical indices)"}};
  def.infer = [op](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> {
    RETURN_IF_ERROR(CheckRowInput(op, ctx.op_name, "x", ctx.inputs[0], ctx.attrs.Bool("causal")));
    return std::vector<TensorDesc>{ctx.inputs[0]};
  };
  def.sbp = [](const AttrMap&, const std::vector<TensorDesc>& in) {
    return RowSignatures(in[0].shape.num_axes(), 1, /*linear_in_last_input=*/false);
  };
  def.cost = [](const AttrMap&, const std::vector<TensorDesc>& in, const std::vector<TensorDesc>& out) {
    return OpCost{8.0 * static_cast<double>(in[0].shape.elem_count()), ops::TotalBytes(in) + ops::TotalBytes(out)};
  };
  const std::string grad_op = op + "_grad";
  def.grad = [grad_op](GradContext* ctx) -> absl::Status {
    if (!ctx->needs_input_grad(0)) return absl::OkStatus();
    AttrMap attrs;
    attrs.Set("causal", ctx->attrs().Bool("causal"));
    ASSIGN_OR_RETURN(std::string dx, ctx->EmitOne(grad_op, {ctx->output(0), ctx->output_grad(0)}, attrs));
    ctx->SetInputGrad(0, dx);
    return absl::OkStatus();
  };
  def.cpu_kernel = [op, log](const KernelContext& ctx) -> absl::Status {
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    const bool causal = ctx.attrs.Bool("causal");
    RETURN_IF_ERROR(CheckRowInput(op, ctx.op_name, "x", x.desc(), causal));
    if (y.desc() != x.desc()) {
      return OpError(op, ctx.op_name, "output ", y.desc().ToString(), " does not match x ", x.desc().ToString());
    }
    const Rows rows = MakeRows(x.shape(), ctx.input_shards.empty() ? nullptr : &ctx.input_shards[0], causal);
    return ops::DispatchFloat(x.dtype(), op, [&](auto tag) {
      using T = decltype(tag);
      ParallelFor(ctx.intra_op_pool, rows.count, rows.cols,
                  [&](int64_t b, int64_t e) { SoftmaxRows<T>(x.data<T>(), y.data<T>(), rows, b, e, log); });
      return absl::OkStatus();
    });
  };
  return def;
}

OpDef MakeSoftmaxGradDef(const std::string& op, bool log) {
  OpDef def;
  def.name = op;
  def.doc = log ? "gradient of log_softmax: dx = dy - exp(y) * sum(dy) over the last axis"
                : "gradient of softmax: dx = y * (dy - sum(y * dy)) over the last axis";
  def.inputs = {"y", "dy"};
  def.outputs = {"dx"};
  def.attrs = {{"causal", AttrType::kBool, AttrValue(false), "the forward op's causal mask"}};
  def.infer = [op](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> {
    const bool causal = ctx.attrs.Bool("causal");
    RETURN_IF_ERROR(CheckRowInput(op, ctx.op_name, "y", ctx.inputs[0], causal));
    if (ctx.inputs[1] != ctx.inputs[0]) {
      return OpError(op, ctx.op_name, "dy ", ctx.inputs[1].ToString(), " must match y ", ctx.inputs[0].ToString());
    }
    return std::vector<TensorDesc>{ctx.inputs[0]};
  };
  def.sbp = [](const AttrMap&, const std::vector<TensorDesc>& in) {
    return RowSignatures(in[0].shape.num_axes(), 2, /*linear_in_last_input=*/true);
  };
  def.cost = [](const AttrMap&, const std::vector<TensorDesc>& in, const std::vector<TensorDesc>& out) {
    return OpCost{4.0 * static_cast<double>(in[0].shape.elem_count()), ops::TotalBytes(in) + ops::TotalBytes(out)};
  };
  def.cpu_kernel = [op, log](const KernelContext& ctx) -> absl::Status {
    const Tensor& y = *ctx.inputs[0];
    const Tensor& dy = *ctx.inputs[1];
    Tensor& dx = *ctx.outputs[0];
    const bool causal = ctx.attrs.Bool("causal");
    RETURN_IF_ERROR(CheckRowInput(op, ctx.op_name, "y", y.desc(), causal));
    if (dy.desc() != y.desc() || dx.desc() != y.desc()) {
      return OpError(op, ctx.op_name, "y ", y.desc().ToString(), ", dy ", dy.desc().ToString(), " and dx ",
                     dx.desc().ToString(), " must match");
    }
    const Rows rows = MakeRows(y.shape(), ctx.input_shards.empty() ? nullptr : &ctx.input_shards[0], causal);
    return ops::DispatchFloat(y.dtype(), op, [&](auto tag) {
      using T = decltype(tag);
      ParallelFor(ctx.intra_op_pool, rows.count, rows.cols, [&](int64_t b, int64_t e) {
        SoftmaxGradRows<T>(y.data<T>(), dy.data<T>(), dx.data<T>(), rows, b, e, log);
      });
      return absl::OkStatus();
    });
  };
  return def;
}

}  // namespace

absl::Status RegisterSoftmaxOps(OpRegistry* registry) {
  RETURN_IF_ERROR(registry->Register(MakeSoftmaxDef("softmax", /*log=*/false)));
  RETURN_IF_ERROR(registry->Register(MakeSoftmaxDef("log_softmax", /*log=*/true)));
  RETURN_IF_ERROR(registry->Register(MakeSoftmaxGradDef("softmax_grad", /*log=*/false)));
  RETURN_IF_ERROR(registry->Register(MakeSoftmaxGradDef("log_softmax_grad", /*log=*/true)));
  return absl::OkStatus();
}

}  // namespace oneflow_like
