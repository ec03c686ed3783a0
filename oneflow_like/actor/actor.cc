#include "oneflow_like/actor/actor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace oneflow_like {
namespace actor {

std::string ActorStateName(ActorState state) {
  switch (state) {
    case ActorState::kRunning:
      return "running";
    case ActorState::kDraining:
      return "draining";
    case ActorState::kDone:
      return "done";
    case ActorState::kFailed:
      return "failed";
  }
  return "unknown";
}

std::string WaitCauseName(const WaitCause& cause) {
  const std::string name = cause.layout != nullptr ? cause.layout->name : "";
  switch (cause.kind) {
    case WaitCause::kNone:
      return "nothing";
    case WaitCause::kInput:
      return absl::StrCat("input '", name, "'");
    case WaitCause::kOutput:
      return absl::StrCat("output '", name, "'");
    case WaitCause::kSharedBytes:
      return absl::StrCat("shared bytes of '", name, "'");
    case WaitCause::kStepCredit:
      return "step credit";
    case WaitCause::kInPlace:
      return absl::StrCat("other readers of variable '", name, "' (in-place update)");
    case WaitCause::kInFlight:
      return "its previous act (asynchronous) to finish";
  }
  return "unknown";
}

Actor::Actor(ActorSpec spec, std::unique_ptr<ActBody> body, ActorHost* host)
    : spec_(std::move(spec)), body_(std::move(body)), host_(host) {
  for (OutputPort& out : spec_.outputs) {
    out.free.clear();
    for (int32_t b = 0; b < out.layout->count; ++b) out.free.push_back(b);
    out.holders.assign(out.layout->count, 0);
  }
  if (spec_.rule == FiringRule::kAccumulate && body_->accumulation() == nullptr) {
    for (const PayloadRef& ref : spec_.payload_inputs) {
      accumulator_.emplace_back(spec_.inputs[ref.port].layout->slots[ref.slot]);
    }
  }
}

void Actor::Handle(const ActorMessage& message) {
  switch (message.kind) {
    case MessageKind::kRegisterReady:
      spec_.inputs[message.port].ready.push_back(message.buffer);
      break;
    case MessageKind::kRegisterReturned: {
      OutputPort& out = spec_.outputs[message.port];
      if (out.holders[message.buffer] <= 0) {  // only a corrupted peer can cause this
        Fail(absl::InternalError(absl::StrCat("actor '", spec_.name, "': buffer ", message.buffer, " of register '",
                                              out.layout->name, "' was returned more often than it was sent")));
        break;
      }
      if (--out.holders[message.buffer] == 0) {
        out.free.push_back(message.buffer);
        if (out.use != nullptr) {
          out.use->live.fetch_sub(1);
          WakeConflicts(out);
        }
      } else if (out.holders[message.buffer] == 1 && out.has_inplace_writer) {
        host_->Post(ActorMessage{MessageKind::kWake, out.inplace_writer, 0, 0, 0});  // maybe the writer is the last
      }
      break;
    }
    case MessageKind::kEndOfData: {
      spec_.inputs[message.port].end_of_data = true;
      bool all = true;
      for (const InputPort& in : spec_.inputs) all = all && (in.end_of_data || in.back_edge);
      if (all && state_ == ActorState::kRunning) state_ = ActorState::kDraining;
      break;
    }
    case MessageKind::kStartStep:
      credits_ += spec_.rule == FiringRule::kInputSource ? message.value : 1;
      break;
    case MessageKind::kEndOfStream:
      if (state_ == ActorState::kRunning) state_ = ActorState::kDraining;
      break;
    case MessageKind::kActFinished:
      FinishAsync();
      break;
    case MessageKind::kWake:  // nothing to record: the thread offers a firing next
    case MessageKind::kReport:
    case MessageKind::kStop:
      break;  // handled by the thread
  }
}

bool Actor::AllInputsReady() const {
  for (const InputPort& in : spec_.inputs) {
    if (in.ready.empty()) return false;
  }
  return true;
}

const OutputPort* Actor::BusyInPlaceTarget() const {
  // The writer holds buffer 0 itself (it is ready as an input), so 1 means nobody else.
  for (const OutputPort* port : inplace_targets_) {
    if (port->holders[0] != 1) return port;
  }
  return nullptr;
}

bool Actor::AllOutputsFree() const {
  for (const OutputPort& out : spec_.outputs) {
    if (out.free.empty() || !BytesAvailable(out)) return false;
  }
  return true;
}

bool Actor::BytesAvailable(const OutputPort& out) const {
  if (out.use == nullptr) return true;
  const int64_t mine = out.use->writes.load();
  auto clear = [mine](const ByteConflict& c) {
    // Read `writes` before `live`: the producer raises `live` before `writes`.
    const int64_t theirs = c.other->writes.load();
    if (c.other->live.load() != 0) return false;
    return c.other_is_earlier ? theirs > mine : theirs == mine;
  };
  for (const ByteConflict& c : out.checks) {
    if (clear(c)) continue;
    if (c.waiting_on_other == nullptr) return false;
    // Ask for a wake, then look again: the other producer changes its counters before it reads
    // the flag (WakeConflicts), so either it sees the flag or this sees its change.
    c.waiting_on_other->store(true);
    if (!clear(c)) return false;
  }
  return true;
}

void Actor::WakeConflicts(const OutputPort& out) {
  for (const ByteConflict& c : out.dependents) {
    // It does not wait (a load first: the exchange's locked write only when it does).
    if (c.other_waiting != nullptr && !(c.other_waiting->load() && c.other_waiting->exchange(false))) continue;
    host_->Post(ActorMessage{MessageKind::kWake, c.other_producer, 0, 0, 0});
  }
}

ActIo Actor::FrontIo() const {
  ActIo io;
  io.inputs.reserve(spec_.payload_inputs.size());
  io.outputs.reserve(spec_.payload_outputs.size());
  for (const PayloadRef& ref : spec_.payload_inputs) {
    const InputPort& in = spec_.inputs[ref.port];
    io.inputs.push_back(in.layout->View(in.ready.front(), ref.slot));
  }
  for (const PayloadRef& ref : spec_.payload_outputs) {
    const OutputPort& out = spec_.outputs[ref.port];
    io.outputs.push_back(out.layout->View(out.free.front(), ref.slot));
  }
  return io;
}

absl::Status Actor::RunBody(ActBody* body) {
  ActIo io = FrontIo();
  absl::Status status = body->Act(io);
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("actor '", spec_.name, "' (task ", spec_.task.value(), ", ",
                                                    spec_.type_name, "): ", status.message()));
  }
  return absl::OkStatus();
}

