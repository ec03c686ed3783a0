// DeviceBackend: an accelerator under the runtime (issue 14), for plans whose tasks and memory
// blocks are on a device the host cannot read directly (DeviceProto.type "cuda").
//
// The runtime keeps its CPU semantics (actors, registers, back-pressure, byte sharing) and asks
// the backend only for what touches device memory:
//   Allocate / Free      one allocation per planned memory block of the device (zeroed)
//   CopyToDevice/ToHost  synchronous copies for what the host does between steps or at the
//                        edges: variable initialization and checkpoints, an INPUT source's fed
//                        shard, the accumulator of an ACCUMULATE
//   MakeBody             the body of a task on the device: COMPUTE (the op's device kernel),
//                        COPY host <-> device, a TRANSFER's received bytes to the device, and
//                        the copies / sums of the firing rules (REPEAT, ACCUMULATE, a variable
//                        holder absorbing its update)
//   CopyWithinDevice, ZeroDevice, CopyBox
//                        synchronous data movement for collective and boxing bodies
// Bodies are asynchronous (ActBody::IsAsync): Start enqueues the work on the stream of the
// task's (device, stream_id) and returns at once; `finished` is called from the backend's thread
// once the stream has done it (CUDA: an event after the kernels, stream_completions.h), never
// by blocking an actor thread on the device. The actor starts COMPUTE, COPY, TRANSFER, REPEAT, a variable
// holder's absorption and an ACCUMULATE's steps (Accumulation::Start) this way. Their Act (a
// boxing body's sums within a rank) enqueues and waits for the stream.
// Ordering: within a stream, work runs in enqueue order. So device actors of one stream hand
// registers to each other as soon as an act is enqueued (stream_ordered.h; RuntimeEnv::
// stream_ordered_handoffs): the host queues a chain of kernels ahead of the device. Between two
// streams of one device a backend with events (HasStreamEvents) does the same: the producer's
// body records an event after its work, the consumer's stream waits for it before its own.
// Every other hand-off (the host, another rank, a byte sharer elsewhere, a backend without
// events) waits for `finished`, so that work is ordered through the actors' messages.
//
// Across ranks: a COLLECTIVE on device registers needs a collective backend of device memory
// (comm::CollectiveBackend::memory_type(): NCCL; Runtime::Create refuses gloo there, naming both);
// the body moves boxes with CopyWithinDevice / ZeroDevice / CopyBox. A TRANSFER of a device
// register is staged through the host: the producer's rank copies its slots to the host before
// sending (Runtime::SendRemoteFrom), the consumer's TRANSFER copies the received bytes to its
// device (kHostToDevice). Boxing slices, concats and sums within a rank run on the device.
//
// Implementations: cuda_backend (actor/cuda, built with the CUDA toolkit; runs where a GPU
// is visible) and FakeDeviceBackend (fake_device_backend.h, tests): device memory the host
// cannot touch, CPU kernels on a stream thread, so every CPU test machine exercises the
// runtime's device paths.
// Thread-safety: every method may be called from any thread.
#ifndef ONEFLOW_LIKE_ACTOR_DEVICE_BACKEND_H_
#define ONEFLOW_LIKE_ACTOR_DEVICE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "oneflow_like/actor/act_body.h"
#include "oneflow_like/core/attr.h"
#include "oneflow_like/core/op_def.h"

