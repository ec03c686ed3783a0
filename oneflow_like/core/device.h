// Devices, streams and events: where work runs and how its completion is observed.
//
// A Device owns an Allocator and creates Streams and Events. A Stream is an ordered queue of
// work on one device; the runtime binds each stream to one thread (its owner). An Event marks
// a point in a stream: once everything enqueued before RecordEvent has finished, the event is
// complete. Another stream can WaitEvent on it, which orders that stream's later work after
// the marked point (a cross-stream dependency without blocking the host). AddCallback runs a
// host function once all work enqueued so far has finished, with the stream's status.
//
// Errors. Work is enqueued with Enqueue(f), where f returns void (cannot fail) or absl::Status.
// The first failing item puts the stream into a sticky error state: later work is skipped (it
// would read garbage), callbacks receive the error, events recorded afterwards carry it, and
// Synchronize returns it. A stream that waits on an event carrying an error adopts the error.
//
// How an asynchronous device maps onto the same interface (e.g. a later CudaDevice):
//   Stream       = a cudaStream_t created with cudaStreamNonBlocking; Enqueue launches a
//                  kernel or cudaMemcpyAsync on it and returns at once; a fallible work item's
//                  launch error (cudaGetLastError) becomes the sticky stream status.
//   Event        = a cudaEvent_t (cudaEventDisableTiming). RecordEvent = cudaEventRecord,
//                  WaitEvent = cudaStreamWaitEvent, Query = cudaEventQuery != cudaErrorNotReady,
//                  Event::Synchronize = cudaEventSynchronize.
//   AddCallback  = cudaLaunchHostFunc with a heap-allocated closure; the host function must not
//                  call CUDA APIs, so it only posts a message (e.g. to an actor's mailbox).
//   Synchronize  = cudaStreamSynchronize, returning the sticky status.
//   Allocator    = a caching device allocator (cudaMalloc'd arenas); the device is selected
//                  with cudaSetDevice(index) on every thread that talks to it.
// The CPU implementation below runs work inline at Enqueue, so it is the degenerate case:
// events are complete when recorded and callbacks run immediately.
//
// Ownership: no globals. Whoever needs a device creates it (`CpuDevice device(DeviceId(0));`)
// and keeps it alive longer than its streams, events and allocations.
// Thread-safety: Device methods are thread-safe. A Stream is used by one thread at a time (its
// owner). Event::Query and Event::Synchronize are thread-safe (other threads poll events).
#ifndef ONEFLOW_LIKE_CORE_DEVICE_H_
#define ONEFLOW_LIKE_CORE_DEVICE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

#include "oneflow_like/core/allocator.h"
#include "oneflow_like/core/ids.h"
#include "oneflow_like/core/sbp.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {

class Device;

// What a stream is for. Separate kinds let compute, host/device copies and communication
// overlap (they are different threads / hardware queues).
enum class StreamKind : int32_t { kCompute = 0, kCopy = 1, kComm = 2 };
std::string StreamKindName(StreamKind kind);  // "compute", "copy", "comm"

class Event {
 public:
  virtual ~Event() = default;
  // True once all work before the latest RecordEvent has finished (also true if never
  // recorded: there is nothing to wait for). Thread-safe, never blocks.
  virtual bool Query() const = 0;
  // Blocks until Query() would be true; returns the status of the recording stream at the
  // recorded point (OK if never recorded). Thread-safe.
  virtual absl::Status Synchronize() = 0;
};

class Stream {
 public:
  using Callback = std::function<void(absl::Status)>;

  virtual ~Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  virtual Device* device() const = 0;
  virtual StreamKind kind() const = 0;
  // Unique among the streams of one device, in creation order from 0.
  virtual StreamId id() const = 0;
  // "cpu:0/compute#1"
  std::string name() const;

