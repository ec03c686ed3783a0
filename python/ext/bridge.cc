#include "python/ext/bridge.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/actor/runtime.h"
#include "oneflow_like/actor/step_notifier.h"
#include "oneflow_like/compiler/autograd/autograd_pass.h"
#include "oneflow_like/compiler/driver/compile.h"
#include "oneflow_like/compiler/infer_pass.h"
#include "oneflow_like/compiler/text_format.h"
#include "oneflow_like/core/ops/builtin_ops.h"
#include "oneflow_like/core/status.h"
#include "oneflow_like/core/attr_proto.h"
#include "oneflow_like/core/proto/checkpoint.pb.h"
#include "oneflow_like/train/checkpoint.h"
#include "oneflow_like/train/checkpoint_format.h"
#include "oneflow_like/train/checkpoint_reader.h"
#include "oneflow_like/train/plan_agreement.h"

namespace oneflow_like {
namespace python {
namespace {

std::string NdSbpText(const NdSbpProto& proto) {
  absl::StatusOr<NdSbp> nd = NdSbp::FromProto(proto);
  return nd.ok() ? nd->ToString() : "?";
}

// ---------------------------------------------------------------------------------------------
// All ranks in this process: an actor::Session over the loopback transport.
class SessionRunner : public Runner {
 public:
  explicit SessionRunner(const CompiledPlan& plan) : Runner(plan) {}

  absl::Status Init(const OpRegistry* registry, int64_t watchdog_ms) {
    actor::SessionOptions options;
    options.watchdog_timeout_ms = watchdog_ms;
    ASSIGN_OR_RETURN(session_, actor::Session::Create(plan_, registry, options));
    return absl::OkStatus();
  }
  ~SessionRunner() override {
    if (!closed_ && session_ != nullptr) (void)Close();
  }

  std::vector<int32_t> local_ranks() const override {
    return std::vector<int32_t>(plan_.ranks().begin(), plan_.ranks().end());
  }
  int64_t pieces_per_step() const override { return session_->pieces_per_step(); }
  bool Holds(const std::string& name, int32_t rank) const override { return Binding(name, rank) != nullptr; }
  absl::Status FeedShard(const std::string& name, int32_t rank, const Tensor& shard) override {
    return session_->FeedShard(name, rank, shard);
  }
  absl::Status RunStep() override { return session_->RunStep(); }
  absl::StatusOr<std::vector<Tensor>> FetchShards(const std::string& name, int32_t rank) override {
    std::vector<Tensor> out;
    const int64_t n = session_->FetchCount(name);
    for (int64_t i = 0; i < n; ++i) {
      ASSIGN_OR_RETURN(Tensor t, session_->FetchShard(name, rank, i));
      out.push_back(std::move(t));
    }
    return out;
  }
  absl::StatusOr<Tensor> ReadVariableShard(const std::string& name, int32_t rank) const override {
    actor::Runtime* runtime = session_->runtime(rank);
    if (runtime == nullptr) return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " has no work in this plan"));
    return runtime->ReadVariableShard(name);
  }
  absl::Status WriteVariableShard(const std::string& name, int32_t rank, const Tensor& shard) override {
    actor::Runtime* runtime = session_->runtime(rank);
    if (runtime == nullptr) return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " has no work in this plan"));
    return runtime->WriteVariableShard(name, shard);
  }
  absl::Status Save(const std::string& dir, int64_t step) override {
    train::CheckpointMeta meta;
    meta.step = step;
    meta.plan_hash = 0;
    meta.layout = "python";
    return train::SaveSession(*session_, meta, dir);
  }
  absl::StatusOr<int64_t> Load(const std::string& dir) override {
    ASSIGN_OR_RETURN(train::CheckpointMeta meta, train::LoadSession(session_.get(), dir));
    return meta.step;
  }
  absl::Status Close() override {
    if (closed_ || session_ == nullptr) return absl::OkStatus();
    closed_ = true;
    return session_->Close();
  }

 private:
  std::unique_ptr<actor::Session> session_;
  bool closed_ = false;
};

// ---------------------------------------------------------------------------------------------
// This process's rank of a multi-process job: one actor::Runtime over the job's transport.
class RankRunner : public Runner {
 public:
  RankRunner(const CompiledPlan& plan, Engine* engine) : Runner(plan), engine_(engine) {}
  ~RankRunner() override {
    if (!closed_ && initialized_) (void)Close();
    if (runtime_ != nullptr) runtime_->Stop();
  }

