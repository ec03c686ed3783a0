// Activation ops: relu, relu_grad, gelu, gelu_grad.
//
//   relu(x)          y = max(x, 0) (NaN propagates)
//   relu_grad(dy, y) dx = y > 0 ? dy : 0            (uses the forward *output*)
//   gelu(x)          approximate="tanh" (default): y = 0.5 x (1 + tanh(u)),
//                                                  u = sqrt(2/pi) (x + 0.044715 x^3)
//                    approximate="none" (exact, torch's F.gelu default):
//                                                  y = x Phi(x) = 0.5 x (1 + erf(x / sqrt(2)))
//   gelu_grad(dy, x) dx = dy * d gelu / dx            (uses the forward *input*; same attr)
//                    exact: d gelu / dx = Phi(x) + x phi(x), phi(x) = e^(-x^2/2) / sqrt(2 pi)
//
// SBP: the forward ops are nonlinear, so only S(i) -> S(i) and B -> B. The *_grad ops are
// linear in dy: S(i),S(i) -> S(i); B,B -> B; and dy:P, y/x:B -> dx:P.
//
// Kernels are element-wise loops over the shard (a large shard is split into contiguous
// chunks over the rank's intra-op threads: the same per-element arithmetic, bit-identical
// results; core/intra_op_pool.h). They are written for GCC's vectorizer at
// -O2 (whose "very cheap" cost model only vectorizes loops with a known trip count): fixed
// 16-wide inner blocks plus a scalar tail, on __restrict pointers. The float32 gelu loops are
// compute-bound, so they are also compiled for AVX2 and AVX-512 (OL_ROW_KERNEL). The output
// may be the same buffer as an input (in-place; each element is read before it is written),
// but must not partially overlap one. float32 gelu uses the identity
// 0.5 (1 + tanh(u)) = 1 / (1 + e^(-2u)) with row_math's branch-free polynomial exp (which
// saturates: e^(-2u) -> 0 or ~e^88, so gelu -> x or ~0 in the tails); float64 uses std::tanh
// (it serves gradient checks). The exact (erf) form: see ErfGeluValue below.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "oneflow_like/core/ops/builtin_ops.h"
#include "oneflow_like/core/ops/op_util.h"
#include "oneflow_like/core/ops/row_math.h"

