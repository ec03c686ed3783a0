#include "oneflow_like/compiler/sbp/sbp_candidates.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace oneflow_like {
namespace compiler {
namespace {

// A user pin on an op: an in_sbp entry, an out_sbp entry, or the sbp= pin of an output tensor.
struct PinRef {
  enum Kind { kInput, kOutput, kOutputTensor } kind;
  int index;  // input or output index
};

std::vector<PinRef> PinsOf(const Graph& graph, const OpNode& op) {
  std::vector<PinRef> pins;
  for (const auto& entry : op.pinned_input_nd_sbp) pins.push_back({PinRef::kInput, entry.first});
  for (const auto& entry : op.pinned_output_nd_sbp) pins.push_back({PinRef::kOutput, entry.first});
  for (int k = 0; k < static_cast<int>(op.outputs.size()); ++k) {
    if (graph.tensor(op.outputs[k]).pinned_nd_sbp) pins.push_back({PinRef::kOutputTensor, k});
  }
  return pins;
}

std::string PinName(const Graph& graph, const OpNode& op, const PinRef& pin) {
  switch (pin.kind) {
    case PinRef::kInput:
      return absl::StrCat("in_sbp of input ", pin.index, " ('", graph.tensor(op.inputs[pin.index]).name, "')");
    case PinRef::kOutput:
      return absl::StrCat("out_sbp of output ", pin.index, " ('", graph.tensor(op.outputs[pin.index]).name, "')");
    case PinRef::kOutputTensor:
      return absl::StrCat("sbp pin of tensor '", graph.tensor(op.outputs[pin.index]).name, "'");
  }
  return "";
}

// The first pin (other than `skip`) that `sig` violates, described; empty if none.
std::string PinConflict(const Graph& graph, const OpNode& op, const std::vector<PinRef>& pins,
                        const NdSbpSignature& sig, int skip) {
  for (int p = 0; p < static_cast<int>(pins.size()); ++p) {
    if (p == skip) continue;
    const PinRef& pin = pins[p];
    const NdSbp& wanted = pin.kind == PinRef::kInput    ? op.pinned_input_nd_sbp.at(pin.index)
                          : pin.kind == PinRef::kOutput ? op.pinned_output_nd_sbp.at(pin.index)
                                                        : *graph.tensor(op.outputs[pin.index]).pinned_nd_sbp;
    const NdSbp& got = pin.kind == PinRef::kInput ? sig.inputs[pin.index] : sig.outputs[pin.index];
    if (got != wanted) {
      return absl::StrCat("conflicts with the ", PinName(graph, op, pin), ": ", NdSbpText(wanted), " pinned, ",
                          NdSbpText(got), " here");
    }
  }
  return "";
}

// Why `sig` cannot lay out the op's tensors; empty if it can.
std::string ShapeConflict(const OpNode& op, const std::vector<TensorDesc>& inputs,
                          const std::vector<TensorDesc>& outputs, const NdSbpSignature& sig) {
  for (int i = 0; i < static_cast<int>(inputs.size()); ++i) {
    absl::Status s = ValidateNdSbp(sig.inputs[i], inputs[i].shape, *op.placement);
    if (!s.ok()) return absl::StrCat("input ", i, ": ", s.message());
  }
  for (int k = 0; k < static_cast<int>(outputs.size()); ++k) {
    absl::Status s = ValidateNdSbp(sig.outputs[k], outputs[k].shape, *op.placement);
    if (!s.ok()) return absl::StrCat("output ", k, ": ", s.message());
  }
  return "";
}

std::vector<TensorDesc> Descs(const Graph& graph, const std::vector<TensorId>& ids) {
  std::vector<TensorDesc> descs;
  descs.reserve(ids.size());
  for (TensorId id : ids) descs.push_back(*graph.tensor(id).desc);
  return descs;
}

absl::Status NoCandidateError(const Graph& graph, const OpNode& op, const NodeCandidates& candidates,
                              const std::vector<PinRef>& pins, const std::vector<TensorDesc>& inputs,
                              const std::vector<TensorDesc>& outputs) {
  // "x float32[64,64] sbp=[S(0)] in_sbp=[S(1)]": a tensor with its own pin and the op's.
  auto describe = [&](TensorId id, const std::map<int, NdSbp>& op_pins, int index, const char* key) {
    const TensorNode& t = graph.tensor(id);
    std::string text = absl::StrCat(t.name, " ", t.desc->ToString());
    if (t.pinned_nd_sbp) absl::StrAppend(&text, " sbp=", NdSbpText(*t.pinned_nd_sbp));
    auto pin = op_pins.find(index);
    if (pin != op_pins.end()) absl::StrAppend(&text, " ", key, "=", NdSbpText(pin->second));
    return text;
  };
  std::vector<std::string> ins, outs, rejected, helpful;
  for (int i = 0; i < static_cast<int>(op.inputs.size()); ++i) {
    ins.push_back(describe(op.inputs[i], op.pinned_input_nd_sbp, i, "in_sbp"));
  }
  for (int k = 0; k < static_cast<int>(op.outputs.size()); ++k) {
    outs.push_back(describe(op.outputs[k], op.pinned_output_nd_sbp, k, "out_sbp"));
  }
  const size_t shown = std::min<size_t>(candidates.all.size(), 6);
  for (size_t c = 0; c < shown; ++c) {
    rejected.push_back(absl::StrCat(candidates.all[c].signature.ToString(), ": ", candidates.all[c].rejected_reason));
  }
  if (shown < candidates.all.size()) rejected.push_back(absl::StrCat("... ", candidates.all.size() - shown, " more"));
  for (int p = 0; p < static_cast<int>(pins.size()); ++p) {
    for (const SbpCandidate& c : candidates.all) {
      if (ShapeConflict(op, inputs, outputs, c.signature).empty() &&
          PinConflict(graph, op, pins, c.signature, p).empty()) {
        helpful.push_back(PinName(graph, op, pins[p]));
        break;
      }
    }
  }
  const std::string hint = helpful.empty()
                               ? "no single pin is to blame; relax the pins together or check them against the shapes"
                               : absl::StrCat("drop the ", absl::StrJoin(helpful, ", or the "));
  return absl::InvalidArgumentError(absl::StrCat(
      graph.Describe(op.id), ": no SBP signature on placement ", op.placement->ToString(),
      " satisfies the pins and shapes; inputs: ", absl::StrJoin(ins, ", "), "; outputs: ", absl::StrJoin(outs, ", "),
      "; candidates: ", absl::StrJoin(rejected, "; "), " (hint: ", hint, ")"));
}

}  // namespace

int64_t LargestShardBytes(const TensorDesc& desc, const NdSbp& nd_sbp, const Placement& placement) {
  const ShardSlice slice = GetShardSlice(desc.shape, nd_sbp, placement.hierarchy(), 0);
  return slice.shape.elem_count() * SizeOf(desc.dtype);
}

double SignatureComputeSeconds(const OpNode& op, const std::vector<TensorDesc>& inputs,
                               const std::vector<TensorDesc>& outputs, const NdSbpSignature& signature,
                               const CostConfig& config) {
  const Placement& placement = *op.placement;
  OpCost cost = op.def->Cost(op.attrs, inputs, outputs);
  double work_divisor = 1;
  for (int axis = 0; axis < placement.num_hierarchy_axes(); ++axis) {
    bool split = false;
    for (const NdSbp& s : signature.inputs) split = split || s[axis].is_split();
    for (const NdSbp& s : signature.outputs) split = split || s[axis].is_split();
    if (split) work_divisor *= static_cast<double>(placement.hierarchy()[axis]);
  }
  double logical_io = 0, device_io = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    logical_io += static_cast<double>(inputs[i].byte_size());
    device_io += static_cast<double>(LargestShardBytes(inputs[i], signature.inputs[i], placement));
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    logical_io += static_cast<double>(outputs[k].byte_size());
    device_io += static_cast<double>(LargestShardBytes(outputs[k], signature.outputs[k], placement));
  }
  cost.flops /= work_divisor;
  cost.bytes_moved = logical_io > 0 ? cost.bytes_moved * device_io / logical_io : cost.bytes_moved / work_divisor;
  return ComputeSeconds(cost, config);
}

