// The graph verifier: structural invariants every pass must preserve. A violation is a
// compiler bug, reported as absl::InternalError("graph verifier: <problem>") naming the op or
// tensor and what is wrong. PassPipeline (pass.h) runs it after every pass in tests.
//
// Always checked:
//   - ids: tensors()[i].id == i and ops()[i].id == i; names non-empty, unique and indexed;
//   - the program order lists every op once, and every op input is a source or is produced
//     by an op earlier in that order ("produced before use");
//   - every op has its registered OpDef, an input/output count the OpDef allows, pin indices
//     in range and stage >= 0; every input/output id exists (no dangling references);
//   - links are symmetric: op o lists tensor t as output k  <=>  t.producer == o and
//     t.producer_output == k; op o reads t as input i  <=>  (o, i) is in t.consumers, once;
//     sources (inputs, variables) have no producer, every other tensor has one;
//   - the job config is consistent (ValidateJobConfig);
//   - variable updates name a variable (at most once) and an op output with the same desc.
// With VerifierOptions::require_inferred (the default; true after the infer pass):
//   - every tensor has a desc and a placement, every op a placement, and op outputs share
//     their op's placement;
//   - the descs of each op's outputs equal what OpDef::Infer computes from its input descs;
//   - pinned SBPs have one Sbp per placement hierarchy axis and pass ValidateNdSbp.
// When SBPs were chosen (OpNode::nd_sbp_signature, TensorNode::nd_sbp present):
//   - a signature has one NdSbp per input and per output, each with as many axes as the op's
//     placement hierarchy, and agrees with the op's pins; a tensor's chosen NdSbp has as many
//     axes as its placement hierarchy and agrees with its pin.
//
// Pure function of the graph; thread-safe for concurrent calls on a graph nobody mutates.
#ifndef ONEFLOW_LIKE_COMPILER_VERIFIER_H_
#define ONEFLOW_LIKE_COMPILER_VERIFIER_H_

#include "oneflow_like/compiler/graph.h"

namespace oneflow_like {
namespace compiler {

struct VerifierOptions {
  // Check what the infer pass establishes (descs, placements, pins against shapes). Turn off
  // only for graphs straight from the parser or the builder.
  bool require_inferred = true;
};

absl::Status VerifyGraph(const Graph& graph, const VerifierOptions& options = {});

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_VERIFIER_H_
