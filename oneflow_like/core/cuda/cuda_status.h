// absl::Status from CUDA runtime error codes, naming the call that failed. No macros: callers
// write `RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(...), "cudaMemcpyAsync(x to device)"));`.
//
//   CudaStatus(cudaSuccess, ...)                 -> OK
//   CudaStatus(cudaErrorMemoryAllocation, "cudaMalloc(4096 bytes)")
//     -> ResourceExhausted "cudaMalloc(4096 bytes) failed: out of memory (cudaErrorMemoryAllocation)"
//   no device / no driver                        -> Unavailable (a machine without a GPU)
//   a bad argument                               -> InvalidArgument
//   anything else (launch failures, sticky errors) -> Internal
//
// CudaLaunchStatus(what) reads cudaGetLastError() after a kernel launch (launch errors only:
// a fault inside the kernel surfaces at the next synchronizing call on the stream). The runtime
// keeps one last error per host thread, left there by ANY failing call, not only launches
// (cudaEventQuery's and cudaStreamQuery's cudaErrorNotReady included), so every launch site
// calls ClearLastError() right before its `<<<...>>>`: the status after it is that launch's own.
// A sticky error (a fault that broke the context) is not cleared and fails the launch anyway.
// Thread-safe (cudaGetLastError is per host thread).
#ifndef ONEFLOW_LIKE_CORE_CUDA_CUDA_STATUS_H_
#define ONEFLOW_LIKE_CORE_CUDA_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace oneflow_like {
namespace cuda {

absl::Status CudaStatus(cudaError_t error, absl::string_view call);

// Drops this thread's last error (left by an earlier call, which reported it through its own
// return value), so that the next CudaLaunchStatus reports the launch between the two only.
void ClearLastError();

// The status of the last launch on this thread, e.g. CudaLaunchStatus("softmax_rows<float>").
// Call ClearLastError() before the launch, and this only where something was launched.
absl::Status CudaLaunchStatus(absl::string_view kernel);

}  // namespace cuda
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_CUDA_CUDA_STATUS_H_