absl::StatusOr<NodeCandidates> OpCandidates(const Graph& graph, OpId op_id, const CostConfig& config) {
  const OpNode& op = graph.op(op_id);
  const std::vector<TensorDesc> inputs = Descs(graph, op.inputs), outputs = Descs(graph, op.outputs);
  const std::vector<SbpSignature> one_d = op.def->sbp(op.attrs, inputs);
  std::vector<NdSbpSignature> nd = DeriveNdSignatures(one_d, op.placement->num_hierarchy_axes());
  const std::vector<PinRef> pins = PinsOf(graph, op);
  NodeCandidates result;
  for (NdSbpSignature& sig : nd) {
    if (sig.inputs.size() != inputs.size() || sig.outputs.size() != outputs.size()) {
      return absl::InternalError(absl::StrCat(graph.Describe(op_id), ": the registry's SBP signature ",
                                              sig.ToString(), " does not match the op's ", inputs.size(),
                                              " inputs and ", outputs.size(), " outputs"));
    }
    const bool duplicate = std::any_of(result.all.begin(), result.all.end(),
                                       [&](const SbpCandidate& c) { return c.signature == sig; });
    if (duplicate) continue;
    SbpCandidate candidate;
    candidate.rejected_reason = ShapeConflict(op, inputs, outputs, sig);
    if (candidate.rejected_reason.empty()) candidate.rejected_reason = PinConflict(graph, op, pins, sig, -1);
    if (candidate.rejected_reason.empty()) {
      candidate.compute_seconds = SignatureComputeSeconds(op, inputs, outputs, sig, config);
      result.eligible.push_back(static_cast<int>(result.all.size()));
    }
    candidate.signature = std::move(sig);
    result.all.push_back(std::move(candidate));
  }
  if (result.eligible.empty()) return NoCandidateError(graph, op, result, pins, inputs, outputs);
  return result;
}

