// The compiler's entry point: a logical job in, a verified, sealed Plan out.
//
//   Graph (text format, JobProto or GraphBuilder)
//     -> stage_balance  with config.stage_placements: stages by cost      (pipeline/stage_balance_pass.h)
//     -> infer_shapes   shapes, dtypes, placements, pinned-SBP checks       (infer_pass.h)
//     -> autograd       backward ops, loss scaling, recompute clones       (autograd/autograd_pass.h)
//     -> optimizer      update ops, state variables, ZeRO-1/2 pins         (autograd/optimizer_pass.h)
//     -> infer_shapes   (again, for what the two passes added)
//     -> sbp_selection  an NdSbp signature per op, with costed candidates  (sbp/sbp_pass.h)
//     -> lower          boxing, pipeline, tasks, registers, memory         (lower/lower.h)
//     -> verify_plan    producers, transfers, collective order, deadlock   (plan/plan_verifier.h)
//     -> seal           content hash                                       (plan/plan_hash.h)
//
// Per rank (CompileOptions::only_rank = r, what each process of a large job does): the same
// global passes (they are small: the logical graph), then lower only rank r's plan (lower.h;
// time and memory independent of the world size), verify what rank r can check alone
// (VerifyRankPlan: memory bounds, stream order, registers, its collectives' geometry) and record
// PlanProto.per_rank.agreement (agreement.h): a digest of the global decisions the ranks compare
// before any data moves. The whole plan's checks across ranks (both ends of every transfer,
// collective order on every member, the deadlock simulation) run on the whole plan:
// `olplan verify`. A per-rank plan's rank plan equals the whole plan's byte for byte
// (driver/per_rank_compile_test.cc).
//
// Example:
//   ASSIGN_OR_RETURN(Graph g, ParseGraph(kMlpText, registry));
//   ASSIGN_OR_RETURN(PlanProto plan, Compile(std::move(g), CompileOptions{}));
//   // plan.content_hash() is the same on every rank and every run for the same job/options.
//
// The job's own errors come back unchanged (InvalidArgument naming the op, tensors, shapes and
// SBPs, with a hint); a plan that fails verification is an InternalError (a compiler bug).
// Deterministic and free of global state: every rank can compile locally and compare hashes.
// Thread-compatible (no shared mutable state; concurrent Compile calls are fine).
#ifndef ONEFLOW_LIKE_COMPILER_DRIVER_COMPILE_H_
#define ONEFLOW_LIKE_COMPILER_DRIVER_COMPILE_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "oneflow_like/compiler/graph.h"
#include "oneflow_like/compiler/lower/lower.h"
#include "oneflow_like/compiler/pipeline/stage_balance_pass.h"
#include "oneflow_like/compiler/plan/plan_verifier.h"
#include "oneflow_like/compiler/sbp/sbp_pass.h"
#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace compiler {

struct CompileOptions {
  // Link and compute parameters, shared by SBP selection and boxing (cost_model.h defaults:
  // 8 ranks per node, loopback TCP within a node, 10 GbE across).
  CostConfig cost;
  // Point-to-point (CPU/TCP) or collective (GPU/NCCL-style) boxing tasks.
  BoxingStyle boxing = BoxingStyle::kPointToPoint;
  // Data-parallel gradient buckets of collective boxing (LowerOptions::bucket_bytes; 0 = off).
  int64_t bucket_bytes = LowerOptions().bucket_bytes;
  // Share bytes between registers with disjoint lifetimes (lower.h, plan/memory_planner.h).
  // The runtime makes actors whose registers share bytes take turns in task order, so results
  // are identical with and without (tests/e2e/parallel_training_test.cc checks bit equality).
  // false: every register has bytes of its own (planned bytes = the naive sum).
  bool reuse_memory = true;
  // Compute streams per device (LowerOptions::compute_streams): 1, or 2 (gradients for the
  // optimizer on a second stream).
  int32_t compute_streams = 1;
  // Number of processes of the job; 0 = 1 + the largest rank any placement uses.
  int32_t world_size = 0;
  // -1: the whole plan. r >= 0: rank r's plan alone (see above; LowerOptions::only_rank).
  int32_t only_rank = -1;
  // Run the graph verifier after every graph pass (tests; costs one Infer per op per pass).
  bool verify_each_pass = false;
  // Verify the finished plan (the deadlock simulation is linear in tasks x pieces).
  bool verify_plan = true;
  PlanVerifierOptions plan_verifier;
  // SBP solver options (algorithm, local-search rounds); `cost` overrides its cost config.
  SbpSolverOptions sbp_solver;
  // Called after each phase with its name and wall seconds (progress output on long compiles).
  std::function<void(const std::string& phase, double seconds)> on_phase;
};

struct CompileReport {
  std::vector<std::pair<std::string, double>> phase_seconds;  // in pipeline order
  SbpPassStats sbp;
  StageBalanceReport stages;  // empty unless config.stage_placements asked for balancing
  int64_t num_logical_ops = 0;  // after autograd and optimizer
};

// Compiles `graph` (as built or parsed: not yet inferred). `report` may be null.
absl::StatusOr<PlanProto> Compile(Graph graph, const CompileOptions& options = {}, CompileReport* report = nullptr);

// The two halves of Compile, for callers that lower one job's graph several times (tests, tools:
// every rank's plan from one run of the global passes).
struct GlobalDecisions {
  Graph graph;  // after stage balancing, inference, autograd, optimizer and SBP selection
  std::vector<OpSbpDecisionProto> sbp_decisions;  // PlanProto.sbp_decisions
};
absl::StatusOr<GlobalDecisions> RunGlobalPasses(Graph graph, const CompileOptions& options = {},
                                                CompileReport* report = nullptr);
// Lowers (the whole plan, or options.only_rank's), verifies and seals. `report` gets the phases.
absl::StatusOr<PlanProto> LowerDecisions(const GlobalDecisions& decisions, const CompileOptions& options = {},
                                         CompileReport* report = nullptr);
// The same, moving the SBP decisions into the plan instead of copying them (Compile).
absl::StatusOr<PlanProto> LowerDecisions(GlobalDecisions&& decisions, const CompileOptions& options = {},
                                         CompileReport* report = nullptr);
// The LowerOptions Compile lowers with.
LowerOptions LowerOptionsFor(const CompileOptions& options);

// Same, from a JobProto (Graph::FromJobProto errors pass through).
absl::StatusOr<PlanProto> CompileJob(const JobProto& job, const OpRegistry& registry,
                                     const CompileOptions& options = {}, CompileReport* report = nullptr);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_DRIVER_COMPILE_H_
