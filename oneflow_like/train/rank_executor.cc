#include "oneflow_like/train/rank_executor.h"

#include <unistd.h>

#include <chrono>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "oneflow_like/comm/control_store.h"
#include "oneflow_like/comm/gloo_collective.h"
#include "oneflow_like/core/status.h"
#include "oneflow_like/train/fault_injection.h"

namespace oneflow_like {
namespace train {
namespace {

// Whether a shard of a (scalar) output takes part in the logical value: one copy along every
// broadcast axis, every contributor along partial-sum axes. Split axes are not for scalars.
absl::StatusOr<bool> Contributes(const ShardInfoProto& shard, const std::string& name) {
  if (shard.mesh_coords_size() != shard.nd_sbp().sbp_size()) {
    return absl::InternalError(absl::StrCat("output '", name, "': the plan's shard info has no mesh coordinates"));
  }
  for (int axis = 0; axis < shard.nd_sbp().sbp_size(); ++axis) {
    const SbpProto& sbp = shard.nd_sbp().sbp(axis);
    if (sbp.kind() == SbpProto::SPLIT) {
      return absl::UnimplementedError(absl::StrCat("output '", name, "' is split across ranks; only scalars are ",
                                                   "assembled across processes"));
    }
    if (sbp.kind() != SbpProto::PARTIAL_SUM && shard.mesh_coords(axis) != 0) return false;
  }
  return true;
}

class RankExecutor : public StepExecutor {
 public:
  RankExecutor(const PlanProto& plan, DistributedContext* context, actor::SessionOptions options)
      : context_(context), options_(std::move(options)), pieces_(std::max<int64_t>(1, plan.pieces_per_step())) {
    for (const RankPlanProto& rank : plan.rank_plans()) {
      for (const TensorBindingProto& binding : rank.bindings()) {
        names_.insert(binding.tensor_name());
        if (binding.kind() == TensorBindingProto::OUTPUT) holders_[binding.tensor_name()].push_back(rank.rank());
      }
    }
    if (plan.has_per_rank()) {  // this rank's plan alone: the job's inputs and outputs are listed
      holders_.clear();
      for (const std::string& name : plan.per_rank().inputs()) names_.insert(name);
      for (const OutputHoldersProto& output : plan.per_rank().outputs()) {
        names_.insert(output.tensor_name());
        holders_[output.tensor_name()].assign(output.ranks().begin(), output.ranks().end());
      }
    }
  }
  ~RankExecutor() override {
    if (runtime_ != nullptr) runtime_->Stop();
    runtime_.reset();  // its collective bodies (communicators) before the backend and the store
  }

  absl::Status Init(const PlanProto& plan, const OpRegistry* registry) {
    actor::RuntimeEnv env;
    env.transport = context_->transport();
    env.allocator = &allocator_;
    env.registry = registry;
    env.on_act = options_.on_act;
    env.record_timeline = options_.record_timeline;
    env.inplace_variable_updates = options_.inplace_variable_updates;
    env.stream_ordered_handoffs = options_.stream_ordered_handoffs;
    env.order_collectives = options_.order_collectives;
    env.intra_op_threads = options_.intra_op_threads;
    env.device_backend = options_.device_backend;
    env.step_notifier = &notifier_;
    bool collectives = false;
    for (const RankPlanProto& rank : plan.rank_plans()) {
      for (const TaskProto& task : rank.tasks()) collectives |= task.type() == TaskProto::COLLECTIVE;
    }
    if (collectives) {  // gloo on this rank's data address, meeting through the control plane
      store_ = std::make_unique<comm::ControlStore>(context_->control(), "collectives/");
      comm::GlooOptions gloo;
      gloo.hostname = context_->env().bind_address;
      // A call waits for the slowest member's arrival; dead peers are caught by the heartbeats.
      gloo.timeout_ms = context_->env().connect_timeout_ms;
      gloo.transport = context_->env().gloo_transport;  // OL_GLOO_TRANSPORT
      gloo.job_token = context_->env().job_token;       // every gloo connection's hello (kOl)
      if (options_.collective_factory) {  // e.g. NCCL for cuda plans (oltrain_cuda)
        ASSIGN_OR_RETURN(collectives_, options_.collective_factory(store_.get(), context_->rank(), context_->world_size()));
      } else {
        ASSIGN_OR_RETURN(collectives_, comm::CreateGlooBackend(store_.get(), context_->rank(), context_->world_size(), gloo));
      }
      env.collectives = collectives_.get();
    }
    ASSIGN_OR_RETURN(runtime_, actor::Runtime::Create(plan, context_->rank(), std::move(env)));
    // No rank starts a step (and sends) before every rank's runtime receives.
    return Barrier("runtimes_created");
  }

