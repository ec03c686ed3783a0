// Actor: one task of the Plan as a small state machine. It owns its ports (the registers it
// consumes and produces), fires by its task's rule and delegates the work of a firing to its
// ActBody. All methods run on the actor's owner thread (the thread of its device stream); the
// actor talks to the rest of the world only through messages, via its ActorHost.
//
// The loop, for the common rule (COMPUTE, TRANSFER, BOXING_*, TICK):
//   while (every input has a ready buffer && every output has a free buffer) {
//     Act();            // body reads the front ready buffers, writes the front free ones
//     SendOutputs();    // "ready" to every consumer (local post, or the payload to a rank)
//     ReturnInputs();   // "returned" to every producer
//   }
// Other rules (docs/plan_format.md, firing rules):
//   kInputSource     one firing per step credit (kStartStep gives pieces_per_step credits)
//   kVariableHolder  one firing per step; after a firing it waits for its update register
//                    (if it consumes one), copies it into the variable and returns it before
//                    it may fire again; the first firing does not wait
//   kRepeat          one input buffer -> `count` output firings, then returns the input
//   kAccumulate      sums `count` input buffers (each returned at once), then emits one
//   kSink            consumes one buffer per firing, produces nothing
// End of data: sources enter kDraining on kEndOfStream, other actors once every (non-back-
// edge) input got kEndOfData; a draining actor waits until every buffer of every output came
// back, then sends kEndOfData to its consumers and is kDone.
#ifndef ONEFLOW_LIKE_ACTOR_ACTOR_H_
#define ONEFLOW_LIKE_ACTOR_ACTOR_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <memory>
#include <string>
#include <vector>

#include "oneflow_like/actor/act_body.h"
#include "oneflow_like/actor/message.h"
#include "oneflow_like/actor/register_layout.h"
#include "oneflow_like/actor/wire.h"

