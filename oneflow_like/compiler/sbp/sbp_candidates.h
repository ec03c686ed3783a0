// Candidate layouts for SBP selection: every SBP signature an op could run with, every layout
// a source (input or variable) could take, which of them the pins and shapes rule out (and
// why), and what each costs to compute.
//
// Ops: OpDef::sbp(attrs, input descs) gives 1-D signatures; DeriveNdSignatures combines them
// over the placement's mesh axes (duplicates dropped, order kept). A candidate is rejected,
// with a reason, when one of its NdSbps cannot lay out its tensor (ValidateNdSbp) or when it
// differs from a pin: OpNode::pinned_input_nd_sbp / pinned_output_nd_sbp, or the pin of an
// output tensor (TensorNode::pinned_nd_sbp).
// Sources: every NdSbp made of B and S(axis) per mesh axis (B first, then S(0), S(1), ...;
// mesh axis 0 varies slowest), rejected when invalid for the shape or different from the
// tensor's pin (a pin outside that set, e.g. P, is added as a candidate).
//
// Compute cost of an op at a signature, for one firing (ComputeSeconds of the scaled cost):
//   flops        = OpDef::Cost(logical descs).flops / W, where W multiplies the sizes of the
//                  mesh axes on which some input or output is split (the devices that share
//                  the work); B and P on an axis replicate it;
//   bytes_moved  = logical bytes_moved x (bytes of the largest device's shards of the inputs
//                  and outputs / their logical bytes): a B weight is read whole on every device.
// Example: matmul x[8,4096] (B) x w[4096,4096] (S(1)) on 4 ranks: W = 4, flops = 2*8*4096*4096/4,
// and each device moves 128 KB + 16 MB + 32 KB instead of the logical 64.3 MB.
//
// Thread-compatible: pure functions.
#ifndef ONEFLOW_LIKE_COMPILER_SBP_SBP_CANDIDATES_H_
#define ONEFLOW_LIKE_COMPILER_SBP_SBP_CANDIDATES_H_

#include <string>
#include <vector>

#include "oneflow_like/compiler/boxing/cost_model.h"
#include "oneflow_like/compiler/graph.h"

namespace oneflow_like {
namespace compiler {

struct SbpCandidate {
  NdSbpSignature signature;      // sources: no inputs and one output (the layout)
  std::string rejected_reason;   // non-empty: not eligible
  double compute_seconds = 0;    // one firing; eligible op candidates only
};

struct NodeCandidates {
  std::vector<SbpCandidate> all;  // in enumeration order (what decisions record)
  std::vector<int> eligible;      // indices into `all` of the candidates without a reason
};

// REQUIRES: the graph is inferred (descs and placements everywhere).
// InvalidArgument when no candidate is eligible, naming the op, its inputs' layouts/pins and
// shapes, the rejections, and a hint (which pin to drop, if dropping one helps).
absl::StatusOr<NodeCandidates> OpCandidates(const Graph& graph, OpId op, const CostConfig& config);

// REQUIRES: `source` is an inferred input or variable. Never empty of eligible candidates
// (a pinned tensor keeps its pin, which the infer pass validated).
NodeCandidates SourceCandidates(const Graph& graph, TensorId source);

// The compute cost of one firing of `op` at `signature` (see the header comment).
double SignatureComputeSeconds(const OpNode& op, const std::vector<TensorDesc>& inputs,
                               const std::vector<TensorDesc>& outputs, const NdSbpSignature& signature,
                               const CostConfig& config);

// Bytes of the largest shard (device 0 under balanced splits) of `desc` laid out as `nd_sbp`.
int64_t LargestShardBytes(const TensorDesc& desc, const NdSbp& nd_sbp, const Placement& placement);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_SBP_SBP_CANDIDATES_H_
