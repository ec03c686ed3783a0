#include "oneflow_like/actor/runtime.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/core/shard_simulator.h"

namespace oneflow_like {
namespace actor {

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Create(const PlanProto& plan, int rank, RuntimeEnv env) {
  if (env.allocator == nullptr) return absl::InvalidArgumentError("RuntimeEnv.allocator is required");
  const RankPlanProto* rank_plan = nullptr;
  for (const RankPlanProto& rp : plan.rank_plans()) {
    if (rp.rank() == rank) rank_plan = &rp;
  }
  if (rank_plan == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("plan '", plan.job_name(), "' has no rank plan for rank ", rank,
                                                   " (it has ", plan.rank_plans_size(), " rank plans)"));
  }
  std::unique_ptr<Runtime> runtime(new Runtime(Rank(rank), std::move(env)));
  absl::Status status = runtime->Build(plan, *rank_plan);
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("plan '", plan.job_name(), "', rank ", rank, ": ", status.message()));
  }
  runtime->Start();
  return runtime;
}

void Runtime::Stop() {
  for (auto& thread : threads_) {
    if (thread->thread.joinable()) thread->mailbox.Push(ActorMessage{MessageKind::kStop, ActorId(), 0, 0, 0});
  }
  for (auto& thread : threads_) {
    if (thread->thread.joinable()) thread->thread.join();
  }
}

Runtime::~Runtime() {
  Stop();
  // No held collective call runs on a body being destroyed (a first firing's waiter thread may
  // still drain the order).
  if (collective_order_ != nullptr) collective_order_->Close();
  if (env_.transport != nullptr) env_.transport->SetReceiver([](Rank, absl::string_view) {});
  // Device work still in flight (a failed job) completes before its actors go away.
  if (env_.device_backend != nullptr && !blocks_.empty()) (void)env_.device_backend->Drain();
  actors_.clear();
  // Frames still queued (a failed job) stop referring to our registers before they are freed.
  for (const Block& block : registered_) env_.transport->UnregisterMemory(block.data, block.bytes);
  for (const Block& block : blocks_) {
    if (block.device >= 0) {
      env_.device_backend->Free(block.device, block.data);
    } else {
      env_.allocator->Deallocate(block.data, block.bytes);
    }
  }
}

char* Runtime::AllocateBytes(int64_t bytes) {
  const size_t size = static_cast<size_t>(bytes);
  char* data = static_cast<char*>(env_.allocator->Allocate(size));
  if (data != nullptr) blocks_.push_back(Block{data, size});
  return data;
}

void Runtime::Start() {
  if (env_.transport != nullptr) {
    env_.transport->SetReceiver([this](Rank from, absl::string_view bytes) { OnRemoteBytes(from, bytes); });
  }
  if (env_.deterministic) return;  // DispatchOne drives the actors
  for (auto& thread : threads_) {
    StreamThread* t = thread.get();
    t->thread = std::thread([this, t] { ThreadLoop(t); });
  }
}

void Runtime::DescribeThread(const StreamThread& thread) {
  std::lock_guard<std::mutex> lock(report_mu_);
  for (ActorId id : thread.actors) {
    report_lines_.push_back(absl::StrCat(thread.name, ": ", actors_[id.value()]->DescribeWait()));
  }
  ++report_answers_;
  report_cv_.notify_all();
}

void Runtime::FireReady(StreamThread* thread, std::vector<int32_t>* touched) {
  // Only an actor that got a message can have become ready. Offer those a firing, in static
  // (order_in_stream) order, until nothing moves.
  std::sort(touched->begin(), touched->end());
  touched->erase(std::unique(touched->begin(), touched->end()), touched->end());
  bool progressed = true;
  while (progressed && !failed_.load()) {
    progressed = false;
    for (int32_t position : *touched) progressed = actors_[thread->actors[position].value()]->TryFire() || progressed;
  }
  touched->clear();
}

bool Runtime::HandleBatch(StreamThread* thread, const std::vector<ActorMessage>& batch,
                          std::vector<int32_t>* touched) {
  for (const ActorMessage& message : batch) {
    if (message.kind == MessageKind::kStop) return false;
    if (message.kind == MessageKind::kReport) {
      DescribeThread(*thread);
    } else {
      actors_[message.actor.value()]->Handle(message);
      touched->push_back(position_in_thread_[message.actor.value()]);
    }
  }
  return true;
}