namespace oneflow_like {
namespace {

using ops::OpError;
namespace row_math = ops::row_math;

// Inner blocks of 16 elements: one AVX-512 vector of floats, two AVX2 vectors, four SSE ones.
constexpr int kBlock = 16;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluCubic = 0.044715;
constexpr double kGeluFlopsPerElement = 20;  // polynomial exp + division, roughly

// -2 u(x) = x (kA + kB x^2), the sigmoid argument in gelu(x) = x / (1 + e^(-2u)).
inline float MinusTwoU(float x) {
  constexpr float kA = static_cast<float>(-2 * kSqrt2OverPi);
  constexpr float kB = static_cast<float>(-2 * kSqrt2OverPi * kGeluCubic);
  return x * (kA + kB * x * x);
}

// s(x) = 0.5 (1 + tanh(u(x))) = 1 / (1 + e^(-2u)), so that gelu(x) = x s(x).
inline float GeluGate(float x) { return 1.0f / (1.0f + row_math::Exp(MinusTwoU(x))); }
inline double GeluGate(double x) {
  return 0.5 * (1.0 + std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
}

// gelu(x); for float32 as x / (1 + e^(-2u)), which saves a multiplication.
inline float GeluValue(float x) { return x / (1.0f + row_math::Exp(MinusTwoU(x))); }
inline double GeluValue(double x) { return x * GeluGate(x); }

// d gelu / dx = s + x s' with s' = 0.5 (1 - tanh^2) u' = 2 s (1 - s) u'.
template <typename T>
inline T GeluDerivative(T x) {
  const T s = GeluGate(x);
  const T du = static_cast<T>(kSqrt2OverPi) * (T(1) + static_cast<T>(3 * kGeluCubic) * x * x);
  return s + T(2) * x * s * (T(1) - s) * du;
}

// The exact (erf) gelu: y = x Phi(x), Phi(x) = 0.5 (1 + erf(x / sqrt 2)) = 0.5 erfc(-x / sqrt 2),
// and dy/dx = Phi(x) + x phi(x), phi(x) = e^(-x^2/2) / sqrt(2 pi).
// float64 (gradient checks): std::erfc, which keeps full relative accuracy in the negative tail.
// float32: branch-free and vectorizable, with a = min(|x|, 14) (e(a) below flushes to 0 past
// a = 13.2, where Phi(-a) ~ 5e-40 is a denormal already):
//   Phi(-a) = e(a) R(a),   e(a) = exp(-a^2 / 2),   R(a) = P(a) / Q(a)
// R is the Mills ratio over sqrt(2 pi) (R(0) = 1/2, R(a) ~ 1 / (a sqrt(2 pi))), a rational
// function of degrees 4 / 5 fitted for relative error (< 5e-9 on [0, 13.3] against mpmath;
// all coefficients positive, so no cancellation). e(a) comes from the exact square: a^2 = hi +
// lo with lo = fma(a, a, -hi) exactly, reaching row_math::ExpHiLo as a head and a small tail.
// Phi(x) = x < 0 ? Phi(-a) : 1 - Phi(-a), and phi(x) = e(a) / sqrt(2 pi) shares the
// exponential. The exponential and the rational function are independent chains, each by
// Estrin's scheme with explicit fused multiply-adds (exactly rounded: the same bits in every
// clone; see ExpHiLo): the loop is bound by its latency and its operation count (the former
// erfc of Numerical Recipes fed a 9-step Horner chain into exp: 2.5x slower).
// Against float64 over [-16, 16] (activation_ops_test): relative error < 4e-7 in gelu wherever
// it is a normal float (the negative tail included), and < 3e-7 of Phi(x) + |x| phi(x) in gelu'.
constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1 / sqrt(2 pi)

inline double NormalCdf(double x) { return 0.5 * std::erfc(-x * kSqrtHalf); }
inline double NormalPdf(double x) { return std::exp(-0.5 * x * x) * kInvSqrt2Pi; }

// min(|x|, 14), 14 for NaN (x itself carries the NaN to the result). Through the bits, as an
// integer min: GCC cannot turn a float `a < 14 ? a : 14` into a min (NaN semantics) and
// duplicates the whole computation instead.
inline float AbsClamp14(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  bits &= 0x7FFFFFFFu;
  constexpr uint32_t k14 = 0x41600000u;  // 14.0f
  bits = bits < k14 ? bits : k14;
  float a;
  std::memcpy(&a, &bits, sizeof(a));
  return a;
}

// e(a) = exp(-a^2 / 2) from the exact square (see above). REQUIRES: 0 <= a <= 14.
inline float HalfGaussExp(float a) {
  const float hi = a * a;
  return row_math::ExpHiLo(-0.5f * hi, -0.5f * std::fma(a, a, -hi));
}

// R(a) = Phi(-a) / e(a) for 0 <= a <= 14.
inline float MillsRatioOverSqrt2Pi(float a) {
  const float a2 = a * a;
  const float a4 = a2 * a2;
  const float p = std::fma(a4, 0.004020595942317962f,
                           std::fma(a2, std::fma(0.039986947120353444f, a, 0.18131501687858112f),
                                    std::fma(0.4356974818105161f, a, 0.5000000024788459f)));
  const float q = std::fma(a4, std::fma(0.010077996335739359f, a, 0.10023978997458811f),
                           std::fma(a2, std::fma(0.4644021110758458f, a, 1.1945185458288485f),
                                    std::fma(1.66927988206215f, a, 1.0f)));
  return p / q;
}

// Infinite inputs: where Phi(x) or phi(x) is 0, the factor x multiplying it is clamped to a
// finite bound first (NaN passes: its comparisons are false), so gelu(-inf) = -0, gelu'(-inf) = 0
// and gelu'(+inf) = 1 instead of inf * 0 = NaN; finite inputs give the same bits as without the
// clamp (past the bound the product underflows to the same zero).
template <typename T>
inline T ClampMagnitude(T x, T bound) {
  return x < -bound ? -bound : (x > bound ? bound : x);
}
inline double ErfGeluValue(double x) { return (x < 0 ? ClampMagnitude(x, 40.0) : x) * NormalCdf(x); }
inline double ErfGeluDerivative(double x) { return NormalCdf(x) + ClampMagnitude(x, 40.0) * NormalPdf(x); }
inline float ErfGeluValue(float x) {
  const float a = AbsClamp14(x);
  const float tail = HalfGaussExp(a) * MillsRatioOverSqrt2Pi(a);  // Phi(-|x|)
  return (x < -14.0f ? -14.0f : x) * (x < 0.0f ? tail : 1.0f - tail);
}
inline float ErfGeluDerivative(float x) {
  const float a = AbsClamp14(x);
  const float e = HalfGaussExp(a);
  const float tail = e * MillsRatioOverSqrt2Pi(a);
  return std::fma(ClampMagnitude(x, 14.0f), e * static_cast<float>(kInvSqrt2Pi), x < 0.0f ? tail : 1.0f - tail);
}

template <typename T>
inline void ErfGeluLoop(const T* __restrict x, T* __restrict y, int64_t n) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (int k = 0; k < kBlock; ++k) y[i + k] = ErfGeluValue(x[i + k]);
  }
  for (; i < n; ++i) y[i] = ErfGeluValue(x[i]);
}
template <typename T>
inline void ErfGeluGradLoop(const T* __restrict dy, const T* __restrict x, T* __restrict dx, int64_t n) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (int k = 0; k < kBlock; ++k) dx[i + k] = dy[i + k] * ErfGeluDerivative(x[i + k]);
  }
  for (; i < n; ++i) dx[i] = dy[i] * ErfGeluDerivative(x[i]);
}
OL_ROW_KERNEL void ErfGeluLoop(const float* __restrict x, float* __restrict y, int64_t n) {
  ErfGeluLoop<float>(x, y, n);
}
OL_ROW_KERNEL void ErfGeluGradLoop(const float* __restrict dy, const float* __restrict x, float* __restrict dx,
                                   int64_t n) {
  ErfGeluGradLoop<float>(dy, x, dx, n);
}

