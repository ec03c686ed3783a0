// FakeDeviceBackend: a DeviceBackend (device_backend.h) for tests on machines without a GPU. It
// serves DeviceProto.type "cuda" with the properties of a real device that matter to the
// runtime, so every CPU test machine exercises the runtime's device paths:
//   - device memory the host cannot touch: Allocate returns addresses of a PROT_NONE mapping, so
//     a host read or write of device memory (a missing CopyToHost in the runtime) crashes at once
//     instead of passing; the bytes live in a private shadow mapping only the backend reaches;
//   - asynchronous streams: each (device, stream) has a worker thread; a body's Start queues the
//     work there and returns, and `finished` is called from that thread afterwards;
//   - kernels: the op's CPU kernel (OpDef::cpu_kernel) on the shadow bytes, so losses of a
//     "cuda" run equal the CPU run's bit for bit.
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

  // The shadow (host-readable) address of device address `p`; nullptr if `p` is not inside an
  // allocation. `bytes` must fit in it too.
  char* Shadow(const void* p, int64_t bytes) const;
  // Queues `work` on (device, stream)'s thread.
  void Enqueue(int32_t device, int32_t stream, std::function<void()> work);

  int64_t bodies_started() const { return bodies_started_.load(); }
  int64_t bytes_to_device() const { return bytes_to_device_.load(); }
  int64_t bytes_to_host() const { return bytes_to_host_.load(); }
  int64_t live_allocations() const;
  void CountStart() { bodies_started_.fetch_add(1); }
  // A slow device: every stream item waits this long before it runs (tests of how far the host
  // runs ahead; 0 = none).
  void set_stream_delay_us(int64_t us) { stream_delay_us_.store(us); }
  // A stopped stream: while `stream` (a TaskProto.stream_id) is paused, it runs no next item
  // (they queue up); the other streams run. kNoStream: none paused.
  static constexpr int32_t kNoStream = -1000;
  void set_paused_stream(int32_t stream) { paused_stream_.store(stream); }
  // The most items one stream had queued or running at once (the host's lead over the device).
  int64_t max_stream_depth() const { return max_stream_depth_.load(); }

 private:
  struct Allocation {
    char* shadow = nullptr;
    size_t bytes = 0;   // mapped size of both
    int32_t device = 0;
  };
  struct Stream {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> queue;
    bool running = false;  // an item taken from the queue is being run
    bool stop = false;
    std::thread thread;
  };

  mutable std::mutex mu_;
  std::map<const char*, Allocation> allocations_;  // by device (PROT_NONE) base address
  std::map<std::pair<int32_t, int32_t>, std::unique_ptr<Stream>> streams_;
  std::atomic<int64_t> bodies_started_{0}, bytes_to_device_{0}, bytes_to_host_{0};
  std::atomic<int64_t> memory_bytes_{int64_t{64} << 30};
  std::atomic<int64_t> stream_delay_us_{0}, max_stream_depth_{0};
  std::atomic<int32_t> paused_stream_{kNoStream};
};

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_FAKE_DEVICE_BACKEND_H_
