// Runtime: executes ONE rank's part of a PlanProto with actors.
//
//   RuntimeEnv env;
//   env.transport = hub->endpoint(Rank(0));   // comm/transport.h (needed for remote edges)
//   env.allocator = &allocator;               // planned memory blocks + mirror staging
//   env.registry = &registry;                 // kernels of COMPUTE tasks
//   env.clock = &clock;                       // optional (IdleMicros); default: steady clock
//   ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(plan, /*rank=*/0, env));
//   RETURN_IF_ERROR(runtime->FeedLogical("x", x_piece0));   // once per piece, per input
//   RETURN_IF_ERROR(runtime->StartStep());
//   while (!runtime->StepDone()) { ... }                      // Session does this for you
//   ASSIGN_OR_RETURN(std::vector<Tensor> y, runtime->TakeFetched("y"));
//
// Create validates the rank's plan (every referenced register, slot, block, binding and op
// exists and agrees; errors are InvalidArgument naming the task/register), allocates every
// memory block, initializes variables from their bindings (initializer + ShardInfo: each shard
// generates exactly its part of the logical tensor), builds one actor per task and starts one
// thread per (device, stream). Each thread owns a mailbox and its actors and, after every
// batch of messages, offers each of its actors a firing in `order_in_stream` order. Remote
// registers arrive through the transport into staging buffers of their mirror register.
// A task's payload is exactly TaskProto.inputs / outputs; a consumed register none of whose
// slots is named there is a control input (it paces the task). Registers whose planned bytes
// overlap (the memory planner's lifetime reuse) are written alternately in task order: the
// later one only after the earlier one was written and returned, and vice versa.
//
// A step is done when every source fired its pieces, every sink its firings per step (derived
// from the plan: REPEAT multiplies, ACCUMULATE divides) and every variable holder absorbed its
// update. Steps stream through the same actors. EndStream() drains: sources stop, end of data
// flows down, each actor finishes once all its buffers came back.
//
// Thread-safety: all public methods are thread-safe. ReadVariableShard and WriteVariableShard
// need every started step done (StepDone()); TakeFetched the oldest untaken step done.
#ifndef ONEFLOW_LIKE_ACTOR_RUNTIME_H_
#define ONEFLOW_LIKE_ACTOR_RUNTIME_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "oneflow_like/actor/actor.h"
#include "oneflow_like/actor/clock.h"
#include "oneflow_like/actor/collective_order.h"
#include "oneflow_like/actor/device_backend.h"
#include "oneflow_like/actor/step_notifier.h"
#include "oneflow_like/actor/mailbox.h"
#include "oneflow_like/comm/collective.h"
#include "oneflow_like/comm/transport.h"
#include "oneflow_like/core/allocator.h"
#include "oneflow_like/core/intra_op_pool.h"
#include "oneflow_like/core/op_registry.h"
#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace actor {

// A register produced on another rank: payloads arrive into `layout` (staging owned by the
// runtime); the last local consumer to return a buffer sends "returned" to the producer rank.
struct MirrorRegister {
  RegisterLayout layout;
  Rank producer_rank;
  TaskId producer_task;
  std::vector<LocalEndpoint> consumers;
  std::vector<TaskId> consumer_tasks;
  std::unique_ptr<std::atomic<int32_t>[]> holders;  // per buffer
};

struct ActEvent {
  Rank rank;
  TaskId task;
  const std::string* task_name;
  int64_t firing;  // this actor's acts so far, from 1
};

