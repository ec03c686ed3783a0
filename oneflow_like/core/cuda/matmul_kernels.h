// matmul and matmul_batch_sum on CUDA through cuBLAS (core/ops/matmul_ops.cc), same semantics,
// row-major as the CPU op:
//
//   Matmul          y = alpha * op(a) @ op(b), op(t) = t or t^T on the last two axes. op(a) is
//                   [..., m, k], op(b) [..., k, n] -> y [..., m, n]; b has a's batch dims, or is
//                   2-D and shared by every matrix of a (MatmulShapeOf checks the shapes with the
//                   CPU op's rules and messages).
//   MatmulBatchSum  y[m, n] = alpha * sum over the batch of op(a_i) @ op(b_i) (a and b with the
//                   same batch dims: a shared weight's gradient).
//
// Row-major y = op(a) op(b) is column-major y^T = op(b)^T op(a)^T, so each call is one
// cublas{S,D}gemmStridedBatched with the operands swapped (a shared b has stride 0).
// float32 runs in full float precision by default (CUBLAS_DEFAULT_MATH: no TF32);
// MatmulOptions::allow_tf32 lets cuBLAS use TF32 tensor cores (about 1e-3 relative error).
//
// Ownership: a CublasHandle (move-only) is created per device and thread of use; no global
// handle. Each call binds the handle to `stream` and enqueues; it returns at once.
// Errors: InvalidArgument for bad shapes or dims over cuBLAS's int range; the failing cuBLAS
// call's name and status otherwise. T: float, double.
#ifndef ONEFLOW_LIKE_CORE_CUDA_MATMUL_KERNELS_H_
#define ONEFLOW_LIKE_CORE_CUDA_MATMUL_KERNELS_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace oneflow_like {
namespace cuda {

// absl::Status from a cuBLAS status, naming the call ("cublasSgemmStridedBatched failed: ...").
absl::Status CublasStatus(cublasStatus_t status, const char* call);

class CublasHandle {
 public:
  static absl::StatusOr<CublasHandle> Create();  // on the current device
  CublasHandle() = default;
  CublasHandle(CublasHandle&& other) noexcept;
  CublasHandle& operator=(CublasHandle&& other) noexcept;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  ~CublasHandle();

  cublasHandle_t get() const { return handle_; }

 private:
  explicit CublasHandle(cublasHandle_t handle) : handle_(handle) {}
  cublasHandle_t handle_ = nullptr;
};

struct MatmulShape {
  int64_t batch = 1;       // matrices in a (product of its batch dims)
  int64_t m = 0, k = 0, n = 0;
  bool transpose_a = false, transpose_b = false;
  bool shared_b = false;   // a batched, b 2-D
};

// The matmul of a [a_dims] and b [b_dims] with the transpose flags, or InvalidArgument with the
// CPU op's message. batch_sum: the matmul_batch_sum rules (same batch dims, rank >= 3).
absl::StatusOr<MatmulShape> MatmulShapeOf(const std::vector<int64_t>& a_dims, const std::vector<int64_t>& b_dims,
                                          bool transpose_a, bool transpose_b, bool batch_sum = false);

// What cuBLAS's classic (int) API needs of `shape`: the batch count and every dim (so every
// leading dim: k, n or m) at most INT_MAX, else InvalidArgument. The products m*k, k*n and m*n
// may exceed it: the batch strides are 64-bit (long long). Matmul / MatmulBatchSum check it
// (MatmulBatchSum on its merged k = batch * k where it merges the batch). Host-only.
absl::Status CheckCublasDims(const MatmulShape& shape);

struct MatmulOptions {
  bool allow_tf32 = false;  // float32 only: TF32 tensor-core math
};

template <typename T>
absl::Status Matmul(const CublasHandle& handle, const MatmulShape& shape, double alpha, const T* a, const T* b, T* y,
                    cudaStream_t stream, const MatmulOptions& options = {});

template <typename T>
absl::Status MatmulBatchSum(const CublasHandle& handle, const MatmulShape& shape, double alpha, const T* a,
                            const T* b, T* y, cudaStream_t stream, const MatmulOptions& options = {});

// The same on a borrowed cuBLAS handle (not owned; e.g. the runtime's, op_kernels.h). A null
// handle is FailedPrecondition.
template <typename T>
absl::Status Matmul(cublasHandle_t handle, const MatmulShape& shape, double alpha, const T* a, const T* b, T* y,
                    cudaStream_t stream, const MatmulOptions& options = {});

template <typename T>
absl::Status MatmulBatchSum(cublasHandle_t handle, const MatmulShape& shape, double alpha, const T* a, const T* b,
                            T* y, cudaStream_t stream, const MatmulOptions& options = {});

}  // namespace cuda
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_CUDA_MATMUL_KERNELS_H_