void Actor::Acted(bool step_event) {
  if (wait_begin_micros_ >= 0) {
    host_->OnWaited(*this, wait_cause_, wait_begin_micros_, attempt_begin_micros_);
    wait_begin_micros_ = -1;
  }
  host_->OnActed(*this, ++acts_, step_event, attempt_begin_micros_);
}

void Actor::Fail(const absl::Status& status) {
  state_ = ActorState::kFailed;
  host_->OnFailed(*this, status);
}

bool Actor::TryFinishDrain() {
  for (const OutputPort& out : spec_.outputs) {
    if (static_cast<int32_t>(out.free.size()) != out.layout->count) return false;
  }
  for (const OutputPort& out : spec_.outputs) {
    for (const LocalEndpoint& c : out.local_consumers) {
      host_->Post(ActorMessage{MessageKind::kEndOfData, c.actor, c.port, 0, 0});
    }
    for (const RemoteEndpoint& c : out.remote_consumers) {
      host_->SendRemote(c.rank, RemoteMessage{RemoteKind::kEndOfData, out.layout->id, 0, spec_.task, c.task, ""});
    }
  }
  state_ = ActorState::kDone;
  host_->OnDone(*this);
  return true;
}

bool Actor::TryFire() {
  attempt_begin_micros_ = host_->NowMicros();
  const bool fired = TryFireOnce();
  if (!fired && state_ == ActorState::kRunning && host_->RecordsWaits()) {
    const WaitCause cause = FirstWait();
    if (cause.kind != WaitCause::kNone) {
      if (wait_begin_micros_ < 0) wait_begin_micros_ = attempt_begin_micros_;
      wait_cause_ = cause;
    }
  }
  return fired;
}

