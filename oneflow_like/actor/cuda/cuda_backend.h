// CudaBackend: the DeviceBackend (actor/device_backend.h) of `cuda` placements on NVIDIA GPUs.
// Built only with the CUDA toolkit (tagged "manual"; oltrain_cuda links it), run where a GPU is
// visible.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> cuda, CudaBackend::Create());  // Unavailable: no GPU
//   options.device_backend = cuda.get();   // TrainerOptions / SessionOptions / RuntimeEnv
//
// Mapping (device_backend.h has the contract):
//   Allocate       cudaMalloc, zeroed (one allocation per planned block, so the peak device
//                  memory is the plan's); Free = cudaFree
//   CopyToDevice / CopyToHost / CopyWithinDevice / ZeroDevice / CopyBox
//                  enqueued on the backend's own stream and waited for (the runtime calls them
//                  only on buffers no act is using)
//   streams        one non-blocking cudaStream_t (and one cuBLAS handle bound to it) per
//                  (device, TaskProto.stream_id), created on first use
//   bodies         Start enqueues on the stream (kernels from core/cuda/op_kernels.h' table,
//                  cudaMemcpyAsync for copies, a broadcast add for sums) and then records an
//                  event whose completion calls `finished` from the stream's completion thread
//                  (stream_completions.h): the actor thread never waits for the GPU and the
//                  stream never waits for the host. REPEAT, holder absorptions and ACCUMULATE
//                  start this way too; Act (the add of a BOXING_ADD within a rank) waits for
//                  the stream. Waits that remain: that add, and the embedding and cross-entropy
//                  launchers (core/cuda/index_kernels.cu synchronizes the stream), which stop
//                  the host from running ahead there
//   events         between two streams of a device (stream-ordered hand-offs across streams,
//                  actor/stream_ordered.h): CudaEvent (stream_events.h), cudaEventRecord on the
//                  producer's stream after its kernels, cudaStreamWaitEvent on the consumer's
//                  before its own
// Devices: placements' DeviceProto.index is the device within the process (one process per GPU:
// olrun's LOCAL_RANK picks it through CUDA_VISIBLE_DEVICES or `device_offset`).
// Errors: a launch failure fails the act, naming the task and the CUDA call; a fault inside a
// kernel fails the acts whose events follow it (cudaEventSynchronize returns it, with CUDA's
// message) and every later synchronizing call.
#ifndef ONEFLOW_LIKE_ACTOR_CUDA_CUDA_BACKEND_H_
#define ONEFLOW_LIKE_ACTOR_CUDA_CUDA_BACKEND_H_

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "oneflow_like/actor/cuda/stream_completions.h"
#include "oneflow_like/actor/cuda/stream_events.h"
#include "oneflow_like/actor/device_backend.h"
#include "oneflow_like/core/cuda/cuda_device.h"
#include "oneflow_like/core/cuda/matmul_kernels.h"
#include "oneflow_like/core/cuda/op_kernels.h"

namespace oneflow_like {
namespace actor {

class CudaBackend final : public DeviceBackend {
 public:
  // Unavailable (CUDA's message) when no GPU is visible; `device_offset` is added to every
  // placement device index (the process's GPU when several processes share a node).
  // `allow_tf32`: float32 matmuls may use TF32 tensor cores (about 1e-3 relative error; the
  // profile tools/plan/profiles/h100.txt prices that, h100_fp32.txt the default).
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(int32_t device_offset = 0, bool allow_tf32 = false);
  ~CudaBackend() override;

