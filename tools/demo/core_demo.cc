// The core's smallest real demo (the main job until the actor runtime exists).
//
// 1. Trains a 2-layer MLP classifier on a synthetic, learnable task with the registered CPU
//    kernels: forward ops, their gradient ops, and AdamW updates, printing the loss per step.
// 2. Re-runs one forward/backward of the first layer as 4 "devices" would under data parallel
//    (x:S(0), w:B) and Megatron tensor parallel (w1:S(1) column split, then w2:S(0) row split
//    giving a partial sum), slicing with the shard simulator, and checks that the assembled
//    results equal the single-device run.
//
// Usage: core_demo [--steps N] [--batch B] [--hidden H] [--lr LR] [--seed S]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "oneflow_like/core/eager.h"
#include "oneflow_like/core/ops/builtin_ops.h"
#include "oneflow_like/core/random.h"
#include "oneflow_like/core/shard_simulator.h"

namespace oneflow_like {
namespace {

struct Options {
  int steps = 30;         // training steps
  int64_t batch = 64;     // examples per step
  int64_t in = 32;        // input features
  int64_t hidden = 64;    // hidden width
  int64_t classes = 4;    // output classes
  double lr = 3e-2;       // AdamW learning rate
  uint64_t seed = 1;      // init and data seed
};

// Dies with a message on error: this is a demo's main, not a library.
template <typename T>
T Must(absl::StatusOr<T> v, const char* what) {
  if (!v.ok()) {
    std::fprintf(stderr, "core_demo: %s failed: %s\n", what, std::string(v.status().message()).c_str());
    std::exit(1);
  }
  return *std::move(v);
}

Tensor Normal(const Shape& shape, uint64_t seed, double std) {
  Tensor t(DataType::kFloat32, shape);
  FillNormal(&t, shape, std::vector<int64_t>(shape.num_axes(), 0), seed, 0.0, std);
  return t;
}

// Labels of a learnable rule: the class is argmax of x @ w_true.
Tensor Labels(const OpRegistry& reg, const Tensor& x, const Tensor& w_true) {
  Tensor scores = Must(RunOp(reg, "matmul", {x, w_true}), "labels")[0];
  Tensor labels(DataType::kInt64, Shape({x.shape()[0]}));
  const int64_t c = w_true.shape()[1];
  for (int64_t i = 0; i < x.shape()[0]; ++i) {
    int64_t best = 0;
    for (int64_t j = 1; j < c; ++j) {
      if (scores.GetAsDouble(i * c + j) > scores.GetAsDouble(i * c + best)) best = j;
    }
    labels.data<int64_t>()[i] = best;
  }
  return labels;
}

double MaxAbsDiff(const Tensor& a, const Tensor& b) {
  double m = 0;
  for (int64_t i = 0; i < a.elem_count(); ++i) m = std::max(m, std::abs(a.GetAsDouble(i) - b.GetAsDouble(i)));
  return m;
}

int Main(const Options& o) {
  OpRegistry reg;
  if (absl::Status s = RegisterBuiltinOps(&reg); !s.ok()) {
    std::fprintf(stderr, "core_demo: registering ops failed: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  CpuAllocator alloc;
  std::printf("oneflow_like core demo: %zu ops registered\n", reg.Names().size());
  std::printf("training MLP %lld -> %lld (relu) -> %lld, batch %lld, AdamW lr %g, %d steps\n",
              (long long)o.in, (long long)o.hidden, (long long)o.classes, (long long)o.batch, o.lr, o.steps);

  Tensor w_true = Normal({o.in, o.classes}, o.seed + 100, 1.0);
  Tensor w1 = Normal({o.in, o.hidden}, o.seed, 1.0 / std::sqrt(double(o.in)));
  Tensor w2 = Normal({o.hidden, o.classes}, o.seed + 1, 1.0 / std::sqrt(double(o.hidden)));
  Tensor m1(w1.desc()), v1(w1.desc()), m2(w2.desc()), v2(w2.desc());
  const AttrMap adam{{"lr", o.lr}, {"weight_decay", 0.01}};
  double first_loss = 0, last_loss = 0;
  for (int step = 1; step <= o.steps; ++step) {
    Tensor x = Normal({o.batch, o.in}, o.seed * 1000 + step, 1.0);
    Tensor y = Labels(reg, x, w_true);
    // Forward.
    Tensor h = Must(RunOp(reg, "matmul", {x, w1}, {}, &alloc), "matmul 1")[0];
    Tensor a = Must(RunOp(reg, "relu", {h}, {}, &alloc), "relu")[0];
    Tensor logits = Must(RunOp(reg, "matmul", {a, w2}, {}, &alloc), "matmul 2")[0];
    Tensor loss = Must(RunOp(reg, "sparse_softmax_cross_entropy", {logits, y}, {}, &alloc), "loss")[0];
    // Backward (the ops each forward op's gradient rule emits).
    Tensor one = Tensor::FromVector<float>(Shape({}), {1.0f});
    Tensor dlogits = Must(RunOp(reg, "sparse_softmax_cross_entropy_grad", {logits, y, one}, {}, &alloc), "dloss")[0];
    Tensor dw2 = Must(RunOp(reg, "matmul", {a, dlogits}, {{"transpose_a", true}}, &alloc), "dw2")[0];
    Tensor da = Must(RunOp(reg, "matmul", {dlogits, w2}, {{"transpose_b", true}}, &alloc), "da")[0];
    Tensor dh = Must(RunOp(reg, "relu_grad", {da, a}, {}, &alloc), "relu_grad")[0];
    Tensor dw1 = Must(RunOp(reg, "matmul", {x, dh}, {{"transpose_a", true}}, &alloc), "dw1")[0];
    // AdamW.
    Tensor t = Tensor::FromVector<int64_t>(Shape({}), {step});
    auto u1 = Must(RunOp(reg, "adam_update", {w1, dw1, m1, v1, t}, adam, &alloc), "adam w1");
    auto u2 = Must(RunOp(reg, "adam_update", {w2, dw2, m2, v2, t}, adam, &alloc), "adam w2");
    w1 = u1[0], m1 = u1[1], v1 = u1[2];
    w2 = u2[0], m2 = u2[1], v2 = u2[2];
    double l = loss.GetAsDouble(0);
    if (step == 1) first_loss = l;
    last_loss = l;
    if (step == 1 || step % 5 == 0 || step == o.steps) std::printf("step %3d  loss %.4f\n", step, l);
  }
  std::printf("loss %.4f -> %.4f (%s); host allocator peak %.1f KiB\n", first_loss, last_loss,
              last_loss < first_loss ? "falling" : "NOT falling", alloc.peak_bytes() / 1024.0);

  // Parallel layouts of the first layer on 4 simulated devices vs one device.
  Tensor x = Normal({o.batch + 3, o.in}, 7, 1.0);  // +3: an uneven split
  Tensor h = Must(RunOp(reg, "matmul", {x, w1}), "reference matmul")[0];
  Tensor z = Must(RunOp(reg, "matmul", {Must(RunOp(reg, "relu", {h}), "relu")[0], w2}), "reference layer 2")[0];
  const std::vector<int64_t> mesh{4};
  // Data parallel: x:S(0), w1:B -> h:S(0).
  auto xs = Must(ShardTensor(x, NdSbp{Sbp::Split(0)}, mesh), "shard x");
  std::vector<Tensor> hs;
  for (const Tensor& xi : xs) hs.push_back(Must(RunOp(reg, "matmul", {xi, w1}), "dp matmul")[0]);
  Tensor h_dp = Must(AssembleTensor(hs, h.shape(), NdSbp{Sbp::Split(0)}, mesh), "assemble dp");
  // Tensor parallel: w1:S(1) -> h:S(1); relu; w2:S(0) -> z:P.
  auto w1s = Must(ShardTensor(w1, NdSbp{Sbp::Split(1)}, mesh), "shard w1");
  auto w2s = Must(ShardTensor(w2, NdSbp{Sbp::Split(0)}, mesh), "shard w2");
  std::vector<Tensor> zs;
  for (size_t d = 0; d < w1s.size(); ++d) {
    Tensor hd = Must(RunOp(reg, "matmul", {x, w1s[d]}), "tp matmul 1")[0];
    Tensor ad = Must(RunOp(reg, "relu", {hd}), "tp relu")[0];
    zs.push_back(Must(RunOp(reg, "matmul", {ad, w2s[d]}), "tp matmul 2")[0]);
  }
  Tensor z_tp = Must(AssembleTensor(zs, z.shape(), NdSbp{Sbp::PartialSum()}, mesh), "assemble tp");
  double e_dp = MaxAbsDiff(h_dp, h), e_tp = MaxAbsDiff(z_tp, z);
  std::printf("4 devices, data parallel   x:S(0) w1:B            max |diff| vs 1 device = %.2e\n", e_dp);
  std::printf("4 devices, tensor parallel w1:S(1) relu w2:S(0) -> P  max |diff| vs 1 device = %.2e\n", e_tp);
  bool ok = last_loss < first_loss && e_dp < 1e-5 && e_tp < 1e-4;
  std::printf("%s\n", ok ? "core demo OK" : "core demo FAILED");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace oneflow_like

int main(int argc, char** argv) {
  oneflow_like::Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&](const char* flag) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "core_demo: %s needs a value\n", flag);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--steps") o.steps = std::atoi(next("--steps"));
    else if (a == "--batch") o.batch = std::atoll(next("--batch"));
    else if (a == "--hidden") o.hidden = std::atoll(next("--hidden"));
    else if (a == "--lr") o.lr = std::atof(next("--lr"));
    else if (a == "--seed") o.seed = std::strtoull(next("--seed"), nullptr, 10);
    else if (a == "--help" || a == "-h") {
      std::printf("usage: core_demo [--steps N] [--batch B] [--hidden H] [--lr LR] [--seed S]\n");
      return 0;
    } else {
      std::fprintf(stderr, "core_demo: unknown flag '%s' (see --help)\n", a.c_str());
      return 2;
    }
  }
  if (o.steps < 1 || o.batch < 1 || o.hidden < 1 || !(o.lr > 0)) {
    std::fprintf(stderr, "core_demo: --steps, --batch, --hidden and --lr must be positive\n");
    return 2;
  }
  return oneflow_like::Main(o);
}
