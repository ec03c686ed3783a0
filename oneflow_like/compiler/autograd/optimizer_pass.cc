#include "oneflow_like/compiler/autograd/optimizer_pass.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/autograd/autograd_pass.h"
#include "oneflow_like/compiler/infer_pass.h"

namespace oneflow_like {
namespace compiler {

// On a mesh of 2+ axes (dp x tp) two departures from the 1-axis rule, both measured on the GPT
// (gpt tiny dims, vocab 2048, 4 x 256, seq 256, batch 8, dp2 x tp2, p2p; planned peak per rank,
// `olplan memory`): ZeRO-0 155.26 MiB; the plain rule ([S(0), pin or B]) 185.58 MiB, with
// persistent bytes up from 17.30 to 19.44 MiB; with both departures 154.27 MiB (16.79).
//  - An unpinned parameter gets no ZeRO layout: the SBP solver, free to place its state, already
//    splits the large ones over both axes where the gradient arrives partial (ZeRO-0 stores
//    wte, wpe and lm_head.weight's Adam state in (S, S), a quarter per rank); [S(0), B] pinned
//    them to a half and drew the parameters themselves into it (wte (S(1), S(1)) -> (S(0), B));
//    with these pins the solver also turned its MLP from gathered weights with the batch split
//    over both axes to tensor parallel, with P -> S boxing buffers of the activations
//    (communication 66 -> 107 MiB). This change alone: 163.02 MiB (ranks 1, 2; 154.23 on 0, 3);
//    the next alone: 176.83; both: 154.27.
//  - Axis 0 splits a dimension no other axis splits, where one fits: [B, S(0)] -> [S(1), S(0)].
//    Axes split in nested order, so from [B, S(0)] the shard of [S(0), S(0)] is not a slice of
//    the rank's rows (rank (0, 1) holds quarter 1 of dim 0, its [B, S(0)] block quarters 2-3):
//    the update's parameter input and its all-gather back both moved data that [S(1), S(0)]
//    slices locally (the layout ZeRO-0's solver picks for these states by itself).
std::optional<NdSbp> ZeroShardedLayout(const TensorNode& parameter) {
  if (!parameter.desc || !parameter.placement || parameter.desc->shape.num_axes() == 0) return std::nullopt;
  const Placement& placement = *parameter.placement;
  const std::vector<int64_t>& hierarchy = placement.hierarchy();
  if (hierarchy.empty() || hierarchy[0] < 2) return std::nullopt;  // no data-parallel axis to shard over
  const std::optional<NdSbp>& pin = parameter.pinned_nd_sbp;
  const bool pin_fits = pin && pin->num_axes() == static_cast<int>(hierarchy.size());
  const bool multi_axis = hierarchy.size() > 1;
  if (multi_axis && !pin_fits) return std::nullopt;  // the solver places its state (above)
  std::vector<Sbp> sbps;
  for (size_t axis = 0; axis < hierarchy.size(); ++axis) {
    const Sbp own = pin_fits ? (*pin)[static_cast<int>(axis)] : Sbp::Broadcast();
    if (axis == 0) {
      if (!own.is_broadcast()) return std::nullopt;  // axis 0 is not data parallel for this parameter
      sbps.push_back(Sbp::Split(0));
    } else {
      sbps.push_back(own);
    }
  }
  // Candidate dimensions for axis 0: on one axis only 0; on more, those no other axis splits
  // first (in order), then the others.
  std::vector<int> dims = {0};
  if (multi_axis) {
    dims.clear();
    const int rank = parameter.desc->shape.num_axes();
    std::vector<bool> split_elsewhere(rank, false);
    for (size_t axis = 1; axis < sbps.size(); ++axis) {
      if (sbps[axis].is_split() && sbps[axis].axis() < rank) split_elsewhere[sbps[axis].axis()] = true;
    }
    for (int pass = 0; pass < 2; ++pass) {
      for (int d = 0; d < rank; ++d) {
        if (split_elsewhere[d] == (pass == 1)) dims.push_back(d);
      }
    }
  }
  for (int d : dims) {
    sbps[0] = Sbp::Split(d);
    NdSbp layout(sbps);
    if (ValidateNdSbp(layout, parameter.desc->shape, placement).ok()) return layout;
  }
  return std::nullopt;
}

namespace {

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError("optimizer: " + message); }

absl::Status CheckNameFree(const Graph& graph, const std::string& name, const std::string& what) {
  if (graph.FindTensor(name).valid() || graph.FindOp(name).valid()) {
    return Invalid(absl::StrCat("the name '", name, "' of ", what, " is already used (hint: rename that tensor or op)"));
  }
  return absl::OkStatus();
}

// The facts about a parameter the pass needs (copied: adding sources may move TensorNodes).
struct Parameter {
  TensorId id;
  std::string name;
  TensorDesc desc;
  Placement placement;
  TensorId grad;
  int stage = 0;
  std::optional<NdSbp> zero_layout;
  bool zero_gather = false;  // ZeRO-2: stored in zero_layout, gathered for its readers
};

absl::StatusOr<TensorId> AddState(Graph* graph, const Parameter& p, const std::string& suffix) {
  const std::string name = absl::StrCat(p.name, "/", suffix);
  RETURN_IF_ERROR(CheckNameFree(*graph, name, absl::StrCat("the optimizer state of '", p.name, "'")));
  SourceSpec spec;
  spec.name = name;
  spec.desc = p.desc;
  spec.is_variable = true;  // initializer: zeros
  spec.frozen = true;
  spec.placement = p.placement;
  spec.pinned_nd_sbp = p.zero_layout;
  return graph->AddSource(std::move(spec));
}

// Adam step counters, one per parameter placement: "<counter>/next" = counter + 1.
class StepCounters {
 public:
  absl::StatusOr<TensorId> NextStep(Graph* graph, const Placement& placement, int stage) {
    for (const auto& [p, next] : counters_) {
      if (p == placement) return next;
    }
    SourceSpec spec;
    spec.name = graph->UniqueTensorName("optimizer/step");
    spec.desc = TensorDesc{DataType::kInt64, Shape()};
    spec.is_variable = true;
    spec.frozen = true;
    spec.placement = placement;
    ASSIGN_OR_RETURN(TensorId counter, graph->AddSource(spec));
    OpSpec op;
    op.name = absl::StrCat(spec.name, "/increment");
    op.type = "step_increment";
    op.inputs = {counter};
    op.output_names = {absl::StrCat(spec.name, "/next")};
    op.placement = placement;
    op.stage = stage;
    ASSIGN_OR_RETURN(OpId id, graph->AddOp(std::move(op)));
    RETURN_IF_ERROR(InferOp(graph, id).status());
    const TensorId next = graph->op(id).outputs[0];
    RETURN_IF_ERROR(graph->AddVariableUpdate(counter, next));
    counters_.emplace_back(placement, next);
    return next;
  }

