#include "oneflow_like/core/cuda/matmul_kernels.h"

#include <algorithm>
#include <climits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/core/cuda/cuda_status.h"

namespace oneflow_like {
namespace cuda {

absl::Status CublasStatus(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string message =
      absl::StrCat(call, " failed: ", cublasGetStatusString(status), " (", cublasGetStatusName(status), ")");
  switch (status) {
    case CUBLAS_STATUS_ALLOC_FAILED: return absl::ResourceExhaustedError(message);
    case CUBLAS_STATUS_INVALID_VALUE: return absl::InvalidArgumentError(message);
    case CUBLAS_STATUS_NOT_INITIALIZED: return absl::UnavailableError(message);
    default: return absl::InternalError(message);
  }
}

absl::StatusOr<CublasHandle> CublasHandle::Create() {
  cublasHandle_t handle = nullptr;
  if (absl::Status s = CublasStatus(cublasCreate(&handle), "cublasCreate"); !s.ok()) return s;
  return CublasHandle(handle);
}

CublasHandle::CublasHandle(CublasHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

CublasHandle& CublasHandle::operator=(CublasHandle&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) cublasDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

CublasHandle::~CublasHandle() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

namespace {

std::string Dims(const std::vector<int64_t>& d) { return absl::StrCat("[", absl::StrJoin(d, ","), "]"); }
const char* Flag(bool v) { return v ? "true" : "false"; }

// Column-major view (see the header): C[n, m] = op(B)[n, k] op(A)[k, m] with B = b's buffer, A = a's.
struct GemmArgs {
  cublasOperation_t op_b, op_a;
  int lda, ldb;
};

GemmArgs ArgsOf(const MatmulShape& s) {
  GemmArgs g;
  g.op_b = s.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  // Leading dimensions are at least 1 (cuBLAS rejects 0 even for an empty k).
  g.ldb = static_cast<int>(std::max<int64_t>(1, s.transpose_b ? s.k : s.n));
  g.op_a = s.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  g.lda = static_cast<int>(std::max<int64_t>(1, s.transpose_a ? s.m : s.k));
  return g;
}

cublasStatus_t Gemm(cublasHandle_t h, const GemmArgs& g, const MatmulShape& s, const float* alpha, const float* a,
                    long long stride_a, const float* b, long long stride_b, const float* beta, float* y,
                    long long stride_y, int count) {
  return cublasSgemmStridedBatched(h, g.op_b, g.op_a, static_cast<int>(s.n), static_cast<int>(s.m),
                                   static_cast<int>(s.k), alpha, b, g.ldb, stride_b, a, g.lda, stride_a, beta, y,
                                   static_cast<int>(s.n), stride_y, count);
}
cublasStatus_t Gemm(cublasHandle_t h, const GemmArgs& g, const MatmulShape& s, const double* alpha, const double* a,
                    long long stride_a, const double* b, long long stride_b, const double* beta, double* y,
                    long long stride_y, int count) {
  return cublasDgemmStridedBatched(h, g.op_b, g.op_a, static_cast<int>(s.n), static_cast<int>(s.m),
                                   static_cast<int>(s.k), alpha, b, g.ldb, stride_b, a, g.lda, stride_a, beta, y,
                                   static_cast<int>(s.n), stride_y, count);
}

template <typename T>
absl::Status Prepare(cublasHandle_t handle, const MatmulShape& shape, cudaStream_t stream,
                     const MatmulOptions& options) {
  if (handle == nullptr) {
    return absl::FailedPreconditionError("cuda matmul: no cuBLAS handle (CublasHandle::Create, or the caller's)");
  }
  if (absl::Status s = CheckCublasDims(shape); !s.ok()) return s;
  if (absl::Status s = CublasStatus(cublasSetStream(handle, stream), "cublasSetStream"); !s.ok()) return s;
  const cublasMath_t math = options.allow_tf32 && sizeof(T) == 4 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
  return CublasStatus(cublasSetMathMode(handle, math), "cublasSetMathMode");
}

// y = 0 for an empty k (cuBLAS with k = 0 scales C by beta, which is 0 here).
bool Empty(const MatmulShape& s) { return s.batch == 0 || s.m == 0 || s.n == 0; }

}  // namespace

// cuBLAS's classic API takes int dims and leading dims (lda, ldb, ldc are k, n or m here) and an
// int batch count; the strides between matrices are long long, so m*k, k*n and m*n may exceed
// INT_MAX.
absl::Status CheckCublasDims(const MatmulShape& s) {
  const std::pair<const char*, int64_t> dims[] = {{"batch", s.batch}, {"m", s.m}, {"k", s.k}, {"n", s.n}};
  for (const auto& [name, v] : dims) {
    if (v > INT_MAX) {
      return absl::InvalidArgumentError(
          absl::StrCat("cuda matmul: ", name, " = ", v, " exceeds cuBLAS's limit ", INT_MAX));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<MatmulShape> MatmulShapeOf(const std::vector<int64_t>& a, const std::vector<int64_t>& b, bool ta,
                                          bool tb, bool batch_sum) {
  const char* op = batch_sum ? "matmul_batch_sum" : "matmul";
  const int ra = static_cast<int>(a.size()), rb = static_cast<int>(b.size());
  if (ra < 2 || rb < 2) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": a ", Dims(a), " and b ", Dims(b),
                                                   " must have at least 2 axes (reshape a vector to [1,k] or [k,1])"));
  }
  bool same_batch = ra == rb;
  for (int i = 0; same_batch && i < ra - 2; ++i) same_batch = a[i] == b[i];
  if (batch_sum ? (!same_batch || ra < 3) : (rb > 2 && !same_batch)) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": batch dimensions differ: a ", Dims(a), " and b ", Dims(b),
                                                   batch_sum ? " (same batch dims and at least 3 axes needed)"
                                                             : " (b must have exactly a's batch dims, or be 2-D)"));
  }
  MatmulShape s;
  s.transpose_a = ta;
  s.transpose_b = tb;
  s.shared_b = ra > 2 && rb == 2;
  for (int i = 0; i < ra - 2; ++i) s.batch *= a[i];
  s.m = ta ? a[ra - 1] : a[ra - 2];
  s.k = ta ? a[ra - 2] : a[ra - 1];
  const int64_t bk = tb ? b[rb - 1] : b[rb - 2];
  s.n = tb ? b[rb - 2] : b[rb - 1];
  if (s.k != bk) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": inner dimensions differ: a ", Dims(a), " (transpose_a=",
                                                   Flag(ta), ") has k=", s.k, ", b ", Dims(b), " has k=", bk,
                                                   " (transpose_b=", Flag(tb), ")"));
  }
  return s;
}

