#include "oneflow_like/actor/session.h"

#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/actor/act_body.h"
#include "oneflow_like/comm/gloo_collective.h"
#include "oneflow_like/core/shard_simulator.h"

namespace oneflow_like {
namespace actor {

absl::StatusOr<std::unique_ptr<Session>> Session::Create(const PlanProto& plan, const OpRegistry* registry,
                                                         SessionOptions options) {
  if (plan.world_size() < 1) return absl::InvalidArgumentError("plan has world_size < 1");
  std::unique_ptr<Session> session(new Session());
  session->options_ = std::move(options);
  session->clock_ = session->options_.clock != nullptr ? session->options_.clock : &session->system_clock_;
  session->pieces_per_step_ = std::max<int64_t>(1, plan.pieces_per_step());
  session->world_size_ = plan.world_size();
  session->hub_ = comm::LoopbackHub::Create(plan.world_size());
  bool collectives = false;
  for (const RankPlanProto& rank_plan : plan.rank_plans()) {
    for (const TaskProto& task : rank_plan.tasks()) collectives |= task.type() == TaskProto::COLLECTIVE;
  }
  if (collectives) {  // gloo over loopback TCP between the ranks (threads) of this process
    session->collective_store_ = std::make_unique<comm::InMemoryStore>();
    for (int32_t r = 0; r < plan.world_size(); ++r) {
      absl::StatusOr<std::unique_ptr<comm::CollectiveBackend>> backend =
          session->options_.collective_factory
              ? session->options_.collective_factory(session->collective_store_.get(), r, plan.world_size())
              : comm::CreateGlooBackend(session->collective_store_.get(), r, plan.world_size());
      RETURN_IF_ERROR(backend.status());
      session->collective_backends_.push_back(*std::move(backend));
    }
  }
  for (const RankPlanProto& rank_plan : plan.rank_plans()) {
    session->allocators_.push_back(std::make_unique<CpuAllocator>());
    RuntimeEnv env;
    env.transport = session->hub_->endpoint(Rank(rank_plan.rank()));
    env.allocator = session->allocators_.back().get();
    env.registry = registry;
    env.on_act = session->options_.on_act;
    env.deterministic = session->options_.deterministic;
    env.clock = session->clock_;
    env.record_timeline = session->options_.record_timeline;
    env.inplace_variable_updates = session->options_.inplace_variable_updates;
    env.stream_ordered_handoffs = session->options_.stream_ordered_handoffs;
    env.order_collectives = session->options_.order_collectives;
    env.intra_op_threads = session->options_.intra_op_threads;
    env.device_backend = session->options_.device_backend;
    env.step_notifier = &session->notifier_;
    if (collectives) env.collectives = session->collective_backends_[rank_plan.rank()].get();
    ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(plan, rank_plan.rank(), std::move(env)));
    session->runtimes_.push_back(std::move(runtime));
  }
  return session;
}

Session::~Session() {
  for (auto& runtime : runtimes_) runtime->Stop();
  runtimes_.clear();
}

Runtime* Session::runtime(int rank) const {
  for (const auto& runtime : runtimes_) {
    if (runtime->rank().value() == rank) return runtime.get();
  }
  return nullptr;
}

absl::Status Session::Feed(const std::string& name, const Tensor& logical) {
  RETURN_IF_ERROR(broken_);
  bool found = false;
  for (auto& runtime : runtimes_) {
    if (runtime->FindBinding(name) == nullptr) continue;
    found = true;
    RETURN_IF_ERROR(runtime->FeedLogical(name, logical));
  }
  if (!found) return absl::InvalidArgumentError(absl::StrCat("the plan has no input named '", name, "'"));
  return absl::OkStatus();
}

absl::Status Session::FeedShard(const std::string& name, int rank, const Tensor& shard) {
  RETURN_IF_ERROR(broken_);
  Runtime* r = runtime(rank);
  if (r == nullptr) return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " has no work in this plan"));
  return r->FeedShard(name, shard);
}

absl::Status Session::Stalled(const std::string& headline) {
  std::string report = absl::StrCat(headline, ":\n");
  for (auto& runtime : runtimes_) absl::StrAppend(&report, runtime->Report(/*timeout_ms=*/1000));
  return broken_ = absl::DeadlineExceededError(report);
}

absl::Status Session::Wait(const std::function<bool()>& done, const std::string& what, int64_t wake_at) {
  int64_t last_progress = -1;
  int64_t last_change = clock_->NowMicros();
  while (true) {
    const int64_t seen = notifier_.count();  // before the checks: no event slips between
    for (auto& runtime : runtimes_) {
      absl::Status status = runtime->status();
      if (!status.ok()) return broken_ = status;
    }
    if (done()) return absl::OkStatus();
    if (options_.deterministic) {
      bool dispatched = false;
      for (auto& runtime : runtimes_) {
        ActorMessage message;
        if (!runtime->DispatchOne(&message)) continue;
        dispatched = true;
        message_log_.push_back(absl::StrCat("r", runtime->rank().value(), " ", runtime->DescribeMessage(message)));
      }
      if (!dispatched && !done()) {
        return Stalled(absl::StrCat("deterministic executor: no message pending while waiting for ", what));
      }
      continue;
    }
    int64_t progress = 0;
    for (auto& runtime : runtimes_) progress += runtime->progress();
    const int64_t now = clock_->NowMicros();
    if (progress != last_progress) {
      last_progress = progress;
      last_change = now;
    } else if (now - last_change > options_.watchdog_timeout_ms * 1000) {
      return Stalled(absl::StrCat("watchdog: no actor progressed for ", options_.watchdog_timeout_ms,
                                  " ms while waiting for ", what));
    }
    // Sleep until a step event, a finished actor or a failure; wake at least every 10 ms for
    // the watchdog.
    notifier_.WaitChange(seen, std::chrono::milliseconds(10), wake_at);
  }
}

