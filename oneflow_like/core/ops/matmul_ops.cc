// matmul: y = alpha * op(a) @ op(b), op(t) = t or t^T on the last two axes (transpose_a/_b).
//
// Shapes: op(a) is [..., m, k] and op(b) is [..., k, n] -> y [..., m, n]. Either both have the
// same batch dims ("batched"), or b is 2-D and shared by every matrix of a batched a.
//
// SBP signatures (matrix axes of a/b chosen according to the transpose flags; Y is [.., m, n]):
//   Y:S(m) <- A:S(m), B:B        Y:S(n) <- A:B, B:S(n)        Y:P <- A:S(k), B:S(k)
//   Y:P <- A:P, B:B              Y:P <- A:B, B:P              Y:B <- A:B, B:B
//   batched: Y:S(i) <- A:S(i), B:S(i) for each batch axis i; with a shared 2-D b, B:B instead.
// All are linear, so alpha needs no care, and all hold for uneven splits.
//
// Gradients (A = op(a), B = op(b)): dA = alpha dY B^T, dB = alpha A^T dY, written as matmuls
// with transpose flags. With a shared 2-D b, db is summed over the batch with one
// matmul_batch_sum (below; no reshaped copies of a and dy); and da for a transposed a is a
// matmul followed by a transpose of the last two axes.
//
// Kernel: OpenBLAS cblas_sgemm/cblas_dgemm (row-major), one call per matrix, or one call for the
// whole batch when b is shared and a is not transposed (the batch folds into m). Without intra-op
// threads it runs with OpenBLAS's own threads (OPENBLAS_NUM_THREADS). With the rank's intra-op
// threads (KernelContext::intra_op_pool, >= 2 threads) OpenBLAS runs single-threaded inside
// them (SingleThreadedBlas: a process-wide setting) and the kernel splits the work, one part
// per thread: the matrices of a batch, else the rows of y (its columns when y has too few
// rows); products under 4 x the pool's threshold (2^18 multiply-adds by default, OpenBLAS's own)
// stay whole. Measured on the 2-core dev VM at the W1/W2 shapes: 5-15% faster than OpenBLAS's two
// threads, 2.5x on attention's 32 small matrices, and no OpenBLAS thread spinning beside the
// pool's. OpenBLAS's blocking follows the operand sizes, so a split product differs from the
// whole one in the last bits (as OpenBLAS's 1- and 2-thread products already do); it does not
// depend on which thread computes a part.
//
// matmul_batch_sum: y[m, n] = alpha * sum over the batch of op(a_i) @ op(b_i), a and b with the
// same batch dims. It is the weight gradient of a matmul with a shared 2-D b, computed without
// materializing reshaped (copied) operands: with transpose_a and not transpose_b the batch
// folds into k (one GEMM over k = batch * k), otherwise one GEMM per matrix accumulating into y
// (beta = 1). SBP: a batch axis split on both -> P, and the 2-D matmul signatures
// (S(m) <- S(m),B; S(n) <- B,S(n); P <- S(k),S(k); P <- P,B; P <- B,P; B <- B,B). It has no
// gradient rule (it only appears in gradient graphs; double backward is not supported).
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "oneflow_like/core/ops/builtin_ops.h"
#include "oneflow_like/core/ops/op_util.h"

