#include "oneflow_like/compiler/lower/test_annotate.h"

#include "absl/strings/str_cat.h"

namespace oneflow_like {
namespace compiler {
namespace testing {
namespace {

bool Fits(const NdSbp& nd_sbp, const TensorDesc& desc, const Placement& placement) {
  return ValidateNdSbp(nd_sbp, desc.shape, placement).ok();
}

}  // namespace

absl::Status AnnotateSbpForTest(Graph* graph) {
  for (const TensorNode& t : graph->tensors()) {
    if (!t.is_source()) continue;
    TensorNode* node = graph->mutable_tensor(t.id);
    node->nd_sbp = t.pinned_nd_sbp.has_value()
                       ? *t.pinned_nd_sbp
                       : NdSbp(std::vector<Sbp>(t.placement->num_hierarchy_axes(), Sbp::Broadcast()));
  }
  for (OpId id : graph->op_order()) {
    const OpNode& op = graph->op(id);
    const Placement& placement = *op.placement;
    std::vector<TensorDesc> in_descs;
    for (TensorId t : op.inputs) in_descs.push_back(*graph->tensor(t).desc);
    const std::vector<NdSbpSignature> candidates =
        DeriveNdSignatures(op.def->sbp(op.attrs, in_descs), placement.num_hierarchy_axes());
    int best = -1, best_mismatches = 0;
    for (size_t c = 0; c < candidates.size(); ++c) {
      const NdSbpSignature& sig = candidates[c];
      bool ok = true;
      int mismatches = 0;
      for (size_t i = 0; ok && i < op.inputs.size(); ++i) {
        const TensorNode& in = graph->tensor(op.inputs[i]);
        auto pin = op.pinned_input_nd_sbp.find(static_cast<int>(i));
        ok = Fits(sig.inputs[i], *in.desc, placement) &&
             (pin == op.pinned_input_nd_sbp.end() || pin->second == sig.inputs[i]);
        if (*in.placement != placement || *in.nd_sbp != sig.inputs[i]) ++mismatches;
      }
      for (size_t j = 0; ok && j < op.outputs.size(); ++j) {
        const TensorNode& out = graph->tensor(op.outputs[j]);
        auto pin = op.pinned_output_nd_sbp.find(static_cast<int>(j));
        ok = Fits(sig.outputs[j], *out.desc, placement) &&
             (pin == op.pinned_output_nd_sbp.end() || pin->second == sig.outputs[j]) &&
             (!out.pinned_nd_sbp.has_value() || *out.pinned_nd_sbp == sig.outputs[j]);
      }
      if (ok && (best < 0 || mismatches < best_mismatches)) {
        best = static_cast<int>(c);
        best_mismatches = mismatches;
      }
    }
    if (best < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(graph->Describe(id), ": no SBP signature satisfies its pins on ", placement.ToString()));
    }
    graph->mutable_op(id)->nd_sbp_signature = candidates[best];
    for (size_t j = 0; j < op.outputs.size(); ++j) {
      graph->mutable_tensor(op.outputs[j])->nd_sbp = candidates[best].outputs[j];
    }
  }
  return absl::OkStatus();
}

}  // namespace testing
}  // namespace compiler
}  // namespace oneflow_like