struct RuntimeEnv {
  comm::Transport* transport = nullptr;  // required iff the rank has remote edges; not owned
  Allocator* allocator = nullptr;        // required; not owned; outlives the runtime
  const OpRegistry* registry = nullptr;  // required iff the rank has COMPUTE tasks; not owned
  // Optional instrumentation, called on actor threads after every act; must be thread-safe.
  std::function<void(const ActEvent&)> on_act;
  // Deterministic executor (tests): no threads are started; every message waits in one FIFO
  // until DispatchOne() handles it on the caller's thread, so runs are reproducible message
  // by message.
  bool deterministic = false;
  // Time source for IdleMicros() and the timeline; null = a SystemClock owned by the runtime.
  const Clock* clock = nullptr;
  // Record every act (actor, thread, begin, end), every wait that preceded an act (what the
  // actor lacked) and every remote send/receive, for TimelineEvents() / WriteRankTimeline().
  bool record_timeline = false;
  // Before a stream thread sleeps on its empty mailbox it polls it this many times (a load
  // each, yielding the core every 256th poll: some microseconds), so a message from another
  // thread arriving meanwhile costs no sleep/wake round trip (the cross-thread hop; see
  // mailbox.h). 0 = sleep at once (less CPU when threads far outnumber cores).
  int64_t idle_spin_polls = 4000;
  // Notified after every step event, finished actor and failure (step_notifier.h), so the
  // driving thread can sleep instead of polling. Optional; not owned.
  StepNotifier* step_notifier = nullptr;
  // Optimizer tasks write variables (and their state) in place when the plan allows it
  // (inplace_updates.h), so variable holders copy nothing; false: always copy.
  bool inplace_variable_updates = true;
  // COLLECTIVE tasks run through it (collective_body.h): required iff the rank has any. Not
  // owned; outlives the runtime.
  comm::CollectiveBackend* collectives = nullptr;
  // The rank's thread budget for its kernels (core/intra_op_pool.h): > 1 gives the rank an
  // IntraOpPool of that many threads (the stream thread + workers), which every COMPUTE task's
  // kernel gets in KernelContext::intra_op_pool (matmuls then run OpenBLAS single-threaded on
  // them). 1 = serial kernels. Results are bit-identical either way but for split matmuls'
  // last bits.
  int intra_op_threads = 1;
  // The accelerator of the plan's non-cpu tasks and memory blocks (device_backend.h): required
  // iff the rank's plan has any (their DeviceProto.type must be its type()). Not owned;
  // outlives the runtime.
  DeviceBackend* device_backend = nullptr;
  // Device actors of one stream hand registers to each other when an act is enqueued rather
  // than when it finished (the stream runs them in that order anyway), so the host runs ahead
  // of the device along a chain of kernels instead of waiting one completion per act; actors on
  // two streams of one device too, ordered by events, when the backend has them
  // (DeviceBackend::HasStreamEvents). Edges to the host, other ranks and byte sharers on other
  // streams wait for the act to finish (stream_ordered.h). False: every hand-off at finish.
  bool stream_ordered_handoffs = true;
  // Issue the rank's collective calls in the plan's agreed order (collective_order.h) even when
  // the backend does not need it (gloo): to rehearse on CPU what NCCL requires. A backend whose
  // NeedsIssueOrder() is true gets the order whatever this says.
  bool order_collectives = false;
};

class Runtime final : public ActorHost {
 public:
  static absl::StatusOr<std::unique_ptr<Runtime>> Create(const PlanProto& plan, int rank, RuntimeEnv env);
  // Stop()s and frees the memory.
  ~Runtime() override;
  // Stops the threads without draining (idempotent). When several runtimes share a transport,
  // stop them all before destroying any, so no thread sends to a destroyed runtime.
  void Stop();

  Rank rank() const { return rank_; }
  // The allocator of this rank's memory (its peak_bytes() is the measured high-water mark).
  const Allocator* allocator() const { return env_.allocator; }
  int64_t pieces_per_step() const { return pieces_per_step_; }
  // nullptr when this rank has no binding of that name.
  const TensorBindingProto* FindBinding(const std::string& name) const;
  // Names of this rank's OUTPUT bindings, sorted.
  std::vector<std::string> OutputNames() const;
  // Names of this rank's VARIABLE bindings (parameters and optimizer state), sorted.
  std::vector<std::string> VariableNames() const;
  // The physical desc of a binding's slot. REQUIRES: FindBinding(name) != nullptr.
  const TensorDesc& BindingDesc(const std::string& name) const;

  // Queues one piece of input `name`: its whole logical tensor (this rank slices its shard by
  // the binding's ShardInfo) or this rank's shard. InvalidArgument for an unknown input or a
  // wrong dtype/shape.
  absl::Status FeedLogical(const std::string& name, const Tensor& logical);
  absl::Status FeedShard(const std::string& name, const Tensor& shard);