template <typename T>
void ReluLoop(const T* __restrict x, T* __restrict y, int64_t n) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (int k = 0; k < kBlock; ++k) y[i + k] = x[i + k] < T(0) ? T(0) : x[i + k];
  }
  for (; i < n; ++i) y[i] = x[i] < T(0) ? T(0) : x[i];
}

// Both inputs are loaded unconditionally: with `y > 0 ? dy[i] : 0` GCC keeps the load of dy
// conditional, so the loop stays scalar with an unpredictable branch (~8x slower).
template <typename T>
void ReluGradLoop(const T* __restrict dy, const T* __restrict y, T* __restrict dx, int64_t n) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (int k = 0; k < kBlock; ++k) {
      const T d = dy[i + k];
      const T v = y[i + k];
      dx[i + k] = v > T(0) ? d : T(0);
    }
  }
  for (; i < n; ++i) dx[i] = y[i] > T(0) ? dy[i] : T(0);
}

template <typename T>
inline void GeluLoop(const T* __restrict x, T* __restrict y, int64_t n) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (int k = 0; k < kBlock; ++k) y[i + k] = GeluValue(x[i + k]);
  }
  for (; i < n; ++i) y[i] = GeluValue(x[i]);
}

template <typename T>
inline void GeluGradLoop(const T* __restrict dy, const T* __restrict x, T* __restrict dx, int64_t n) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (int k = 0; k < kBlock; ++k) dx[i + k] = dy[i + k] * GeluDerivative(x[i + k]);
  }
  for (; i < n; ++i) dx[i] = dy[i] * GeluDerivative(x[i]);
}

// float32 gelu is compute-bound (~25 flops per element): these overloads are compiled for
// AVX-512, AVX2 and baseline x86-64 and the best one is picked at load time (row_math.h).
OL_ROW_KERNEL void GeluLoop(const float* __restrict x, float* __restrict y, int64_t n) {
  GeluLoop<float>(x, y, n);
}
OL_ROW_KERNEL void GeluGradLoop(const float* __restrict dy, const float* __restrict x, float* __restrict dx,
                                int64_t n) {
  GeluGradLoop<float>(dy, x, dx, n);
}

// ---- shared op-definition pieces ----

absl::StatusOr<std::vector<TensorDesc>> InferUnary(const std::string& op, const InferContext& ctx) {
  const TensorDesc& x = ctx.inputs[0];
  if (x.dtype != DataType::kFloat32 && x.dtype != DataType::kFloat64) {
    return OpError(op, ctx.op_name, "input x ", x.ToString(), " must be float32 or float64");
  }
  return std::vector<TensorDesc>{x};
}

// (dy, other) -> dx: both descs must be equal.
absl::StatusOr<std::vector<TensorDesc>> InferGrad(const std::string& op, const std::string& other,
                                                  const InferContext& ctx) {
  const TensorDesc& dy = ctx.inputs[0];
  const TensorDesc& o = ctx.inputs[1];
  if (dy.dtype != DataType::kFloat32 && dy.dtype != DataType::kFloat64) {
    return OpError(op, ctx.op_name, "input dy ", dy.ToString(), " must be float32 or float64");
  }
  if (dy != o) {
    return OpError(op, ctx.op_name, "dy ", dy.ToString(), " and ", other, " ", o.ToString(),
                   " must have the same dtype and shape");
  }
  return std::vector<TensorDesc>{dy};
}

