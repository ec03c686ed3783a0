#include "oneflow_like/compiler/pipeline/stage_balance_pass.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/compiler/infer_pass.h"
#include "oneflow_like/compiler/pipeline/stage_partition.h"

namespace oneflow_like {
namespace compiler {
namespace {

constexpr char kConfigHint[] =
    "with config stages=[...] the compiler assigns stages and placements; remove it to place stages by hand";

std::string PlacementsText(const std::vector<Placement>& stages) {
  return absl::StrCat("[", absl::StrJoin(stages, ", ", [](std::string* out, const Placement& p) {
                        out->append(p.ToString());
                      }), "]");
}

// Descs of every tensor, inferred on a scratch copy where every op sits on the first stage's
// placement and nothing is pinned (shapes do not depend on placements or SBPs).
absl::StatusOr<std::vector<TensorDesc>> InferDescs(const Graph& graph, const Placement& somewhere) {
  Graph scratch = graph;
  for (OpId id : scratch.op_order()) {
    OpNode* op = scratch.mutable_op(id);
    op->placement = somewhere;
    op->pinned_input_nd_sbp.clear();
    op->pinned_output_nd_sbp.clear();
  }
  for (const TensorNode& t : graph.tensors()) {
    TensorNode* node = scratch.mutable_tensor(t.id);
    node->pinned_nd_sbp.reset();
    if (!node->is_source()) node->placement.reset();
  }
  RETURN_IF_ERROR(InferPass().Run(&scratch).status());
  std::vector<TensorDesc> descs;
  for (const TensorNode& t : scratch.tensors()) descs.push_back(*t.desc);
  return descs;
}

// "stage=1", "placement=cpu:[2,3]" or both: what the user fixed about `op`.
std::string ConstraintText(const OpNode& op) {
  std::vector<std::string> parts;
  if (op.stage != 0) parts.push_back(absl::StrCat("stage=", op.stage));
  if (op.placement) parts.push_back(absl::StrCat("placement=", op.placement->ToString()));
  return absl::StrJoin(parts, ", ");
}

// The stages `op` may take (empty = any): an explicit stage (0 counts as unset) and an explicit
// placement must both agree with the stage.
absl::StatusOr<std::vector<bool>> AllowedStages(const Graph& graph, const OpNode& op,
                                                const std::vector<Placement>& stages) {
  if (op.stage == 0 && !op.placement) return std::vector<bool>();
  std::vector<bool> allowed(stages.size(), false);
  bool any = false;
  for (size_t s = 0; s < stages.size(); ++s) {
    allowed[s] = (op.stage == 0 || op.stage == static_cast<int>(s)) && (!op.placement || stages[s] == *op.placement);
    any = any || allowed[s];
  }
  if (any) return allowed;
  return absl::InvalidArgumentError(absl::StrCat(
      graph.Describe(op.id), " has ", ConstraintText(op), ", which matches none of the ", stages.size(),
      " stage placements ", PlacementsText(stages), " (hint: remove its stage and placement, or use one of the stage "
      "placements; ", kConfigHint, ")"));
}

// Names two constrained ops that no contiguous cut can order, if any.
absl::Status ExplainInfeasible(const Graph& graph, const std::vector<std::vector<bool>>& allowed,
                               const std::vector<Placement>& stages) {
  const std::vector<OpId>& order = graph.op_order();
  auto first = [&](size_t i) { return std::find(allowed[i].begin(), allowed[i].end(), true) - allowed[i].begin(); };
  auto last = [&](size_t i) { return allowed[i].rend() - std::find(allowed[i].rbegin(), allowed[i].rend(), true) - 1; };
  for (size_t i = 0; i < order.size(); ++i) {
    for (size_t t = i + 1; t < order.size() && !allowed[i].empty(); ++t) {
      if (allowed[t].empty() || last(t) >= first(i)) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          graph.Describe(order[t]), " has ", ConstraintText(graph.op(order[t])), " (stage <= ", last(t),
          ") but comes after ", graph.Describe(order[i]), " with ", ConstraintText(graph.op(order[i])), " (stage >= ",
          first(i), "); stages run in program order (hint: remove one of them; ", kConfigHint, ")"));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("the ops' explicit stages and placements leave no way to cut the ",
                                                 order.size(), " ops into the stages ", PlacementsText(stages),
                                                 " in program order, each stage non-empty (hint: remove them; ",
                                                 kConfigHint, ")"));
}

// Cost of `op` in each stage.
std::vector<double> OpStageCosts(const Graph& graph, const OpNode& op, const std::vector<TensorDesc>& descs,
                                 const std::vector<Placement>& stages, const StageBalanceOptions& options) {
  std::vector<TensorDesc> in, out;
  double variable_bytes = 0;
  for (TensorId t : op.inputs) {
    in.push_back(descs[t.value()]);
    if (graph.tensor(t).is_variable) variable_bytes += static_cast<double>(descs[t.value()].byte_size());
  }
  for (TensorId t : op.outputs) out.push_back(descs[t.value()]);
  const OpCost whole = op.def->Cost(op.attrs, in, out);
  std::vector<double> costs;
  for (const Placement& p : stages) {
    const double devices = static_cast<double>(p.num_devices());
    const OpCost share{whole.flops / devices, whole.bytes_moved / devices};
    costs.push_back(ComputeSeconds(share, options.cost) + options.variable_byte_seconds * variable_bytes);
  }
  return costs;
}

absl::Status CheckPin(const Graph& graph, const NdSbp& pin, TensorId tensor, const Placement& placement,
                      const std::string& who, int stage, const std::vector<TensorDesc>& descs) {
  absl::Status s = ValidateNdSbp(pin, descs[tensor.value()].shape, placement);
  if (s.ok()) return s;
  return absl::InvalidArgumentError(absl::StrCat(
      who, graph.Describe(tensor), " is pinned to ", NdSbpText(pin), " but is placed on ", placement.ToString(),
      " (stage ", stage, "): ", s.message(), " (hint: pin one SBP per axis of the stage placements, or give stages ",
      "with a mesh of the pin's rank)"));
}

// Places sources without a placement on their first consumer's (unused ones on the first
// stage's), checks that placed op outputs agree with their op, then checks every pin on its
// (future) placement.
absl::Status PlaceTensorsAndCheckPins(Graph* graph, const std::vector<Placement>& stages,
                                      const std::vector<TensorDesc>& descs) {
  std::vector<int> source_stage(graph->num_tensors(), -1);  // the stage of a source's first consumer
  for (OpId id : graph->op_order()) {
    const OpNode& op = graph->op(id);
    for (TensorId t : op.inputs) {
      TensorNode* node = graph->mutable_tensor(t);
      if (!node->is_source() || source_stage[t.value()] >= 0) continue;
      source_stage[t.value()] = op.stage;
      if (!node->placement) node->placement = op.placement;
    }
    for (TensorId t : op.outputs) {
      const std::optional<Placement>& placed = graph->tensor(t).placement;
      if (placed && *placed != *op.placement) {
        return absl::InvalidArgumentError(absl::StrCat(graph->Describe(t), " is placed on ", placed->ToString(),
                                                       " but its producer ", graph->Describe(id), " is in stage ",
                                                       op.stage, " on ", op.placement->ToString(), " (hint: remove ",
                                                       "the tensor's placement; ", kConfigHint, ")"));
      }
      // InferPass places it (setting it here, before its desc, would trip InferPass's check of
      // source pins, which reads the desc of every placed, pinned tensor).
    }
  }
  for (const TensorNode& t : graph->tensors()) {
    if (!t.is_source()) continue;
    if (!t.placement) graph->mutable_tensor(t.id)->placement = stages[0];
    if (t.pinned_nd_sbp) {
      const int stage = std::max(0, source_stage[t.id.value()]);
      RETURN_IF_ERROR(CheckPin(*graph, *t.pinned_nd_sbp, t.id, *graph->tensor(t.id).placement, "", stage, descs));
    }
  }
  for (OpId id : graph->op_order()) {
    const OpNode& op = graph->op(id);
    const std::string who = absl::StrCat(graph->Describe(id), ": ");
    for (const auto& [i, pin] : op.pinned_input_nd_sbp) {
      RETURN_IF_ERROR(
          CheckPin(*graph, pin, op.inputs[i], *op.placement, absl::StrCat(who, "input ", i, " "), op.stage, descs));
    }
    for (const auto& [k, pin] : op.pinned_output_nd_sbp) {
      RETURN_IF_ERROR(
          CheckPin(*graph, pin, op.outputs[k], *op.placement, absl::StrCat(who, "output ", k, " "), op.stage, descs));
    }
    for (TensorId t : op.outputs) {
      const TensorNode& node = graph->tensor(t);
      if (node.pinned_nd_sbp) {
        RETURN_IF_ERROR(CheckPin(*graph, *node.pinned_nd_sbp, t, *op.placement, "", op.stage, descs));
      }
    }
  }
  return absl::OkStatus();
}

// Every op's placement, then every tensor's: what the pass may change besides stages.
std::vector<std::optional<Placement>> PlacementsOf(const Graph& graph) {
  std::vector<std::optional<Placement>> placements;
  for (const OpNode& op : graph.ops()) placements.push_back(op.placement);
  for (const TensorNode& t : graph.tensors()) placements.push_back(t.placement);
  return placements;
}

}  // namespace

std::string StageBalanceReport::ToString(const Graph& graph) const {
  std::string out;
  for (size_t s = 0; s < stages.size(); ++s) {
    const Stage& stage = stages[s];
    const std::string first = stage.ops.empty() ? "" : graph.op(stage.ops.front()).name;
    const std::string last = stage.ops.empty() ? "" : graph.op(stage.ops.back()).name;
    absl::StrAppend(&out, "stage ", s, " on ", stage.placement.ToString(), ": ", stage.ops.size(), " ops (", first,
                    stage.ops.size() > 1 ? absl::StrCat(" .. ", last) : "", "), ",
                    absl::StrFormat("%.3g ms", stage.seconds * 1e3), "\n");
  }
  return out;
}

absl::StatusOr<bool> StageBalancePass::Run(Graph* graph) {
  report_ = StageBalanceReport();
  const JobConfigProto& config = graph->config();
  if (config.stage_placements().empty()) return false;
  if (!graph->variable_updates().empty()) {
    return absl::FailedPreconditionError("stage_balance must run before autograd and the optimizer pass");
  }
  RETURN_IF_ERROR(ValidateJobConfig(*graph));
  std::vector<Placement> stages;
  for (const PlacementProto& proto : config.stage_placements()) {
    ASSIGN_OR_RETURN(Placement p, Placement::FromProto(proto));
    stages.push_back(std::move(p));
  }
  const std::vector<OpId> order = graph->op_order();
  if (order.size() < stages.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.stage_placements lists ", stages.size(), " stages but the job has only ", order.size(),
        " op(s) (hint: every stage needs at least one op; give at most ", order.size(), " stage placements)"));
  }

  StagePartitionProblem problem;
  problem.cost.assign(stages.size(), std::vector<double>());
  ASSIGN_OR_RETURN(std::vector<TensorDesc> descs, InferDescs(*graph, stages[0]));
  for (OpId id : order) {
    ASSIGN_OR_RETURN(std::vector<bool> allowed, AllowedStages(*graph, graph->op(id), stages));
    problem.allowed.push_back(std::move(allowed));
    const std::vector<double> costs = OpStageCosts(*graph, graph->op(id), descs, stages, options_);
    for (size_t s = 0; s < stages.size(); ++s) problem.cost[s].push_back(costs[s]);
  }
  absl::StatusOr<StagePartition> cut = PartitionStages(problem);
  if (!cut.ok()) {
    if (cut.status().code() == absl::StatusCode::kInvalidArgument) {
      return ExplainInfeasible(*graph, problem.allowed, stages);
    }
    return cut.status();
  }

  const std::vector<std::optional<Placement>> placements_before = PlacementsOf(*graph);
  std::vector<int> stages_before;
  for (OpId id : order) stages_before.push_back(graph->op(id).stage);
  for (size_t p = 0; p < order.size(); ++p) {
    OpNode* op = graph->mutable_op(order[p]);
    op->stage = cut->stage_of[p];
    op->placement = stages[op->stage];
  }
  RETURN_IF_ERROR(PlaceTensorsAndCheckPins(graph, stages, descs));
  ASSIGN_OR_RETURN(bool inferred, InferPass().Run(graph));
  const bool changed = inferred || placements_before != PlacementsOf(*graph) || stages_before != cut->stage_of;

  StageBalanceReport report;
  for (size_t s = 0; s < stages.size(); ++s) {
    report.stages.push_back(StageBalanceReport::Stage{stages[s], {}, cut->stage_seconds[s]});
  }
  for (size_t p = 0; p < order.size(); ++p) report.stages[cut->stage_of[p]].ops.push_back(order[p]);
  report.bottleneck_seconds = cut->bottleneck_seconds;
  report_ = std::move(report);
  return changed;
}

}  // namespace compiler
}  // namespace oneflow_like
