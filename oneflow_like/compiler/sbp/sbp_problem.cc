#include "oneflow_like/compiler/sbp/sbp_problem.h"

#include <algorithm>
#include <utility>

namespace oneflow_like {
namespace compiler {
namespace {

// One side of an edge: for each solver candidate of a node, the layout it has there.
std::vector<NdSbp> OutputLayouts(const NodeCandidates& candidates, int output) {
  std::vector<NdSbp> layouts;
  for (int c : candidates.eligible) layouts.push_back(candidates.all[c].signature.outputs[output]);
  return layouts;
}
std::vector<NdSbp> InputLayouts(const NodeCandidates& candidates, int input) {
  std::vector<NdSbp> layouts;
  for (int c : candidates.eligible) layouts.push_back(candidates.all[c].signature.inputs[input]);
  return layouts;
}

// Distinct layouts (in first-appearance order) and each candidate's index among them.
std::vector<int> Distinct(const std::vector<NdSbp>& layouts, std::vector<NdSbp>* distinct) {
  std::vector<int> map;
  for (const NdSbp& layout : layouts) {
    auto it = std::find(distinct->begin(), distinct->end(), layout);
    map.push_back(static_cast<int>(it - distinct->begin()));
    if (it == distinct->end()) distinct->push_back(layout);
  }
  return map;
}

struct EdgeEnds {
  int producer_node, consumer_node;
  std::vector<NdSbp> producer_layouts, consumer_layouts;  // per solver candidate
  const TensorNode* tensor;
  const Placement* src_placement;
  const Placement* dst_placement;
};

void AddEdge(const EdgeEnds& ends, SbpEdgeOrigin origin, BoxingPriceBook* prices, SbpGraphProblem* out) {
  SbpEdge edge;
  edge.producer = ends.producer_node;
  edge.consumer = ends.consumer_node;
  std::vector<NdSbp> rows, columns;
  edge.producer_row = Distinct(ends.producer_layouts, &rows);
  edge.consumer_column = Distinct(ends.consumer_layouts, &columns);
  edge.num_columns = static_cast<int>(columns.size());
  const int desc = prices->DescId(*ends.tensor->desc);
  const int src = prices->PlacementId(*ends.src_placement), dst = prices->PlacementId(*ends.dst_placement);
  std::vector<int> column_ids;
  for (const NdSbp& c : columns) column_ids.push_back(prices->NdSbpId(c));
  origin.num_columns = edge.num_columns;
  for (const NdSbp& r : rows) {
    const int row_id = prices->NdSbpId(r);
    origin.row_sbp.push_back(row_id);
    for (int column_id : column_ids) {
      const int quote = prices->Quote(desc, src, row_id, dst, column_id);
      origin.quotes.push_back(quote);
      edge.seconds.push_back(prices->quote(quote).seconds * origin.rate);
    }
  }
  const int index = static_cast<int>(out->problem.edges.size());
  out->node_edges[edge.producer].push_back(index);
  out->node_edges[edge.consumer].push_back(index);
  out->problem.edges.push_back(std::move(edge));
  out->origins.push_back(std::move(origin));
}

}  // namespace

absl::StatusOr<SbpGraphProblem> BuildSbpProblem(const Graph& graph, BoxingPriceBook* prices) {
  SbpGraphProblem out;
  out.pieces_per_step = PiecesPerStep(graph.config());
  const double pieces = static_cast<double>(out.pieces_per_step);
  out.node_of_tensor.assign(graph.num_tensors(), -1);
  out.node_of_op.assign(graph.num_ops(), -1);
  auto add_node = [&](TensorId source, OpId op, double rate, NodeCandidates candidates) {
    const int node = static_cast<int>(out.candidates.size());
    std::vector<double> unary;
    for (int c : candidates.eligible) unary.push_back(candidates.all[c].compute_seconds * rate);
    out.problem.unary.push_back(std::move(unary));
    out.node_source.push_back(source);
    out.node_op.push_back(op);
    out.node_rate.push_back(rate);
    out.candidates.push_back(std::move(candidates));
    out.node_edges.emplace_back();
    return node;
  };
  for (const TensorNode& t : graph.tensors()) {
    if (!t.is_source()) continue;
    out.node_of_tensor[t.id.value()] =
        add_node(t.id, OpId(), t.is_input ? pieces : 1.0, SourceCandidates(graph, t.id));
  }
  for (OpId id : graph.op_order()) {
    ASSIGN_OR_RETURN(NodeCandidates candidates, OpCandidates(graph, id, prices->options().cost));
    const double rate = graph.op(id).def->is_optimizer ? 1.0 : pieces;
    out.node_of_op[id.value()] = add_node(TensorId(), id, rate, std::move(candidates));
  }
  // The node deciding the layout of `t`, and which output of that node's candidates it is.
  auto producer_of = [&](const TensorNode& t) {
    return t.is_source() ? std::make_pair(out.node_of_tensor[t.id.value()], 0)
                         : std::make_pair(out.node_of_op[t.producer.value()], t.producer_output);
  };
  for (OpId id : graph.op_order()) {
    const OpNode& op = graph.op(id);
    const int consumer = out.node_of_op[id.value()];
    for (int i = 0; i < static_cast<int>(op.inputs.size()); ++i) {
      const TensorNode& t = graph.tensor(op.inputs[i]);
      const auto [producer, output] = producer_of(t);
      EdgeEnds ends{producer, consumer, OutputLayouts(out.candidates[producer], output),
                    InputLayouts(out.candidates[consumer], i), &t, &*t.placement, &*op.placement};
      SbpEdgeOrigin origin;
      origin.tensor = t.id;
      origin.consumer = id;
      origin.input_index = i;
      origin.rate = std::min(out.node_rate[producer], out.node_rate[consumer]);
      AddEdge(ends, std::move(origin), prices, &out);
    }
  }
  for (const VariableUpdate& update : graph.variable_updates()) {
    const TensorNode& value = graph.tensor(update.new_value);
    const TensorNode& variable = graph.tensor(update.variable);
    const auto [producer, output] = producer_of(value);
    const int consumer = out.node_of_tensor[update.variable.value()];
    EdgeEnds ends{producer, consumer, OutputLayouts(out.candidates[producer], output),
                  OutputLayouts(out.candidates[consumer], 0), &value, &*value.placement, &*variable.placement};
    SbpEdgeOrigin origin;
    origin.tensor = value.id;
    origin.variable = variable.id;
    origin.rate = 1.0;
    AddEdge(ends, std::move(origin), prices, &out);
  }
  return out;
}

}  // namespace compiler
}  // namespace oneflow_like