namespace oneflow_like {
namespace {

using ops::OpError;

// Axis roles of one matmul instance.
struct MatmulDims {
  int a_rank = 0, b_rank = 0;
  bool shared_b = false;  // a batched, b 2-D
  int a_m_axis = 0, a_k_axis = 0, b_k_axis = 0, b_n_axis = 0;
  int64_t batch = 1, m = 0, k = 0, n = 0;
};

MatmulDims GetDims(const Shape& a, const Shape& b, bool ta, bool tb) {
  MatmulDims d;
  d.a_rank = a.num_axes();
  d.b_rank = b.num_axes();
  d.shared_b = d.a_rank > 2 && d.b_rank == 2;
  d.a_m_axis = ta ? d.a_rank - 1 : d.a_rank - 2;
  d.a_k_axis = ta ? d.a_rank - 2 : d.a_rank - 1;
  d.b_k_axis = tb ? d.b_rank - 1 : d.b_rank - 2;
  d.b_n_axis = tb ? d.b_rank - 2 : d.b_rank - 1;
  d.batch = a.Count(0, d.a_rank - 2);
  d.m = a.dim(d.a_m_axis);
  d.k = a.dim(d.a_k_axis);
  d.n = b.dim(d.b_n_axis);
  return d;
}

std::string Flag(bool v) { return v ? "true" : "false"; }

absl::StatusOr<std::vector<TensorDesc>> InferMatmul(const InferContext& ctx) {
  const TensorDesc& a = ctx.inputs[0];
  const TensorDesc& b = ctx.inputs[1];
  const bool ta = ctx.attrs.Bool("transpose_a"), tb = ctx.attrs.Bool("transpose_b");
  const std::string& name = ctx.op_name;
  if (a.dtype != DataType::kFloat32 && a.dtype != DataType::kFloat64) {
    return OpError("matmul", name, "a ", a.ToString(), " and b ", b.ToString(),
                   " must be float32 or float64");
  }
  if (a.dtype != b.dtype) {
    return OpError("matmul", name, "dtypes differ: a ", a.ToString(), " and b ", b.ToString(),
                   " (insert a cast)");
  }
  if (a.shape.num_axes() < 2 || b.shape.num_axes() < 2) {
    return OpError("matmul", name, "a ", a.ToString(), " and b ", b.ToString(),
                   " must have at least 2 axes (reshape a vector to [1,k] or [k,1])");
  }
  const int ra = a.shape.num_axes(), rb = b.shape.num_axes();
  if (rb > 2) {
    bool same_batch = ra == rb;
    for (int i = 0; same_batch && i < ra - 2; ++i) same_batch = a.shape.dim(i) == b.shape.dim(i);
    if (!same_batch) {
      return OpError("matmul", name, "batch dimensions differ: a ", a.ToString(), " and b ", b.ToString(),
                     " (b must have exactly a's batch dims, or be 2-D to be shared across a's batch)");
    }
  }
  const MatmulDims d = GetDims(a.shape, b.shape, ta, tb);
  const int64_t bk = b.shape.dim(d.b_k_axis);
  if (d.k != bk) {
    return OpError("matmul", name, "inner dimensions differ: a ", a.ToString(), " (transpose_a=", Flag(ta),
                   ") has k=", d.k, ", b ", b.ToString(), " has k=", bk, " (transpose_b=", Flag(tb), ")");
  }
  std::vector<int64_t> dims(a.shape.dims().begin(), a.shape.dims().end() - 2);
  dims.push_back(d.m);
  dims.push_back(d.n);
  return std::vector<TensorDesc>{{a.dtype, Shape(std::move(dims))}};
}

std::vector<SbpSignature> MatmulSbp(const AttrMap& attrs, const std::vector<TensorDesc>& in) {
  const MatmulDims d =
      GetDims(in[0].shape, in[1].shape, attrs.Bool("transpose_a"), attrs.Bool("transpose_b"));
  const int ry = d.a_rank;
  const Sbp B = Sbp::Broadcast(), P = Sbp::PartialSum();
  std::vector<SbpSignature> sigs;
  for (int i = 0; i < ry - 2; ++i) {
    sigs.push_back({{Sbp::Split(i), d.shared_b ? B : Sbp::Split(i)}, {Sbp::Split(i)}});
  }
  sigs.push_back({{Sbp::Split(d.a_m_axis), B}, {Sbp::Split(ry - 2)}});
  sigs.push_back({{B, Sbp::Split(d.b_n_axis)}, {Sbp::Split(ry - 1)}});
  sigs.push_back({{Sbp::Split(d.a_k_axis), Sbp::Split(d.b_k_axis)}, {P}});
  sigs.push_back({{P, B}, {P}});
  sigs.push_back({{B, P}, {P}});
  sigs.push_back({{B, B}, {B}});
  return sigs;
}

OpCost MatmulCost(const AttrMap& attrs, const std::vector<TensorDesc>& in,
                  const std::vector<TensorDesc>& out) {
  const MatmulDims d =
      GetDims(in[0].shape, in[1].shape, attrs.Bool("transpose_a"), attrs.Bool("transpose_b"));
  OpCost c;
  c.flops = 2.0 * static_cast<double>(d.batch) * d.m * d.n * d.k;
  c.bytes_moved = ops::TotalBytes(in) + ops::TotalBytes(out);
  return c;
}

// ---- kernel ----

// c = alpha * op(a) @ op(b) + beta * c (row-major).
void Gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
          int ldb, float* c, int ldc, float beta = 0.0f) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha,
              a, lda, b, ldb, beta, c, ldc);
}
void Gemm(bool ta, bool tb, int m, int n, int k, double alpha, const double* a, int lda, const double* b,
          int ldb, double* c, int ldc, double beta = 0.0) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha,
              a, lda, b, ldb, beta, c, ldc);
}