  int64_t pieces_per_step() const override { return pieces_; }

  absl::Status Feed(const std::string& name, const Tensor& logical) override {
    if (names_.count(name) == 0) return absl::InvalidArgumentError(absl::StrCat("the plan has no input named '", name, "'"));
    if (runtime_->FindBinding(name) == nullptr) return absl::OkStatus();  // another rank's input
    return runtime_->FeedLogical(name, logical);
  }

  absl::Status StartStep(int64_t step) override {
    if (started_ - finished_ >= actor::Runtime::kMaxStepsInFlight) {
      return absl::FailedPreconditionError(absl::StrCat("StartStep(", step, ") while ", started_ - finished_,
                                                        " steps are still running (FinishStep first)"));
    }
    MaybeInjectFault("step", context_->rank(), step);
    context_->control()->ReportStep(step);
    RETURN_IF_ERROR(context_->failure());
    RETURN_IF_ERROR(runtime_->StartStep());
    ++started_;
    return absl::OkStatus();
  }

  absl::Status FinishStep(int64_t step) override {
    if (finished_ >= started_) return absl::FailedPreconditionError(absl::StrCat("FinishStep(", step, ") without a started step"));
    // The runtime's steps count from its creation; the oldest unfinished one is finished_ + 1.
    const int64_t need = runtime_->steps_started() - (started_ - finished_ - 1);
    RETURN_IF_ERROR(Wait([this, need] { return runtime_->StepsDone() >= need; }, absl::StrCat("step ", step)));
    ++finished_;
    return absl::OkStatus();
  }

  absl::StatusOr<double> MeanScalar(const std::string& name, int64_t step) override {
    auto holders = holders_.find(name);
    if (holders == holders_.end()) return absl::InvalidArgumentError(absl::StrCat("the plan has no output named '", name, "'"));
    if (const TensorBindingProto* binding = runtime_->FindBinding(name)) {
      ASSIGN_OR_RETURN(std::vector<Tensor> shards, runtime_->TakeFetched(name));
      ASSIGN_OR_RETURN(bool contributes, Contributes(binding->shard(), name));
      std::string values;  // one float per firing, 0 for a copy that does not take part
      for (const Tensor& shard : shards) {
        absl::StrAppend(&values, values.empty() ? "" : " ",
                        absl::StrFormat("%.9g", contributes ? static_cast<float>(shard.GetAsDouble(0)) : 0.0f));
      }
      RETURN_IF_ERROR(context_->control()->Set(Key(name, step, context_->rank()), values));
    }
    // Per firing, the float sum over ranks in rank order (as Session::Fetch assembles partial
    // sums), then the mean over firings in double: the same number an in-process run prints.
    std::vector<float> per_firing;
    for (int32_t rank : holders->second) {
      ASSIGN_OR_RETURN(std::string text, context_->control()->Get(Key(name, step, rank), options_.watchdog_timeout_ms));
      std::vector<std::string> parts = absl::StrSplit(text, ' ');
      if (per_firing.empty()) per_firing.assign(parts.size(), 0.0f);
      if (parts.size() != per_firing.size()) {
        return absl::DataLossError(absl::StrCat("'", name, "' from rank ", rank, " has ", parts.size(),
                                                " firings, other ranks ", per_firing.size()));
      }
      for (size_t i = 0; i < parts.size(); ++i) {
        float value = 0;
        if (!absl::SimpleAtof(parts[i], &value)) {
          return absl::DataLossError(absl::StrCat("malformed value of '", name, "' from rank ", rank, ": '", text, "'"));
        }
        per_firing[i] += value;
      }
    }
    if (per_firing.empty()) return absl::InternalError(absl::StrCat("the step produced no '", name, "'"));
    double total = 0;
    for (float value : per_firing) total += value;
    return total / static_cast<double>(per_firing.size());
  }

