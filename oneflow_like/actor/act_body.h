// ActBody: what one actor does when it fires, separated from when it fires (actor.h). The
// actor hands its body borrowed views of the buffers it reads and writes, in the task's payload
// order (TaskProto.inputs / outputs). Bodies are owned by their actor and called only on the
// actor's thread.
//
//   COMPUTE        ComputeBody: the op's CPU kernel on this shard (KernelContext)
//   TRANSFER, REPEAT, variable update   CopyBody: outputs[i] = inputs[i]
//   BOXING_SLICE   SliceBody: outputs[k] = region k of inputs[0]
//   BOXING_CONCAT  ConcatBody: outputs[0] = zeros, then region k = inputs[k]
//   BOXING_ADD     AddBody: outputs[0] = sum of inputs
//   SOURCE/SINK    FunctionBody around the runtime's feed / fetch queues
//   COLLECTIVE     CollectiveBody (collective_body.h), asynchronous
#ifndef ONEFLOW_LIKE_ACTOR_ACT_BODY_H_
#define ONEFLOW_LIKE_ACTOR_ACT_BODY_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "oneflow_like/core/device.h"
#include "oneflow_like/core/op_def.h"
#include "oneflow_like/core/status.h"
#include "oneflow_like/core/tensor.h"

namespace oneflow_like {
namespace actor {

struct ActIo {
  std::vector<Tensor> inputs;   // borrowed views, payload order
  std::vector<Tensor> outputs;  // borrowed views, payload order
};

// The running sums of an ACCUMULATE (FiringRule::kAccumulate) kept where the host cannot keep
// them (a device's memory): payload i's sum = the first piece, += each next piece, then written
// to the output. Synchronous.
class Accumulation {
 public:
  virtual ~Accumulation() = default;
  virtual absl::Status First(size_t i, const Tensor& piece) = 0;
  virtual absl::Status Next(size_t i, const Tensor& piece) = 0;
  virtual absl::Status Emit(size_t i, Tensor* out) = 0;
  // One step for every payload at once (`views`: payload i's piece, or for kEmit its output),
  // `finished` called exactly once when it is done, from any thread (the actor starts the step and
  // fires again only after it). Default: the synchronous calls above, then `finished`.
  enum class Step { kFirst, kNext, kEmit };
  virtual void Start(Step step, std::vector<Tensor> views, std::function<void(const absl::Status&)> finished);
};

class ActBody {
 public:
  virtual ~ActBody() = default;
  // Non-null: an ACCUMULATE's sums go through it (device_backend.h); null: host tensors.
  virtual Accumulation* accumulation() { return nullptr; }
  virtual absl::Status Act(ActIo& io) = 0;
  // Asynchronous bodies (collective libraries, device streams): Start begins the act and returns
  // at once; `finished` is called exactly once, from any thread, when the outputs are written
  // (the views stay valid until then; the actor fires again only after it). Default: Act.
  virtual bool IsAsync() const { return false; }
  virtual void Start(ActIo io, std::function<void(const absl::Status&)> finished) { finished(Act(io)); }
  // A body whose Start enqueues ALL its work, in order, on one device stream of the backend
  // (device_backend.h) sets *device and *stream and returns true: work queued later on that
  // stream runs after it (stream-ordered hand-offs, stream_ordered.h). False for everything else
  // (host bodies, collectives on their library's streams, bodies that wait).
  virtual bool OnDeviceStream(int32_t* device, int32_t* stream) const {
    (void)device, (void)stream;
    return false;
  }
  // Events between the streams of one device (stream-ordered hand-offs across streams,
  // stream_ordered.h), for a body with OnDeviceStream whose backend has them (core/device.h's
  // Event: cudaEvent_t). RecordEvent marks the current end of the body's stream in `event` (after
  // everything Start enqueued so far); WaitEvent makes the work enqueued on the body's stream from
  // now on wait until `event`'s recorded point has completed (cudaStreamWaitEvent: the host does
  // not wait). Both are called on the actor's thread, WaitEvent before the Start it orders.
  virtual bool HasStreamEvents() const { return false; }
  virtual absl::StatusOr<std::unique_ptr<Event>> CreateEvent() {
    return absl::UnimplementedError("this body has no stream events");
  }
  virtual absl::Status RecordEvent(Event* event) {
    (void)event;
    return absl::UnimplementedError("this body has no stream events");
  }
  virtual absl::Status WaitEvent(const Event& event) {
    (void)event;
    return absl::UnimplementedError("this body has no stream events");
  }
};

// Element-wise helpers (any dtype; same desc required, CHECKed: the runtime validated shapes).
void CopyTensorData(const Tensor& source, Tensor* destination);
void AddTensorInto(const Tensor& source, Tensor* destination);  // destination += source

class ComputeBody final : public ActBody {
 public:
  // REQUIRES: `def` (and `intra_op_pool`, if any) outlive the body; `attrs` validated
  // (defaults filled). The kernel gets `intra_op_pool` in its KernelContext (null: serial).
  ComputeBody(const OpDef* def, std::string op_name, AttrMap attrs, std::vector<ShardInfo> input_shards,
              std::vector<ShardInfo> output_shards, IntraOpPool* intra_op_pool = nullptr)
      : def_(def),
        op_name_(std::move(op_name)),
        attrs_(std::move(attrs)),
        context_{op_name_, attrs_, {}, {}, std::move(input_shards), std::move(output_shards), nullptr, intra_op_pool} {}
  ComputeBody(const ComputeBody&) = delete;  // context_ refers to attrs_
  ComputeBody& operator=(const ComputeBody&) = delete;
  absl::Status Act(ActIo& io) override;

 private:
  const OpDef* def_;
  std::string op_name_;
  AttrMap attrs_;
  // Built once (name, attrs, shards); each act sets only the tensors (one act at a time).
  KernelContext context_;
};

class CopyBody final : public ActBody {
 public:
  absl::Status Act(ActIo& io) override;
};

class SliceBody final : public ActBody {
 public:
  explicit SliceBody(std::vector<std::vector<int64_t>> region_begins) : begins_(std::move(region_begins)) {}
  absl::Status Act(ActIo& io) override;

 private:
  std::vector<std::vector<int64_t>> begins_;  // per output
};

class ConcatBody final : public ActBody {
 public:
  explicit ConcatBody(std::vector<std::vector<int64_t>> region_begins) : begins_(std::move(region_begins)) {}
  absl::Status Act(ActIo& io) override;

 private:
  std::vector<std::vector<int64_t>> begins_;  // per input
};

class AddBody final : public ActBody {
 public:
  absl::Status Act(ActIo& io) override;
};

// Wraps a function (sources, sinks, ticks).
class FunctionBody final : public ActBody {
 public:
  explicit FunctionBody(std::function<absl::Status(ActIo&)> fn) : fn_(std::move(fn)) {}
  absl::Status Act(ActIo& io) override { return fn_(io); }

 private:
  std::function<absl::Status(ActIo&)> fn_;
};

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_ACT_BODY_H_