NodeCandidates SourceCandidates(const Graph& graph, TensorId source) {
  const TensorNode& t = graph.tensor(source);
  const Placement& placement = *t.placement;
  const int mesh_axes = placement.num_hierarchy_axes();
  std::vector<Sbp> options = {Sbp::Broadcast()};
  for (int a = 0; a < t.desc->shape.num_axes(); ++a) options.push_back(Sbp::Split(a));
  std::vector<NdSbp> layouts;
  std::vector<size_t> pick(mesh_axes, 0);
  while (true) {
    std::vector<Sbp> sbps;
    for (int a = 0; a < mesh_axes; ++a) sbps.push_back(options[pick[a]]);
    layouts.emplace_back(std::move(sbps));
    int a = mesh_axes - 1;
    while (a >= 0 && ++pick[a] == options.size()) pick[a--] = 0;
    if (a < 0) break;
  }
  if (t.pinned_nd_sbp && std::find(layouts.begin(), layouts.end(), *t.pinned_nd_sbp) == layouts.end()) {
    layouts.push_back(*t.pinned_nd_sbp);
  }
  NodeCandidates result;
  for (NdSbp& layout : layouts) {
    SbpCandidate candidate;
    absl::Status valid = ValidateNdSbp(layout, t.desc->shape, placement);
    if (!valid.ok()) {
      candidate.rejected_reason = std::string(valid.message());
    } else if (t.pinned_nd_sbp && *t.pinned_nd_sbp != layout) {
      candidate.rejected_reason = absl::StrCat(graph.Describe(source), " is pinned to ", NdSbpText(*t.pinned_nd_sbp));
    } else {
      result.eligible.push_back(static_cast<int>(result.all.size()));
    }
    candidate.signature.outputs.push_back(std::move(layout));
    result.all.push_back(std::move(candidate));
  }
  return result;
}

}  // namespace compiler
}  // namespace oneflow_like
