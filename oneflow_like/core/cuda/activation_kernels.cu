// Activation kernels (activation_kernels.h): grid-stride element-wise loops.
#include "oneflow_like/core/cuda/activation_kernels.h"

#include "oneflow_like/core/cuda/cuda_status.h"
#include "oneflow_like/core/cuda/kernel_util.cuh"

namespace oneflow_like {
namespace cuda {
namespace {

using internal::GridFor;
using internal::kThreads;

constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluCubic = 0.044715;
constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

// s(x) = 0.5 (1 + tanh(u)) = 1 / (1 + e^(-2u)), gelu = x s(x); the CPU kernel's two forms.
__device__ __forceinline__ float GeluGate(float x) {
  constexpr float kA = static_cast<float>(-2 * kSqrt2OverPi);
  constexpr float kB = static_cast<float>(-2 * kSqrt2OverPi * kGeluCubic);
  return 1.0f / (1.0f + expf(x * (kA + kB * x * x)));
}
__device__ __forceinline__ double GeluGate(double x) {
  return 0.5 * (1.0 + tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
}
__device__ __forceinline__ float TanhGelu(float x) {
  constexpr float kA = static_cast<float>(-2 * kSqrt2OverPi);
  constexpr float kB = static_cast<float>(-2 * kSqrt2OverPi * kGeluCubic);
  return x / (1.0f + expf(x * (kA + kB * x * x)));
}
__device__ __forceinline__ double TanhGelu(double x) { return x * GeluGate(x); }

// d gelu / dx = s + x s', s' = 2 s (1 - s) u'.
template <typename T>
__device__ __forceinline__ T TanhGeluDerivative(T x) {
  const T s = GeluGate(x);
  const T du = static_cast<T>(kSqrt2OverPi) * (T(1) + static_cast<T>(3 * kGeluCubic) * x * x);
  return s + T(2) * x * s * (T(1) - s) * du;
}

__device__ __forceinline__ float NormalCdf(float x) { return 0.5f * erfcf(-x * static_cast<float>(kSqrtHalf)); }
__device__ __forceinline__ double NormalCdf(double x) { return 0.5 * erfc(-x * kSqrtHalf); }
__device__ __forceinline__ float NormalPdf(float x) { return expf(-0.5f * x * x) * static_cast<float>(kInvSqrt2Pi); }
__device__ __forceinline__ double NormalPdf(double x) { return exp(-0.5 * x * x) * kInvSqrt2Pi; }

template <typename T>
__global__ void ReluKernel(const T* x, T* y, int64_t n) {
  OL_GRID_STRIDE_LOOP(i, n) {
    const T v = x[i];
    y[i] = v < T(0) ? T(0) : v;
  }
}

template <typename T>
__global__ void ReluGradKernel(const T* dy, const T* y, T* dx, int64_t n) {
  OL_GRID_STRIDE_LOOP(i, n) { dx[i] = y[i] > T(0) ? dy[i] : T(0); }
}

// x clamped where Phi(x) or phi(x) is already 0 (float: |x| > 20, double: > 40), so that the
// limits at +-inf come out (gelu(-inf) = -0, gelu'(+-inf) = 1 / 0) instead of inf * 0 = NaN, as
// the CPU op's (core/ops/activation_ops.cc); finite inputs are unchanged. NaN passes.
template <typename T>
__device__ T ClampedFactor(T v) {
  const T bound = sizeof(T) == 4 ? T(20) : T(40);
  return v < -bound ? -bound : (v > bound ? bound : v);
}

template <typename T>
__global__ void GeluKernel(bool exact, const T* x, T* y, int64_t n) {
  if (exact) {
    OL_GRID_STRIDE_LOOP(i, n) {
      const T v = x[i];
      y[i] = (v < T(0) ? ClampedFactor(v) : v) * NormalCdf(v);
    }
  } else {
    OL_GRID_STRIDE_LOOP(i, n) { y[i] = TanhGelu(x[i]); }
  }
}

template <typename T>
__global__ void GeluGradKernel(bool exact, const T* dy, const T* x, T* dx, int64_t n) {
  if (exact) {
    OL_GRID_STRIDE_LOOP(i, n) {
      const T v = x[i];
      dx[i] = dy[i] * (NormalCdf(v) + ClampedFactor(v) * NormalPdf(v));
    }
  } else {
    OL_GRID_STRIDE_LOOP(i, n) { dx[i] = dy[i] * TanhGeluDerivative(x[i]); }
  }
}

}  // namespace

template <typename T>
absl::Status Relu(const T* x, T* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  ClearLastError();
  ReluKernel<T><<<GridFor(n), kThreads, 0, stream>>>(x, y, n);
  return CudaLaunchStatus("relu");
}

template <typename T>
absl::Status ReluGrad(const T* dy, const T* y, T* dx, int64_t n, cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  ClearLastError();
  ReluGradKernel<T><<<GridFor(n), kThreads, 0, stream>>>(dy, y, dx, n);
  return CudaLaunchStatus("relu_grad");
}

template <typename T>
absl::Status Gelu(GeluApproximation approximation, const T* x, T* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  ClearLastError();
  GeluKernel<T><<<GridFor(n), kThreads, 0, stream>>>(approximation == GeluApproximation::kExact, x, y, n);
  return CudaLaunchStatus("gelu");
}

template <typename T>
absl::Status GeluGrad(GeluApproximation approximation, const T* dy, const T* x, T* dx, int64_t n,
                      cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  ClearLastError();
  GeluGradKernel<T><<<GridFor(n), kThreads, 0, stream>>>(approximation == GeluApproximation::kExact, dy, x, dx, n);
  return CudaLaunchStatus("gelu_grad");
}

template absl::Status Relu<float>(const float*, float*, int64_t, cudaStream_t);
template absl::Status Relu<double>(const double*, double*, int64_t, cudaStream_t);
template absl::Status ReluGrad<float>(const float*, const float*, float*, int64_t, cudaStream_t);
template absl::Status ReluGrad<double>(const double*, const double*, double*, int64_t, cudaStream_t);
template absl::Status Gelu<float>(GeluApproximation, const float*, float*, int64_t, cudaStream_t);
template absl::Status Gelu<double>(GeluApproximation, const double*, double*, int64_t, cudaStream_t);
template absl::Status GeluGrad<float>(GeluApproximation, const float*, const float*, float*, int64_t, cudaStream_t);
template absl::Status GeluGrad<double>(GeluApproximation, const double*, const double*, double*, int64_t,
                                       cudaStream_t);

}  // namespace cuda
}  // namespace oneflow_like