  // Starts one step. Up to kMaxStepsInFlight steps may run at once: the next one's sources
  // fire as soon as their registers come back (a variable's only after the previous step's
  // update absorbed it), so the host's work between steps (fetch, feed) overlaps compute.
  // FailedPrecondition if an input lacks pieces for every started step plus this one, too many
  // steps are running, or the runtime failed or was ended.
  static constexpr int64_t kMaxStepsInFlight = 2;
  absl::Status StartStep();
  // Every started step is done.
  bool StepDone() const;
  // The number of steps done (<= steps_started()): a step is done when every source, sink and
  // variable holder had all its events of that step (each actor's events come in step order).
  int64_t StepsDone() const;
  int64_t steps_started() const { return steps_started_; }
  // Step events so far (each notifies RuntimeEnv::step_notifier), and how many one step has
  // (its sources', sinks' and holders' firings): StepsDone() >= S needs step_events() >= S x it.
  int64_t step_events() const { return step_events_.load(); }
  int64_t StepEventsPerStep() const;
  // Update registers whose optimizer writes the variables in place (inplace_updates.h).
  int64_t num_inplace_updates() const { return num_inplace_updates_; }
  // Register edges handed over when the producing act is enqueued on its device stream
  // (RuntimeEnv::stream_ordered_handoffs, stream_ordered.h); 0 for a cpu-only plan.
  int64_t num_stream_ordered_edges() const { return num_stream_ordered_edges_; }
  // Memory reuse: (register, register sharing its bytes) pairs, and the checks producers make
  // before a write (OutputPort::checks: one per register and turn, far fewer).
  int64_t num_byte_sharers() const { return num_byte_sharers_; }
  int64_t num_byte_checks() const { return num_byte_checks_; }
  // Starts the end-of-data drain; Finished() once every actor is done.
  void EndStream();
  bool Finished() const;
  // Number of acts so far (the watchdog's progress measure).
  int64_t progress() const { return progress_.load(); }
  // Microseconds (by the env's clock) since the last act (stamped when the thread finished the
  // batch of messages that led to it: one clock read per batch), or since Create if none.
  int64_t IdleMicros() const { return clock_->NowMicros() - last_act_micros_.load(); }
  bool records_timeline() const { return env_.record_timeline; }
  // OK, or the first failure (a kernel error, a bad remote message, a transport error).
  absl::Status status() const;

  // The shards the sink of output `name` fetched in the oldest step not yet taken, in firing
  // order (its firings per step of them). REQUIRES: that step is done.
  absl::StatusOr<std::vector<Tensor>> TakeFetched(const std::string& name);
  // A copy of this rank's shard of variable `name`. FailedPrecondition while a step runs
  // (StepDone() false): an in-place optimizer may be writing it.
  absl::StatusOr<Tensor> ReadVariableShard(const std::string& name) const;
  // Overwrites this rank's shard of variable `name` (e.g. from a checkpoint). REQUIRES: no
  // step is running (StepDone()); FailedPrecondition otherwise, InvalidArgument when the
  // shard's dtype or shape differs from the binding's.
  absl::Status WriteVariableShard(const std::string& name, const Tensor& shard);
  // Every thread describes its actors (one line each). Waits up to `timeout_ms` for the
  // threads; a thread that does not answer (busy in an act) is named as such.
  std::string Report(int64_t timeout_ms);

  // Deterministic mode only: handles the oldest pending message, then offers firings to the
  // actors of its stream (which may post more). Copies the message to *handled if non-null.
  // Returns false when no message is pending.
  bool DispatchOne(ActorMessage* handled = nullptr);
  // "ready -> 'relu' port 0 buffer 1"
  std::string DescribeMessage(const ActorMessage& message) const;

  // The recorded timeline as Chrome trace events, pid = rank, tid = stream thread (plus one
  // "transport" row for receives), with process/thread-name metadata:
  //   acts      "X", name = task name, cat = task type, args {task, firing}
  //   waits     "X", name "wait: input 'x'" (or output / shared bytes / step credit), cat
  //             "wait", args {task, waits_for}: from the first failed firing attempt to the act
  //             that ended it
  //   sends     "X", name "send ready 'x'" / "send returned 'x'", cat "transfer", args {register,
  //             buffer, peer, bytes}, plus a flow start ("s") ...
  //   receives  ... and "X" "receive ..." on the transport row with the matching flow end ("f"):
  //             flow ids "<from>><to>:<kind>:<register>:<n>" pair the n-th send with the n-th
  //             receive of that register and kind (per-link FIFO order).
  // Comma-separated without brackets so several ranks' lists can be joined into one
  // {"traceEvents": [...]} file (Session::TimelineJson does). Empty unless
  // RuntimeEnv.record_timeline. Call between steps (or after Stop) for a complete picture.
  std::string TimelineEvents() const;

  // How loaded each stream thread has been since the runtime started (thread-safe; always
  // counted, two clock reads per handled batch): the time spent handling messages and acting
  // (an asynchronous act counts the time to enqueue it), not the time polling or asleep.
  // A device stream's thread near 100% busy is the host bounding the step (tools/gpu).
  struct ThreadLoad {
    std::string name;  // "cuda:0/stream 0"
    int64_t busy_micros = 0;
    int64_t acts = 0;
    int64_t messages = 0;
  };
  std::vector<ThreadLoad> ThreadLoads() const;

