// Pass 1, shape/dtype inference. Visits the ops in program order and, for each op:
//   1. placement: keeps an explicit one, else takes the placement of its first input that has
//      one; an input or variable without placement takes the placement of its first consumer;
//   2. output descs from OpDef::Infer on the input descs (a desc already present on an output
//      is an assertion and must match);
//   3. output tensors take the op's placement;
//   4. pinned SBPs (the op's per-input/output pins, the tensors' pins) are checked against
//      the shapes and the placement with ValidateNdSbp.
// Finally every input/variable must have a placement and the loss (if training) must be a
// floating-point scalar.
//
// User errors are InvalidArgument and extend the op's own message with the tensors involved
// and a hint, e.g.
//   matmul 'y': inner dimensions differ: a float32[64,128] (transpose_a=false) has k=128, b
//   float32[256,128] has k=256 (transpose_b=false); inputs: x float32[64,128] sbp=[S(0)],
//   w float32[256,128] (hint: did you mean transpose_b=true?)
// The hint flips each bool attribute of the op in turn and suggests those that make inference
// succeed. Running the pass again on an inferred graph changes nothing (returns false).
#ifndef ONEFLOW_LIKE_COMPILER_INFER_PASS_H_
#define ONEFLOW_LIKE_COMPILER_INFER_PASS_H_

#include <string>

#include "oneflow_like/compiler/graph.h"
#include "oneflow_like/compiler/pass.h"

namespace oneflow_like {
namespace compiler {

class InferPass : public Pass {
 public:
  std::string name() const override { return "infer_shapes"; }
  absl::StatusOr<bool> Run(Graph* graph) override;
};

// Steps 1-4 above for one op, for passes that add ops to an inferred graph (autograd,
// boxing): AddOp, then InferOp. Returns whether anything was filled in.
// REQUIRES: every input of the op has a desc (sources always do; produced tensors once their
// producer was inferred) — otherwise InternalError.
absl::StatusOr<bool> InferOp(Graph* graph, OpId op);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_INFER_PASS_H_
