#include "oneflow_like/compiler/sbp/sbp_pass.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/sbp/sbp_problem.h"

namespace oneflow_like {
namespace compiler {
namespace {

absl::Status CheckInferred(const Graph& graph) {
  for (const TensorNode& t : graph.tensors()) {
    if (!t.desc || !t.placement) {
      return absl::FailedPreconditionError(
          absl::StrCat("sbp_selection: ", graph.Describe(t.id), " has no inferred desc or placement; run the infer pass first"));
    }
  }
  for (const OpNode& op : graph.ops()) {
    if (!op.placement) {
      return absl::FailedPreconditionError(
          absl::StrCat("sbp_selection: ", graph.Describe(op.id), " has no placement; run the infer pass first"));
    }
  }
  return absl::OkStatus();
}

// The error for a chosen pair of layouts that the boxing planner refused.
absl::Status CheckFeasible(const Graph& graph, const SbpGraphProblem& p, const std::vector<int>& choice,
                           const BoxingPriceBook& prices) {
  for (size_t e = 0; e < p.problem.edges.size(); ++e) {
    const SbpEdge& edge = p.problem.edges[e];
    const SbpEdgeOrigin& origin = p.origins[e];
    const int row = edge.producer_row[choice[edge.producer]], column = edge.consumer_column[choice[edge.consumer]];
    const BoxingQuote& quote = prices.quote(origin.quotes[static_cast<size_t>(row) * origin.num_columns + column]);
    if (!std::isinf(quote.seconds)) continue;
    const std::string where = origin.consumer.valid()
                                  ? absl::StrCat("input ", origin.input_index, " of ", graph.Describe(origin.consumer))
                                  : absl::StrCat("the update of ", graph.Describe(origin.variable));
    return absl::InvalidArgumentError(absl::StrCat(
        "sbp_selection: no boxing can deliver ", graph.Describe(origin.tensor), " ",
        graph.tensor(origin.tensor).desc->ToString(), " to ", where, ": ", quote.error,
        " (hint: pin compatible layouts or placements on both sides)"));
  }
  return absl::OkStatus();
}

void SetCommCost(const BoxingQuote& quote, int input, const NdSbp& producer, double rate, const std::string& tensor,
                 SbpCandidateProto* candidate) {
  SbpCandidateProto::InputCommCost* comm = candidate->add_input_comm();
  comm->set_input(input);
  comm->set_tensor(tensor);
  *comm->mutable_producer_nd_sbp() = producer.ToProto();
  comm->set_boxing(quote.kind);
  comm->set_bytes(quote.bytes * rate);
  comm->set_seconds(quote.seconds * rate);
  candidate->set_comm_seconds(candidate->comm_seconds() + comm->seconds());
}

// The decision record of node `v` given every node's final choice.
OpSbpDecisionProto Explain(const Graph& graph, const SbpGraphProblem& p, const std::vector<int>& choice,
                           const BoxingPriceBook& prices, int v) {
  OpSbpDecisionProto decision;
  const NodeCandidates& candidates = p.candidates[v];
  if (p.node_op[v].valid()) {
    decision.set_op_name(graph.op(p.node_op[v]).name);
    decision.set_op_type(graph.op(p.node_op[v]).type);
  } else {
    const TensorNode& t = graph.tensor(p.node_source[v]);
    decision.set_op_name(t.name);
    decision.set_op_type(t.is_variable ? "variable" : "input");
  }
  std::vector<int> solver_index(candidates.all.size(), -1);
  for (int s = 0; s < static_cast<int>(candidates.eligible.size()); ++s) solver_index[candidates.eligible[s]] = s;
  decision.set_chosen(candidates.eligible[choice[v]]);
  for (int a = 0; a < static_cast<int>(candidates.all.size()); ++a) {
    const SbpCandidate& c = candidates.all[a];
    SbpCandidateProto* proto = decision.add_candidates();
    for (const NdSbp& s : c.signature.inputs) *proto->add_inputs() = s.ToProto();
    for (const NdSbp& s : c.signature.outputs) *proto->add_outputs() = s.ToProto();
    const int s = solver_index[a];
    if (s < 0) {
      proto->set_rejected_reason(c.rejected_reason);
      continue;
    }
    proto->set_compute_seconds(c.compute_seconds * p.node_rate[v]);
    for (int e : p.node_edges[v]) {
      const SbpEdge& edge = p.problem.edges[e];
      const SbpEdgeOrigin& origin = p.origins[e];
      const bool consumes = edge.consumer == v;
      const int row = edge.producer_row[consumes ? choice[edge.producer] : s];
      const int column = edge.consumer_column[consumes ? s : choice[edge.consumer]];
      const BoxingQuote& quote = prices.quote(origin.quotes[static_cast<size_t>(row) * origin.num_columns + column]);
      const std::string& tensor = graph.tensor(origin.tensor).name;
      if (consumes && origin.consumer.valid()) {
        SetCommCost(quote, origin.input_index, prices.nd_sbp(origin.row_sbp[row]), origin.rate, tensor, proto);
      } else if (consumes) {  // a variable's update arriving
        SetCommCost(quote, -1, prices.nd_sbp(origin.row_sbp[row]), origin.rate, tensor, proto);
      } else if (!origin.consumer.valid()) {  // this op's output k is a variable's new value
        const NdSbp& variable_layout = *graph.tensor(origin.variable).nd_sbp;
        SetCommCost(quote, -1 - graph.tensor(origin.tensor).producer_output, variable_layout, origin.rate, tensor,
                    proto);
      }
    }
    proto->set_total_seconds(proto->compute_seconds() + proto->comm_seconds());
  }
  return decision;
}

}  // namespace

absl::StatusOr<bool> SbpPass::Run(Graph* graph) {
  decisions_.clear();
  source_decisions_.clear();
  stats_ = SbpPassStats();
  RETURN_IF_ERROR(CheckInferred(*graph));
  BoxingPriceBook prices(options_.boxing, options_.exact_boxing_max_devices);
  ASSIGN_OR_RETURN(SbpGraphProblem p, BuildSbpProblem(*graph, &prices));
  const std::string defect = CheckProblem(p.problem);
  if (!defect.empty()) return absl::InternalError(absl::StrCat("sbp_selection built a bad problem: ", defect));
  const SbpSolution solution = SolveSbp(p.problem, options_.solver);
  RETURN_IF_ERROR(CheckFeasible(*graph, p, solution.choice, prices));

  bool changed = false;
  for (size_t v = 0; v < p.candidates.size(); ++v) {
    const NdSbpSignature& sig = p.candidates[v].all[p.candidates[v].eligible[solution.choice[v]]].signature;
    if (p.node_source[v].valid()) {
      TensorNode* t = graph->mutable_tensor(p.node_source[v]);
      changed = changed || t->nd_sbp != sig.outputs[0];
      t->nd_sbp = sig.outputs[0];
      continue;
    }
    OpNode* op = graph->mutable_op(p.node_op[v]);
    changed = changed || !op->nd_sbp_signature || !(*op->nd_sbp_signature == sig);
    op->nd_sbp_signature = sig;
    for (size_t k = 0; k < op->outputs.size(); ++k) {
      TensorNode* t = graph->mutable_tensor(op->outputs[k]);
      changed = changed || t->nd_sbp != sig.outputs[k];
      t->nd_sbp = sig.outputs[k];
    }
  }
  for (size_t v = 0; v < p.candidates.size(); ++v) {
    OpSbpDecisionProto decision = Explain(*graph, p, solution.choice, prices, static_cast<int>(v));
    (p.node_op[v].valid() ? decisions_ : source_decisions_).push_back(std::move(decision));
  }
  stats_.total_seconds = solution.total_seconds;
  stats_.num_nodes = static_cast<int64_t>(p.candidates.size());
  stats_.num_edges = static_cast<int64_t>(p.problem.edges.size());
  for (const std::vector<double>& unary : p.problem.unary) stats_.num_candidates += static_cast<int64_t>(unary.size());
  stats_.num_exact_prices = prices.num_exact();
  stats_.num_analytic_prices = prices.num_analytic();
  stats_.forest_edges = solution.forest_edges;
  stats_.local_search_rounds = solution.local_search_rounds;
  stats_.local_search_switches = solution.local_search_switches;
  stats_.forest_rounds = solution.forest_rounds;
  return changed;
}

}  // namespace compiler
}  // namespace oneflow_like
