// HolderDeviceBody: the body of a variable holder whose variable lives on a device. It wraps
// the backend's copy body (DeviceTask::Kind::kCopy, which writes an update that is not in place
// into the variable) and finishes at once, without the device, when there is nothing to copy:
// the absorption of an update written in place (every input's bytes are its output's), which is
// what an optimizer's update is. (A holder's emission does not call its body at all:
// Actor::FireVariableHolder.)
//
// Why: a device body reports its finish when the stream has run everything enqueued before it
// (an event after the act), and a holder is not a stream actor (stream_ordered.h): its
// consumers hear of the updated variable only after that finish. So the next step's reads of a
// weight waited for the device to drain everything enqueued before the absorption, and the GPU
// idled while the host enqueued what came next (not yet measured on a GPU: docs/cuda.md).
// Safe because a holder's inputs come at their producer's finish (never at enqueue: holders are
// not stream actors), so an update written in place is complete when the holder absorbs it,
// and the variable it hands out was complete since that absorption.
#ifndef ONEFLOW_LIKE_ACTOR_HOLDER_BODY_H_
#define ONEFLOW_LIKE_ACTOR_HOLDER_BODY_H_

#include <functional>
#include <memory>
#include <utility>

#include "oneflow_like/actor/act_body.h"

namespace oneflow_like {
namespace actor {

class HolderDeviceBody final : public ActBody {
 public:
  explicit HolderDeviceBody(std::unique_ptr<ActBody> copy) : copy_(std::move(copy)) {}

  // True when `io` has no bytes to move: every input is its output's bytes, or empty.
  static bool NothingToCopy(const ActIo& io);

  absl::Status Act(ActIo& io) override { return NothingToCopy(io) ? absl::OkStatus() : copy_->Act(io); }
  bool IsAsync() const override { return copy_->IsAsync(); }
  void Start(ActIo io, std::function<void(const absl::Status&)> finished) override;
  bool OnDeviceStream(int32_t* device, int32_t* stream) const override {
    return copy_->OnDeviceStream(device, stream);
  }
  bool HasStreamEvents() const override { return copy_->HasStreamEvents(); }
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent() override { return copy_->CreateEvent(); }
  absl::Status RecordEvent(Event* event) override { return copy_->RecordEvent(event); }
  absl::Status WaitEvent(const Event& event) override { return copy_->WaitEvent(event); }

 private:
  std::unique_ptr<ActBody> copy_;
};

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_HOLDER_BODY_H_