  std::vector<actor::Runtime*> local_runtimes() const override { return {runtime_.get()}; }
  int32_t world_size() const override { return context_->world_size(); }
  absl::Status Barrier(const std::string& name) override {
    RETURN_IF_ERROR(context_->failure());
    return context_->control()->Barrier(name, options_.watchdog_timeout_ms);
  }

  absl::Status Close() override {
    // A step started ahead finishes first (see Session::Close).
    while (finished_ < started_) RETURN_IF_ERROR(FinishStep(-1));
    runtime_->EndStream();
    RETURN_IF_ERROR(Wait([this] { return runtime_->Finished(); }, "the end-of-data drain"));
    RETURN_IF_ERROR(Barrier("closed"));
    context_->MarkFinished();
    return absl::OkStatus();
  }

  bool leader() const override { return context_->rank() == 0; }
  std::string Description() const override {
    return absl::StrCat("one process per rank (this is rank ", context_->rank(), ", pid ", getpid(), " on ",
                        context_->env().host, "), ", context_->transport_description());
  }

 private:
  static std::string Key(const std::string& name, int64_t step, int32_t rank) {
    return absl::StrCat("scalar/", name, "/", step, "/", rank);
  }

  absl::Status Wait(const std::function<bool()>& done, const std::string& what) {
    int64_t last_progress = -1;
    auto last_change = std::chrono::steady_clock::now();
    while (true) {
      const int64_t seen = notifier_.count();  // before the checks: no event slips between
      RETURN_IF_ERROR(runtime_->status());
      if (done()) return absl::OkStatus();
      absl::Status failure = context_->failure();
      if (!failure.ok()) {
        return absl::Status(failure.code(), absl::StrCat("rank ", context_->rank(), " stops while waiting for ", what,
                                                         ": ", failure.message()));
      }
      const auto now = std::chrono::steady_clock::now();
      if (runtime_->progress() != last_progress) {
        last_progress = runtime_->progress();
        last_change = now;
      } else if (now - last_change > std::chrono::milliseconds(options_.watchdog_timeout_ms)) {
        return absl::DeadlineExceededError(absl::StrCat("watchdog: no actor of rank ", context_->rank(),
                                                        " progressed for ", options_.watchdog_timeout_ms,
                                                        " ms while waiting for ", what, ":\n", runtime_->Report(1000)));
      }
      // Sleep until a step event, a finished actor or a failure of this runtime; wake at least
      // every 10 ms for the job's failures (control plane) and the watchdog.
      notifier_.WaitChange(seen, std::chrono::milliseconds(10));
    }
  }

  DistributedContext* context_;
  actor::SessionOptions options_;
  int64_t pieces_;
  int64_t started_ = 0, finished_ = 0;  // steps, by StartStep / FinishStep
  std::set<std::string> names_;
  std::map<std::string, std::vector<int32_t>> holders_;  // output -> ranks holding a shard
  CpuAllocator allocator_;
  actor::StepNotifier notifier_;  // declared before runtime_: outlives it
  std::unique_ptr<comm::ControlStore> store_;                  // plans with COLLECTIVE tasks
  std::unique_ptr<comm::CollectiveBackend> collectives_;
  std::unique_ptr<actor::Runtime> runtime_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StepExecutor>> CreateRankExecutor(const PlanProto& plan, const OpRegistry* registry,
                                                                 actor::SessionOptions options,
                                                                 DistributedContext* context) {
  auto executor = std::make_unique<RankExecutor>(plan, context, std::move(options));
  RETURN_IF_ERROR(executor->Init(plan, registry));
  return std::unique_ptr<StepExecutor>(std::move(executor));
}

}  // namespace train
}  // namespace oneflow_like