namespace oneflow_like {
namespace actor {

class Actor;
struct MirrorRegister;  // runtime.h: a remote register's local staging

enum class FiringRule { kAllInputs, kInputSource, kVariableHolder, kRepeat, kAccumulate, kSink };
enum class ActorState { kRunning, kDraining, kDone, kFailed };
std::string ActorStateName(ActorState state);

struct LocalEndpoint {
  ActorId actor;
  int32_t port = 0;
};
struct RemoteEndpoint {
  Rank rank;
  TaskId task;  // a TRANSFER task on that rank consuming the mirror
};

struct InputPort {
  const RegisterLayout* layout = nullptr;
  LocalEndpoint producer;            // where returns go, unless `mirror` is set
  MirrorRegister* mirror = nullptr;  // the register is produced on another rank
  bool back_edge = false;            // a variable holder's update input (ignored by end of data)
  // Stream-ordered hand-off (SetStreamOrdered): returned as soon as this actor's act is
  // enqueued on its device stream, which is also the producer's (its later writes queue behind
  // this act's reads), instead of when the act finished; or, with `return_events`, on another
  // stream of the device.
  bool return_early = false;
  // Produced on another stream of this actor's device (SetStreamOrdered): the producer's events,
  // one per buffer (null: never recorded), each recorded after the act that wrote the buffer;
  // this actor's stream waits for the buffer's event before its act reads it. Null: no wait
  // (same stream, or handed over at finish).
  const std::vector<std::shared_ptr<Event>>* wait_events = nullptr;
  // Returned at enqueue to a producer on another stream: per buffer, an event recorded on this
  // actor's stream after its act read the buffer; the producer's stream waits for it before it
  // writes the buffer again (OutputPort::reader_events). Empty: not returned that way.
  std::vector<std::shared_ptr<Event>> return_events;
  std::string producer_description;  // for wait reports: "'x.source' (task 1) on rank 0"
  // Mutable state.
  std::deque<int32_t> ready;
  bool end_of_data = false;
};

// Shared (cross-thread) use counters of one register whose bytes the memory planner shares
// with other registers (lifetime-based reuse in task order).
struct RegisterUse {
  std::atomic<int64_t> writes{0};  // buffers produced so far
  std::atomic<int32_t> live{0};    // buffers handed to consumers and not yet returned
};

// A register whose bytes overlap this output's. The planner assumed the two alternate in task
// order, so: the earlier one is written only when the later one has caught up and is idle;
// the later one only after the earlier one was written (this round) and is idle again.
struct ByteConflict {
  const RegisterUse* other = nullptr;
  bool other_is_earlier = false;
  ActorId other_producer;  // woken when this register's state changes (and it waits for it)
  std::string other_name;
  // Wake-ups only to a producer that waits (a register can share bytes with dozens of others:
  // waking every one on every write and return cost ~3 us an act). Each flag is shared with the
  // other register's mirrored entry. `waiting_on_other`: this producer found `other` in its way
  // (set before it checks again, so a change in between is seen by one side or the other:
  // seq_cst on both); `other_waiting`: the other producer waits for this register -- a change
  // here posts it a wake only when set. Null: always wake (entries built without a mirror).
  std::shared_ptr<std::atomic<bool>> waiting_on_other, other_waiting;
};

struct OutputPort {
  const RegisterLayout* layout = nullptr;
  RegisterUse* use = nullptr;  // non-null iff `conflicts` is non-empty
  std::vector<ByteConflict> conflicts;  // every register sharing bytes (stream_ordered.h, reports)
  // What a write waits for and whom a change wakes (ByteSharing in runtime_build.cc): the
  // registers this one checks (per byte, the one before it in task order; the first one's: the
  // last) and the ones that check this one. Subsets of `conflicts`; checking these suffices.
  std::vector<ByteConflict> checks, dependents;
  std::vector<LocalEndpoint> local_consumers;
  std::vector<RemoteEndpoint> remote_consumers;  // at most one per rank
  std::string consumers_description;
  // Mutable state.
  std::deque<int32_t> free;
  std::vector<int32_t> holders;  // per buffer: consumers that have not returned it yet
  // A variable holder's register that `inplace_writer` (its optimizer task) overwrites in
  // place (inplace_updates.h): woken when only that writer still holds the buffer.
  bool has_inplace_writer = false;
  ActorId inplace_writer;
  // Stream-ordered hand-offs (SetStreamOrdered): the buffer is taken and the consumers flagged
  // in `early_consumers` (parallel to local_consumers: on this actor's device stream) get it
  // when the act is enqueued; the others when it finished. False: everything at finish.
  bool stream_ordered = false;
  std::vector<bool> early_consumers;
  int32_t pending_buffer = -1;  // taken at enqueue, announced to the others at finish
  // Early consumers on other streams of the device: per buffer, an event recorded on this
  // actor's stream after the act that wrote the buffer (their InputPort::wait_events).
  std::vector<std::shared_ptr<Event>> ready_events;
  // Consumers on other streams that return the buffer at enqueue: their InputPort::return_events,
  // waited for by this actor's stream before it writes the buffer again.
  std::vector<const std::vector<std::shared_ptr<Event>>*> reader_events;
};

// Which slot of which port a body input/output is.
struct PayloadRef {
  int32_t port = 0;
  int32_t slot = 0;
};

struct ActorSpec {
  ActorId id;
  TaskId task;
  std::string name;       // task name, for reports
  std::string type_name;  // "COMPUTE", ...
  FiringRule rule = FiringRule::kAllInputs;
  int64_t count = 1;  // kRepeat / kAccumulate
  std::vector<InputPort> inputs;
  std::vector<OutputPort> outputs;
  std::vector<PayloadRef> payload_inputs;
  std::vector<PayloadRef> payload_outputs;
};

// Why an actor could not fire (timelines record the last cause before each act that waited).
struct WaitCause {
  enum Kind {
    kNone,         // not waiting
    kInput,        // no ready buffer of input register `layout`
    kOutput,       // no free buffer of output register `layout` (consumers hold them all)
    kSharedBytes,  // output `layout` shares bytes with another register not yet idle
    kStepCredit,   // a source: every piece of the started steps is out
    kInPlace,      // an in-place update of variable register `layout`: other readers hold it
    kInFlight,     // its previous (asynchronous) act has not finished
  };
  Kind kind = kNone;
  const RegisterLayout* layout = nullptr;  // kInput, kOutput, kSharedBytes
};
// "input 'x'", "output 'y'", "shared bytes of 'y'", "step credit".
std::string WaitCauseName(const WaitCause& cause);

// What an actor needs from its runtime. Called on the actor's thread.
class ActorHost {
 public:
  virtual ~ActorHost() = default;
  virtual void Post(const ActorMessage& message) = 0;
  // Post from a thread that is not the actor's (an asynchronous body's completion).
  virtual void PostFromAnyThread(const ActorMessage& message) { Post(message); }
  virtual void SendRemote(Rank to, const RemoteMessage& message) = 0;
  virtual void ReturnMirrorBuffer(MirrorRegister* mirror, int32_t buffer, TaskId consumer) = 0;
  // After every act (`firing` counts this actor's acts from 1); `step_event`: a firing that
  // counts toward step completion (source firings, holder updates, sink firings).
  // `begin_micros`: when the firing attempt started (NowMicros), for timelines.
  virtual void OnActed(const Actor& actor, int64_t firing, bool step_event, int64_t begin_micros) = 0;
  virtual int64_t NowMicros() const = 0;
  virtual void OnFailed(const Actor& actor, const absl::Status& status) = 0;
  virtual void OnDone(const Actor& actor) = 0;
  // Timelines: whether to track waits, and a wait that ended with an act at `end_micros`
  // (`cause`: what the last failed firing attempt lacked).
  virtual bool RecordsWaits() const { return false; }
  virtual void OnWaited(const Actor& actor, const WaitCause& cause, int64_t begin_micros, int64_t end_micros) {
    (void)actor, (void)cause, (void)begin_micros, (void)end_micros;
  }
};

class Actor {
 public:
  // REQUIRES: body and host non-null; host outlives the actor.
  Actor(ActorSpec spec, std::unique_ptr<ActBody> body, ActorHost* host);

