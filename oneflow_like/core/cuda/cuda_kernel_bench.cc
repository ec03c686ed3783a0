// Times the CUDA kernels of this folder on one GPU at transformer-sized shapes (float32) and
// prints a markdown table: milliseconds per call (CUDA events, median of 20 after 3 warm-ups),
// the bytes each kernel must move and the resulting GB/s next to a device-to-device copy
// measured in the same run (the memory-bandwidth limit), and TFLOP/s for matmul (float32 with
// and without TF32). Numbers, not a test: without a GPU it prints why and exits 0.
//
//   cuda_kernel_bench [--rows=8192] [--cols=1024]      (tools/gpu/run_checks.sh --bench runs it)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "oneflow_like/core/cuda/activation_kernels.h"
#include "oneflow_like/core/cuda/copy_kernels.h"
#include "oneflow_like/core/cuda/cuda_device.h"
#include "oneflow_like/core/cuda/cuda_status.h"
#include "oneflow_like/core/cuda/elementwise_kernels.h"
#include "oneflow_like/core/cuda/embedding_kernels.h"
#include "oneflow_like/core/cuda/loss_kernels.h"
#include "oneflow_like/core/cuda/matmul_kernels.h"
#include "oneflow_like/core/cuda/norm_kernels.h"
#include "oneflow_like/core/cuda/optimizer_kernels.h"
#include "oneflow_like/core/cuda/reduce_kernels.h"
#include "oneflow_like/core/cuda/softmax_kernels.h"