absl::Status Session::RunStep() {
  RETURN_IF_ERROR(broken_);
  if (started_ != finished_) {
    return absl::FailedPreconditionError(
        absl::StrCat("RunStep while step ", finished_, " started by StartStep is not finished (call FinishStep)"));
  }
  RETURN_IF_ERROR(StartStep());
  return FinishStep();
}

absl::Status Session::StartStep() {
  RETURN_IF_ERROR(broken_);
  if (closed_) return absl::FailedPreconditionError("StartStep after Close");
  // Checked here for the session as a whole: each rank finishes a step at its own time, so one
  // rank could accept a third step another refuses, which would break the session.
  if (started_ - finished_ >= Runtime::kMaxStepsInFlight) {
    return absl::FailedPreconditionError(absl::StrCat("StartStep while ", Runtime::kMaxStepsInFlight,
                                                      " steps are still running (at most ",
                                                      Runtime::kMaxStepsInFlight, " at once; FinishStep first)"));
  }
  for (auto& runtime : runtimes_) {
    absl::Status status = runtime->StartStep();
    if (!status.ok()) {
      // Ranks started before this one now run a step the others do not: unrecoverable.
      if (&runtime != &runtimes_.front()) broken_ = status;
      return status;
    }
  }
  ++started_;
  return absl::OkStatus();
}

absl::Status Session::FinishStep() {
  RETURN_IF_ERROR(broken_);
  if (finished_ >= started_) return absl::FailedPreconditionError("FinishStep without a started step");
  const int64_t step = finished_;
  // Each runtime counts its own steps; they started together, so step `step` is the same
  // number of steps behind each one's count. The notifier's count cannot be below wake_at
  // before that (each runtime's step events for those steps, plus the other notifications so
  // far; the count read first, so wake_at is low rather than high): sleep until then.
  int64_t wake_at = notifier_.count();
  for (auto& runtime : runtimes_) {
    const int64_t target = runtime->steps_started() - (started_ - finished_ - 1);
    wake_at += target * runtime->StepEventsPerStep() - runtime->step_events();
  }
  RETURN_IF_ERROR(Wait(
      [this] {
        for (auto& runtime : runtimes_) {
          if (runtime->StepsDone() < runtime->steps_started() - (started_ - finished_ - 1)) return false;
        }
        return true;
      },
      absl::StrCat("step ", step + 1), wake_at));
  ++finished_;
  fetched_.clear();
  for (auto& runtime : runtimes_) {
    // Every OUTPUT binding of this rank.
    for (const std::string& name : runtime->OutputNames()) {
      ASSIGN_OR_RETURN(std::vector<Tensor> pieces, runtime->TakeFetched(name));
      fetched_[name].emplace_back(runtime->rank().value(), std::move(pieces));
    }
  }
  return absl::OkStatus();
}

int64_t Session::FetchCount(const std::string& name) const {
  auto it = fetched_.find(name);
  return it == fetched_.end() || it->second.empty() ? 0 : static_cast<int64_t>(it->second.front().second.size());
}

absl::StatusOr<Tensor> Session::FetchShard(const std::string& name, int rank, int64_t firing) const {
  auto it = fetched_.find(name);
  if (it == fetched_.end()) return absl::NotFoundError(absl::StrCat("no output named '", name, "' was fetched"));
  for (const auto& [r, pieces] : it->second) {
    if (r != rank) continue;
    if (firing < 0 || firing >= static_cast<int64_t>(pieces.size())) {
      return absl::OutOfRangeError(absl::StrCat("output '", name, "' fired ", pieces.size(), " times on rank ", rank,
                                                " in the last step; firing ", firing, " requested"));
    }
    return pieces[firing];
  }
  return absl::NotFoundError(absl::StrCat("output '", name, "' has no shard on rank ", rank));
}

absl::StatusOr<Tensor> Session::Fetch(const std::string& name, int64_t firing) const {
  auto it = fetched_.find(name);
  if (it == fetched_.end()) return absl::NotFoundError(absl::StrCat("no output named '", name, "' was fetched"));
  std::vector<std::pair<int, Tensor>> shards;
  for (const auto& [rank, pieces] : it->second) {
    ASSIGN_OR_RETURN(Tensor shard, FetchShard(name, rank, firing));
    shards.emplace_back(rank, std::move(shard));
  }
  return Assemble(name, shards);
}