void Runtime::ThreadLoop(StreamThread* thread) {
  std::vector<ActorMessage> batch, own;
  std::vector<int32_t> touched;
  while (true) {
    // Block (after a short spin) only when this thread's own actors posted nothing.
    if (thread->local.empty()) {
      thread->mailbox.PopAll(&batch, env_.idle_spin_polls);
    } else {
      thread->mailbox.TryPopAll(&batch);
    }
    const auto busy_from = std::chrono::steady_clock::now();
    if (!HandleBatch(thread, batch, &touched)) return;
    own.clear();
    own.swap(thread->local);  // handling may post again (wake-ups): those go to the next round
    HandleBatch(thread, own, &touched);
    FireReady(thread, &touched);
    thread->messages.fetch_add(static_cast<int64_t>(batch.size() + own.size()), std::memory_order_relaxed);
    thread->busy_nanos.fetch_add(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - busy_from).count(),
        std::memory_order_relaxed);
    if (thread->acted) {  // one clock read per batch, not per act
      thread->acted = false;
      last_act_micros_.store(clock_->NowMicros());
    }
  }
}

std::vector<Runtime::ThreadLoad> Runtime::ThreadLoads() const {
  std::vector<ThreadLoad> loads;
  for (const auto& thread : threads_) {
    loads.push_back(ThreadLoad{thread->name, thread->busy_nanos.load(std::memory_order_relaxed) / 1000,
                               thread->acts.load(std::memory_order_relaxed),
                               thread->messages.load(std::memory_order_relaxed)});
  }
  return loads;
}

bool Runtime::DispatchOne(ActorMessage* handled) {
  ActorMessage message;
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    if (pending_.empty()) return false;
    message = pending_.front();
    pending_.pop_front();
  }
  if (handled != nullptr) *handled = message;
  actors_[message.actor.value()]->Handle(message);
  std::vector<int32_t> touched = {position_in_thread_[message.actor.value()]};
  StreamThread* thread = thread_of_actor_[message.actor.value()];
  FireReady(thread, &touched);
  if (thread->acted) {
    thread->acted = false;
    last_act_micros_.store(clock_->NowMicros());
  }
  return true;
}

std::string Runtime::DescribeMessage(const ActorMessage& message) const {
  if (message.actor.value() < 0 || message.actor.value() >= static_cast<int64_t>(actors_.size())) {
    return MessageToString(message);
  }
  return absl::StrCat(MessageKindName(message.kind), " -> '", actors_[message.actor.value()]->spec().name, "'",
                      message.kind == MessageKind::kRegisterReady || message.kind == MessageKind::kRegisterReturned
                          ? absl::StrCat(" port ", message.port, " buffer ", message.buffer)
                          : "");
}

// ---- ActorHost -----------------------------------------------------------------------------

void Runtime::Post(const ActorMessage& message) {
  if (env_.deterministic) {
    std::lock_guard<std::mutex> lock(pending_mu_);
    pending_.push_back(message);
    return;
  }
  thread_of_actor_[message.actor.value()]->mailbox.Push(message);
}

void Runtime::StreamThread::Post(const ActorMessage& message) {
  if (!runtime->env_.deterministic && runtime->thread_of_actor_[message.actor.value()] == this) {
    local.push_back(message);  // we are this thread: ThreadLoop handles it before sleeping
  } else {
    runtime->Post(message);
  }
}

void Runtime::StreamThread::SendRemote(Rank to, const RemoteMessage& message) {
  runtime->SendRemoteFrom(index, to, message);
}

void Runtime::StreamThread::ReturnMirrorBuffer(MirrorRegister* mirror, int32_t buffer, TaskId consumer) {
  if (mirror->holders[buffer].fetch_sub(1) != 1) return;
  runtime->SendRemoteFrom(
      index, mirror->producer_rank,
      RemoteMessage{RemoteKind::kReturned, mirror->layout.id, buffer, consumer, mirror->producer_task, ""});
}

void Runtime::StreamThread::OnActed(const Actor& actor, int64_t firing, bool step_event, int64_t begin_micros) {
  acted = true;
  acts.fetch_add(1, std::memory_order_relaxed);
  runtime->OnActed(actor, firing, step_event, begin_micros);
}