std::vector<SbpSignature> UnarySbp(const AttrMap&, const std::vector<TensorDesc>& in) {
  std::vector<SbpSignature> sigs;
  for (int a : ops::SplitAxes(in[0].shape.num_axes())) {
    sigs.push_back({{Sbp::Split(a)}, {Sbp::Split(a)}});
  }
  sigs.push_back({{Sbp::Broadcast()}, {Sbp::Broadcast()}});
  return sigs;
}

std::vector<SbpSignature> GradSbp(const AttrMap&, const std::vector<TensorDesc>& in) {
  std::vector<SbpSignature> sigs;
  for (int a : ops::SplitAxes(in[0].shape.num_axes())) {
    sigs.push_back({{Sbp::Split(a), Sbp::Split(a)}, {Sbp::Split(a)}});
  }
  sigs.push_back({{Sbp::Broadcast(), Sbp::Broadcast()}, {Sbp::Broadcast()}});
  sigs.push_back({{Sbp::PartialSum(), Sbp::Broadcast()}, {Sbp::PartialSum()}});
  return sigs;
}

CostFn ElementCost(double flops_per_element) {
  return [flops_per_element](const AttrMap&, const std::vector<TensorDesc>& in,
                             const std::vector<TensorDesc>& out) {
    OpCost c;
    c.flops = flops_per_element * static_cast<double>(out[0].shape.elem_count());
    c.bytes_moved = ops::TotalBytes(in) + ops::TotalBytes(out);
    return c;
  };
}

// Kernels calling `loop(in..., out, n)` on the shard, a generic lambda over T = float/double;
// large shards in chunks of whole 16-element blocks over the rank's intra-op threads.
template <typename Loop>
KernelFn UnaryKernel(const std::string& op, Loop loop) {
  return [op, loop](const KernelContext& ctx) -> absl::Status {
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    return ops::DispatchFloat(x.dtype(), op, [&](auto zero) {
      using T = decltype(zero);
      const T* px = x.data<T>();
      T* py = y.data<T>();
      ParallelFor(ctx.intra_op_pool, y.elem_count(), 1, [&](int64_t b, int64_t e) { loop(px + b, py + b, e - b); },
                  kBlock);
      return absl::OkStatus();
    });
  };
}
template <typename Loop>
KernelFn BinaryKernel(const std::string& op, Loop loop) {
  return [op, loop](const KernelContext& ctx) -> absl::Status {
    const Tensor& a = *ctx.inputs[0];
    const Tensor& b = *ctx.inputs[1];
    Tensor& y = *ctx.outputs[0];
    return ops::DispatchFloat(a.dtype(), op, [&](auto zero) {
      using T = decltype(zero);
      const T* pa = a.data<T>();
      const T* pb = b.data<T>();
      T* py = y.data<T>();
      ParallelFor(ctx.intra_op_pool, y.elem_count(), 1,
                  [&](int64_t s, int64_t e) { loop(pa + s, pb + s, py + s, e - s); }, kBlock);
      return absl::OkStatus();
    });
  };
}

// gelu's `approximate` attr: "tanh" or "none" (erf), as torch.nn.functional.gelu.
AttrDef GeluApproximateAttr() {
  return {"approximate", AttrType::kString, AttrValue(std::string("tanh")),
          "\"tanh\" (tanh approximation) or \"none\" (exact, with erf)"};
}

absl::Status CheckGeluApproximate(const std::string& op, const InferContext& ctx) {
  const std::string& a = ctx.attrs.String("approximate");
  if (a == "tanh" || a == "none") return absl::OkStatus();
  return OpError(op, ctx.op_name, "approximate must be \"tanh\" or \"none\" (exact erf form), got \"", a, "\"");
}

bool IsExactGelu(const AttrMap& attrs) { return attrs.String("approximate") == "none"; }

// Picks the tanh or the erf kernel by the `approximate` attr.
KernelFn GeluKernel(KernelFn tanh_kernel, KernelFn erf_kernel) {
  return [tanh_kernel, erf_kernel](const KernelContext& ctx) {
    return IsExactGelu(ctx.attrs) ? erf_kernel(ctx) : tanh_kernel(ctx);
  };
}

}  // namespace