namespace oneflow_like {
namespace actor {

// What a body on the device does.
struct DeviceTask {
  enum class Kind {
    kCompute,       // the op's kernel: outputs = op(inputs)
    kCopy,          // outputs[i] = inputs[i], both on the device (REPEAT, holder updates)
    kHostToDevice,  // COPY: inputs in host memory, outputs on the device
    kDeviceToHost,  // COPY: inputs on the device, outputs in host memory
    kAdd,           // outputs[0] += inputs[0] (an ACCUMULATE's running sum)
  };
  Kind kind = Kind::kCompute;
  int32_t device = 0;     // DeviceProto.index
  int32_t stream = 0;     // TaskProto.stream_id
  std::string name;       // the task's name, for messages
  // kCompute:
  const OpDef* def = nullptr;
  std::string op_name;
  AttrMap attrs;          // validated, defaults filled
  std::vector<ShardInfo> input_shards, output_shards;
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  // The DeviceProto.type it serves, e.g. "cuda".
  virtual std::string type() const = 0;
  // `bytes` of zeroed memory on `device`; ResourceExhausted / Unavailable naming the device.
  virtual absl::StatusOr<char*> Allocate(int32_t device, int64_t bytes) = 0;
  // REQUIRES: `data` came from Allocate(device, ...) and no work on it is pending.
  virtual void Free(int32_t device, char* data) = 0;
  // Bytes `device` can still allocate (CUDA: cudaMemGetInfo's free). The runtime compares its
  // planned blocks with it before allocating any, so a plan that does not fit fails at once
  // naming the device, the planned and the free bytes.
  virtual absl::StatusOr<int64_t> FreeBytes(int32_t device) = 0;
  // Synchronous copies between host memory and device memory of `device`.
  virtual absl::Status CopyToDevice(int32_t device, const void* host, char* device_data, int64_t bytes) = 0;
  virtual absl::Status CopyToHost(int32_t device, const char* device_data, void* host, int64_t bytes) = 0;
  // Synchronous copies and zeroing within `device`'s memory, complete on return (collective
  // bodies packing device buffers for the collective library, which runs on streams of its own).
  virtual absl::Status CopyWithinDevice(int32_t device, const char* from, char* to, int64_t bytes) = 0;
  virtual absl::Status ZeroDevice(int32_t device, char* data, int64_t bytes) = 0;
  // to[to_offset + i] = from[from_offset + i] for every index i of `shape` (row-major tensors of
  // one dtype in `device`'s memory; offsets per axis): a collective's boxes cut and pasted.
  // Synchronous, like CopyWithinDevice.
  virtual absl::Status CopyBox(int32_t device, const Tensor& from, const std::vector<int64_t>& from_offset, Tensor* to,
                               const std::vector<int64_t>& to_offset, const std::vector<int64_t>& shape) = 0;
  // The body of one task. InvalidArgument naming the task when the backend cannot run it (e.g.
  // an op without a kernel on this device).
  virtual absl::StatusOr<std::unique_ptr<ActBody>> MakeBody(DeviceTask task) = 0;
  // Events between the streams of one device (core/device.h's Event; CUDA: cudaEventRecord /
  // cudaStreamWaitEvent), for stream-ordered hand-offs across streams (stream_ordered.h).
  // HasStreamEvents false (the default): the runtime keeps the finish semantics on such edges.
  // RecordEvent marks the current end of (device, stream) in `event`; WaitEvent orders the work
  // enqueued on (device, stream) after it after the event's recorded point (a never-recorded
  // event: no wait), without blocking the caller. `event` comes from CreateEvent(device).
  virtual bool HasStreamEvents() const { return false; }
  virtual absl::StatusOr<std::unique_ptr<Event>> CreateEvent(int32_t device) {
    (void)device;
    return absl::UnimplementedError(absl::StrCat("device backend '", type(), "' has no stream events"));
  }
  virtual absl::Status RecordEvent(int32_t device, int32_t stream, Event* event) {
    (void)device, (void)stream, (void)event;
    return absl::UnimplementedError(absl::StrCat("device backend '", type(), "' has no stream events"));
  }
  virtual absl::Status WaitEvent(int32_t device, int32_t stream, const Event& event) {
    (void)device, (void)stream, (void)event;
    return absl::UnimplementedError(absl::StrCat("device backend '", type(), "' has no stream events"));
  }
  // Returns once the work enqueued so far on every stream has finished and its `finished`
  // callbacks have run (a runtime calls it before destroying its actors, so no completion of a
  // failed job reaches a destroyed actor). The first error of that work, if any.
  virtual absl::Status Drain() { return absl::OkStatus(); }
};

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_DEVICE_BACKEND_H_
