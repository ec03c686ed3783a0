// Actor: the hand-off of a firing (SendOutputs / ReturnInputs) and asynchronous acts, with the
// stream-ordered hand-offs (stream_ordered.h): at enqueue within a stream, and across the streams
// of one device through events recorded and waited for on the device (actor.h).
#include <utility>

#include "absl/strings/str_cat.h"
#include "oneflow_like/actor/actor.h"

namespace oneflow_like {
namespace actor {

void Actor::SetStreamOrdered(const StreamHandOffs& h) {
  stream_ordered_ = true;
  for (size_t i = 0; i < spec_.inputs.size(); ++i) {
    InputPort& in = spec_.inputs[i];
    in.return_early = h.early_inputs[i];
    in.wait_events = h.input_events.empty() ? nullptr : h.input_events[i];
    const bool events = !h.input_return_events.empty() && h.input_return_events[i];
    in.return_events.assign(events ? in.layout->count : 0, nullptr);  // made at first use
  }
  for (size_t p = 0; p < spec_.outputs.size(); ++p) {
    OutputPort& out = spec_.outputs[p];
    out.stream_ordered = h.ordered_outputs[p];
    out.early_consumers = h.early_consumers[p];
    const bool events = !h.output_ready_events.empty() && h.output_ready_events[p];
    out.ready_events.assign(events ? out.layout->count : 0, nullptr);  // made at first use
    out.reader_events = h.reader_events.empty() ? std::vector<const std::vector<std::shared_ptr<Event>>*>{}
                                                : h.reader_events[p];
  }
}

// Before the act is enqueued: its stream waits for the producers' events of the buffers it reads
// (written on other streams) and for the events of the consumers on other streams that read the
// buffers it is about to overwrite. A wait is for the record as of the call, so the owner may
// record the slot again once it has the buffer back. An event slot is written only by its owner
// while it holds the buffer (RecordStreamEvents) and read by the other actor only after the
// message that handed the buffer over, so the slots need no lock. A slot still empty was never
// recorded: nothing to wait for.
absl::Status Actor::WaitForStreamEvents() {
  for (const InputPort& in : spec_.inputs) {
    if (in.wait_events == nullptr) continue;
    const std::shared_ptr<Event>& written = (*in.wait_events)[in.ready.front()];
    if (written != nullptr) RETURN_IF_ERROR(body_->WaitEvent(*written));
  }
  for (const OutputPort& out : spec_.outputs) {
    for (const std::vector<std::shared_ptr<Event>>* readers : out.reader_events) {
      const std::shared_ptr<Event>& read = (*readers)[out.free.front()];
      if (read != nullptr) RETURN_IF_ERROR(body_->WaitEvent(*read));
    }
  }
  return absl::OkStatus();
}

// After the act is enqueued (before its early hand-off takes the buffers): the points its
// consumers and producers on other streams wait for.
absl::Status Actor::RecordStreamEvents() {
  auto record = [this](std::shared_ptr<Event>& slot) -> absl::Status {
    if (slot == nullptr) {
      ASSIGN_OR_RETURN(std::unique_ptr<Event> event, body_->CreateEvent());
      slot = std::move(event);
    }
    return body_->RecordEvent(slot.get());
  };
  for (OutputPort& out : spec_.outputs) {
    if (!out.ready_events.empty()) RETURN_IF_ERROR(record(out.ready_events[out.free.front()]));
  }
  for (InputPort& in : spec_.inputs) {
    if (!in.return_events.empty()) RETURN_IF_ERROR(record(in.return_events[in.ready.front()]));
  }
  return absl::OkStatus();
}

// A stream-ordered output takes its buffer (and tells the byte sharers) when the act is
// enqueued; every other output at finish. Consumers flagged early hear at enqueue, the rest
// (other streams, the host, remote ranks) at finish.
void Actor::SendOutputs(HandOff part) {
  for (int32_t p = 0; p < static_cast<int32_t>(spec_.outputs.size()); ++p) {
    OutputPort& out = spec_.outputs[p];
    const bool take = part == HandOff::kAll || (part == HandOff::kEnqueued) == out.stream_ordered;
    if (part == HandOff::kEnqueued && !out.stream_ordered) continue;
    int32_t buffer = out.pending_buffer;
    if (take) {
      buffer = out.free.front();
      out.free.pop_front();
      out.holders[buffer] = static_cast<int32_t>(out.local_consumers.size() + out.remote_consumers.size());
      if (out.holders[buffer] == 0) out.free.push_back(buffer);  // nobody reads it: free at once
      if (out.use != nullptr) {
        if (out.holders[buffer] > 0) out.use->live.fetch_add(1);
        out.use->writes.fetch_add(1);
        WakeConflicts(out);
      }
      out.pending_buffer = buffer;
    }
    for (size_t k = 0; k < out.local_consumers.size(); ++k) {
      const bool early = part != HandOff::kAll && out.stream_ordered && out.early_consumers[k];
      if (part != HandOff::kAll && early != (part == HandOff::kEnqueued)) continue;
      const LocalEndpoint& c = out.local_consumers[k];
      host_->Post(ActorMessage{MessageKind::kRegisterReady, c.actor, c.port, buffer, 0});
    }
    if (part == HandOff::kEnqueued) continue;
    for (const RemoteEndpoint& c : out.remote_consumers) {
      // The slots are packed straight into the wire bytes (one copy); they stay untouched until
      // the consumer returns the buffer.
      RemoteMessage ready{RemoteKind::kReady, out.layout->id, buffer, spec_.task, c.task, ""};
      ready.payload_parts = out.layout->PayloadParts(buffer);
      host_->SendRemote(c.rank, ready);
    }
  }
}

void Actor::ReturnInputs(HandOff part) {
  for (InputPort& in : spec_.inputs) {
    if (part != HandOff::kAll && in.return_early != (part == HandOff::kEnqueued)) continue;
    const int32_t buffer = in.ready.front();
    in.ready.pop_front();
    if (in.mirror != nullptr) {
      host_->ReturnMirrorBuffer(in.mirror, buffer, spec_.task);
    } else {
      host_->Post(ActorMessage{MessageKind::kRegisterReturned, in.producer.actor, in.producer.port, buffer, 0});
    }
  }
}

void Actor::StartAsync() {
  in_flight_ = true;
  {
    std::lock_guard<std::mutex> lock(finished_mu_);
    finished_status_ = absl::OkStatus();
  }
  const bool two_parts = stream_ordered_ && spec_.rule == FiringRule::kAllInputs;
  enqueue_status_ = two_parts ? WaitForStreamEvents() : absl::OkStatus();
  if (!enqueue_status_.ok()) {  // nothing was enqueued: fail now
    in_flight_ = false;
    Fail(absl::Status(enqueue_status_.code(), absl::StrCat("actor '", spec_.name, "' (task ", spec_.task.value(), ", ",
                                                           spec_.type_name, "): ", enqueue_status_.message())));
    return;
  }
  body_->Start(FrontIo(), [this](const absl::Status& status) {
    {
      std::lock_guard<std::mutex> lock(finished_mu_);
      finished_status_ = status;
    }
    host_->PostFromAnyThread(ActorMessage{MessageKind::kActFinished, spec_.id, 0, 0, 0});
  });
  if (two_parts) {
    bool failed_already;  // Start could not queue the work (it reported so at once)
    {
      std::lock_guard<std::mutex> lock(finished_mu_);
      failed_already = !finished_status_.ok();
    }
    // The act is queued on the stream: its stream's later work runs after it anyway, and the
    // other streams' after the events recorded now. An event that cannot be recorded fails the
    // act when it finished (FinishAsync), with nothing handed over early.
    if (!failed_already) enqueue_status_ = RecordStreamEvents();
    if (!failed_already && enqueue_status_.ok()) {
      SendOutputs(HandOff::kEnqueued);
      ReturnInputs(HandOff::kEnqueued);
    }
  }
}

void Actor::FinishAsync() {
  if (!in_flight_) return;
  in_flight_ = false;
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(finished_mu_);
    status = finished_status_;
  }
  if (status.ok()) status = enqueue_status_;
  if (!status.ok()) {
    Fail(absl::Status(status.code(), absl::StrCat("actor '", spec_.name, "' (task ", spec_.task.value(), ", ",
                                                  spec_.type_name, "): ", status.message())));
    return;
  }
  switch (spec_.rule) {
    case FiringRule::kVariableHolder:  // the update absorbed (FireVariableHolder)
      awaiting_update_ = false;
      Acted(true);
      ReturnInputs();
      return;
    case FiringRule::kAccumulate:  // a piece summed into device memory, or the sum emitted
      Acted(false);
      if (phase_ < spec_.count) {
        ++phase_;
        ReturnInputs();
      } else {
        phase_ = 0;
        SendOutputs();
      }
      return;
    case FiringRule::kRepeat:  // one of `count` emissions of the input
      Acted(false);
      SendOutputs();
      if (++phase_ == spec_.count) {
        phase_ = 0;
        ReturnInputs();
      }
      return;
    default: {
      const HandOff rest = stream_ordered_ ? HandOff::kFinished : HandOff::kAll;
      Acted(false);
      SendOutputs(rest);
      ReturnInputs(rest);
    }
  }
}

}  // namespace actor
}  // namespace oneflow_like