void Runtime::SendRemote(Rank to, const RemoteMessage& message) {
  SendRemoteFrom(static_cast<int32_t>(threads_.size()), to, message);
}

void Runtime::SendRemoteFrom(int32_t tid, Rank to, const RemoteMessage& message) {
  const int64_t begin = NowMicros();
  // Handed over (not copied again): a TCP link queues it and writes what the socket does not
  // take at once from its I/O thread, so this thread never waits for the peer to read.
  absl::Status status;
  const int32_t device = message.kind == RemoteKind::kReady ? DeviceOf(message.register_id.value()) : -1;
  if (device >= 0) {
    // A register in device memory: its slots come to the host first (the producer's act is
    // complete), then travel like any payload; the consumer's TRANSFER copies them to its device.
    RemoteMessage staged = message;
    staged.payload_parts.clear();
    staged.payload.resize(static_cast<size_t>(message.payload_size()));
    size_t at = 0;
    for (absl::string_view part : message.payload_parts) {
      if (status.ok()) {
        status = env_.device_backend->CopyToHost(device, part.data(), &staged.payload[at], static_cast<int64_t>(part.size()));
      }
      at += part.size();
    }
    if (status.ok()) {
      std::string wire = env_.transport->TakeBuffer(staged.payload.size() + 64);
      EncodeRemoteMessageInto(staged, &wire);
      status = env_.transport->SendOwned(to, std::move(wire));
    }
  } else if (message.kind == RemoteKind::kReady && message.payload.empty() && message.payload_parts.size() == 1) {
    // One slot of a planned (registered) register: its bytes stay put until the consumer returns
    // the buffer, so an RDMA transport lets the consumer read them in place (SendRegistered).
    RemoteMessage header = message;
    header.payload_parts.clear();
    status = env_.transport->SendRegistered(to, EncodeRemoteMessage(header), message.payload_parts[0]);
  } else {
    std::string wire = env_.transport->TakeBuffer(static_cast<size_t>(message.payload_size()) + 64);
    EncodeRemoteMessageInto(message, &wire);
    status = env_.transport->SendOwned(to, std::move(wire));
  }
  if (env_.record_timeline) {
    TimelineEvent event;
    event.kind = TimelineEvent::kSend;
    event.tid = tid;
    event.begin_micros = begin;
    event.end_micros = clock_->NowMicros();
    event.remote_kind = message.kind;
    event.register_id = message.register_id.value();
    event.buffer = message.buffer;
    event.bytes = message.payload_size();
    event.peer = to.value();
    RecordTimelineEvent(std::move(event));
  }
  if (!status.ok()) {
    RecordFailure(absl::Status(status.code(),
                               absl::StrCat("rank ", rank_.value(), ": sending register ", message.register_id.value(),
                                            " to rank ", to.value(), " failed: ", status.message())));
  }
}

void Runtime::ReturnMirrorBuffer(MirrorRegister* mirror, int32_t buffer, TaskId consumer) {
  if (mirror->holders[buffer].fetch_sub(1) != 1) return;
  SendRemote(mirror->producer_rank,
             RemoteMessage{RemoteKind::kReturned, mirror->layout.id, buffer, consumer, mirror->producer_task, ""});
}

void Runtime::OnActed(const Actor& actor, int64_t firing, bool step_event, int64_t begin_micros) {
  if (env_.record_timeline) {
    TimelineEvent event;
    event.kind = TimelineEvent::kAct;
    event.tid = thread_of_actor_[actor.spec().id.value()]->index;
    event.actor = actor.spec().id;
    event.firing = firing;
    event.begin_micros = begin_micros;
    event.end_micros = clock_->NowMicros();
    RecordTimelineEvent(std::move(event));
  }
  if (env_.on_act) env_.on_act(ActEvent{rank_, actor.spec().task, &actor.spec().name, firing});
  // last_act_micros_ is stamped once per batch by the thread loop (DispatchOne alike).
  progress_.fetch_add(1);
  if (step_event) {
    actor_step_events_[actor.spec().id.value()].fetch_add(1);
    step_events_.fetch_add(1);
    if (env_.step_notifier != nullptr) env_.step_notifier->Notify();
  }
}

void Runtime::OnFailed(const Actor& actor, const absl::Status& status) {
  (void)actor;  // the status already names it
  RecordFailure(status);
}