namespace oneflow_like {
namespace cuda {
namespace {

struct Row {
  std::string kernel, shape;
  double ms = 0, bytes = 0, flops = 0;
};

// Median milliseconds of `fn` on `stream`; exits naming the failure.
double TimeIt(cudaStream_t stream, const std::function<absl::Status()>& fn) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<float> ms;
  for (int i = 0; i < 23; ++i) {
    cudaEventRecord(start, stream);
    const absl::Status s = fn();
    cudaEventRecord(stop, stream);
    if (!s.ok()) {
      std::fprintf(stderr, "cuda_kernel_bench: %s\n", s.ToString().c_str());
      std::exit(1);
    }
    const absl::Status sync = CudaStatus(cudaEventSynchronize(stop), "cudaEventSynchronize");
    if (!sync.ok()) {
      std::fprintf(stderr, "cuda_kernel_bench: %s\n", sync.ToString().c_str());
      std::exit(1);
    }
    float t = 0;
    cudaEventElapsedTime(&t, start, stop);
    if (i >= 3) ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// A device buffer of n floats filled with small values (bytes 0x3C: ~0.0115).
float* Floats(std::vector<DeviceBuffer>* keep, int64_t n, cudaStream_t stream) {
  absl::StatusOr<DeviceBuffer> b = DeviceBuffer::Allocate(n * static_cast<int64_t>(sizeof(float)));
  const absl::Status status = b.ok() ? b->Fill(0x3C, stream) : b.status();
  if (!status.ok()) {
    std::fprintf(stderr, "cuda_kernel_bench: a buffer of %lld floats: %s\n", static_cast<long long>(n),
                 status.ToString().c_str());
    std::exit(1);
  }
  keep->push_back(std::move(b).value());
  return keep->back().as<float>();
}

int64_t Flag(int argc, char** argv, const char* name, int64_t fallback) {
  const std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) return std::atoll(argv[i] + prefix.size());
  }
  return fallback;
}

int Main(int argc, char** argv) {
  const absl::StatusOr<int> count = DeviceCount();
  if (!count.ok() || *count == 0) {
    std::printf("cuda_kernel_bench: no CUDA device (%s); nothing measured\n",
                count.ok() ? "0 devices" : std::string(count.status().message()).c_str());
    return 0;
  }
  const int64_t rows = Flag(argc, argv, "rows", 8192), cols = Flag(argc, argv, "cols", 1024);
  const int64_t n = rows * cols, f = sizeof(float);
  if (!UseDevice(0).ok()) return 1;
  absl::StatusOr<std::string> device = DeviceDescription(0);
  absl::StatusOr<CudaStream> stream_or = CudaStream::Create();
  absl::StatusOr<CublasHandle> cublas = CublasHandle::Create();
  if (!device.ok() || !stream_or.ok() || !cublas.ok()) {
    std::fprintf(stderr, "cuda_kernel_bench: set-up failed\n");
    return 1;
  }
  const cudaStream_t s = stream_or->get();
  std::vector<DeviceBuffer> keep;
  float* x = Floats(&keep, n, s);
  float* y = Floats(&keep, n, s);
  float* z = Floats(&keep, n, s);
  float* vec = Floats(&keep, cols, s);
  float* vec2 = Floats(&keep, cols, s);
  float* dgamma = Floats(&keep, cols, s);
  float* dbeta = Floats(&keep, cols, s);
  float* row_stats = Floats(&keep, rows, s);
  float* row_stats2 = Floats(&keep, rows, s);
  const std::string shape = "[" + std::to_string(rows) + "," + std::to_string(cols) + "]";
  const std::vector<int64_t> dims = {rows, cols};
  std::vector<Row> table;
  auto add = [&](const std::string& kernel, const std::string& sh, double bytes, double flops,
                 const std::function<absl::Status()>& fn) { table.push_back({kernel, sh, TimeIt(s, fn), bytes, flops}); };

  add("memcpy device to device", shape, 2.0 * n * f, 0, [&] {
    return CudaStatus(cudaMemcpyAsync(y, x, n * f, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
  });
  // Attention's head split [B, T, H, D] -> [B, H, T, D] (8 x 1024 x 16 x 64 floats: 8 x 1024 x 1024).
  const std::vector<int64_t> heads = {8, rows / 8, cols / 64, 64};
  if (rows % 8 == 0 && cols % 64 == 0) {
    add("transpose [B,T,H,D] -> [B,H,T,D]", "[8," + std::to_string(rows / 8) + "," + std::to_string(cols / 64) + ",64]",
        2.0 * n * f, 0, [&] { return Transpose(x, heads, {0, 2, 1, 3}, f, y, s); });
  }
  add("add (same shape)", shape, 3.0 * n * f, 0, [&] { return BroadcastBinary<float>(BinaryOp::kAdd, x, dims, y, dims, z, s); });
  add("add (row vector)", shape, 2.0 * n * f, 0, [&] {
    return BroadcastBinary<float>(BinaryOp::kAdd, x, dims, vec, {cols}, z, s);
  });
  add("bias_add", shape, 2.0 * n * f, 0, [&] { return BiasAdd<float>(x, dims, -1, vec, z, s); });
  add("gelu (tanh)", shape, 2.0 * n * f, 0, [&] { return Gelu<float>(GeluApproximation::kTanh, x, z, n, s); });
  add("gelu_grad (tanh)", shape, 3.0 * n * f, 0, [&] {
    return GeluGrad<float>(GeluApproximation::kTanh, y, x, z, n, s);
  });
  add("reduce_sum axis 0 (bias grad)", shape, 1.0 * n * f, 0, [&] {
    return ReduceSum<float>(x, dims, {true, false}, vec, s);
  });
  add("reduce_sum axis 1", shape, 1.0 * n * f, 0, [&] { return ReduceSum<float>(x, dims, {false, true}, row_stats, s); });
  add("softmax", shape, 2.0 * n * f, 0, [&] { return Softmax<float>(x, dims, {}, z, s); });
  add("softmax_grad", shape, 3.0 * n * f, 0, [&] { return SoftmaxGrad<float>(x, y, dims, {}, z, s); });
  add("layer_norm", shape, 2.0 * n * f, 0, [&] {
    return LayerNorm<float>(x, vec, vec2, 1e-5, rows, cols, z, row_stats, row_stats2, s);
  });
  add("layer_norm_grad", shape, 3.0 * n * f, 0, [&] {
    return LayerNormGrad<float>(y, x, row_stats, row_stats2, vec, rows, cols, z, dgamma, dbeta, s);
  });
  {
    absl::StatusOr<DeviceBuffer> labels = DeviceBuffer::Allocate(rows * 8);
    absl::StatusOr<DeviceBuffer> ws = DeviceBuffer::Allocate(CrossEntropyWorkspaceBytes(rows));
    if (!labels.ok() || !ws.ok() || !labels->Fill(0, s).ok()) return 1;
    const int64_t* l = labels->as<int64_t>();
    add("cross_entropy", shape, 1.0 * n * f, 0, [&] {
      return SparseSoftmaxCrossEntropy<float, int64_t>(x, l, rows, cols, rows, row_stats, ws->data(), s);
    });
    add("cross_entropy_grad", shape, 2.0 * n * f, 0, [&] {
      return SparseSoftmaxCrossEntropyGrad<float, int64_t>(x, l, row_stats, rows, cols, rows, z, s);
    });
    add("embedding (ids all 0)", shape, 2.0 * n * f, 0, [&] {
      return Embedding<float, int64_t>(x, rows, cols, 0, l, rows, z, s);
    });
    keep.push_back(std::move(labels).value());
    keep.push_back(std::move(ws).value());
  }
  {
    absl::StatusOr<DeviceBuffer> step = DeviceBuffer::Allocate(8);
    const int64_t one = 1;
    if (!step.ok() || !step->CopyFromHost(&one, 8, s).ok()) return 1;
    AdamOptions o;
    o.lr = 1e-3;
    float* v = Floats(&keep, n, s);
    add("adam_update (in place)", shape, 7.0 * n * f, 0, [&] {
      return AdamUpdate<float, int64_t>(x, y, z, v, step->as<int64_t>(), n, o, x, z, v, s);
    });
    keep.push_back(std::move(step).value());
  }
  // matmul: [rows, cols] @ [cols, 4 cols].
  const int64_t m = rows, k = cols, nn = 4 * cols;
  float* a = Floats(&keep, m * k, s);
  float* b = Floats(&keep, k * nn, s);
  float* c = Floats(&keep, m * nn, s);
  const MatmulShape ms{1, m, k, nn, false, false, false};
  const std::string mshape = "[" + std::to_string(m) + "," + std::to_string(k) + "]x[" + std::to_string(k) + "," +
                             std::to_string(nn) + "]";
  const double mm_bytes = static_cast<double>(m * k + k * nn + m * nn) * f, mm_flops = 2.0 * m * k * nn;
  add("matmul float32", mshape, mm_bytes, mm_flops, [&] { return Matmul<float>(*cublas, ms, 1.0, a, b, c, s); });
  MatmulOptions tf32;
  tf32.allow_tf32 = true;
  add("matmul TF32", mshape, mm_bytes, mm_flops, [&] { return Matmul<float>(*cublas, ms, 1.0, a, b, c, s, tf32); });

  const double copy_gbs = table[0].bytes / (table[0].ms * 1e6);
  std::printf("## CUDA kernels, float32, %s\n\n", device->c_str());
  std::printf("| kernel | shape | ms | GB/s | of copy GB/s | TFLOP/s |\n|---|---|---:|---:|---:|---:|\n");
  for (const Row& r : table) {
    const double gbs = r.bytes / (r.ms * 1e6);
    std::printf("| %s | %s | %.4f | %.0f | %.0f%% | %s |\n", r.kernel.c_str(), r.shape.c_str(), r.ms, gbs,
                100.0 * gbs / copy_gbs, r.flops > 0 ? std::to_string(r.flops / (r.ms * 1e9)).c_str() : "");
  }
  std::printf("\nGB/s counts the bytes each kernel must read and write once; memcpy reads and writes.\n");
  return 0;
}

}  // namespace
}  // namespace cuda
}  // namespace oneflow_like

int main(int argc, char** argv) { return oneflow_like::cuda::Main(argc, argv); }