  absl::Status Init() {
    train::DistributedContext* ctx = engine_->context();
    RETURN_IF_ERROR(engine_->CheckSameJob(plan_));  // before any actor exists or data moves
    holds_rank_ = false;
    for (int32_t r : plan_.ranks()) holds_rank_ |= (r == ctx->rank());
    if (holds_rank_) {
      actor::RuntimeEnv env;
      channel_ = engine_->OpenChannel();
      env.transport = channel_.get();
      env.allocator = &allocator_;
      env.registry = &engine_->registry();
      env.step_notifier = &notifier_;
      ASSIGN_OR_RETURN(runtime_, actor::Runtime::Create(plan_, ctx->rank(), std::move(env)));
    }
    // No rank sends before every rank's runtime receives.
    RETURN_IF_ERROR(engine_->Barrier("runner_created"));
    initialized_ = true;
    return absl::OkStatus();
  }

  std::vector<int32_t> local_ranks() const override {
    if (!holds_rank_) return {};
    return {engine_->rank()};
  }
  int64_t pieces_per_step() const override { return std::max<int64_t>(1, plan_.pieces_per_step()); }
  bool Holds(const std::string& name, int32_t rank) const override {
    return rank == engine_->rank() && Binding(name, rank) != nullptr;
  }
  absl::Status FeedShard(const std::string& name, int32_t rank, const Tensor& shard) override {
    RETURN_IF_ERROR(Mine(rank));
    return runtime_->FeedShard(name, shard);
  }
  absl::Status RunStep() override {
    if (!holds_rank_) return absl::OkStatus();
    RETURN_IF_ERROR(engine_->context()->failure());
    RETURN_IF_ERROR(runtime_->StartStep());
    return Wait([this] { return runtime_->StepDone(); }, "a step");
  }
  absl::StatusOr<std::vector<Tensor>> FetchShards(const std::string& name, int32_t rank) override {
    RETURN_IF_ERROR(Mine(rank));
    return runtime_->TakeFetched(name);
  }
  absl::StatusOr<Tensor> ReadVariableShard(const std::string& name, int32_t rank) const override {
    RETURN_IF_ERROR(Mine(rank));
    return runtime_->ReadVariableShard(name);
  }
  absl::Status WriteVariableShard(const std::string& name, int32_t rank, const Tensor& shard) override {
    RETURN_IF_ERROR(Mine(rank));
    return runtime_->WriteVariableShard(name, shard);
  }
  absl::Status Save(const std::string& dir, int64_t step) override {
    train::CheckpointMeta meta;
    meta.step = step;
    meta.layout = "python";
    if (!holds_rank_) {
      return absl::FailedPreconditionError(absl::StrCat("rank ", engine_->rank(), " has no work in this plan: a checkpoint ",
                                                        "needs a shard file from every rank of the job"));
    }
    RETURN_IF_ERROR(train::SaveRankShards(*runtime_, meta, plan_.world_size(), dir));
    RETURN_IF_ERROR(engine_->Barrier("checkpoint_saved"));
    if (engine_->rank() == 0) RETURN_IF_ERROR(train::MarkCheckpointComplete(dir, plan_.world_size()));
    return engine_->Barrier("checkpoint_complete");
  }
  absl::StatusOr<int64_t> Load(const std::string& dir) override {
    int64_t step = 0;
    if (holds_rank_) {
      ASSIGN_OR_RETURN(train::CheckpointMeta meta, train::LoadRankShards(runtime_.get(), dir));
      step = meta.step;
    }
    RETURN_IF_ERROR(engine_->Barrier("checkpoint_loaded"));
    return step;
  }
  absl::Status Close() override {
    if (closed_) return absl::OkStatus();
    closed_ = true;
    if (holds_rank_) {
      runtime_->EndStream();
      RETURN_IF_ERROR(Wait([this] { return runtime_->Finished(); }, "the end-of-data drain"));
    }
    return engine_->Barrier("runner_closed");
  }