void Runtime::OnDone(const Actor& actor) {
  (void)actor;
  done_actors_.fetch_add(1);
  progress_.fetch_add(1);
  if (env_.step_notifier != nullptr) env_.step_notifier->NotifyAlways();
}

void Runtime::RecordFailure(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(status_mu_);
  if (status_.ok()) status_ = status;
  failed_.store(true);
  if (env_.step_notifier != nullptr) env_.step_notifier->NotifyAlways();
}

absl::Status Runtime::status() const {
  std::lock_guard<std::mutex> lock(status_mu_);
  return status_;
}

// ---- remote messages ----------------------------------------------------------------------

void Runtime::OnRemoteBytes(Rank from, absl::string_view bytes) {
  const int64_t begin = NowMicros();
  absl::string_view payload;  // not copied: unpacked straight into the mirror's buffer
  absl::StatusOr<RemoteMessage> decoded = DecodeRemoteMessageView(bytes, &payload);
  if (!decoded.ok()) {
    RecordFailure(absl::InvalidArgumentError(absl::StrCat("rank ", rank_.value(), ": message from rank ",
                                                          from.value(), ": ", decoded.status().message())));
    return;
  }
  DeliverRemote(from, *decoded, payload);
  if (env_.record_timeline) {
    TimelineEvent event;
    event.kind = TimelineEvent::kReceive;
    event.begin_micros = begin;
    event.end_micros = clock_->NowMicros();
    event.remote_kind = decoded->kind;
    event.register_id = decoded->register_id.value();
    event.buffer = decoded->buffer;
    event.bytes = static_cast<int64_t>(payload.size());
    event.peer = from.value();
    RecordTimelineEvent(std::move(event));
  }
}

void Runtime::DeliverRemote(Rank from, const RemoteMessage& message, absl::string_view payload) {
  const std::string where = absl::StrCat("rank ", rank_.value(), ": message from rank ", from.value());
  const int64_t id = message.register_id.value();
  if (message.kind == RemoteKind::kReturned) {
    auto it = producer_by_register_.find(id);
    if (it == producer_by_register_.end()) {
      RecordFailure(absl::InvalidArgumentError(
          absl::StrCat(where, ": 'returned' for register ", id, ", which is not produced on this rank")));
      return;
    }
    const RegisterLayout* layout = layout_by_id_.at(id);
    if (message.buffer >= layout->count) {
      RecordFailure(absl::InvalidArgumentError(absl::StrCat(where, ": 'returned' for buffer ", message.buffer,
                                                            " of register ", id, " (count ", layout->count, ")")));
      return;
    }
    Post(ActorMessage{MessageKind::kRegisterReturned, it->second.actor, it->second.port, message.buffer, 0});
    return;
  }
  auto it = mirror_by_id_.find(id);
  if (it == mirror_by_id_.end()) {
    RecordFailure(absl::InvalidArgumentError(absl::StrCat(where, ": register ", id, " has no mirror on this rank")));
    return;
  }
  MirrorRegister* mirror = it->second;
  if (message.kind == RemoteKind::kReady) {
    absl::Status status = mirror->layout.Unpack(message.buffer, payload);
    if (!status.ok()) {
      RecordFailure(absl::InvalidArgumentError(absl::StrCat(where, ": ", status.message())));
      return;
    }
    mirror->holders[message.buffer].store(static_cast<int32_t>(mirror->consumers.size()));
  }
  const MessageKind kind = message.kind == RemoteKind::kReady ? MessageKind::kRegisterReady : MessageKind::kEndOfData;
  for (const LocalEndpoint& c : mirror->consumers) Post(ActorMessage{kind, c.actor, c.port, message.buffer, 0});
}

// ---- feeding, steps, results --------------------------------------------------------------

const TensorBindingProto* Runtime::FindBinding(const std::string& name) const {
  auto it = bindings_.find(name);
  return it == bindings_.end() ? nullptr : &it->second;
}

std::vector<std::string> Runtime::OutputNames() const {
  std::vector<std::string> names;
  for (const auto& [name, binding] : bindings_) {
    if (binding.kind() == TensorBindingProto::OUTPUT) names.push_back(name);
  }
  return names;
}

std::vector<std::string> Runtime::VariableNames() const {
  std::vector<std::string> names;
  for (const auto& [name, binding] : bindings_) {
    if (binding.kind() == TensorBindingProto::VARIABLE) names.push_back(name);
  }
  return names;
}

