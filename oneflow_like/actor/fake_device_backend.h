// FakeDeviceBackend: a DeviceBackend (device_backend.h) for tests on machines without a GPU. It
// serves DeviceProto.type "cuda" with the properties of a real device that matter to the
// runtime, so every CPU test machine exercises the runtime's device paths:
//   - device memory the host cannot touch: Allocate returns addresses of a PROT_NONE mapping, so
//     a host read or write of device memory (a missing CopyToHost in the runtime) crashes at once
//     instead of passing; the bytes live in a private shadow mapping only the backend reaches;
//   - asynchronous streams: each (device, stream) has a worker thread; a body's Start queues the
//     work there and returns, and `finished` is called from that thread afterwards;
//   - kernels: the op's CPU kernel (OpDef::cpu_kernel) on the shadow bytes, so losses of a
//     "cuda" run equal the CPU run's bit for bit;
//   - events between streams (HasStreamEvents): RecordEvent marks how many items the stream had
//     queued so far; WaitEvent queues an item on the waiting stream that lets nothing behind it
//     run before the other stream completed that many (cudaStreamWaitEvent's semantics).
// Counters (bodies started, bytes copied each way) let tests check the paths were taken.
// Thread-safe. Destroy it after every runtime using it.
#ifndef ONEFLOW_LIKE_ACTOR_FAKE_DEVICE_BACKEND_H_
#define ONEFLOW_LIKE_ACTOR_FAKE_DEVICE_BACKEND_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>

#include "oneflow_like/actor/device_backend.h"

namespace oneflow_like {
namespace actor {

class FakeDeviceBackend final : public DeviceBackend {
 public:
  FakeDeviceBackend() = default;
  ~FakeDeviceBackend() override;  // joins the stream threads, unmaps what is left

  std::string type() const override { return "cuda"; }
  absl::StatusOr<char*> Allocate(int32_t device, int64_t bytes) override;
  void Free(int32_t device, char* data) override;
  // The fake's capacity: `memory_bytes` minus what is allocated (default 64 GiB).
  absl::StatusOr<int64_t> FreeBytes(int32_t device) override;
  void set_memory_bytes(int64_t bytes) { memory_bytes_.store(bytes); }
  absl::Status CopyToDevice(int32_t device, const void* host, char* device_data, int64_t bytes) override;
  absl::Status CopyToHost(int32_t device, const char* device_data, void* host, int64_t bytes) override;
  absl::Status CopyWithinDevice(int32_t device, const char* from, char* to, int64_t bytes) override;
  absl::Status ZeroDevice(int32_t device, char* data, int64_t bytes) override;
  absl::Status CopyBox(int32_t device, const Tensor& from, const std::vector<int64_t>& from_offset, Tensor* to,
                       const std::vector<int64_t>& to_offset, const std::vector<int64_t>& shape) override;
  absl::StatusOr<std::unique_ptr<ActBody>> MakeBody(DeviceTask task) override;
  absl::Status Drain() override;  // every stream's queue empty and its last item done
  bool HasStreamEvents() const override { return stream_events_.load(); }
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent(int32_t device) override;
  absl::Status RecordEvent(int32_t device, int32_t stream, Event* event) override;
  absl::Status WaitEvent(int32_t device, int32_t stream, const Event& event) override;
  // A backend without events (tests: the runtime then keeps the finish semantics across streams).
  void set_stream_events(bool on) { stream_events_.store(on); }

  // The shadow (host-readable) address of device address `p`; nullptr if `p` is not inside an
  // allocation. `bytes` must fit in it too.
  char* Shadow(const void* p, int64_t bytes) const;
  // Queues `work` on (device, stream)'s thread.
  void Enqueue(int32_t device, int32_t stream, std::function<void()> work);
  // Items (bodies' work and event waits) (device, stream) has run to the end so far.
  int64_t completed_items(int32_t device, int32_t stream);

  int64_t bodies_started() const { return bodies_started_.load(); }
  int64_t bytes_to_device() const { return bytes_to_device_.load(); }
  int64_t bytes_to_host() const { return bytes_to_host_.load(); }
  int64_t live_allocations() const;
  void CountStart() { bodies_started_.fetch_add(1); }
  // A slow device: every stream item (not an event wait) waits this long before it runs (tests
  // of how far the host runs ahead; 0 = none); `random`: a uniformly random time in [0, 2 us]
  // instead, different per item and per stream (streams overtake each other at random).
  void set_stream_delay_us(int64_t us, bool random = false) {
    stream_delay_us_.store(us);
    random_delays_.store(random);
  }
  // A stopped stream: while `stream` (a TaskProto.stream_id) is paused, it runs no next item
  // (they queue up); the other streams run. kNoStream: none paused.
  static constexpr int32_t kNoStream = -1000;
  void set_paused_stream(int32_t stream) { paused_stream_.store(stream); }
  // The most items one stream had queued or running at once (the host's lead over the device);
  // with `stream`: over the streams of that TaskProto.stream_id only.
  int64_t max_stream_depth() const { return max_stream_depth_.load(); }
  int64_t max_stream_depth(int32_t stream) const;
  // Items queued or running on (device, stream) now.
  int64_t queued_items(int32_t device, int32_t stream);
  // Event waits queued so far (WaitEvent calls).
  int64_t event_waits() const { return event_waits_.load(); }

 private:
  struct Allocation {
    char* shadow = nullptr;
    size_t bytes = 0;   // mapped size of both
    int32_t device = 0;
  };
  struct Item {
    std::function<void()> work;
    bool event_wait = false;  // no delay: not a kernel
  };
  struct Stream {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Item> queue;
    bool running = false;  // an item taken from the queue is being run
    bool stop = false;
    int64_t enqueued = 0, completed = 0;  // items
    int64_t max_depth = 0;
    std::thread thread;
  };
  Stream* GetStream(int32_t device, int32_t stream);  // created (with its thread) on first use
  void Push(Stream* s, Item item);
  void Loop(Stream* s, int32_t stream);

  mutable std::mutex mu_;
  std::map<const char*, Allocation> allocations_;  // by device (PROT_NONE) base address
  std::map<std::pair<int32_t, int32_t>, std::unique_ptr<Stream>> streams_;
  std::atomic<int64_t> bodies_started_{0}, bytes_to_device_{0}, bytes_to_host_{0};
  std::atomic<int64_t> memory_bytes_{int64_t{64} << 30};
  std::atomic<int64_t> stream_delay_us_{0}, max_stream_depth_{0}, event_waits_{0};
  std::atomic<bool> random_delays_{false}, stream_events_{true};
  std::atomic<int32_t> paused_stream_{kNoStream};
};

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_FAKE_DEVICE_BACKEND_H_