 private:
  absl::Status Mine(int32_t rank) const {
    if (!holds_rank_ || rank != engine_->rank()) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is not run by this process (rank ",
                                                     engine_->rank(), ")"));
    }
    return absl::OkStatus();
  }

  absl::Status Wait(const std::function<bool()>& done, const std::string& what) {
    train::DistributedContext* ctx = engine_->context();
    int64_t last_progress = -1;
    auto last_change = std::chrono::steady_clock::now();
    while (true) {
      const int64_t seen = notifier_.count();
      RETURN_IF_ERROR(runtime_->status());
      if (done()) return absl::OkStatus();
      absl::Status failure = ctx->failure();
      if (!failure.ok()) {
        return absl::Status(failure.code(),
                            absl::StrCat("rank ", ctx->rank(), " stops while waiting for ", what, ": ", failure.message()));
      }
      const auto now = std::chrono::steady_clock::now();
      if (runtime_->progress() != last_progress) {
        last_progress = runtime_->progress();
        last_change = now;
      } else if (now - last_change > std::chrono::milliseconds(engine_->watchdog_ms())) {
        return absl::DeadlineExceededError(absl::StrCat("watchdog: no actor of rank ", ctx->rank(), " progressed for ",
                                                        engine_->watchdog_ms(), " ms while waiting for ", what, ":\n",
                                                        runtime_->Report(1000)));
      }
      notifier_.WaitChange(seen, std::chrono::milliseconds(10));
    }
  }

  Engine* engine_;
  bool holds_rank_ = false;
  bool initialized_ = false;
  bool closed_ = false;
  CpuAllocator allocator_;
  actor::StepNotifier notifier_;
  std::unique_ptr<comm::Transport> channel_;  // outlives runtime_
  std::unique_ptr<actor::Runtime> runtime_;
};

}  // namespace

std::vector<int32_t> CompiledPlan::job_ranks() const {
  if (layout != nullptr) return layout->ranks();
  return std::vector<int32_t>(plan.ranks().begin(), plan.ranks().end());
}

Runner::Runner(const CompiledPlan& plan) : compiled_(plan), plan_(compiled_.plan) {
  for (const RankPlanProto& rank : plan_.rank_plans()) {
    for (const TensorBindingProto& binding : rank.bindings()) bindings_[{binding.tensor_name(), rank.rank()}] = binding;
  }
}

const TensorBindingProto* Runner::Binding(const std::string& name, int32_t rank) const {
  auto it = bindings_.find({name, rank});
  if (it != bindings_.end()) return &it->second;
  if (compiled_.layout == nullptr || rank == plan_.per_rank().rank()) return nullptr;  // lowered here: none
  auto derived = derived_.find({name, rank});
  if (derived == derived_.end()) derived = derived_.emplace(std::make_pair(name, rank), compiled_.layout->Binding(name, rank)).first;
  return derived->second.has_value() ? &*derived->second : nullptr;
}

// ---------------------------------------------------------------------------------------------
Engine::Engine(bool use_launcher_env) {
  absl::Status registered = RegisterBuiltinOps(&registry_);
  if (!registered.ok()) {  // a build defect, not a user error
    fprintf(stderr, "oneflow_like: registering the built-in ops failed: %s\n", std::string(registered.message()).c_str());
    abort();
  }
  distributed_ = use_launcher_env && train::LaunchedByLauncher();
  if (distributed_) {
    absl::StatusOr<train::DistributedEnv> env = train::DistributedEnvFromEnviron();
    if (env.ok()) {
      rank_ = env->rank;
      world_size_ = env->world_size;
      local_rank_ = env->local_rank;
    }
  }
  if (const char* w = getenv("OL_WATCHDOG_MS")) watchdog_ms_ = std::max<int64_t>(100, atoll(w));
}

Engine::~Engine() {
  if (context_ != nullptr && !shut_down_) (void)Shutdown();
  hub_.reset();
}

std::vector<std::string> Engine::OpTypes() const { return registry_.Names(); }

absl::StatusOr<std::vector<TensorInfo>> Engine::Infer(const std::string& text) const {
  ASSIGN_OR_RETURN(compiler::Graph graph, compiler::ParseGraph(text, registry_));
  compiler::InferPass infer;
  RETURN_IF_ERROR(infer.Run(&graph).status());
  std::vector<TensorInfo> out;
  for (const compiler::TensorNode& t : graph.tensors()) {
    TensorInfo info;
    info.name = t.name;
    if (t.desc.has_value()) {
      info.shape = t.desc->shape.dims();
      info.dtype = DataTypeName(t.desc->dtype);
    }
    if (t.placement.has_value()) info.placement = t.placement->ToString();
    if (t.pinned_nd_sbp.has_value()) info.nd_sbp = t.pinned_nd_sbp->ToString();
    out.push_back(std::move(info));
  }
  return out;
}