absl::Status RegisterActivationOps(OpRegistry* registry) {
  {
    OpDef def;
    def.name = "relu";
    def.doc = "y = max(x, 0)";
    def.inputs = {"x"};
    def.outputs = {"y"};
    def.inplace_pairs = {{0, 0}};
    def.infer = [](const InferContext& ctx) { return InferUnary("relu", ctx); };
    def.sbp = UnarySbp;
    def.grad = [](GradContext* ctx) -> absl::Status {
      if (!ctx->needs_input_grad(0)) return absl::OkStatus();
      ASSIGN_OR_RETURN(std::string dx, ctx->EmitOne("relu_grad", {ctx->output_grad(0), ctx->output(0)}));
      ctx->SetInputGrad(0, dx);
      return absl::OkStatus();
    };
    def.cost = ElementCost(1);
    def.cpu_kernel = UnaryKernel("relu", [](auto x, auto y, int64_t n) { ReluLoop(x, y, n); });
    RETURN_IF_ERROR(registry->Register(std::move(def)));
  }
  {
    OpDef def;
    def.name = "relu_grad";
    def.doc = "dx = y > 0 ? dy : 0, where y = relu(x) is the forward output";
    def.inputs = {"dy", "y"};
    def.outputs = {"dx"};
    def.inplace_pairs = {{0, 0}};
    def.infer = [](const InferContext& ctx) { return InferGrad("relu_grad", "y", ctx); };
    def.sbp = GradSbp;
    def.cost = ElementCost(1);
    def.cpu_kernel =
        BinaryKernel("relu_grad", [](auto dy, auto y, auto dx, int64_t n) { ReluGradLoop(dy, y, dx, n); });
    RETURN_IF_ERROR(registry->Register(std::move(def)));
  }
  {
    OpDef def;
    def.name = "gelu";
    def.doc =
        "approximate=\"tanh\": y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); "
        "approximate=\"none\": y = 0.5 x (1 + erf(x / sqrt(2)))";
    def.inputs = {"x"};
    def.outputs = {"y"};
    def.attrs = {GeluApproximateAttr()};
    def.inplace_pairs = {{0, 0}};
    def.infer = [](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> {
      RETURN_IF_ERROR(CheckGeluApproximate("gelu", ctx));
      return InferUnary("gelu", ctx);
    };
    def.sbp = UnarySbp;
    def.grad = [](GradContext* ctx) -> absl::Status {
      if (!ctx->needs_input_grad(0)) return absl::OkStatus();
      AttrMap attrs;
      attrs.Set("approximate", ctx->attrs().String("approximate"));
      ASSIGN_OR_RETURN(std::string dx, ctx->EmitOne("gelu_grad", {ctx->output_grad(0), ctx->input(0)}, attrs));
      ctx->SetInputGrad(0, dx);
      return absl::OkStatus();
    };
    def.cost = ElementCost(kGeluFlopsPerElement);
    def.cpu_kernel = GeluKernel(UnaryKernel("gelu", [](auto x, auto y, int64_t n) { GeluLoop(x, y, n); }),
                                UnaryKernel("gelu", [](auto x, auto y, int64_t n) { ErfGeluLoop(x, y, n); }));
    RETURN_IF_ERROR(registry->Register(std::move(def)));
  }
  {
    OpDef def;
    def.name = "gelu_grad";
    def.doc = "dx = dy * gelu'(x), where x is the forward input and approximate the forward's";
    def.inputs = {"dy", "x"};
    def.outputs = {"dx"};
    def.attrs = {GeluApproximateAttr()};
    def.inplace_pairs = {{0, 0}};
    def.infer = [](const InferContext& ctx) -> absl::StatusOr<std::vector<TensorDesc>> {
      RETURN_IF_ERROR(CheckGeluApproximate("gelu_grad", ctx));
      return InferGrad("gelu_grad", "x", ctx);
    };
    def.sbp = GradSbp;
    def.cost = ElementCost(kGeluFlopsPerElement + 8);
    def.cpu_kernel = GeluKernel(
        BinaryKernel("gelu_grad", [](auto dy, auto x, auto dx, int64_t n) { GeluGradLoop(dy, x, dx, n); }),
        BinaryKernel("gelu_grad", [](auto dy, auto x, auto dx, int64_t n) { ErfGeluGradLoop(dy, x, dx, n); }));
    RETURN_IF_ERROR(registry->Register(std::move(def)));
  }
  return absl::OkStatus();
}

}  // namespace oneflow_like