const TensorDesc& Runtime::BindingDesc(const std::string& name) const { return binding_descs_.at(name); }

absl::Status Runtime::FeedShard(const std::string& name, const Tensor& shard) {
  const TensorBindingProto* binding = FindBinding(name);
  if (binding == nullptr || binding->kind() != TensorBindingProto::INPUT) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank_.value(), " has no input named '", name, "'"));
  }
  if (shard.desc() != BindingDesc(name)) {
    return absl::InvalidArgumentError(absl::StrCat("input '", name, "' on rank ", rank_.value(), ": fed shard is ",
                                                   shard.desc().ToString(), ", the plan expects ",
                                                   BindingDesc(name).ToString()));
  }
  std::lock_guard<std::mutex> lock(io_mu_);
  feeds_[name].push_back(shard.Clone());
  ++fed_total_[name];
  return absl::OkStatus();
}

absl::Status Runtime::FeedLogical(const std::string& name, const Tensor& logical) {
  const TensorBindingProto* binding = FindBinding(name);
  if (binding == nullptr || binding->kind() != TensorBindingProto::INPUT) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank_.value(), " has no input named '", name, "'"));
  }
  const Shape logical_shape(
      std::vector<int64_t>(binding->shard().logical_dims().begin(), binding->shard().logical_dims().end()));
  if (logical.dtype() != BindingDesc(name).dtype || logical.shape() != logical_shape) {
    return absl::InvalidArgumentError(absl::StrCat("input '", name, "': fed ", logical.desc().ToString(),
                                                   ", the plan expects the logical tensor ",
                                                   DataTypeName(BindingDesc(name).dtype), logical_shape.ToString()));
  }
  for (const SbpProto& sbp : binding->shard().nd_sbp().sbp()) {
    if (sbp.kind() == SbpProto::PARTIAL_SUM) {
      return absl::InvalidArgumentError(absl::StrCat("input '", name, "' is partial-sum on rank ", rank_.value(),
                                                     ": feed per-rank shards (FeedShard) instead"));
    }
  }
  Tensor shard(BindingDesc(name));
  CopyBlockOut(logical, binding_offsets_.at(name), &shard);
  std::lock_guard<std::mutex> lock(io_mu_);
  feeds_[name].push_back(std::move(shard));
  ++fed_total_[name];
  return absl::OkStatus();
}

absl::Status Runtime::StartStep() {
  RETURN_IF_ERROR(status());
  if (ended_) return absl::FailedPreconditionError("StartStep after EndStream");
  if (steps_started_ - StepsDone() >= kMaxStepsInFlight) {
    return absl::FailedPreconditionError(
        absl::StrCat("StartStep while ", kMaxStepsInFlight, " steps are still running (at most ", kMaxStepsInFlight,
                     " at once)"));
  }
  {
    std::lock_guard<std::mutex> lock(io_mu_);
    const int64_t needed = (steps_started_ + 1) * pieces_per_step_;
    for (const auto& [name, binding] : bindings_) {
      if (binding.kind() != TensorBindingProto::INPUT) continue;
      const int64_t fed = fed_total_[name];
      if (fed < needed) {
        return absl::FailedPreconditionError(absl::StrCat("input '", name, "' on rank ", rank_.value(), " has ",
                                                          fed - steps_started_ * pieces_per_step_,
                                                          " fed pieces; a step needs ", pieces_per_step_));
      }
    }
  }
  ++steps_started_;
  for (ActorId id : sources_) {
    Post(ActorMessage{MessageKind::kStartStep, id, 0, 0, pieces_per_step_});
  }
  return absl::OkStatus();
}

bool Runtime::StepDone() const { return step_events_.load() >= steps_started_ * events_per_step_; }

int64_t Runtime::StepEventsPerStep() const {
  int64_t n = 0;
  for (int64_t k : step_events_per_actor_) n += k;
  return n;
}

int64_t Runtime::StepsDone() const {
  int64_t done = steps_started_;
  for (size_t i = 0; i < step_events_per_actor_.size(); ++i) {
    if (step_events_per_actor_[i] > 0) done = std::min(done, actor_step_events_[i].load() / step_events_per_actor_[i]);
  }
  return done;
}

void Runtime::EndStream() {
  if (ended_) return;
  ended_ = true;
  for (ActorId id : sources_) Post(ActorMessage{MessageKind::kEndOfStream, id, 0, 0, 0});
}