  void Handle(const ActorMessage& message);
  // Fires at most once (or completes one accumulate/update phase, or finishes its drain).
  // Returns whether anything happened.
  bool TryFire();
  // The first thing a firing lacks now (kNone if it could fire or is not running).
  WaitCause FirstWait() const;
  // One line: state, firings, and what it waits for.
  std::string DescribeWait() const;
  // In-place variable updates (inplace_updates.h), wired by the runtime after construction.
  // This actor writes the variable register of `holder_port` in place, so it fires only when
  // no other reader holds that register's buffer 0. REQUIRES: same thread as its owner.
  void AddInPlaceTarget(const OutputPort* holder_port) { inplace_targets_.push_back(holder_port); }
  // Output `port` of this (holder) actor is overwritten in place by `writer`.
  void SetInPlaceWriter(int32_t port, ActorId writer) {
    spec_.outputs[port].has_inplace_writer = true;
    spec_.outputs[port].inplace_writer = writer;
  }
  const OutputPort& output(int32_t port) const { return spec_.outputs[port]; }
  // Stream-ordered hand-offs between device actors of one device (which edges qualify:
  // stream_ordered.h). The events are made (ActBody::CreateEvent) when first recorded; one
  // that cannot be made or recorded fails the act. REQUIRES: rule kAllInputs with an
  // asynchronous body; sizes as in StreamHandOffs; an early consumer only on a stream_ordered
  // output; the event vectors pointed to (other actors' ports) outlive this actor's acts.
  struct StreamHandOffs {
    std::vector<bool> early_inputs;  // per input: returned at enqueue
    // Per input (or empty: none): the producer's OutputPort::ready_events to wait for, or null.
    std::vector<const std::vector<std::shared_ptr<Event>>*> input_events;
    // Per input (or empty: none): an early return to another stream (record return_events).
    std::vector<bool> input_return_events;
    std::vector<bool> ordered_outputs;                 // per output
    std::vector<std::vector<bool>> early_consumers;    // per output, per local consumer
    std::vector<bool> output_ready_events;             // per output (or empty): record ready_events
    // Per output (or empty): the return_events of its consumers that return at enqueue from
    // another stream.
    std::vector<std::vector<const std::vector<std::shared_ptr<Event>>*>> reader_events;
  };
  void SetStreamOrdered(const StreamHandOffs& hand_offs);
  // Whether the body records and waits for events on its stream (ActBody::HasStreamEvents).
  bool HasStreamEvents() const { return body_->HasStreamEvents(); }
  // The device stream all of this actor's work is queued on (ActBody::OnDeviceStream).
  bool OnDeviceStream(int32_t* device, int32_t* stream) const {
    return body_->IsAsync() && body_->OnDeviceStream(device, stream);
  }

