// Pass 3, SBP selection: chooses how every tensor is laid out over its placement and which
// SBP signature every op runs with, minimizing an estimate of the step time.
//
// Input: an inferred graph (descs, placements, pins; backward and optimizer ops if present).
// Output: TensorNode::nd_sbp for every tensor (for an op output: its op's chosen output
// NdSbp) and OpNode::nd_sbp_signature for every op; pins are always respected. Where a
// consumer's input layout differs from the tensor's nd_sbp (or the placements differ), the
// lowering inserts the boxing that was priced here.
//
// Objective (seconds per step, details in sbp_problem.h and sbp_candidates.h):
//   sum over ops      compute seconds at the chosen signature (work divided over the mesh
//                     axes on which something is split; B/P replicate), x firings per step
//   + sum over edges  boxing seconds from the producer's layout to the consumer's, priced
//                     by EstimateBoxing (BoxingCostCache; for large placements an analytic
//                     model of the same schedules, sbp_pricing.h), x transfers per step;
//                     variable updates count the boxing from the optimizer's output to the
//                     variable.
// Sources are decided too: an unpinned input or variable may be B or any valid S(axis) per
// mesh axis, and ends up in the layout its consumers (and its update) make cheapest.
// Algorithm: sbp_solver.h (exact spanning-forest DP = Viterbi on chains, then coordinate
// descent over all edges and a few re-conditioned forest rounds; linear in edges x
// candidates per round; deterministic).
//
// Explanations: decisions() holds one OpSbpDecisionProto per op in program order, listing
// every candidate (also the rejected ones, with rejected_reason) with its cost given the
// neighbours' final choices:
//   compute_seconds  its compute per step;
//   input_comm       per input i: the producer's chosen layout, the boxing kind to this
//                    candidate's input layout, bytes per device and seconds (per step); an op
//                    whose output k is a variable's new value also lists that update with
//                    input = -1 - k (producer_nd_sbp = the variable's chosen layout);
//   comm_seconds     the sum of input_comm seconds; total_seconds = compute + comm.
// Consumers' boxing of the op's outputs is listed under the consumers, so a loser can show a
// lower local total than the winner when the winner saves downstream boxing. Rejected
// candidates carry their layouts and reason only. source_decisions() does the same for
// inputs and variables (op_type "input"/"variable", op_name = the tensor), one candidate
// per layout, a variable's update listed as input -1.
//
// Worked example (4 ranks, weights dominate): x[8,1024] input, w1[1024,4096], w2[4096,1024]
// variables, h = matmul(x, w1), a = relu(h), y = matmul(a, w2) and a consumer needing y as [B]:
// the pass picks x [B], w1 [S(1)], h (B, S(1) -> S(1)), relu S(1), w2 [S(0)],
// y (S(1), S(0) -> P), and the consumer's record shows the all_reduce of y: the Megatron
// column/row split. With x[4096,64] and 64x64 weights it picks data parallelism instead
// (x S(0), weights B, weight gradients P, all-reduced before the update).
//
// Errors: InvalidArgument when an op has no signature compatible with its pins and shapes
// (naming the op, its inputs/outputs with shapes and pins, the rejected candidates and a hint
// which pin to drop), or when the chosen layouts need a boxing the planner refuses;
// FailedPrecondition on a graph that was not inferred. Not thread-safe; Run may be called
// again (decisions are replaced).
#ifndef ONEFLOW_LIKE_COMPILER_SBP_SBP_PASS_H_
#define ONEFLOW_LIKE_COMPILER_SBP_SBP_PASS_H_

#include <string>
#include <vector>

#include "oneflow_like/compiler/boxing/boxing.h"
#include "oneflow_like/compiler/pass.h"
#include "oneflow_like/compiler/sbp/sbp_solver.h"
#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace compiler {

struct SbpPassOptions {
  BoxingOptions boxing;         // cost model (CostConfig defaults) and schedule policy for boxing
  SbpSolverOptions solver;      // algorithm (default: forest DP + local search), round bound
  // Boxing between placements with at most this many devices in total is priced exactly by
  // EstimateBoxing; larger ones by the analytic model of sbp_pricing.h (exact estimates grow
  // with the number of rank pairs: seconds each at 512 ranks).
  int64_t exact_boxing_max_devices = 64;
};

struct SbpPassStats {
  double total_seconds = 0;        // the objective at the chosen layouts (per step)
  int64_t num_nodes = 0;           // sources + ops
  int64_t num_edges = 0;
  int64_t num_candidates = 0;      // eligible ones, over all nodes
  int64_t num_exact_prices = 0;     // distinct transitions priced by EstimateBoxing
  int64_t num_analytic_prices = 0;  // distinct transitions priced by the analytic model
  int forest_edges = 0;
  int local_search_rounds = 0;
  int local_search_switches = 0;
  int forest_rounds = 0;
};

class SbpPass : public Pass {
 public:
  explicit SbpPass(SbpPassOptions options = {}) : options_(std::move(options)) {}
  std::string name() const override { return "sbp_selection"; }
  // Returns whether any chosen SBP differs from what the graph held before.
  absl::StatusOr<bool> Run(Graph* graph) override;

  // Ops in program order (valid after a successful Run).
  const std::vector<OpSbpDecisionProto>& decisions() const { return decisions_; }
  // Inputs and variables in tensor id order.
  const std::vector<OpSbpDecisionProto>& source_decisions() const { return source_decisions_; }
  const SbpPassStats& stats() const { return stats_; }

 private:
  SbpPassOptions options_;
  std::vector<OpSbpDecisionProto> decisions_;
  std::vector<OpSbpDecisionProto> source_decisions_;
  SbpPassStats stats_;
};

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_SBP_SBP_PASS_H_