absl::StatusOr<CompiledPlan> Engine::Compile(const CompileRequest& request) const {
  ASSIGN_OR_RETURN(compiler::Graph graph, compiler::ParseGraph(request.text, registry_));
  compiler::CompileOptions options;
  options.world_size = request.world_size;
  const bool per_rank = distributed_ && !request.whole_plan;
  if (per_rank) {
    if (request.world_size != 0 && request.world_size != world_size_) {
      return absl::InvalidArgumentError(absl::StrCat("a plan for ", request.world_size, " ranks in a job of WORLD_SIZE=",
                                                     world_size_, " (hint: ask for the whole plan, or run it locally)"));
    }
    options.world_size = world_size_;
    options.only_rank = rank_;
  }
  if (!request.gradients_of.empty() || request.gradients_only) {
    compiler::InferPass infer;
    RETURN_IF_ERROR(infer.Run(&graph).status());
    compiler::AutogradPass autograd;
    RETURN_IF_ERROR(autograd.Run(&graph).status());
    for (const std::string& name : request.gradients_of) {
      compiler::TensorId v = graph.FindTensor(name);
      if (!v.valid()) return absl::InvalidArgumentError(absl::StrCat("no tensor named '", name, "' in the job"));
      compiler::TensorId g = compiler::GradientOf(graph, v);
      if (!g.valid()) {
        return absl::InvalidArgumentError(absl::StrCat("'", name, "' gets no gradient from the loss '",
                                                       graph.config().loss(), "' (does the loss depend on it?)"));
      }
      graph.mutable_tensor(g)->is_output = true;
    }
    // Gradients only: no update. With no optimizer the later autograd/optimizer passes do nothing.
    graph.mutable_config()->clear_optimizer();
    graph.mutable_config()->clear_loss();
  }
  ASSIGN_OR_RETURN(compiler::GlobalDecisions decisions, compiler::RunGlobalPasses(std::move(graph), options));
  CompiledPlan out;
  ASSIGN_OR_RETURN(out.plan, compiler::LowerDecisions(decisions, options));
  if (per_rank) out.layout = std::make_shared<const JobLayout>(JobLayout::FromGraph(decisions.graph));
  return out;
}

absl::Status Engine::CheckSameJob(const PlanProto& plan) {
  if (!distributed_) return absl::OkStatus();
  RETURN_IF_ERROR(EnsureJoined());
  RETURN_IF_ERROR(context_->failure());
  // As oltrain's preflight (DistributedContext::CheckPlan), under a key of this runner's own.
  const std::string mine = train::PlanFingerprint(plan);
  const std::string prefix = absl::StrCat("py/", ++sequence_, "/plan/");
  RETURN_IF_ERROR(context_->control()->Set(absl::StrCat(prefix, rank_), mine));
  absl::StatusOr<std::string> first = context_->control()->Get(absl::StrCat(prefix, 0), watchdog_ms_);
  if (absl::IsDeadlineExceeded(first.status())) {  // else the job's failure, naming its rank
    return absl::DeadlineExceededError(absl::StrCat("rank ", rank_, ": rank 0 published no plan to compare with (",
                                                    first.status().message(), ")"));
  }
  RETURN_IF_ERROR(first.status());
  absl::Status same = train::CompareWithRank0(mine, *first, rank_);
  if (!same.ok()) context_->Abort(std::string(same.message()));  // the others stop naming this rank
  return same;
}

absl::Status Engine::EnsureJoined() {
  if (!distributed_ || context_ != nullptr) return absl::OkStatus();
  if (shut_down_) return absl::FailedPreconditionError("the job has ended (ol.env.shutdown was called)");
  ASSIGN_OR_RETURN(train::DistributedEnv env, train::DistributedEnvFromEnviron());
  ASSIGN_OR_RETURN(context_, train::DistributedContext::Create(env));
  hub_ = std::make_unique<ChannelHub>(context_->transport());
  return absl::OkStatus();
}

absl::Status Engine::Barrier(const std::string& what) {
  if (!distributed_) return absl::OkStatus();
  RETURN_IF_ERROR(EnsureJoined());
  RETURN_IF_ERROR(context_->failure());
  return context_->control()->Barrier(absl::StrCat("py/", ++sequence_, "/", what), watchdog_ms_);
}