bool Runtime::Finished() const { return done_actors_.load() == static_cast<int64_t>(actors_.size()); }

absl::StatusOr<std::vector<Tensor>> Runtime::TakeFetched(const std::string& name) {
  const TensorBindingProto* binding = FindBinding(name);
  if (binding == nullptr || binding->kind() != TensorBindingProto::OUTPUT) {
    return absl::NotFoundError(absl::StrCat("rank ", rank_.value(), " has no output named '", name, "'"));
  }
  // Exactly one step's firings, oldest first: a sink of a rank may already have fired for this
  // step before StartStep reached the rank (its inputs come from ranks started earlier).
  std::lock_guard<std::mutex> lock(io_mu_);
  std::deque<Tensor>& queue = fetched_[name];
  const int64_t count = fetches_per_step_[name];
  if (static_cast<int64_t>(queue.size()) < count) {
    return absl::InternalError(absl::StrCat("output '", name, "' on rank ", rank_.value(), " has ", queue.size(),
                                            " fetched shards; a step produces ", count));
  }
  std::vector<Tensor> pieces;
  for (int64_t i = 0; i < count; ++i) {
    pieces.push_back(std::move(queue.front()));
    queue.pop_front();
  }
  return pieces;
}

absl::StatusOr<Tensor> Runtime::ReadVariableShard(const std::string& name) const {
  const TensorBindingProto* binding = FindBinding(name);
  if (binding == nullptr || binding->kind() != TensorBindingProto::VARIABLE) {
    return absl::NotFoundError(absl::StrCat("rank ", rank_.value(), " has no variable named '", name, "'"));
  }
  // A step in flight (e.g. started ahead) may be updating the variable in place right now.
  if (!StepDone()) {
    return absl::FailedPreconditionError(absl::StrCat("reading variable '", name, "' on rank ", rank_.value(),
                                                      " while a step runs: finish every started step first"));
  }
  const RegisterLayout* layout = layout_by_id_.at(binding->slot().register_id());
  return ReadSlot(*layout, 0, binding->slot().slot());
}

absl::Status Runtime::WriteVariableShard(const std::string& name, const Tensor& shard) {
  const TensorBindingProto* binding = FindBinding(name);
  if (binding == nullptr || binding->kind() != TensorBindingProto::VARIABLE) {
    return absl::NotFoundError(absl::StrCat("rank ", rank_.value(), " has no variable named '", name, "'"));
  }
  if (!StepDone()) {
    return absl::FailedPreconditionError(
        absl::StrCat("writing variable '", name, "' on rank ", rank_.value(), " while a step is running"));
  }
  const RegisterLayout* layout = layout_by_id_.at(binding->slot().register_id());
  Tensor target = layout->View(0, binding->slot().slot());
  if (target.dtype() != shard.dtype() || target.shape() != shard.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("variable '", name, "' on rank ", rank_.value(), " holds ",
                                                   DataTypeName(target.dtype()), target.shape().ToString(),
                                                   "; the given shard is ", DataTypeName(shard.dtype()),
                                                   shard.shape().ToString()));
  }
  return WriteSlot(*layout, 0, binding->slot().slot(), shard);
}

std::string Runtime::Report(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(report_mu_);
  report_lines_.clear();
  report_answers_ = 0;
  lock.unlock();
  for (auto& thread : threads_) {
    if (env_.deterministic) {
      DescribeThread(*thread);  // no threads: the caller drives the actors
    } else {
      thread->mailbox.Push(ActorMessage{MessageKind::kReport, ActorId(), 0, 0, 0});
    }
  }
  lock.lock();
  const bool all = report_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                                       [this] { return report_answers_ == static_cast<int64_t>(threads_.size()); });
  std::string report = absl::StrCat("rank ", rank_.value(), ":\n");
  for (const std::string& line : report_lines_) absl::StrAppend(&report, "  ", line, "\n");
  if (!all) absl::StrAppend(&report, "  (some threads did not answer within ", timeout_ms, " ms: busy in an act?)\n");
  if (collective_order_ != nullptr) {
    if (std::string held = collective_order_->Describe(); !held.empty()) absl::StrAppend(&report, "  ", held, "\n");
  }
  return report;
}

}  // namespace actor
}  // namespace oneflow_like