absl::StatusOr<Tensor> Session::ReadVariable(const std::string& name) const {
  std::vector<std::pair<int, Tensor>> shards;
  for (const auto& runtime : runtimes_) {
    if (runtime->FindBinding(name) == nullptr) continue;
    ASSIGN_OR_RETURN(Tensor shard, runtime->ReadVariableShard(name));
    shards.emplace_back(runtime->rank().value(), std::move(shard));
  }
  if (shards.empty()) return absl::NotFoundError(absl::StrCat("the plan has no variable named '", name, "'"));
  return Assemble(name, shards);
}

absl::StatusOr<Tensor> Session::Assemble(const std::string& name,
                                         const std::vector<std::pair<int, Tensor>>& shards) const {
  const TensorBindingProto* first = runtime(shards.front().first)->FindBinding(name);
  const Shape logical(std::vector<int64_t>(first->shard().logical_dims().begin(), first->shard().logical_dims().end()));
  bool partial = false, broadcast = false;
  for (const SbpProto& sbp : first->shard().nd_sbp().sbp()) {
    partial = partial || sbp.kind() == SbpProto::PARTIAL_SUM;
    broadcast = broadcast || sbp.kind() == SbpProto::BROADCAST;
  }
  // Mixed B and P (e.g. a loss on a data x tensor mesh, (B, P)): a partial sum counts each
  // contributor once, so only the copy at mesh coordinate 0 of every B axis takes part.
  const std::vector<std::pair<int, Tensor>>* parts = &shards;
  std::vector<std::pair<int, Tensor>> first_copies;
  if (partial && broadcast) {
    for (const auto& entry : shards) {
      const ShardInfoProto& info = runtime(entry.first)->FindBinding(name)->shard();
      if (info.mesh_coords_size() != info.nd_sbp().sbp_size()) {
        return absl::InvalidArgumentError(absl::StrCat("assembling '", name, "': the plan's shard info of rank ",
                                                       entry.first, " has no mesh coordinates"));
      }
      bool first_copy = true;
      for (int a = 0; a < info.nd_sbp().sbp_size(); ++a) {
        if (info.nd_sbp().sbp(a).kind() == SbpProto::BROADCAST && info.mesh_coords(a) != 0) first_copy = false;
      }
      if (first_copy) first_copies.push_back(entry);
    }
    parts = &first_copies;
  }
  Tensor result(first->shard().logical_dims().empty() ? shards.front().second.desc()
                                                      : TensorDesc{shards.front().second.dtype(), logical});
  // (offset, rank) of the regions written so far, to check broadcast copies against.
  std::vector<std::pair<std::vector<int64_t>, const std::pair<int, Tensor>*>> written;
  for (const auto& entry : *parts) {
    const TensorBindingProto* binding = runtime(entry.first)->FindBinding(name);
    std::vector<int64_t> offset(binding->shard().offset().begin(), binding->shard().offset().end());
    offset.resize(result.shape().num_axes(), 0);
    const Tensor& shard = entry.second;
    const std::pair<int, Tensor>* same = nullptr;
    for (const auto& [o, e] : written) {
      if (o == offset && e->second.shape() == shard.shape()) same = e;
    }
    if (same != nullptr && partial) {
      Tensor sum(shard.desc());
      CopyBlockOut(result, offset, &sum);
      AddTensorInto(shard, &sum);
      CopyBlockIn(sum, offset, &result);
    } else if (same != nullptr) {
      for (int64_t i = 0; i < shard.elem_count(); ++i) {
        if (shard.GetAsDouble(i) != same->second.GetAsDouble(i)) {
          return absl::InternalError(absl::StrCat("broadcast copies of '", name, "' differ between rank ", same->first,
                                                  " and rank ", entry.first, " at element ", i, ": ",
                                                  same->second.GetAsDouble(i), " vs ", shard.GetAsDouble(i)));
        }
      }
    } else {
      CopyBlockIn(shard, offset, &result);
      written.emplace_back(offset, &entry);
    }
  }
  return result;
}

std::string Session::TimelineJson() const {
  std::vector<std::string> parts;
  for (const auto& runtime : runtimes_) {
    std::string events = runtime->TimelineEvents();
    if (!events.empty()) parts.push_back(std::move(events));
  }
  return absl::StrCat("{\"traceEvents\": [\n", absl::StrJoin(parts, ",\n"), "\n]}\n");
}

absl::Status Session::Close() {
  RETURN_IF_ERROR(broken_);
  if (closed_) return absl::OkStatus();
  // Steps started ahead finish first (their outputs are dropped): ending the stream under a
  // running step would leave its variable updates unabsorbed and the drain waiting for them.
  while (finished_ < started_) RETURN_IF_ERROR(FinishStep());
  closed_ = true;
  for (auto& runtime : runtimes_) runtime->EndStream();
  return Wait(
      [this] {
        for (auto& runtime : runtimes_) {
          if (!runtime->Finished()) return false;
        }
        return true;
      },
      "the end-of-data drain");
}

}  // namespace actor
}  // namespace oneflow_like