template <typename T>
absl::Status Matmul(cublasHandle_t handle, const MatmulShape& shape, double alpha, const T* a, const T* b, T* y,
                    cudaStream_t stream, const MatmulOptions& options) {
  if (Empty(shape)) return absl::OkStatus();
  if (absl::Status s = Prepare<T>(handle, shape, stream, options); !s.ok()) return s;
  const T alpha_t = static_cast<T>(alpha), beta_t = T(0);
  const long long stride_a = shape.m * shape.k, stride_b = shape.shared_b ? 0 : shape.k * shape.n;
  return CublasStatus(Gemm(handle, ArgsOf(shape), shape, &alpha_t, a, stride_a, b, stride_b, &beta_t, y,
                           shape.m * shape.n, static_cast<int>(shape.batch)),
                      sizeof(T) == 4 ? "cublasSgemmStridedBatched" : "cublasDgemmStridedBatched");
}

template <typename T>
absl::Status MatmulBatchSum(cublasHandle_t handle, const MatmulShape& shape, double alpha, const T* a, const T* b,
                            T* y, cudaStream_t stream, const MatmulOptions& options) {
  if (shape.m == 0 || shape.n == 0) return absl::OkStatus();
  if (shape.batch == 0) {
    return CudaStatus(cudaMemsetAsync(y, 0, sizeof(T) * shape.m * shape.n, stream), "cudaMemsetAsync(matmul_batch_sum y)");
  }
  const T alpha_t = static_cast<T>(alpha);
  if (shape.transpose_a && !shape.transpose_b) {
    // The weight-gradient form, sum_i a_i^T b_i with a [batch, k, m] and b [batch, k, n]: the same
    // as A^T B for A = a as [batch * k, m] and B = b as [batch * k, n], one GEMM with a long k
    // instead of `batch` short ones (the sum in cuBLAS's order, within the matmul tolerance).
    MatmulShape merged = shape;
    merged.k = shape.batch * shape.k;
    merged.batch = 1;
    if (absl::Status s = Prepare<T>(handle, merged, stream, options); !s.ok()) return s;
    const T beta_t = T(0);
    return CublasStatus(Gemm(handle, ArgsOf(merged), merged, &alpha_t, a, 0, b, 0, &beta_t, y, 0, 1),
                        sizeof(T) == 4 ? "cublasSgemmStridedBatched" : "cublasDgemmStridedBatched");
  }
  if (absl::Status s = Prepare<T>(handle, shape, stream, options); !s.ok()) return s;
  const GemmArgs args = ArgsOf(shape);
  // One GEMM per matrix, accumulating into y (beta 1 after the first), in batch order.
  for (int64_t i = 0; i < shape.batch; ++i) {
    const T beta_t = i == 0 ? T(0) : T(1);
    absl::Status s = CublasStatus(Gemm(handle, args, shape, &alpha_t, a + i * shape.m * shape.k, 0,
                                       b + i * shape.k * shape.n, 0, &beta_t, y, 0, 1),
                                  sizeof(T) == 4 ? "cublasSgemmStridedBatched" : "cublasDgemmStridedBatched");
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Matmul(const CublasHandle& handle, const MatmulShape& shape, double alpha, const T* a, const T* b, T* y,
                    cudaStream_t stream, const MatmulOptions& options) {
  return Matmul<T>(handle.get(), shape, alpha, a, b, y, stream, options);
}

template <typename T>
absl::Status MatmulBatchSum(const CublasHandle& handle, const MatmulShape& shape, double alpha, const T* a,
                            const T* b, T* y, cudaStream_t stream, const MatmulOptions& options) {
  return MatmulBatchSum<T>(handle.get(), shape, alpha, a, b, y, stream, options);
}

template absl::Status Matmul<float>(const CublasHandle&, const MatmulShape&, double, const float*, const float*, float*,
                                    cudaStream_t, const MatmulOptions&);
template absl::Status MatmulBatchSum<float>(const CublasHandle&, const MatmulShape&, double, const float*, const float*,
                                            float*, cudaStream_t, const MatmulOptions&);
template absl::Status Matmul<double>(const CublasHandle&, const MatmulShape&, double, const double*, const double*,
                                     double*, cudaStream_t, const MatmulOptions&);
template absl::Status MatmulBatchSum<double>(const CublasHandle&, const MatmulShape&, double, const double*,
                                             const double*, double*, cudaStream_t, const MatmulOptions&);
template absl::Status Matmul<float>(cublasHandle_t, const MatmulShape&, double, const float*, const float*, float*,
                                    cudaStream_t, const MatmulOptions&);
template absl::Status MatmulBatchSum<float>(cublasHandle_t, const MatmulShape&, double, const float*, const float*,
                                            float*, cudaStream_t, const MatmulOptions&);
template absl::Status Matmul<double>(cublasHandle_t, const MatmulShape&, double, const double*, const double*, double*,
                                    cudaStream_t, const MatmulOptions&);
template absl::Status MatmulBatchSum<double>(cublasHandle_t, const MatmulShape&, double, const double*, const double*,
                                            double*, cudaStream_t, const MatmulOptions&);

}  // namespace cuda
}  // namespace oneflow_like