WaitCause Actor::FirstWait() const {
  if (state_ != ActorState::kRunning) return WaitCause{};
  if (in_flight_) return WaitCause{WaitCause::kInFlight, nullptr};
  const bool source = spec_.rule == FiringRule::kInputSource ||
                      (spec_.rule == FiringRule::kVariableHolder && !awaiting_update_);
  if (source && credits_ == 0) return WaitCause{WaitCause::kStepCredit, nullptr};
  const bool needs_inputs = !source && !(spec_.rule == FiringRule::kAccumulate && phase_ >= spec_.count);
  if (needs_inputs) {
    for (const InputPort& in : spec_.inputs) {
      if (in.ready.empty()) return WaitCause{WaitCause::kInput, in.layout};
    }
  }
  const bool needs_outputs = !(spec_.rule == FiringRule::kAccumulate && phase_ < spec_.count);
  if (needs_outputs) {
    for (const OutputPort& out : spec_.outputs) {
      if (out.free.empty()) return WaitCause{WaitCause::kOutput, out.layout};
      if (!BytesAvailable(out)) return WaitCause{WaitCause::kSharedBytes, out.layout};
    }
  }
  if (needs_inputs && !inplace_targets_.empty()) {
    if (const OutputPort* busy = BusyInPlaceTarget()) return WaitCause{WaitCause::kInPlace, busy->layout};
  }
  return WaitCause{};
}

bool Actor::TryFireOnce() {
  if (in_flight_) return false;
  if (state_ == ActorState::kDraining) return TryFinishDrain();
  if (state_ != ActorState::kRunning) return false;
  switch (spec_.rule) {
    case FiringRule::kAccumulate:
      return FireAccumulate();
    case FiringRule::kVariableHolder:
      return FireVariableHolder();
    case FiringRule::kInputSource:
      if (credits_ == 0 || !AllOutputsFree()) return false;
      break;
    case FiringRule::kSink:
    case FiringRule::kAllInputs:
    case FiringRule::kRepeat:
      if (spec_.inputs.empty() || !AllInputsReady() || !AllOutputsFree()) return false;
      if (!inplace_targets_.empty() && BusyInPlaceTarget() != nullptr) return false;
      break;
  }
  if (body_->IsAsync() && (spec_.rule == FiringRule::kAllInputs || spec_.rule == FiringRule::kRepeat)) {
    StartAsync();  // FinishAsync does the rest of the firing
    return true;
  }
  if (absl::Status status = RunBody(body_.get()); !status.ok()) {
    Fail(status);
    return false;
  }
  const bool step_event = spec_.rule == FiringRule::kInputSource || spec_.rule == FiringRule::kSink;
  Acted(step_event);
  SendOutputs();
  if (spec_.rule == FiringRule::kInputSource) {
    --credits_;
  } else if (spec_.rule != FiringRule::kRepeat || ++phase_ == spec_.count) {
    phase_ = 0;
    ReturnInputs();
  }
  return true;
}

bool Actor::FireAccumulate() {
  if (Accumulation* device = body_->accumulation(); device != nullptr) {  // sums in device memory
    const bool emit = phase_ >= spec_.count;
    if (emit ? !AllOutputsFree() : !AllInputsReady()) return false;
    std::vector<Tensor> views;
    for (const PayloadRef& ref : emit ? spec_.payload_outputs : spec_.payload_inputs) {
      if (emit) {
        const OutputPort& out = spec_.outputs[ref.port];
        views.push_back(out.layout->View(out.free.front(), ref.slot));
      } else {
        const InputPort& in = spec_.inputs[ref.port];
        views.push_back(in.layout->View(in.ready.front(), ref.slot));
      }
    }
    const Accumulation::Step step = emit ? Accumulation::Step::kEmit
                                    : phase_ == 0 ? Accumulation::Step::kFirst
                                                  : Accumulation::Step::kNext;
    in_flight_ = true;  // FinishAsync completes the firing
    device->Start(step, std::move(views), [this](const absl::Status& status) {
      {
        std::lock_guard<std::mutex> lock(finished_mu_);
        finished_status_ = status;
      }
      host_->PostFromAnyThread(ActorMessage{MessageKind::kActFinished, spec_.id, 0, 0, 0});
    });
    return true;
  }
  if (phase_ < spec_.count) {
    if (!AllInputsReady()) return false;
    Accumulation* device = nullptr;
    for (size_t i = 0; i < spec_.payload_inputs.size(); ++i) {
      const PayloadRef& ref = spec_.payload_inputs[i];
      const InputPort& in = spec_.inputs[ref.port];
      const Tensor view = in.layout->View(in.ready.front(), ref.slot);
      if (device != nullptr) {
        if (absl::Status s = phase_ == 0 ? device->First(i, view) : device->Next(i, view); !s.ok()) {
          Fail(absl::Status(s.code(), absl::StrCat("actor '", spec_.name, "' (ACCUMULATE): ", s.message())));
          return false;
        }
      } else if (phase_ == 0) {
        CopyTensorData(view, &accumulator_[i]);
      } else {
        AddTensorInto(view, &accumulator_[i]);
      }
    }
    ++phase_;
    Acted(false);
    ReturnInputs();
    return true;
  }
  if (!AllOutputsFree()) return false;
  Accumulation* device = nullptr;  // host sums (device sums are started above)
  for (size_t i = 0; i < spec_.payload_outputs.size(); ++i) {
    const PayloadRef& ref = spec_.payload_outputs[i];
    const OutputPort& out = spec_.outputs[ref.port];
    Tensor view = out.layout->View(out.free.front(), ref.slot);
    if (device == nullptr) {
      CopyTensorData(accumulator_[i], &view);
    } else if (absl::Status s = device->Emit(i, &view); !s.ok()) {
      Fail(absl::Status(s.code(), absl::StrCat("actor '", spec_.name, "' (ACCUMULATE): ", s.message())));
      return false;
    }
  }
  phase_ = 0;
  Acted(false);
  SendOutputs();
  return true;
}

