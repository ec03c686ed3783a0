#include "oneflow_like/actor/cuda/stream_completions.h"

#include <utility>

#include "oneflow_like/core/cuda/cuda_status.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace actor {

StreamCompletions::StreamCompletions(int device_ordinal, bool blocking_sync)
    : device_ordinal_(device_ordinal),
      event_flags_(cudaEventDisableTiming | (blocking_sync ? cudaEventBlockingSync : 0u)),
      thread_([this] { Loop(); }) {}

StreamCompletions::~StreamCompletions() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();  // the loop returns once nothing is pending
  cudaSetDevice(device_ordinal_);  // the events' device
  for (cudaEvent_t event : free_events_) cudaEventDestroy(event);
}

absl::Status StreamCompletions::Add(cudaStream_t stream, Callback done) {
  cudaEvent_t event = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_events_.empty()) {
      event = free_events_.back();
      free_events_.pop_back();
    }
  }
  if (event == nullptr) {
    RETURN_IF_ERROR(cuda::CudaStatus(
        cudaEventCreateWithFlags(&event, event_flags_), "cudaEventCreateWithFlags"));
  }
  {
    // Recorded and queued under one lock, so two callers on one stream queue in record order.
    std::lock_guard<std::mutex> lock(mu_);
    if (absl::Status recorded = cuda::CudaStatus(cudaEventRecord(event, stream), "cudaEventRecord"); !recorded.ok()) {
      cudaEventDestroy(event);
      return recorded;
    }
    pending_.push_back(Pending{event, std::move(done)});
    ++added_;
  }
  cv_.notify_all();
  return absl::OkStatus();
}

void StreamCompletions::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t target = added_;
  cv_.wait(lock, [&] { return completed_ >= target; });
}

int64_t StreamCompletions::completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_;
}

void StreamCompletions::Loop() {
  const absl::Status device = cuda::CudaStatus(cudaSetDevice(device_ordinal_), "cudaSetDevice");
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
    if (pending_.empty()) return;  // stopped, nothing left
    Pending next = std::move(pending_.front());
    pending_.pop_front();
    lock.unlock();
    // Waited for even if the device could not be selected (the callback must not come early).
    absl::Status status = cuda::CudaStatus(cudaEventSynchronize(next.event), "cudaEventSynchronize");
    if (!status.ok() && !device.ok()) status = device;
    next.done(status);
    lock.lock();
    free_events_.push_back(next.event);
    ++completed_;
    cv_.notify_all();  // WaitIdle
  }
}

}  // namespace actor
}  // namespace oneflow_like
