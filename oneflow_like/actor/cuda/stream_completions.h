// StreamCompletions: reports the completion of work enqueued on one CUDA stream to the host,
// in enqueue order, from a thread of its own, without holding the stream.
//
//   StreamCompletions done(device_ordinal);           // one per (device, stream)
//   enqueue kernels on `stream`, then
//   RETURN_IF_ERROR(done.Add(stream, [](const absl::Status& s) { ... }));  // never blocks
//
// Add records a CUDA event after the work enqueued so far (cudaEventRecord: the stream does not
// wait for anything) and queues it with its callback; the thread waits for the events one by
// one (cudaEventSynchronize on events made with cudaEventBlockingSync: it sleeps, it does not
// spin) and calls each callback with cudaEventSynchronize's status, so a fault inside a kernel
// reaches the act that was waiting for it (named by CUDA's message) instead of leaving it in
// flight. A host function (cudaLaunchHostFunc) per act would do neither: the stream stalls
// until the host has run it, after every kernel, and CUDA runs no host function after a fault.
// Events are reused (a pool per object). Callbacks run on the thread, one at a time, in the
// order of the Add calls (recorded and queued under one lock); they must not block on work of
// this stream. Whatever a callback touches must outlive it: CudaBackend::Drain (WaitIdle) runs
// before a runtime destroys its actors and bodies.
// Thread-safety: Add and WaitIdle may be called from any thread. The destructor waits until
// every callback added has run, then joins the thread.
#ifndef ONEFLOW_LIKE_ACTOR_CUDA_STREAM_COMPLETIONS_H_
#define ONEFLOW_LIKE_ACTOR_CUDA_STREAM_COMPLETIONS_H_

#include <cuda_runtime_api.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"

namespace oneflow_like {
namespace actor {

class StreamCompletions {
 public:
  using Callback = std::function<void(const absl::Status&)>;

  // `device_ordinal`: the CUDA device of the streams passed to Add (the thread selects it).
  // `blocking_sync` false: events without cudaEventBlockingSync, so the thread waits as the
  // device's schedule flags say (by default it spins while the process has fewer CUDA contexts
  // than cores): a shorter wake-up per completion for one busy core.
  explicit StreamCompletions(int device_ordinal, bool blocking_sync = true);
  ~StreamCompletions();
  StreamCompletions(const StreamCompletions&) = delete;
  StreamCompletions& operator=(const StreamCompletions&) = delete;

  // Calls `done` once the work enqueued on `stream` so far is complete. REQUIRES: the calling
  // thread's current device is the device of `stream` and `device_ordinal` (the events are
  // made there). An error (CUDA's message, naming the
  // call) if the event cannot be made or recorded; `done` is not called then.
  absl::Status Add(cudaStream_t stream, Callback done);
  // Returns once every callback added before the call has run.
  void WaitIdle();
  // Callbacks run so far (tests).
  int64_t completed() const;

 private:
  struct Pending {
    cudaEvent_t event;
    Callback done;
  };
  void Loop();

  const int device_ordinal_;
  const unsigned event_flags_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;
  std::vector<cudaEvent_t> free_events_;
  int64_t added_ = 0, completed_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_CUDA_STREAM_COMPLETIONS_H_
