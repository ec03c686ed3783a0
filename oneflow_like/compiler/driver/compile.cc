#include "oneflow_like/compiler/driver/compile.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/autograd/autograd_pass.h"
#include "oneflow_like/compiler/autograd/optimizer_pass.h"
#include "oneflow_like/compiler/driver/agreement.h"
#include "oneflow_like/compiler/infer_pass.h"
#include "oneflow_like/compiler/pass.h"
#include "oneflow_like/compiler/pipeline/stage_balance_pass.h"
#include "oneflow_like/compiler/verifier.h"
#include "oneflow_like/compiler/plan/plan_hash.h"

namespace oneflow_like {
namespace compiler {
namespace {

// Times phases and reports them to the options' callback and the report.
class PhaseClock {
 public:
  PhaseClock(const CompileOptions& options, CompileReport* report) : options_(options), report_(report) {}
  void Done(const std::string& phase) {
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - start_).count();
    start_ = now;
    if (report_ != nullptr) report_->phase_seconds.emplace_back(phase, seconds);
    if (options_.on_phase) options_.on_phase(phase, seconds);
  }

 private:
  const CompileOptions& options_;
  CompileReport* report_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// Runs one pass, then (in tests) the graph verifier, as PassPipeline does, and times it.
absl::Status RunPass(Pass* pass, Graph* graph, const CompileOptions& options, PhaseClock* clock) {
  absl::StatusOr<bool> changed = pass->Run(graph);
  if (!changed.ok()) return changed.status();
  if (options.verify_each_pass) {
    absl::Status verified = VerifyGraph(*graph);
    if (!verified.ok()) {
      return absl::InternalError(
          absl::StrCat("pass '", pass->name(), "' broke a graph invariant: ", verified.message()));
    }
  }
  clock->Done(pass->name());
  return absl::OkStatus();
}

}  // namespace

LowerOptions LowerOptionsFor(const CompileOptions& options) {
  LowerOptions lower_options;
  lower_options.boxing = options.boxing;
  lower_options.bucket_bytes = options.bucket_bytes;
  lower_options.boxing_options.cost = options.cost;
  lower_options.world_size = options.world_size;
  lower_options.reuse_memory = options.reuse_memory;
  lower_options.compute_streams = options.compute_streams;
  lower_options.only_rank = options.only_rank;
  return lower_options;
}

absl::StatusOr<GlobalDecisions> RunGlobalPasses(Graph graph, const CompileOptions& options, CompileReport* report) {
  PhaseClock clock(options, report);
  InferPass infer;
  AutogradPass autograd;
  OptimizerPass optimizer;
  // Before inference: with config.stage_placements it stages and places every op (and infers);
  // without, it does nothing (the graph is not inferred yet, so it skips the verifier).
  StageBalanceOptions stage_options;
  stage_options.cost = options.cost;
  StageBalancePass stage_balance(stage_options);
  RETURN_IF_ERROR(stage_balance.Run(&graph).status());
  clock.Done(stage_balance.name());
  if (report != nullptr) report->stages = stage_balance.report();
  RETURN_IF_ERROR(RunPass(&infer, &graph, options, &clock));
  RETURN_IF_ERROR(RunPass(&autograd, &graph, options, &clock));
  RETURN_IF_ERROR(RunPass(&optimizer, &graph, options, &clock));
  RETURN_IF_ERROR(RunPass(&infer, &graph, options, &clock));

  SbpPassOptions sbp_options;
  sbp_options.boxing.cost = options.cost;
  sbp_options.solver = options.sbp_solver;
  SbpPass sbp(sbp_options);
  RETURN_IF_ERROR(RunPass(&sbp, &graph, options, &clock));
  if (report != nullptr) {
    report->sbp = sbp.stats();
    report->num_logical_ops = graph.num_ops();
  }
  GlobalDecisions decisions{std::move(graph), {}};
  for (const OpSbpDecisionProto& d : sbp.source_decisions()) decisions.sbp_decisions.push_back(d);
  for (const OpSbpDecisionProto& d : sbp.decisions()) decisions.sbp_decisions.push_back(d);
  return decisions;
}

namespace {

// LowerDecisions; `movable` non-null: the decisions to move into the plan (else copied).
absl::StatusOr<PlanProto> Lower(const GlobalDecisions& decisions, std::vector<OpSbpDecisionProto>* movable,
                                const CompileOptions& options, CompileReport* report) {
  PhaseClock clock(options, report);
  const Graph& graph = decisions.graph;
  const LowerOptions lower_options = LowerOptionsFor(options);
  ASSIGN_OR_RETURN(PlanProto plan, LowerToPlan(graph, lower_options));
  plan.mutable_sbp_decisions()->Reserve(static_cast<int>(decisions.sbp_decisions.size()));
  if (movable != nullptr) {
    for (OpSbpDecisionProto& d : *movable) *plan.add_sbp_decisions() = std::move(d);
    movable->clear();
  } else {
    for (const OpSbpDecisionProto& d : decisions.sbp_decisions) *plan.add_sbp_decisions() = d;
  }
  if (plan.has_per_rank()) {
    *plan.mutable_per_rank()->mutable_agreement() = MakeJobAgreement(graph, lower_options, plan.world_size());
  }
  clock.Done("lower");

  if (options.verify_plan) {
    absl::Status verified =
        plan.has_per_rank() ? VerifyRankPlan(plan, options.plan_verifier) : VerifyPlan(plan, options.plan_verifier);
    if (!verified.ok()) {
      return absl::InternalError(absl::StrCat("compiled plan of job '", graph.name(),
                                              "' failed verification (a compiler bug): ", verified.message()));
    }
    clock.Done("verify_plan");
  }
  SealPlan(&plan);
  clock.Done("seal");
  return plan;
}

}  // namespace

absl::StatusOr<PlanProto> LowerDecisions(const GlobalDecisions& decisions, const CompileOptions& options,
                                         CompileReport* report) {
  return Lower(decisions, nullptr, options, report);
}

absl::StatusOr<PlanProto> LowerDecisions(GlobalDecisions&& decisions, const CompileOptions& options,
                                         CompileReport* report) {
  return Lower(decisions, &decisions.sbp_decisions, options, report);
}

absl::StatusOr<PlanProto> Compile(Graph graph, const CompileOptions& options, CompileReport* report) {
  ASSIGN_OR_RETURN(GlobalDecisions decisions, RunGlobalPasses(std::move(graph), options, report));
  return LowerDecisions(std::move(decisions), options, report);
}

absl::StatusOr<PlanProto> CompileJob(const JobProto& job, const OpRegistry& registry, const CompileOptions& options,
                                     CompileReport* report) {
  ASSIGN_OR_RETURN(Graph graph, Graph::FromJobProto(job, registry));
  return Compile(std::move(graph), options, report);
}

}  // namespace compiler
}  // namespace oneflow_like
