// Test-only SBP annotation, so lowering tests can start from text graphs before the real SBP
// selection pass exists. Deterministic and cost-free:
//   - a source takes its pinned NdSbp, else all-B;
//   - an op (in program order) takes, among DeriveNdSignatures(OpDef::sbp) on its placement's
//     mesh, the signatures that satisfy every pin (op input/output pins, pins on its output
//     tensors) and lay out every input/output shape on the placement; of these the one with the
//     fewest inputs whose producer's layout differs (ties: the first).
// Example: x S(0) on cpu:[0,1]; `y = relu(x) in_sbp=[[B]]` gets (B) -> (B), so lowering must
// box x S(0) -> B.
#ifndef ONEFLOW_LIKE_COMPILER_LOWER_TEST_ANNOTATE_H_
#define ONEFLOW_LIKE_COMPILER_LOWER_TEST_ANNOTATE_H_

#include "oneflow_like/compiler/graph.h"

namespace oneflow_like {
namespace compiler {
namespace testing {

// REQUIRES: `graph` inferred. InvalidArgument naming the op when no signature fits.
absl::Status AnnotateSbpForTest(Graph* graph);

}  // namespace testing
}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_LOWER_TEST_ANNOTATE_H_
