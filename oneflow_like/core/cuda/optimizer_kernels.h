// CUDA kernels of the optimizer family (core/ops/optimizer_ops.cc), PyTorch semantics, same as
// the CPU kernels element for element:
//
//   SgdPlainUpdate  param_out = param - lr * (grad + wd * param)
//   SgdUpdate       momentum != 0: buf_out = momentum * buf + (grad + wd * param);
//                                  param_out = param - lr * buf_out
//                   momentum == 0: the plain step; buf_out is zero-filled unless it is buf itself
//   AdamUpdate      AdamW (decoupled_weight_decay): param *= 1 - lr * wd; else grad += wd * param;
//                   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//                   param -= lr * mhat / (sqrt(vhat) + eps), mhat = m / (1 - b1^t),
//                   vhat = v / (1 - b2^t) (without bias_correction: m, v), t = *step (a DEVICE
//                   int scalar, 1-based, as the op's `step` input; the bias corrections are
//                   computed on the device in double, as the CPU op does on the host).
//                   t < 1 is an error on the CPU; here the outputs are left unwritten, so check
//                   the counter where it can go wrong.
//   StepIncrement   step_out = step + 1 (a device int scalar; may be in place).
//
// n elements each; outputs may alias their inputs (in place: param_out = param, m_out = m, ...).
// Device pointers; enqueued on `stream`. Errors: Internal naming the kernel on a launch
// failure. T: float, double; Adam's step I: int32_t, int64_t.
#ifndef ONEFLOW_LIKE_CORE_CUDA_OPTIMIZER_KERNELS_H_
#define ONEFLOW_LIKE_CORE_CUDA_OPTIMIZER_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace oneflow_like {
namespace cuda {

struct SgdOptions {
  double lr = 0;
  double momentum = 0;
  double weight_decay = 0;
};

struct AdamOptions {
  double lr = 0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  double weight_decay = 0;
  bool decoupled_weight_decay = true;  // AdamW
  bool bias_correction = true;
};

template <typename T>
absl::Status SgdPlainUpdate(const T* param, const T* grad, int64_t n, const SgdOptions& options, T* param_out,
                            cudaStream_t stream);

template <typename T>
absl::Status SgdUpdate(const T* param, const T* grad, const T* buf, int64_t n, const SgdOptions& options,
                       T* param_out, T* buf_out, cudaStream_t stream);

template <typename T, typename I>
absl::Status AdamUpdate(const T* param, const T* grad, const T* m, const T* v, const I* step, int64_t n,
                        const AdamOptions& options, T* param_out, T* m_out, T* v_out, cudaStream_t stream);

template <typename I>
absl::Status StepIncrement(const I* step, I* step_out, cudaStream_t stream);

}  // namespace cuda
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_CUDA_OPTIMIZER_KERNELS_H_