  // Device memory in use now on each device this rank has planned blocks on, measured by the
  // backend (DeviceBackend::FreeBytes: cudaMemGetInfo) as the drop in free bytes since just
  // before the rank allocated its blocks: the blocks plus what the libraries took (cuBLAS
  // workspaces, NCCL buffers, the stream-ordered pool). Ranks sharing a device each count the
  // others' allocations made after them. Empty without device blocks.
  absl::StatusOr<std::map<int32_t, int64_t>> DeviceBytesInUse() const;

  // ActorHost (called on actor threads).
  void Post(const ActorMessage& message) override;
  void SendRemote(Rank to, const RemoteMessage& message) override;
  void ReturnMirrorBuffer(MirrorRegister* mirror, int32_t buffer, TaskId consumer) override;
  void OnActed(const Actor& actor, int64_t firing, bool step_event, int64_t begin_micros) override;
  int64_t NowMicros() const override { return env_.record_timeline ? clock_->NowMicros() : 0; }
  void OnFailed(const Actor& actor, const absl::Status& status) override;
  void OnDone(const Actor& actor) override;
  bool RecordsWaits() const override { return env_.record_timeline; }
  void OnWaited(const Actor& actor, const WaitCause& cause, int64_t begin_micros, int64_t end_micros) override;

 private:
  // One thread per (device, stream). It is also the ActorHost of its actors (they run only on
  // it): a message between two of its actors goes to `local` (no lock, no wake-up); anything
  // else is forwarded to the runtime.
  struct StreamThread final : public ActorHost {
    StreamThread(Runtime* runtime, int32_t index) : runtime(runtime), index(index) {}
    void Post(const ActorMessage& message) override;
    void PostFromAnyThread(const ActorMessage& message) override { runtime->Post(message); }
    void SendRemote(Rank to, const RemoteMessage& message) override;
    void ReturnMirrorBuffer(MirrorRegister* mirror, int32_t buffer, TaskId consumer) override;
    void OnActed(const Actor& actor, int64_t firing, bool step_event, int64_t begin_micros) override;
    int64_t NowMicros() const override { return runtime->NowMicros(); }
    void OnFailed(const Actor& actor, const absl::Status& status) override { runtime->OnFailed(actor, status); }
    void OnDone(const Actor& actor) override { runtime->OnDone(actor); }
    bool RecordsWaits() const override { return runtime->RecordsWaits(); }
    void OnWaited(const Actor& actor, const WaitCause& cause, int64_t begin_micros, int64_t end_micros) override {
      runtime->OnWaited(actor, cause, begin_micros, end_micros);
    }

    Runtime* const runtime;
    const int32_t index;  // in threads_ (the timeline's tid)
    std::string name;     // "cpu:0/stream 1"
    Mailbox mailbox;
    std::vector<ActorId> actors;       // in order_in_stream order
    std::vector<ActorMessage> local;   // posted by this thread's actors to this thread's actors
    bool acted = false;                // an act since the loop last stamped last_act_micros_
    std::atomic<int64_t> busy_nanos{0}, acts{0}, messages{0};  // ThreadLoads
    std::thread thread;
  };
  struct Block {
    char* data = nullptr;
    size_t bytes = 0;
    int32_t device = -1;  // >= 0: memory of env_.device_backend's device (else the allocator's)
  };

  // What SetUpTask decided for one task.
  struct TaskSetup {
    std::unique_ptr<ActBody> body;
    int64_t step_events = 0;  // events this actor contributes to one step
  };