  std::string type() const override { return "cuda"; }
  absl::StatusOr<char*> Allocate(int32_t device, int64_t bytes) override;
  void Free(int32_t device, char* data) override;
  absl::StatusOr<int64_t> FreeBytes(int32_t device) override;  // cudaMemGetInfo
  absl::Status CopyToDevice(int32_t device, const void* host, char* device_data, int64_t bytes) override;
  absl::Status CopyToHost(int32_t device, const char* device_data, void* host, int64_t bytes) override;
  absl::Status CopyWithinDevice(int32_t device, const char* from, char* to, int64_t bytes) override;
  absl::Status ZeroDevice(int32_t device, char* data, int64_t bytes) override;
  absl::Status CopyBox(int32_t device, const Tensor& from, const std::vector<int64_t>& from_offset, Tensor* to,
                       const std::vector<int64_t>& to_offset, const std::vector<int64_t>& shape) override;
  absl::StatusOr<std::unique_ptr<ActBody>> MakeBody(DeviceTask task) override;
  absl::Status Drain() override;  // every stream's completions reported, then cudaStreamSynchronize
  // Events between streams of a device (stream_events.h): cudaEventRecord / cudaStreamWaitEvent.
  // set_stream_events(false) (before the runtime is built): none, so the runtime keeps the
  // finish semantics across streams (oltrain_cuda: OL_CUDA_STREAM_EVENTS=0, to compare).
  bool HasStreamEvents() const override { return stream_events_.load(); }
  void set_stream_events(bool on) { stream_events_.store(on); }
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent(int32_t device) override;
  absl::Status RecordEvent(int32_t device, int32_t stream, Event* event) override;
  absl::Status WaitEvent(int32_t device, int32_t stream, const Event& event) override;

  struct Stream {
    cuda::CudaStream stream;
    cuda::CublasHandle cublas;
    // Reports the bodies' completions (declared last: destroyed first, after its pending ones).
    std::unique_ptr<StreamCompletions> completions;
  };
  // The stream of (device, stream_id), created on first use; selects the device on this thread.
  absl::StatusOr<Stream*> StreamFor(int32_t device, int32_t stream_id);
  absl::Status Use(int32_t device) const;  // cudaSetDevice(device + offset) on this thread
  const cuda::CudaKernelTable& kernels() const { return kernels_; }
  bool allow_tf32() const { return allow_tf32_; }
  // Embedding / cross-entropy range checks of ids and labels (op_kernels.h: each synchronizes
  // its stream); on by default. oltrain_cuda: OL_CUDA_CHECK_INDICES=0 turns them off.
  bool check_indices() const { return check_indices_.load(); }
  void set_check_indices(bool on) { check_indices_.store(on); }
  // How the completion threads wait for events (before the first stream is made): sleeping
  // (cudaEventBlockingSync, the default) or, with spin, the device's schedule (spinning when
  // the process has fewer CUDA contexts than cores): lower latency per completion, one busy
  // core per stream. oltrain_cuda: OL_CUDA_SPIN_COMPLETIONS=1.
  void set_spin_completions(bool on) { spin_completions_.store(on); }

  // The host's cost of the asynchronous acts so far (Start, on the actors' threads): selecting
  // the stream and enqueueing the work (kernel launches, cuBLAS, copies), and recording the
  // completion event and queueing its callback. oltrain_cuda prints it at the end of a run.
  struct HostCosts {
    int64_t starts = 0;
    int64_t enqueue_micros = 0;
    int64_t completion_micros = 0;
  };
  HostCosts host_costs() const;
  void CountStart(std::chrono::nanoseconds enqueue, std::chrono::nanoseconds completion);

 private:
  CudaBackend(int32_t device_offset, bool allow_tf32) : device_offset_(device_offset), allow_tf32_(allow_tf32) {}
  int32_t device_offset_ = 0;
  bool allow_tf32_ = false;
  std::atomic<bool> stream_events_{true};
  std::atomic<bool> check_indices_{true};
  std::atomic<bool> spin_completions_{false};
  std::atomic<int64_t> starts_{0}, enqueue_nanos_{0}, completion_nanos_{0};
  int device_count_ = 0;
  cuda::CudaKernelTable kernels_;
  std::mutex mu_;
  std::map<std::pair<int32_t, int32_t>, std::unique_ptr<Stream>> streams_;
};

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_CUDA_CUDA_BACKEND_H_
