// kernel_bench: throughput of the registered CPU kernels next to the machine's own baselines,
// measured in the same run on the same buffers.
//
//   matmul (float32, n^3 for n = 1024, 2048): GFLOP/s of the registered kernel vs a direct
//       cblas_sgemm call. Goal: >= 95%.
//   add, gelu, softmax, layer_norm (float32, [4096,1024]): GB/s of bytes read + written vs
//       memcpy moving the same number of bytes. Goal: >= 50%. Ops not registered (yet) print
//       "missing"; they are looked up by name in the registry at run time. Then the same for
//       the forms W2 runs: gelu_erf, gelu_grad_erf (approximate="none") and softmax_causal on
//       rows of 128 (the same elements); tools/bench/all.sh tabulates only the first four.
//
// Every figure is the median of several timed repetitions after a warm-up; matmul and its
// baseline are timed alternately so that drift (frequency, neighbours) hits both alike. OpenBLAS
// uses OPENBLAS_NUM_THREADS threads; the element-wise kernels and memcpy use one thread.
//
// Usage (build optimized; a fastbuild binary measures -O0 code):
//   bazel run -c opt //tools/bench:kernel_bench
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "oneflow_like/core/op_registry.h"
#include "oneflow_like/core/ops/builtin_ops.h"

namespace oneflow_like {
namespace {

// An op instance with its inputs and preallocated outputs, ready to run its CPU kernel.
struct PreparedOp {
  const OpDef* def = nullptr;
  AttrMap attrs;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;