bool Actor::FireVariableHolder() {
  if (awaiting_update_) {
    // Absorb the update: every reader of this step has returned the variable (its register is
    // free), so it may be overwritten now.
    if (!AllInputsReady() || !AllOutputsFree()) return false;
    if (body_->IsAsync()) {  // a device copy: FinishAsync completes the absorption
      StartAsync();
      return true;
    }
    if (absl::Status status = RunBody(body_.get()); !status.ok()) {
      Fail(status);
      return false;
    }
    awaiting_update_ = false;
    Acted(true);
    ReturnInputs();
    return true;
  }
  if (credits_ == 0 || !AllOutputsFree()) return false;
  --credits_;
  Acted(true);
  SendOutputs();
  awaiting_update_ = !spec_.inputs.empty();
  return true;
}

std::string Actor::DescribeWait() const {
  std::vector<std::string> waits;
  const bool source = spec_.rule == FiringRule::kInputSource || spec_.rule == FiringRule::kVariableHolder;
  if (source && credits_ == 0 && !awaiting_update_) waits.push_back("emitted every piece of the started steps");
  for (const InputPort& in : spec_.inputs) {
    if (!in.ready.empty() || in.end_of_data) continue;
    if (in.back_edge && !awaiting_update_) continue;
    waits.push_back(absl::StrCat("waits for register '", in.layout->name, "' (id ", in.layout->id.value(),
                                 ") from producer ", in.producer_description));
  }
  for (const OutputPort& out : spec_.outputs) {
    if (!out.free.empty() && !BytesAvailable(out)) {
      for (const ByteConflict& c : out.checks) {
        waits.push_back(absl::StrCat("waits for register '", c.other_name, "', which shares the bytes of '",
                                     out.layout->name, "', to be ", c.other_is_earlier ? "written and " : "",
                                     "returned first"));
      }
    }
    if (!out.free.empty()) continue;
    waits.push_back(absl::StrCat("waits for register '", out.layout->name, "' (id ", out.layout->id.value(),
                                 ") to be returned by ", out.consumers_description));
  }
  if (!inplace_targets_.empty() && AllInputsReady()) {
    if (const OutputPort* busy = BusyInPlaceTarget()) {
      waits.push_back(absl::StrCat("waits for the other readers of variable register '", busy->layout->name,
                                   "' to return it (it updates it in place; ", busy->holders[0] - 1, " still hold it)"));
    }
  }
  if (waits.empty()) waits.push_back("not waiting");
  return absl::StrCat("actor '", spec_.name, "' (task ", spec_.task.value(), ", ", spec_.type_name, ", ",
                      ActorStateName(state_), ", ", acts_, " acts): ", absl::StrJoin(waits, "; "));
}

}  // namespace actor
}  // namespace oneflow_like
