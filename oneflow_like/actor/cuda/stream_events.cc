#include "oneflow_like/actor/cuda/stream_events.h"

#include "oneflow_like/core/cuda/cuda_status.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace actor {

absl::StatusOr<std::unique_ptr<CudaEvent>> CudaEvent::Create() {
  cudaEvent_t event = nullptr;
  RETURN_IF_ERROR(
      cuda::CudaStatus(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags"));
  return std::unique_ptr<CudaEvent>(new CudaEvent(event));
}

CudaEvent::~CudaEvent() { cudaEventDestroy(event_); }

absl::Status CudaEvent::Record(cudaStream_t stream) {
  RETURN_IF_ERROR(cuda::CudaStatus(cudaEventRecord(event_, stream), "cudaEventRecord"));
  recorded_.store(true);
  return absl::OkStatus();
}

absl::Status CudaEvent::StreamWait(cudaStream_t stream) const {
  if (!recorded_.load()) return absl::OkStatus();  // nothing to wait for
  return cuda::CudaStatus(cudaStreamWaitEvent(stream, event_, 0), "cudaStreamWaitEvent");
}

bool CudaEvent::Query() const {
  if (cudaEventQuery(event_) != cudaErrorNotReady) return true;
  // NotReady is left as the thread's last error; cleared, so that the next launch's
  // cudaGetLastError check on this thread does not report it as a failure.
  (void)cudaGetLastError();
  return false;
}

absl::Status CudaEvent::Synchronize() {
  return cuda::CudaStatus(cudaEventSynchronize(event_), "cudaEventSynchronize");
}

}  // namespace actor
}  // namespace oneflow_like