  double bytes() const {
    double b = 0;
    for (const Tensor& t : inputs) b += static_cast<double>(t.byte_size());
    for (const Tensor& t : outputs) b += static_cast<double>(t.byte_size());
    return b;
  }
  absl::Status Run() {
    KernelContext ctx{def->name, attrs, {}, {}, {}, {}};
    for (const Tensor& t : inputs) {
      ctx.inputs.push_back(&t);
      ctx.input_shards.push_back(ShardInfo::Whole(t.shape()));
    }
    for (Tensor& t : outputs) {
      ctx.outputs.push_back(&t);
      ctx.output_shards.push_back(ShardInfo::Whole(t.shape()));
    }
    return def->cpu_kernel(ctx);
  }
};

absl::StatusOr<PreparedOp> Prepare(const OpRegistry& registry, const std::string& name,
                                   std::vector<Tensor> inputs, const AttrMap& attrs = {}) {
  PreparedOp op;
  op.def = registry.Find(name);
  if (op.def == nullptr) return absl::NotFoundError("missing");
  ASSIGN_OR_RETURN(op.attrs, op.def->ValidateAttrs(name, attrs));
  std::vector<TensorDesc> descs;
  for (const Tensor& t : inputs) descs.push_back(t.desc());
  ASSIGN_OR_RETURN(std::vector<TensorDesc> out_descs, op.def->Infer(name, op.attrs, descs));
  op.inputs = std::move(inputs);
  for (const TensorDesc& d : out_descs) op.outputs.emplace_back(d);
  return op;
}

Tensor RandomFloats(const Shape& shape, uint64_t seed) {
  Tensor t(DataType::kFloat32, shape);
  float* p = t.data<float>();
  uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (int64_t i = 0; i < t.elem_count(); ++i) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    p[i] = static_cast<float>(static_cast<double>(s >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  }
  return t;
}

double Seconds(const std::chrono::steady_clock::time_point& start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Times `a` and `b` alternately (after one warm-up call of each); returns their medians.
template <typename A, typename B>
std::pair<double, double> TimePair(int reps, A&& a, B&& b) {
  a();
  b();
  std::vector<double> ta, tb;
  for (int r = 0; r < reps; ++r) {
    auto start = std::chrono::steady_clock::now();
    a();
    ta.push_back(Seconds(start));
    start = std::chrono::steady_clock::now();
    b();
    tb.push_back(Seconds(start));
  }
  return {Median(ta), Median(tb)};
}

void BenchMatmul(const OpRegistry& registry, int64_t n, int reps) {
  auto op = Prepare(registry, "matmul", {RandomFloats({n, n}, 1), RandomFloats({n, n}, 2)});
  if (!op.ok()) {
    std::printf("%-22s %s\n", absl::StrCat("matmul ", n, "^3").c_str(),
                std::string(op.status().message()).c_str());
    return;
  }
  const float* a = op->inputs[0].data<float>();
  const float* b = op->inputs[1].data<float>();
  Tensor c(DataType::kFloat32, Shape{n, n});
  absl::Status status;
  const int ni = static_cast<int>(n);
  auto [t_kernel, t_blas] = TimePair(
      reps, [&] { status.Update(op->Run()); },
      [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f, a, ni, b, ni, 0.0f,
                    c.data<float>(), ni);
      });
  if (!status.ok()) {
    std::printf("matmul %lld^3: kernel failed: %s\n", static_cast<long long>(n), status.ToString().c_str());
    return;
  }
  const double flops = 2.0 * n * n * n;
  std::printf("%-22s %10.1f %10.1f %7.1f%%  %s\n", absl::StrCat("matmul ", n, "^3 GFLOP/s").c_str(),
              flops / t_kernel / 1e9, flops / t_blas / 1e9, 100.0 * t_blas / t_kernel,
              t_blas / t_kernel >= 0.95 ? "ok (>= 95%)" : "BELOW GOAL (95%)");
}

// GB/s of `name` on `inputs` vs memcpy moving the same bytes (half read, half written).
void BenchBandwidth(const OpRegistry& registry, const std::string& label, const std::string& name,
                    std::vector<Tensor> inputs, int reps, std::vector<char>* src, std::vector<char>* dst,
                    const AttrMap& attrs = {}) {
  auto op = Prepare(registry, name, std::move(inputs), attrs);
  if (!op.ok()) {
    std::printf("%-22s %10s\n", label.c_str(),
                op.status().code() == absl::StatusCode::kNotFound
                    ? "missing"
                    : std::string(op.status().message()).c_str());
    return;
  }
  const double bytes = op->bytes();
  const size_t copy_bytes = static_cast<size_t>(bytes / 2);
  if (src->size() < copy_bytes) {
    src->assign(copy_bytes, 1);
    dst->assign(copy_bytes, 0);
  }
  absl::Status status;
  auto [t_op, t_copy] = TimePair(
      reps, [&] { status.Update(op->Run()); }, [&] { std::memcpy(dst->data(), src->data(), copy_bytes); });
  if (!status.ok()) {
    std::printf("%-22s kernel failed: %s\n", label.c_str(), status.ToString().c_str());
    return;
  }
  std::printf("%-22s %10.1f %10.1f %7.1f%%  %s\n", label.c_str(), bytes / t_op / 1e9, bytes / t_copy / 1e9,
              100.0 * t_copy / t_op, t_copy / t_op >= 0.5 ? "ok (>= 50%)" : "BELOW GOAL (50%)");
}

int Main() {
  OpRegistry registry;
  absl::Status s = RegisterBuiltinOps(&registry);
  if (!s.ok()) {
    std::fprintf(stderr, "RegisterBuiltinOps: %s\n", s.ToString().c_str());
    return 1;
  }
  const char* env_threads = std::getenv("OPENBLAS_NUM_THREADS");
  std::printf("OpenBLAS: %s, %d thread(s) (OPENBLAS_NUM_THREADS=%s)\n", openblas_get_config(),
              openblas_get_num_threads(), env_threads ? env_threads : "unset");
  std::printf("median of N timed repetitions after a warm-up; ratio = baseline time / kernel time\n\n");
  std::printf("%-22s %10s %10s %8s\n", "", "kernel", "baseline", "ratio");
  std::printf("%-22s %10s %10s\n", "matmul float32", "", "sgemm");
  BenchMatmul(registry, 1024, 20);
  BenchMatmul(registry, 2048, 10);

  const Shape shape{4096, 1024};
  std::printf("\n%-22s %10s %10s\n", "GB/s float32[4096,1024]", "", "memcpy");
  std::vector<char> src, dst;
  const int reps = 25;
  BenchBandwidth(registry, "add", "add", {RandomFloats(shape, 3), RandomFloats(shape, 4)}, reps, &src, &dst);
  BenchBandwidth(registry, "gelu", "gelu", {RandomFloats(shape, 5)}, reps, &src, &dst);
  BenchBandwidth(registry, "softmax", "softmax", {RandomFloats(shape, 6)}, reps, &src, &dst);
  BenchBandwidth(registry, "layer_norm", "layer_norm",
                 {RandomFloats(shape, 7), RandomFloats({shape.dim(1)}, 8), RandomFloats({shape.dim(1)}, 9)},
                 reps, &src, &dst);
  // The forms the GPT workload (W2) runs: exact (erf) gelu and its gradient, and the causal
  // softmax of attention (rows of 128 keys, on average half of them masked).
  const AttrMap exact = {{"approximate", std::string("none")}};
  BenchBandwidth(registry, "gelu_erf", "gelu", {RandomFloats(shape, 10)}, reps, &src, &dst, exact);
  BenchBandwidth(registry, "gelu_grad_erf", "gelu_grad", {RandomFloats(shape, 11), RandomFloats(shape, 12)}, reps, &src,
                 &dst, exact);
  BenchBandwidth(registry, "softmax_causal[.,128]", "softmax", {RandomFloats({shape.elem_count() / 128, 128}, 13)},
                 reps, &src, &dst, {{"causal", true}});
  return 0;
}

}  // namespace
}  // namespace oneflow_like

int main() { return oneflow_like::Main(); }
