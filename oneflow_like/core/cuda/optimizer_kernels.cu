// Optimizer kernels (optimizer_kernels.h): grid-stride element-wise loops; each element is read
// before it is written, so outputs may alias inputs.
#include "oneflow_like/core/cuda/optimizer_kernels.h"

#include "oneflow_like/core/cuda/cuda_status.h"
#include "oneflow_like/core/cuda/kernel_util.cuh"

namespace oneflow_like {
namespace cuda {
namespace {

using internal::GridFor;
using internal::kThreads;

template <typename T>
__global__ void SgdPlainKernel(const T* param, const T* grad, T* param_out, T lr, T wd, int64_t n) {
  OL_GRID_STRIDE_LOOP(i, n) {
    const T p = param[i];
    param_out[i] = p - lr * (grad[i] + wd * p);
  }
}

template <typename T>
__global__ void SgdMomentumKernel(const T* param, const T* grad, const T* buf, T* param_out, T* buf_out, T lr,
                                  T momentum, T wd, int64_t n) {
  OL_GRID_STRIDE_LOOP(i, n) {
    const T p = param[i];
    const T b = momentum * buf[i] + (grad[i] + wd * p);
    buf_out[i] = b;
    param_out[i] = p - lr * b;
  }
}

template <typename T>
__global__ void ZeroKernel(T* x, int64_t n) {
  OL_GRID_STRIDE_LOOP(i, n) { x[i] = T(0); }
}

// The per-step scalars, computed once per block from the device step counter.
template <typename T>
struct AdamScalars {
  T b1, b2, eps, lr, mhat_scale, vhat_scale, param_scale, grad_wd;
};

template <typename T, typename I>
__global__ void AdamKernel(const T* param, const T* grad, const T* m, const T* v, const I* step, AdamOptions o,
                           T* param_out, T* m_out, T* v_out, int64_t n) {
  __shared__ AdamScalars<T> c;
  __shared__ bool valid;
  if (threadIdx.x == 0) {
    const int64_t t = static_cast<int64_t>(*step);
    valid = t >= 1;
    const double m_scale = o.bias_correction ? 1.0 / (1.0 - pow(o.beta1, static_cast<double>(t))) : 1.0;
    const double v_scale = o.bias_correction ? 1.0 / (1.0 - pow(o.beta2, static_cast<double>(t))) : 1.0;
    c.b1 = static_cast<T>(o.beta1);
    c.b2 = static_cast<T>(o.beta2);
    c.eps = static_cast<T>(o.epsilon);
    c.lr = static_cast<T>(o.lr);
    c.mhat_scale = static_cast<T>(m_scale);
    c.vhat_scale = static_cast<T>(v_scale);
    c.param_scale = static_cast<T>(o.decoupled_weight_decay ? 1.0 - o.lr * o.weight_decay : 1.0);
    c.grad_wd = static_cast<T>(o.decoupled_weight_decay ? 0.0 : o.weight_decay);
  }
  __syncthreads();
  if (!valid) return;
  OL_GRID_STRIDE_LOOP(i, n) {
    const T p = param[i];
    const T g = grad[i] + c.grad_wd * p;
    const T mi = c.b1 * m[i] + (T(1) - c.b1) * g;
    const T vi = c.b2 * v[i] + (T(1) - c.b2) * g * g;
    m_out[i] = mi;
    v_out[i] = vi;
    param_out[i] = p * c.param_scale - c.lr * (mi * c.mhat_scale) / (sqrt(vi * c.vhat_scale) + c.eps);
  }
}

template <typename I>
__global__ void StepIncrementKernel(const I* step, I* step_out) {
  *step_out = static_cast<I>(*step + 1);
}

}  // namespace

template <typename T>
absl::Status SgdPlainUpdate(const T* param, const T* grad, int64_t n, const SgdOptions& options, T* param_out,
                            cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  ClearLastError();
  SgdPlainKernel<T><<<GridFor(n), kThreads, 0, stream>>>(param, grad, param_out, static_cast<T>(options.lr),
                                                         static_cast<T>(options.weight_decay), n);
  return CudaLaunchStatus("sgd_plain_update");
}

template <typename T>
absl::Status SgdUpdate(const T* param, const T* grad, const T* buf, int64_t n, const SgdOptions& options,
                       T* param_out, T* buf_out, cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  const T lr = static_cast<T>(options.lr), momentum = static_cast<T>(options.momentum);
  const T wd = static_cast<T>(options.weight_decay);
  if (momentum == T(0)) {
    ClearLastError();
    SgdPlainKernel<T><<<GridFor(n), kThreads, 0, stream>>>(param, grad, param_out, lr, wd, n);
    if (absl::Status s = CudaLaunchStatus("sgd_update (momentum 0)"); !s.ok()) return s;
    if (buf_out == buf) return absl::OkStatus();
    ClearLastError();
    ZeroKernel<T><<<GridFor(n), kThreads, 0, stream>>>(buf_out, n);
    return CudaLaunchStatus("sgd_update (zero buffer)");
  }
  ClearLastError();
  SgdMomentumKernel<T><<<GridFor(n), kThreads, 0, stream>>>(param, grad, buf, param_out, buf_out, lr, momentum, wd, n);
  return CudaLaunchStatus("sgd_update");
}

template <typename T, typename I>
absl::Status AdamUpdate(const T* param, const T* grad, const T* m, const T* v, const I* step, int64_t n,
                        const AdamOptions& options, T* param_out, T* m_out, T* v_out, cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  ClearLastError();
  AdamKernel<T, I><<<GridFor(n), kThreads, 0, stream>>>(param, grad, m, v, step, options, param_out, m_out, v_out, n);
  return CudaLaunchStatus("adam_update");
}

template <typename I>
absl::Status StepIncrement(const I* step, I* step_out, cudaStream_t stream) {
  ClearLastError();
  StepIncrementKernel<I><<<1, 1, 0, stream>>>(step, step_out);
  return CudaLaunchStatus("step_increment");
}

template absl::Status StepIncrement<int32_t>(const int32_t*, int32_t*, cudaStream_t);
template absl::Status StepIncrement<int64_t>(const int64_t*, int64_t*, cudaStream_t);
template absl::Status SgdPlainUpdate<float>(const float*, const float*, int64_t, const SgdOptions&, float*,
                                            cudaStream_t);
template absl::Status SgdPlainUpdate<double>(const double*, const double*, int64_t, const SgdOptions&, double*,
                                             cudaStream_t);
template absl::Status SgdUpdate<float>(const float*, const float*, const float*, int64_t, const SgdOptions&, float*,
                                       float*, cudaStream_t);
template absl::Status SgdUpdate<double>(const double*, const double*, const double*, int64_t, const SgdOptions&,
                                        double*, double*, cudaStream_t);
template absl::Status AdamUpdate<float, int32_t>(const float*, const float*, const float*, const float*,
                                                 const int32_t*, int64_t, const AdamOptions&, float*, float*, float*,
                                                 cudaStream_t);
template absl::Status AdamUpdate<float, int64_t>(const float*, const float*, const float*, const float*,
                                                 const int64_t*, int64_t, const AdamOptions&, float*, float*, float*,
                                                 cudaStream_t);
template absl::Status AdamUpdate<double, int32_t>(const double*, const double*, const double*, const double*,
                                                  const int32_t*, int64_t, const AdamOptions&, double*, double*,
                                                  double*, cudaStream_t);
template absl::Status AdamUpdate<double, int64_t>(const double*, const double*, const double*, const double*,
                                                  const int64_t*, int64_t, const AdamOptions&, double*, double*,
                                                  double*, cudaStream_t);

}  // namespace cuda
}  // namespace oneflow_like