  // Enqueues `work` after everything enqueued before. `work` returns void (cannot fail) or
  // absl::Status (a non-OK result becomes the stream's sticky error; see the file comment).
  template <typename F>
  void Enqueue(F&& work);
  // The primitive behind Enqueue.
  virtual void EnqueueFallible(std::function<absl::Status()> work) = 0;

  // Marks the current end of this stream in `event` (replacing an earlier record).
  // Fails with InvalidArgument if `event` was created by a device of another type.
  virtual absl::Status RecordEvent(Event* event) = 0;
  // Work enqueued after this call waits for `event` (as last recorded). If the event carries
  // an error, this stream adopts it. InvalidArgument for an event of another device type.
  virtual absl::Status WaitEvent(const Event& event) = 0;
  // Runs `callback(status)` on some thread once all work enqueued so far has completed.
  // `callback` must not block on this stream.
  virtual void AddCallback(Callback callback) = 0;
  // Blocks until all enqueued work has completed; returns the sticky status.
  virtual absl::Status Synchronize() = 0;

 protected:
  Stream() = default;
};

class Device {
 public:
  virtual ~Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  virtual DeviceType type() const = 0;
  virtual DeviceId index() const = 0;
  // Owned by the device; valid for the device's lifetime.
  virtual Allocator* allocator() = 0;
  // REQUIRES: the device outlives the stream / event.
  virtual std::unique_ptr<Stream> CreateStream(StreamKind kind) = 0;
  virtual std::unique_ptr<Event> CreateEvent() = 0;
  // "cpu:0"
  std::string name() const;

 protected:
  Device() = default;
};

// ---- CPU ----------------------------------------------------------------------------------

class CpuEvent final : public Event {
 public:
  bool Query() const override { return true; }  // CPU work is done by the time it is recorded
  absl::Status Synchronize() override;
  // Number of RecordEvent calls so far (for tests and debugging).
  int64_t record_count() const;

 private:
  friend class CpuStream;
  void Record(absl::Status status);
  absl::Status recorded_status() const;

  mutable std::mutex mu_;
  absl::Status status_;  // status of the recording stream at the last record
  int64_t record_count_ = 0;
};

// Runs each work item inline, on the calling thread, at Enqueue.
class CpuStream final : public Stream {
 public:
  CpuStream(Device* device, StreamKind kind, StreamId id) : device_(device), kind_(kind), id_(id) {}

  Device* device() const override { return device_; }
  StreamKind kind() const override { return kind_; }
  StreamId id() const override { return id_; }
  void EnqueueFallible(std::function<absl::Status()> work) override;
  absl::Status RecordEvent(Event* event) override;
  absl::Status WaitEvent(const Event& event) override;
  void AddCallback(Callback callback) override;
  absl::Status Synchronize() override { return status_; }

 private:
  Device* device_;
  StreamKind kind_;
  StreamId id_;
  absl::Status status_;  // sticky: the first error
};

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(DeviceId index) : index_(index) {}

  DeviceType type() const override { return DeviceType::kCpu; }
  DeviceId index() const override { return index_; }
  Allocator* allocator() override { return &allocator_; }
  std::unique_ptr<Stream> CreateStream(StreamKind kind) override;
  std::unique_ptr<Event> CreateEvent() override;

 private:
  DeviceId index_;
  CpuAllocator allocator_;
  std::atomic<int32_t> next_stream_id_{0};
};

// ---- template implementation --------------------------------------------------------------

template <typename F>
void Stream::Enqueue(F&& work) {
  using Result = std::invoke_result_t<std::decay_t<F>&>;
  if constexpr (std::is_same_v<Result, absl::Status>) {
    EnqueueFallible(std::function<absl::Status()>(std::forward<F>(work)));
  } else {
    static_assert(std::is_void_v<Result>, "Stream::Enqueue: work must return void or absl::Status");
    EnqueueFallible([w = std::decay_t<F>(std::forward<F>(work))]() mutable {
      w();
      return absl::OkStatus();
    });
  }
}

}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_DEVICE_H_