  Runtime(Rank rank, RuntimeEnv env) : rank_(rank), env_(std::move(env)) {}
  // runtime_build.cc: validation, memory, registers, actors.
  absl::Status Build(const PlanProto& plan, const RankPlanProto& rank_plan);
  // runtime_tasks.cc: per-binding checks and variable initialization; per-task-type rules,
  // payload slots and bodies (fills spec->rule, count, payload refs, back edges).
  absl::Status AddBinding(const TensorBindingProto& binding);
  // Per local register, the registers whose bytes overlap it (the memory planner's reuse): all
  // of them, the ones it checks before a write and the ones that check it (OutputPort);
  // registers in `skip` (in-place updates: they do not use their planned bytes) take no part.
  struct ByteSharing {
    std::vector<ByteConflict> all, checks, dependents;
  };
  std::map<int64_t, ByteSharing> FindByteConflicts(const std::map<int64_t, const RegisterProto*>& registers,
                                                   const std::set<int64_t>& skip);
  absl::StatusOr<TaskSetup> SetUpTask(const TaskProto& task, int64_t firings_per_step, ActorSpec* spec);
  void Start();
  void ThreadLoop(StreamThread* thread);
  // Handles `batch` on `thread`; false when it holds kStop.
  bool HandleBatch(StreamThread* thread, const std::vector<ActorMessage>& batch, std::vector<int32_t>* touched);
  // Every remote send goes through here; `tid` = the sending thread (timeline).
  void SendRemoteFrom(int32_t tid, Rank to, const RemoteMessage& message);
  // REQUIRES: `touched` holds positions in thread->actors of actors that got messages.
  void FireReady(StreamThread* thread, std::vector<int32_t>* touched);
  void DescribeThread(const StreamThread& thread);
  void OnRemoteBytes(Rank from, absl::string_view bytes);
  // OnRemoteBytes minus decoding and timeline; `payload`: a kReady message's payload.
  void DeliverRemote(Rank from, const RemoteMessage& message, absl::string_view payload);
  void RecordFailure(const absl::Status& status);
  char* AllocateBytes(int64_t bytes);
  // device_runtime.cc: a memory block on env_.device_backend's `device`.
  absl::StatusOr<char*> AllocateDeviceBlock(const MemoryBlockProto& block);
  // ResourceExhausted when a device's planned blocks exceed its free bytes (DeviceBackend::FreeBytes).
  // Also records each device's free bytes before the rank's blocks (device_free_at_build_).
  absl::Status CheckDeviceMemory(const RankPlanProto& rank_plan);
  // The device of a local register's memory, -1 for host memory.
  int32_t DeviceOf(int64_t register_id) const;
  // Host <-> a register slot's bytes, wherever they are (VARIABLE bindings, INPUT sources).
  absl::Status WriteSlot(const RegisterLayout& layout, int32_t buffer, int32_t slot, const Tensor& host) const;
  absl::StatusOr<Tensor> ReadSlot(const RegisterLayout& layout, int32_t buffer, int32_t slot) const;
  // InvalidArgument naming the task when a payload is not in the memory its body uses.
  absl::Status CheckPayloadMemory(const TaskProto& task, const ActorSpec& spec,
                                  const std::vector<const RegisterLayout*>& in_layouts,
                                  const std::vector<const RegisterLayout*>& out_layouts) const;
  // The body of a task on the device (tasks whose DeviceProto.type is not "cpu").
  absl::StatusOr<std::unique_ptr<ActBody>> MakeDeviceBody(const TaskProto& task, DeviceTask device_task) const;
  // A BOXING_SLICE / CONCAT / ADD within the rank on the device (`begins`: the regions' corners).
  absl::StatusOr<std::unique_ptr<ActBody>> MakeDeviceBoxingBody(const TaskProto& task, DeviceTask device_task,
                                                               std::vector<std::vector<int64_t>> begins) const;
  // An ACCUMULATE on the device: its running sums (one per payload, `sums`) in device memory.
  absl::StatusOr<std::unique_ptr<ActBody>> MakeDeviceAccumulateBody(const DeviceTask& task,
                                                                   const std::vector<TensorDesc>& sums) const;