  const ActorSpec& spec() const { return spec_; }
  ActorState state() const { return state_; }
  int64_t acts() const { return acts_; }

 private:
  bool AllInputsReady() const;
  // The first in-place target another reader still holds, else nullptr.
  const OutputPort* BusyInPlaceTarget() const;
  bool AllOutputsFree() const;
  bool BytesAvailable(const OutputPort& out) const;
  void WakeConflicts(const OutputPort& out);
  // Views of the front ready input and free output buffers, in the body's payload order.
  ActIo FrontIo() const;
  absl::Status RunBody(ActBody* body);
  // kAll: the whole hand-off at once (synchronous acts, and asynchronous ones at finish);
  // kEnqueued / kFinished: the stream-ordered part when the act is enqueued, the rest at finish.
  enum class HandOff { kAll, kEnqueued, kFinished };
  void SendOutputs(HandOff part = HandOff::kAll);
  void ReturnInputs(HandOff part = HandOff::kAll);
  void Acted(bool step_event);
  void Fail(const absl::Status& status);
  bool TryFinishDrain();
  bool TryFireOnce();
  void StartAsync();
  void FinishAsync();
  absl::Status WaitForStreamEvents();  // before a two-part act is enqueued
  absl::Status RecordStreamEvents();   // after

  bool FireAccumulate();
  bool FireVariableHolder();

  ActorSpec spec_;
  std::unique_ptr<ActBody> body_;
  ActorHost* host_;
  ActorState state_ = ActorState::kRunning;
  int64_t acts_ = 0;
  int64_t attempt_begin_micros_ = 0;  // set at the top of TryFire
  int64_t credits_ = 0;               // sources: firings allowed by kStartStep
  bool awaiting_update_ = false;      // variable holder
  int64_t phase_ = 0;                 // repeat: outputs emitted; accumulate: inputs summed
  std::vector<Tensor> accumulator_;
  std::vector<const OutputPort*> inplace_targets_;  // owned by holder actors of this thread
  // Timelines (host_->RecordsWaits()): when the current wait began (-1: not waiting), and
  // what the latest failed attempt lacked.
  int64_t wait_begin_micros_ = -1;
  WaitCause wait_cause_;
  // An asynchronous act (ActBody::IsAsync) is running: no firing until it finished; its status
  // arrives from the body's thread (kActFinished).
  bool in_flight_ = false;
  bool stream_ordered_ = false;  // SetStreamOrdered was called: acts hand off in two parts
  std::mutex finished_mu_;
  absl::Status finished_status_;
  absl::Status enqueue_status_;  // an event of the act in flight that could not be recorded
};

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_ACTOR_H_