absl::StatusOr<std::vector<std::string>> Engine::AllGather(const std::string& value) {
  if (!distributed_) return std::vector<std::string>{value};
  RETURN_IF_ERROR(EnsureJoined());
  RETURN_IF_ERROR(context_->failure());
  const std::string prefix = absl::StrCat("py/", ++sequence_, "/gather/");
  RETURN_IF_ERROR(context_->control()->Set(absl::StrCat(prefix, rank_), value));
  std::vector<std::string> out;
  for (int32_t r = 0; r < world_size_; ++r) {
    absl::StatusOr<std::string> v = context_->control()->Get(absl::StrCat(prefix, r), watchdog_ms_);
    if (!v.ok()) {
      return absl::Status(v.status().code(), absl::StrCat("waiting for rank ", r, "'s value: ", v.status().message()));
    }
    out.push_back(*std::move(v));
  }
  return out;
}

absl::Status Engine::Shutdown() {
  if (shut_down_) return absl::OkStatus();
  absl::Status status;
  if (context_ != nullptr) {
    status = Barrier("shutdown");
    context_->MarkFinished();
  }
  shut_down_ = true;
  return status;
}

void Engine::Abort(const std::string& reason) {
  if (context_ != nullptr) context_->Abort(reason);
}

absl::StatusOr<std::unique_ptr<Runner>> Engine::NewRunner(const CompiledPlan& plan) {
  if (distributed_) {
    RETURN_IF_ERROR(EnsureJoined());
    if (plan.plan.world_size() > world_size_) {
      return absl::InvalidArgumentError(absl::StrCat("the plan uses ranks up to ", plan.plan.world_size() - 1,
                                                     " but the job has WORLD_SIZE=", world_size_,
                                                     " (hint: a placement names a rank outside the world)"));
    }
    auto runner = std::make_unique<RankRunner>(plan, this);
    RETURN_IF_ERROR(runner->Init());
    return std::unique_ptr<Runner>(std::move(runner));
  }
  if (plan.per_rank()) {
    return absl::InvalidArgumentError(absl::StrCat("a per-rank plan (rank ", plan.plan.per_rank().rank(),
                                                   ") runs only under its job's launcher (olrun), one process per rank"));
  }
  auto runner = std::make_unique<SessionRunner>(plan);
  RETURN_IF_ERROR(runner->Init(&registry_, watchdog_ms_));
  return std::unique_ptr<Runner>(std::move(runner));
}

absl::StatusOr<std::map<std::string, std::pair<std::vector<int64_t>, std::string>>> CheckpointVariables(
    const std::string& dir) {
  RETURN_IF_ERROR(train::CheckpointReader::Open(dir).status());  // COMPLETE and consistent
  std::map<std::string, std::pair<std::vector<int64_t>, std::string>> out;
  for (int32_t rank = 0;; ++rank) {
    const std::string path = absl::StrCat(dir, "/rank_", rank, "/meta.pb");
    if (access(path.c_str(), R_OK) != 0) break;
    ASSIGN_OR_RETURN(std::string bytes, train::ReadWholeFile(path));
    CheckpointRankProto meta;
    if (!meta.ParseFromString(bytes)) return absl::InvalidArgumentError(absl::StrCat(path, ": not a checkpoint meta"));
    for (const CheckpointVariableProto& v : meta.variables()) {
      ASSIGN_OR_RETURN(DataType dt, DataTypeFromProto(v.dtype()));
      out[v.name()] = {std::vector<int64_t>(v.logical_dims().begin(), v.logical_dims().end()), DataTypeName(dt)};
    }
  }
  return out;
}

std::string DescribeSbp(const PlanProto& plan) {
  std::string out;
  for (const OpSbpDecisionProto& d : plan.sbp_decisions()) {
    if (d.chosen() < 0 || d.chosen() >= d.candidates_size()) continue;
    const SbpCandidateProto& c = d.candidates(d.chosen());
    std::vector<std::string> ins, outs;
    for (const NdSbpProto& s : c.inputs()) ins.push_back(NdSbpText(s));
    for (const NdSbpProto& s : c.outputs()) outs.push_back(NdSbpText(s));
    absl::StrAppend(&out, d.op_name(), ": ", d.op_type(), "  in ", absl::StrJoin(ins, ", "), " -> out ",
                    absl::StrJoin(outs, ", "), "\n");
  }
  return out;
}

}  // namespace python
}  // namespace oneflow_like