  const Rank rank_;
  const RuntimeEnv env_;
  SystemClock system_clock_;
  const Clock* const clock_ = env_.clock != nullptr ? env_.clock : &system_clock_;
  // env_.intra_op_threads > 1: the kernels' pool (declared before the actors: outlives them).
  const std::unique_ptr<IntraOpPool> intra_op_pool_ =
      env_.intra_op_threads > 1 ? std::make_unique<IntraOpPool>(env_.intra_op_threads) : nullptr;
  std::atomic<int64_t> last_act_micros_{clock_->NowMicros()};
  int64_t pieces_per_step_ = 1;
  std::vector<Block> blocks_;  // every allocation, freed by ~Runtime
  std::vector<Block> registered_;  // blocks given to the transport's RegisterMemory
  absl::flat_hash_map<int64_t, char*> block_by_id_;
  absl::flat_hash_map<int64_t, int32_t> device_of_block_;     // device blocks only
  absl::flat_hash_map<int64_t, int32_t> device_of_register_;  // registers in device blocks only
  std::vector<std::unique_ptr<RegisterLayout>> layouts_;  // local registers
  absl::flat_hash_map<int64_t, RegisterLayout*> layout_by_id_;
  std::vector<std::unique_ptr<MirrorRegister>> mirrors_;
  absl::flat_hash_map<int64_t, MirrorRegister*> mirror_by_id_;
  absl::flat_hash_map<int64_t, LocalEndpoint> producer_by_register_;
  std::vector<std::unique_ptr<RegisterUse>> register_uses_;  // registers sharing bytes
  absl::flat_hash_map<int64_t, RegisterUse*> use_by_register_;
  // The collectives' issue order (collective_order.h; declared before the actors: outlives them).
  std::unique_ptr<CollectiveOrder> collective_order_;
  absl::flat_hash_map<int64_t, int32_t> collective_call_;  // task id -> its call in collective_order_
  std::vector<std::unique_ptr<Actor>> actors_;  // indexed by ActorId
  std::vector<StreamThread*> thread_of_actor_;  // indexed by ActorId
  std::vector<int32_t> position_in_thread_;     // indexed by ActorId: index in its thread's actors
  std::vector<ActorId> sources_;
  std::vector<std::unique_ptr<StreamThread>> threads_;
  std::map<int32_t, int64_t> device_free_at_build_;  // by device index (CheckDeviceMemory)
  std::map<std::string, TensorBindingProto> bindings_;
  std::map<std::string, TensorDesc> binding_descs_;
  std::map<std::string, std::vector<int64_t>> binding_offsets_;

  mutable std::mutex io_mu_;  // feeds_ and fetched_
  std::map<std::string, std::deque<Tensor>> feeds_;
  std::map<std::string, int64_t> fed_total_;  // pieces ever fed, per input
  std::map<std::string, std::deque<Tensor>> fetched_;
  std::map<std::string, int64_t> fetches_per_step_;  // sink firings per step, per output

  int64_t events_per_step_ = 0;
  // Per actor (indexed by ActorId): its step events per step, and how many it had so far.
  std::vector<int64_t> step_events_per_actor_;
  std::unique_ptr<std::atomic<int64_t>[]> actor_step_events_;
  int64_t num_inplace_updates_ = 0;
  int64_t num_stream_ordered_edges_ = 0;
  int64_t num_byte_sharers_ = 0, num_byte_checks_ = 0;
  int64_t steps_started_ = 0;  // written by StartStep (callers serialize steps)
  std::atomic<int64_t> step_events_{0};
  std::atomic<int64_t> progress_{0};
  std::atomic<int64_t> done_actors_{0};
  std::atomic<bool> failed_{false};
  bool ended_ = false;
  mutable std::mutex status_mu_;
  absl::Status status_;

  struct TimelineEvent {
    enum Kind : uint8_t { kAct, kWait, kSend, kReceive };
    Kind kind = kAct;
    int32_t tid = 0;                      // kAct, kSend: the stream thread (rows: TimelineEvents)
    ActorId actor;                        // kAct, kWait
    int64_t firing = 0;                   // kAct
    WaitCause cause;                      // kWait
    int64_t begin_micros = 0, end_micros = 0;
    RemoteKind remote_kind = RemoteKind::kReady;  // kSend, kReceive
    int64_t register_id = 0, buffer = 0, bytes = 0, sequence = 0;
    int32_t peer = 0;                     // the other rank
  };
  void RecordTimelineEvent(TimelineEvent event);  // REQUIRES: env_.record_timeline
  mutable std::mutex timeline_mu_;
  std::vector<TimelineEvent> timeline_;
  // Sends / receives so far per (peer, kind, register): the flow ids' sequence numbers.
  std::map<std::tuple<int32_t, int, int64_t>, int64_t> sent_count_, received_count_;

  std::mutex pending_mu_;  // deterministic mode: the single FIFO of posted messages
  std::deque<ActorMessage> pending_;

  std::mutex report_mu_;
  std::condition_variable report_cv_;
  std::vector<std::string> report_lines_;
  int64_t report_answers_ = 0;
};

// Writes `runtime`'s timeline as one Chrome trace file, {"traceEvents": [...]} with pid = the
// rank (merge several ranks' files with tools/trace_merge.py). FailedPrecondition unless the
// runtime records a timeline (RuntimeEnv.record_timeline); InvalidArgument naming `path` when
// the file cannot be written.
//   RETURN_IF_ERROR(WriteRankTimeline(*runtime, "/tmp/trace.rank0.json"));
absl::Status WriteRankTimeline(const Runtime& runtime, const std::string& path);

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_RUNTIME_H_