// OpenBLAS computes inside the pool's threads, one thread each, instead of starting its own:
// set by the first matmul kernel that has a pool (openblas_set_num_threads is process-wide).
void SingleThreadedBlas(const IntraOpPool* pool) {
  if (pool != nullptr && pool->num_threads() >= 2 && openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

// Whether m x n x k multiply-adds are worth splitting over the pool.
bool SplitProduct(const IntraOpPool* pool, int64_t m, int64_t n, int64_t k) {
  return pool != nullptr && pool->num_threads() >= 2 &&
         static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) >=
             4.0 * static_cast<double>(pool->min_parallel_work());
}

constexpr int64_t kGemmRowAlign = 16;  // parts of whole register tiles (OpenBLAS sgemm: 16 rows)

// Calls part(m0, m1, n0, n1) for blocks covering y[m, n]: one per thread, by rows of y (by columns
// when y has fewer than 16 rows per thread), or one block when the product is small.
template <typename Part>
void SplitRowsOrColumns(IntraOpPool* pool, int64_t m, int64_t n, int64_t k, Part part) {
  if (!SplitProduct(pool, m, n, k)) return part(int64_t{0}, m, int64_t{0}, n);
  const int64_t threads = pool->num_threads();
  if (m >= threads * kGemmRowAlign) {
    ParallelForChunks(pool, m, RoundUp((m + threads - 1) / threads, kGemmRowAlign),
                      [&](int64_t m0, int64_t m1) { part(m0, m1, int64_t{0}, n); });
  } else if (n >= threads * kGemmRowAlign) {
    ParallelForChunks(pool, n, RoundUp((n + threads - 1) / threads, kGemmRowAlign),
                      [&](int64_t n0, int64_t n1) { part(int64_t{0}, m, n0, n1); });
  } else {
    part(int64_t{0}, m, int64_t{0}, n);
  }
}

// Gemm on the block [m0, m1) x [n0, n1) of c = alpha * op(a) @ op(b) + beta * c.
template <typename T>
void GemmBlock(bool ta, bool tb, int64_t m0, int64_t m1, int64_t n0, int64_t n1, int k, T alpha, const T* a, int lda,
               const T* b, int ldb, T* c, int ldc, T beta) {
  Gemm(ta, tb, static_cast<int>(m1 - m0), static_cast<int>(n1 - n0), k, alpha, ta ? a + m0 : a + m0 * lda, lda,
       tb ? b + n0 * ldb : b + n0, ldb, c + m0 * ldc + n0, ldc, beta);
}

template <typename T>
absl::Status MatmulKernelT(const KernelContext& ctx) {
  const Tensor& a = *ctx.inputs[0];
  const Tensor& b = *ctx.inputs[1];
  Tensor& y = *ctx.outputs[0];
  const bool ta = ctx.attrs.Bool("transpose_a"), tb = ctx.attrs.Bool("transpose_b");
  const T alpha = static_cast<T>(ctx.attrs.Float("alpha"));
  MatmulDims d = GetDims(a.shape(), b.shape(), ta, tb);
  T* py = y.data<T>();
  if (y.elem_count() == 0) return absl::OkStatus();
  if (d.k == 0) {  // an empty sum (e.g. an empty shard of a k-split)
    std::fill(py, py + y.elem_count(), T(0));
    return absl::OkStatus();
  }
  int64_t batch = d.batch, m = d.m;
  if (d.shared_b && !ta) {  // [batch, m, k] is one [batch * m, k] matrix
    m *= batch;
    batch = 1;
  }
  for (int64_t v : {m, d.n, d.k}) {
    if (v > INT_MAX) {
      return OpError("matmul", ctx.op_name, "matrix dimension ", v, " exceeds the BLAS limit ", INT_MAX,
                     " (a ", a.desc().ToString(), ", b ", b.desc().ToString(), ")");
    }
  }
  const int lda = std::max(static_cast<int>(ta ? m : d.k), 1), ldb = std::max(static_cast<int>(tb ? d.k : d.n), 1);
  const int ldy = std::max(static_cast<int>(d.n), 1), k = static_cast<int>(d.k);
  const int64_t a_stride = m * d.k, b_stride = d.shared_b ? 0 : d.k * d.n, y_stride = m * d.n;
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  IntraOpPool* pool = ctx.intra_op_pool;
  SingleThreadedBlas(pool);
  auto matrices = [&](int64_t i0, int64_t i1) {  // whole matrices [i0, i1) of the batch
    for (int64_t i = i0; i < i1; ++i) {
      Gemm(ta, tb, static_cast<int>(m), static_cast<int>(d.n), k, alpha, pa + i * a_stride, lda, pb + i * b_stride,
           ldb, py + i * y_stride, ldy);
    }
  };
  if (pool != nullptr && batch >= pool->num_threads() && SplitProduct(pool, batch * m, d.n, d.k)) {
    ParallelForChunks(pool, batch, (batch + pool->num_threads() - 1) / pool->num_threads(), matrices);
    return absl::OkStatus();
  }
  for (int64_t i = 0; i < batch; ++i) {
    SplitRowsOrColumns(pool, m, d.n, d.k, [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
      GemmBlock(ta, tb, m0, m1, n0, n1, k, alpha, pa + i * a_stride, lda, pb + i * b_stride, ldb, py + i * y_stride,
                ldy, T(0));
    });
  }
  return absl::OkStatus();
}

absl::Status MatmulKernel(const KernelContext& ctx) {
  return ops::DispatchFloat(ctx.inputs[0]->dtype(), "matmul",
                            [&](auto zero) { return MatmulKernelT<decltype(zero)>(ctx); });
}

// ---- gradient ----

absl::Status MatmulGrad(GradContext* ctx) {
  const bool ta = ctx->attrs().Bool("transpose_a"), tb = ctx->attrs().Bool("transpose_b");
  const double alpha = ctx->attrs().Float("alpha");
  const Shape& a_shape = ctx->input_desc(0).shape;
  const Shape& b_shape = ctx->input_desc(1).shape;
  const MatmulDims d = GetDims(a_shape, b_shape, ta, tb);
  const std::string& a = ctx->input(0);
  const std::string& b = ctx->input(1);
  const std::string& dy = ctx->output_grad(0);
  auto mm = [&](const std::string& x, const std::string& y, bool tx, bool ty) {
    return ctx->EmitOne("matmul", {x, y}, {{"transpose_a", tx}, {"transpose_b", ty}, {"alpha", alpha}});
  };
  if (ctx->needs_input_grad(0)) {
    std::string da;
    if (!ta) {
      ASSIGN_OR_RETURN(da, mm(dy, b, false, !tb));  // dY B^T
    } else if (!d.shared_b) {
      ASSIGN_OR_RETURN(da, mm(b, dy, tb, true));  // (dY B^T)^T = B dY^T
    } else {
      ASSIGN_OR_RETURN(std::string da_t, mm(dy, b, false, !tb));
      std::vector<int64_t> perm;
      for (int i = 0; i < d.a_rank; ++i) perm.push_back(i);
      std::swap(perm[d.a_rank - 2], perm[d.a_rank - 1]);
      ASSIGN_OR_RETURN(da, ctx->EmitOne("transpose", {da_t}, {{"perm", perm}}));
    }
    ctx->SetInputGrad(0, da);
  }
  if (ctx->needs_input_grad(1)) {
    std::string db;
    if (!d.shared_b) {
      if (!tb) {
        ASSIGN_OR_RETURN(db, mm(a, dy, !ta, false));  // A^T dY
      } else {
        ASSIGN_OR_RETURN(db, mm(dy, a, true, ta));  // (A^T dY)^T = dY^T A
      }
    } else {  // summed over the batch: matmul_batch_sum (one GEMM over k = batch * m when !ta)
      auto mm_sum = [&](const std::string& x, const std::string& y, bool tx, bool ty) {
        return ctx->EmitOne("matmul_batch_sum", {x, y}, {{"transpose_a", tx}, {"transpose_b", ty}, {"alpha", alpha}});
      };
      if (!tb) {
        ASSIGN_OR_RETURN(db, mm_sum(a, dy, !ta, false));  // sum_i A_i^T dY_i
      } else {
        ASSIGN_OR_RETURN(db, mm_sum(dy, a, true, ta));  // sum_i dY_i^T A_i
      }
    }
    ctx->SetInputGrad(1, db);
  }
  return absl::OkStatus();
}

// ---- matmul_batch_sum ----

absl::StatusOr<std::vector<TensorDesc>> InferMatmulBatchSum(const InferContext& ctx) {
  const TensorDesc& a = ctx.inputs[0];
  const TensorDesc& b = ctx.inputs[1];
  const bool ta = ctx.attrs.Bool("transpose_a"), tb = ctx.attrs.Bool("transpose_b");
  const std::string& name = ctx.op_name;
  const char* op = "matmul_batch_sum";
  if (a.dtype != DataType::kFloat32 && a.dtype != DataType::kFloat64) {
    return OpError(op, name, "a ", a.ToString(), " and b ", b.ToString(), " must be float32 or float64");
  }
  if (a.dtype != b.dtype) {
    return OpError(op, name, "dtypes differ: a ", a.ToString(), " and b ", b.ToString(), " (insert a cast)");
  }
  const int ra = a.shape.num_axes(), rb = b.shape.num_axes();
  bool same_batch = ra >= 3 && ra == rb;
  for (int i = 0; same_batch && i < ra - 2; ++i) same_batch = a.shape.dim(i) == b.shape.dim(i);
  if (!same_batch) {
    return OpError(op, name, "a ", a.ToString(), " and b ", b.ToString(),
                   " must have the same batch dims and at least 3 axes (use matmul for 2-D operands)");
  }
  const MatmulDims d = GetDims(a.shape, b.shape, ta, tb);
  const int64_t bk = b.shape.dim(d.b_k_axis);
  if (d.k != bk) {
    return OpError(op, name, "inner dimensions differ: a ", a.ToString(), " (transpose_a=", Flag(ta), ") has k=", d.k,
                   ", b ", b.ToString(), " has k=", bk, " (transpose_b=", Flag(tb), ")");
  }
  return std::vector<TensorDesc>{{a.dtype, Shape({d.m, d.n})}};
}

std::vector<SbpSignature> MatmulBatchSumSbp(const AttrMap& attrs, const std::vector<TensorDesc>& in) {
  const MatmulDims d =
      GetDims(in[0].shape, in[1].shape, attrs.Bool("transpose_a"), attrs.Bool("transpose_b"));
  const Sbp B = Sbp::Broadcast(), P = Sbp::PartialSum();
  std::vector<SbpSignature> sigs;
  for (int i = 0; i < d.a_rank - 2; ++i) sigs.push_back({{Sbp::Split(i), Sbp::Split(i)}, {P}});
  sigs.push_back({{Sbp::Split(d.a_m_axis), B}, {Sbp::Split(0)}});
  sigs.push_back({{B, Sbp::Split(d.b_n_axis)}, {Sbp::Split(1)}});
  sigs.push_back({{Sbp::Split(d.a_k_axis), Sbp::Split(d.b_k_axis)}, {P}});
  sigs.push_back({{P, B}, {P}});
  sigs.push_back({{B, P}, {P}});
  sigs.push_back({{B, B}, {B}});
  return sigs;
}

template <typename T>
absl::Status MatmulBatchSumKernelT(const KernelContext& ctx) {
  const Tensor& a = *ctx.inputs[0];
  const Tensor& b = *ctx.inputs[1];
  Tensor& y = *ctx.outputs[0];
  const bool ta = ctx.attrs.Bool("transpose_a"), tb = ctx.attrs.Bool("transpose_b");
  const T alpha = static_cast<T>(ctx.attrs.Float("alpha"));
  const MatmulDims d = GetDims(a.shape(), b.shape(), ta, tb);
  T* py = y.data<T>();
  if (y.elem_count() == 0) return absl::OkStatus();
  if (d.k == 0 || d.batch == 0) {  // an empty sum
    std::fill(py, py + y.elem_count(), T(0));
    return absl::OkStatus();
  }
  // transpose_a, !transpose_b: a_i is [k, m] and b_i is [k, n]; stacked, they are one [batch*k, m]
  // and one [batch*k, n] matrix, and the sum over i is one product over k' = batch * k.
  const bool fold = ta && !tb;
  const int64_t k = fold ? d.batch * d.k : d.k, batch = fold ? 1 : d.batch;
  for (int64_t v : {d.m, d.n, k}) {
    if (v > INT_MAX) {
      return OpError("matmul_batch_sum", ctx.op_name, "matrix dimension ", v, " exceeds the BLAS limit ", INT_MAX,
                     " (a ", a.desc().ToString(), ", b ", b.desc().ToString(), ")");
    }
  }
  const int lda = std::max(static_cast<int>(ta ? d.m : d.k), 1), ldb = std::max(static_cast<int>(tb ? d.k : d.n), 1);
  const int ldy = std::max(static_cast<int>(d.n), 1);
  const int64_t a_stride = d.m * d.k, b_stride = d.k * d.n;
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  SingleThreadedBlas(ctx.intra_op_pool);
  // Each block of y accumulates the batch in order (beta = 1 after the first product).
  SplitRowsOrColumns(ctx.intra_op_pool, d.m, d.n, k * batch, [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    for (int64_t i = 0; i < batch; ++i) {
      GemmBlock(ta, tb, m0, m1, n0, n1, static_cast<int>(k), alpha, pa + i * a_stride, lda, pb + i * b_stride, ldb, py,
                ldy, i == 0 ? T(0) : T(1));
    }
  });
  return absl::OkStatus();
}

absl::Status MatmulBatchSumKernel(const KernelContext& ctx) {
  return ops::DispatchFloat(ctx.inputs[0]->dtype(), "matmul_batch_sum",
                            [&](auto zero) { return MatmulBatchSumKernelT<decltype(zero)>(ctx); });
}

}  // namespace

