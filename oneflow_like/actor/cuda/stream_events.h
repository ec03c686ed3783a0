// CudaEvent: core/device.h's Event as a CUDA event (cudaEventDisableTiming), for the
// stream-ordered hand-offs between the streams of one device (actor/stream_ordered.h):
//
//   ASSIGN_OR_RETURN(std::unique_ptr<CudaEvent> written, CudaEvent::Create());  // current device
//   ... the producer's kernels on stream a ...
//   RETURN_IF_ERROR(written->Record(a));      // cudaEventRecord: a does not wait for anything
//   RETURN_IF_ERROR(written->StreamWait(b));  // cudaStreamWaitEvent: b's later work runs after it
//   ... the consumer's kernels on stream b ...
//
// StreamWait orders b after the record as of the call (a later Record does not move it); an
// event never recorded orders nothing. Neither call blocks the host. Query / Synchronize are
// cudaEventQuery / cudaEventSynchronize (a fault of the recorded work comes back from them).
// Thread-safety: Record and StreamWait on one event from one thread at a time (the actor that
// owns it, or the one it handed the register to after recording); Query and Synchronize from
// any thread.
#ifndef ONEFLOW_LIKE_ACTOR_CUDA_STREAM_EVENTS_H_
#define ONEFLOW_LIKE_ACTOR_CUDA_STREAM_EVENTS_H_

#include <cuda_runtime_api.h>

#include <atomic>
#include <memory>

#include "absl/status/statusor.h"
#include "oneflow_like/core/device.h"

namespace oneflow_like {
namespace actor {

class CudaEvent final : public Event {
 public:
  // On the calling thread's current device. CUDA's error (naming the call) if it cannot be made.
  static absl::StatusOr<std::unique_ptr<CudaEvent>> Create();
  ~CudaEvent() override;  // cudaEventDestroy: CUDA releases it once pending work reached it
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  absl::Status Record(cudaStream_t stream);
  absl::Status StreamWait(cudaStream_t stream) const;
  // cudaEventQuery != cudaErrorNotReady (an error: true); clears NotReady from the thread's
  // last error (cudaGetLastError), as a launch check after it would take it for a failure.
  bool Query() const override;
  absl::Status Synchronize() override;     // cudaEventSynchronize's status
  bool recorded() const { return recorded_.load(); }
  cudaEvent_t get() const { return event_; }

 private:
  explicit CudaEvent(cudaEvent_t event) : event_(event) {}
  cudaEvent_t event_;
  std::atomic<bool> recorded_{false};
};

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_CUDA_STREAM_EVENTS_H_