 private:
  std::vector<std::pair<Placement, TensorId>> counters_;
};

AttrMap OptimizerAttrs(const OptimizerProto& opt) {
  if (opt.kind() == OptimizerProto::SGD && opt.momentum() == 0) {
    return AttrMap{{"lr", opt.learning_rate()}, {"weight_decay", opt.weight_decay()}};
  }
  if (opt.kind() == OptimizerProto::SGD) {
    return AttrMap{{"lr", opt.learning_rate()}, {"momentum", opt.momentum()}, {"weight_decay", opt.weight_decay()}};
  }
  return AttrMap{{"lr", opt.learning_rate()},
                 {"beta1", opt.has_beta1() ? opt.beta1() : 0.9},
                 {"beta2", opt.has_beta2() ? opt.beta2() : 0.999},
                 {"epsilon", opt.has_epsilon() ? opt.epsilon() : 1e-8},
                 {"bias_correction", opt.has_bias_correction() ? opt.bias_correction() : true},
                 {"weight_decay", opt.weight_decay()},
                 {"decoupled_weight_decay", opt.kind() == OptimizerProto::ADAMW}};
}

// Adds the update of one parameter: its state variables, the optimizer op, the updates.
absl::Status AddUpdate(Graph* graph, const Parameter& p, StepCounters* counters) {
  const OptimizerProto& opt = graph->config().optimizer();
  const bool sgd = opt.kind() == OptimizerProto::SGD;
  const bool plain = sgd && opt.momentum() == 0;  // no momentum: no buffer
  std::vector<std::string> state_suffixes;
  if (!sgd) state_suffixes = {"adam_m", "adam_v"};
  if (sgd && !plain) state_suffixes = {"momentum"};
  OpSpec op;
  op.name = absl::StrCat(p.name, sgd ? "/sgd_update" : "/adam_update");
  RETURN_IF_ERROR(CheckNameFree(*graph, op.name, absl::StrCat("the optimizer op of '", p.name, "'")));
  op.type = plain ? "sgd_plain_update" : sgd ? "sgd_update" : "adam_update";
  op.inputs = {p.id, p.grad};
  op.output_names = {absl::StrCat(p.name, "/new")};
  std::vector<TensorId> states;
  for (const std::string& suffix : state_suffixes) {
    ASSIGN_OR_RETURN(TensorId state, AddState(graph, p, suffix));
    states.push_back(state);
    op.inputs.push_back(state);
    op.output_names.push_back(absl::StrCat(p.name, "/", suffix, "/new"));
  }
  for (const std::string& name : op.output_names) {
    RETURN_IF_ERROR(CheckNameFree(*graph, name, absl::StrCat("an optimizer output of '", p.name, "'")));
  }
  if (p.zero_layout) {
    for (int i = 0; i < static_cast<int>(op.inputs.size()); ++i) op.pinned_input_nd_sbp[i] = *p.zero_layout;
    for (int k = 0; k < static_cast<int>(op.output_names.size()); ++k) op.pinned_output_nd_sbp[k] = *p.zero_layout;
  }
  if (!sgd) {
    ASSIGN_OR_RETURN(TensorId step, counters->NextStep(graph, p.placement, p.stage));
    op.inputs.push_back(step);
  }
  op.attrs = OptimizerAttrs(opt);
  op.placement = p.placement;
  op.stage = p.stage;
  ASSIGN_OR_RETURN(OpId id, graph->AddOp(std::move(op)));
  RETURN_IF_ERROR(InferOp(graph, id).status());
  const std::vector<TensorId> outputs = graph->op(id).outputs;
  RETURN_IF_ERROR(graph->AddVariableUpdate(p.id, outputs[0]));
  for (size_t k = 0; k < states.size(); ++k) RETURN_IF_ERROR(graph->AddVariableUpdate(states[k], outputs[k + 1]));
  return absl::OkStatus();
}

// ZeRO-2: the variable lives in `zero` (its update, pinned to `zero` by AddUpdate, needs no
// boxing); each consumer on the parameter's placement without a pin of its own reads the
// gathered layout (axis 0 B), so all of them share one all-gather per step (lowering caches a
// value per layout) and compute as under plain data parallelism.
void ShardParameter(Graph* graph, TensorId parameter, const NdSbp& zero) {
  TensorNode* t = graph->mutable_tensor(parameter);
  t->pinned_nd_sbp = zero;
  const NdSbp gathered = ZeroGatheredLayout(zero);
  const Placement placement = *t->placement;
  for (const TensorUse& use : t->consumers) {
    OpNode* op = graph->mutable_op(use.op);
    if (!op->placement || !(*op->placement == placement)) continue;
    op->pinned_input_nd_sbp.emplace(use.input_index, gathered);  // keeps a pin already there
  }
}

// A mesh named by its ranks and shape, whatever its device ("[0,1]" for cpu:[0,1] and
// cuda:[0,1]: a cuda job's inputs sit on the host version of the mesh).
std::string MeshKey(const Placement& placement) {
  const std::string s = placement.ToString();
  const size_t colon = s.find(':');
  return colon == std::string::npos ? s : s.substr(colon + 1);
}

// The 1-D meshes whose one axis is tensor parallel, not data parallel: a trainable parameter on
// the mesh is pinned split on it, and no input (a source that is not a variable: the batch) on
// it is pinned split. GPT with dp 1, tp 2 pins its column weights [S(0)] on [0,1] and its ids
// (B); its layer norms, embeddings and row biases have no pin, and sharding their state over
// that axis would be ZeRO over the tensor-parallel replicas, not over data parallelism. A
// data-parallel job that shards one embedding by rows splits its batch over the axis: ZeRO
// stays on there. (On a mesh of 2+ axes axis 0 is data parallel by convention; ZeroShardedLayout
// checks each pin.)
std::set<std::string> ModelParallelMeshes(const Graph& graph) {
  std::set<std::string> split_parameter, split_input;
  for (const TensorNode& t : graph.tensors()) {
    if (!t.placement || !t.pinned_nd_sbp || t.placement->num_hierarchy_axes() != 1) continue;
    if (t.pinned_nd_sbp->num_axes() != 1 || !(*t.pinned_nd_sbp)[0].is_split()) continue;
    if (t.is_variable && !t.frozen) split_parameter.insert(MeshKey(*t.placement));
    if (!t.is_variable && !t.producer.valid()) split_input.insert(MeshKey(*t.placement));
  }
  std::set<std::string> meshes;
  for (const std::string& mesh : split_parameter) {
    if (!split_input.count(mesh)) meshes.insert(mesh);
  }
  return meshes;
}

// ZeRO-2 gathers a parameter for its readers (ShardParameter) only on a 1-axis mesh, where the
// readers' pin (B) is what data parallelism computes with anyway. On a mesh of 2+ axes a
// parameter keeps ZeRO-1 (sharded optimizer state only): pinning its readers to [B, rest...]
// takes the choice of their layout away from the SBP solver, for an unpinned parameter the
// tensor-parallel splits (S(k) on axis 1), and for a tensor-parallel one ([B, S(k)]) the cheaper
// reading it often picks at small widths (gather to [B, B], split the batch over both axes).
// Measured on W2 (gpt tiny, vocab 2048, 4 x 256) at dp2 x tp2, p2p, planned peak per rank:
// ZeRO-0 119.3 MiB, ZeRO-1 129.3, ZeRO-2 with readers pinned 139.5 (unpinned parameters alone
// left free: 140.3); configs/gpt_gpu.cfg (dp2 x tp4): 10.46 / 11.88 / 14.12 GiB (14.17).
bool ZeroGathersParameter(const TensorNode& parameter) { return parameter.placement->num_hierarchy_axes() <= 1; }

}  // namespace

NdSbp ZeroGatheredLayout(const NdSbp& zero) {
  std::vector<Sbp> sbps;
  for (int axis = 0; axis < zero.num_axes(); ++axis) sbps.push_back(axis == 0 ? Sbp::Broadcast() : zero[axis]);
  return NdSbp(std::move(sbps));
}

absl::StatusOr<bool> OptimizerPass::Run(Graph* graph) {
  if (!graph->config().has_optimizer()) return false;
  std::set<int64_t> updated;
  for (const VariableUpdate& u : graph->variable_updates()) updated.insert(u.variable.value());
  const std::set<std::string> model_parallel = ModelParallelMeshes(*graph);
  std::vector<Parameter> parameters;
  for (const TensorNode& t : graph->tensors()) {
    if (!t.is_variable || t.frozen || updated.count(t.id.value())) continue;
    const TensorId grad = GradientOf(*graph, t.id);
    if (!grad.valid()) continue;
    if (!t.desc || !t.placement) {
      return absl::FailedPreconditionError(
          absl::StrCat("optimizer: variable '", t.name, "' has no desc or placement (run the infer pass first)"));
    }
    Parameter p{t.id, t.name, *t.desc, *t.placement, grad, 0, std::nullopt};
    const OpId producer = graph->tensor(grad).producer;
    p.stage = producer.valid() ? graph->op(producer).stage : 0;
    const int zero_stage = graph->config().zero_stage();
    if ((zero_stage == 1 || zero_stage == 2) && !model_parallel.count(MeshKey(*t.placement))) {
      p.zero_layout = ZeroShardedLayout(t);
    }
    p.zero_gather = zero_stage == 2 && p.zero_layout && ZeroGathersParameter(t);
    parameters.push_back(std::move(p));
  }
  // ZeRO-2 pins before the optimizer ops exist: every consumer now is a forward or backward op.
  for (const Parameter& p : parameters) {
    if (p.zero_gather) ShardParameter(graph, p.id, *p.zero_layout);
  }
  StepCounters counters;
  for (const Parameter& p : parameters) RETURN_IF_ERROR(AddUpdate(graph, p, &counters));
  return !parameters.empty();
}

}  // namespace compiler
}  // namespace oneflow_like