absl::Status RegisterMatmulOps(OpRegistry* registry) {
  OpDef def;
  def.name = "matmul";
  def.doc = "y = alpha * op(a) @ op(b); a[..., m, k], b[..., k, n] or 2-D b shared across a's batch";
  def.inputs = {"a", "b"};
  def.outputs = {"y"};
  def.attrs = {
      {"transpose_a", AttrType::kBool, AttrValue(false), "use a^T (last two axes)"},
      {"transpose_b", AttrType::kBool, AttrValue(false), "use b^T (last two axes)"},
      {"alpha", AttrType::kFloat, AttrValue(1.0), "scale of the product"},
  };
  def.infer = InferMatmul;
  def.sbp = MatmulSbp;
  def.grad = MatmulGrad;
  def.cost = MatmulCost;
  def.cpu_kernel = MatmulKernel;
  RETURN_IF_ERROR(registry->Register(def));

  OpDef sum;
  sum.name = "matmul_batch_sum";
  sum.doc = "y[m, n] = alpha * sum over the batch of op(a_i) @ op(b_i); a, b with the same batch dims";
  sum.inputs = {"a", "b"};
  sum.outputs = {"y"};
  sum.attrs = def.attrs;
  sum.infer = InferMatmulBatchSum;
  sum.sbp = MatmulBatchSumSbp;
  sum.cost = MatmulCost;
  sum.cpu_kernel = MatmulBatchSumKernel;
  return registry->Register(std::move(sum));
}

}  // namespace oneflow_like
