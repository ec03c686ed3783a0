// oltrain_cuda: oltrain with the CUDA backend (actor/cuda/cuda_backend.h), so `--device=cuda`
// jobs run on the GPUs; cpu jobs run as with oltrain. Built with the CUDA toolkit only:
//   tools/bazel.sh build -c opt //tools/train:oltrain_cuda     (tagged manual)
// The process's GPU (cuda_device_choice.h): OL_CUDA_DEVICE, else LOCAL_RANK (olrun sets it: one
// process per GPU) -- but 0 when CUDA_VISIBLE_DEVICES gives the process exactly one GPU -- else 0.
// A LOCAL_RANK past the visible GPUs is an error naming them; a --device=cuda job then exits 3
// with it (no silent CPU run; cpu jobs still run).
// OL_CUDA_TF32=1 lets float32 matmuls use TF32 tensor cores (default: full FP32).
// OL_CUDA_STREAM_EVENTS=0: registers cross the streams of the GPU when their producer finished,
// not at enqueue with a CUDA event (actor/stream_ordered.h; to compare the two).
// OL_CUDA_CHECK_INDICES=0: no range check of embedding ids / cross-entropy labels (each check
// synchronizes its stream). OL_CUDA_SPIN_COMPLETIONS=1: the completion threads spin instead of
// sleeping on each act's event (cuda_backend.h).
// Without a visible GPU a cuda job fails naming CUDA's reason; cpu jobs are unaffected.
// COLLECTIVE tasks run through NCCL (comm/nccl_collective.h) on that GPU; gloo is not used.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "oneflow_like/actor/cuda/cuda_backend.h"
#include "oneflow_like/comm/nccl_collective.h"
#include "oneflow_like/core/cuda/cuda_device.h"
#include "tools/train/cuda_device_choice.h"
#include "tools/train/oltrain_main.h"

int main(int argc, char** argv) {
  const absl::StatusOr<int> count = oneflow_like::cuda::DeviceCount();
  const absl::StatusOr<int> chosen =
      count.ok() ? oneflow_like::ChooseCudaDevice(std::getenv("OL_CUDA_DEVICE"), std::getenv("LOCAL_RANK"),
                                                  std::getenv("CUDA_VISIBLE_DEVICES"), *count)
                 : absl::StatusOr<int>(count.status());
  const int device = chosen.ok() ? *chosen : 0;
  const char* tf32 = std::getenv("OL_CUDA_TF32");  // "1": float32 matmuls on TF32 tensor cores
  absl::StatusOr<std::unique_ptr<oneflow_like::actor::CudaBackend>> cuda =
      chosen.ok() ? oneflow_like::actor::CudaBackend::Create(device, tf32 != nullptr && std::string(tf32) == "1")
                  : absl::StatusOr<std::unique_ptr<oneflow_like::actor::CudaBackend>>(chosen.status());
  if (!cuda.ok()) {
    std::cerr << "oltrain_cuda: no CUDA backend (" << cuda.status().message() << "); cpu jobs only\n";
    return oneflow_like::OltrainMain(argc, argv, nullptr, nullptr, cuda.status());
  }
  const char* events = std::getenv("OL_CUDA_STREAM_EVENTS");
  if (events != nullptr && std::string(events) == "0") (*cuda)->set_stream_events(false);
  const char* checks = std::getenv("OL_CUDA_CHECK_INDICES");
  if (checks != nullptr && std::string(checks) == "0") (*cuda)->set_check_indices(false);
  const char* spin = std::getenv("OL_CUDA_SPIN_COMPLETIONS");
  if (spin != nullptr && std::string(spin) == "1") (*cuda)->set_spin_completions(true);
  // COLLECTIVE tasks of cuda plans through NCCL on this process's GPU (one GPU per process, as
  // olrun starts them: several ranks of one process would share the GPU, which NCCL refuses).
  auto nccl = [device](oneflow_like::comm::RendezvousStore* store, int32_t rank, int32_t world)
      -> absl::StatusOr<std::unique_ptr<oneflow_like::comm::CollectiveBackend>> {
    oneflow_like::comm::NcclOptions options;
    options.device = device;
    return oneflow_like::comm::CreateNcclBackend(store, rank, world, options);
  };
  const int code = oneflow_like::OltrainMain(argc, argv, cuda->get(), nccl);
  const oneflow_like::actor::CudaBackend::HostCosts costs = (*cuda)->host_costs();
  if (code == 0 && costs.starts > 0) {  // where the host's time per device act goes (docs/cuda.md)
    std::printf("cuda host cost per act (whole run, %lld acts): enqueue %.1f us, completion event %.1f us\n",
                static_cast<long long>(costs.starts), static_cast<double>(costs.enqueue_micros) / costs.starts,
                static_cast<double>(costs.completion_micros) / costs.starts);
  }
  return code;
}
