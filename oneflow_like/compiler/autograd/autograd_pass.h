// Pass 2a, autograd: appends the backward program of a training job to its forward program.
//
// Runs when the job config has an optimizer and a loss (graph.config().loss(), a floating
// scalar); otherwise it changes nothing. REQUIRES: an inferred graph (infer_pass.h).
//
//   1. Seed: d(loss) = fill(shape=[], value=1/pieces_per_step), tensor and op "<loss>/grad",
//      with pieces_per_step = max(1, micro_batches) * max(1, gradient_accumulation_steps).
//      Each piece's loss is a mean over the piece; the per-piece gradients are summed over the
//      step (ACCUMULATE), so scaling each by 1/pieces makes the sum the gradient of the mean
//      over the whole step's batch.
//   2. Which tensors need gradients: trainable variables (not frozen, floating point) and
//      floating outputs of differentiable ops (OpDef::grad set, not optimizer ops) that read
//      one. An op is *active* when one of its outputs needs a gradient and reaches the loss;
//      inactive ops are skipped, int tensors and user inputs never get gradients, and an op
//      without a gradient rule stops the flow (its inputs get nothing from it).
//   3. Active ops in reverse program order: the gradients of the op's outputs are complete (all
//      consumers come later in program order); several contributions are summed with `add`
//      ("<tensor>/grad" is the final sum). The op's OpDef::grad rule then runs through
//      GraphGradContext (grad_context.h): emitted ops are named "<op>/grad0", "<op>/grad1", ...
//      and take the forward op's placement and stage; outputs without gradient read zeros
//      (fill "<out>/zero_grad"); values of ops with recompute=true are read from a clone
//      "<op>/recompute" appended before the first backward op that needs it, so the original
//      activations can be freed after the forward consumers.
//   4. Every trainable variable that received a gradient ends with a tensor named
//      GradientName(variable) = "<variable>/grad" (an `add` of its contributions, the renamed
//      sole contribution, or, when a rule passed another tensor through, an `identity`).
//
// Worked example (x input, w trainable, loss = sparse_softmax_cross_entropy(y, label)):
//   y = matmul(x, w)                   forward
//   loss/grad = fill([], 1.0)          seed                      op "loss/grad"
//   loss/grad0 = sparse_softmax_cross_entropy_grad(y, label, loss/grad)
//                                      renamed "y/grad"          op "loss/grad0"
//   w/grad = matmul(x, y/grad, transpose_a=true)                 op "y/grad0"
// (x needs no gradient, so matmul's rule emits only dw.)
//
// Errors: InvalidArgument naming the loss (missing, not in the graph, not a floating scalar,
// not depending on any trainable variable) or a tensor whose name clashes with a gradient
// name. Running the pass twice changes nothing the second time (the seed exists). Deterministic.
#ifndef ONEFLOW_LIKE_COMPILER_AUTOGRAD_AUTOGRAD_PASS_H_
#define ONEFLOW_LIKE_COMPILER_AUTOGRAD_AUTOGRAD_PASS_H_

#include <string>

#include "absl/strings/string_view.h"
#include "oneflow_like/compiler/graph.h"
#include "oneflow_like/compiler/pass.h"

namespace oneflow_like {
namespace compiler {

class AutogradPass : public Pass {
 public:
  std::string name() const override { return "autograd"; }
  absl::StatusOr<bool> Run(Graph* graph) override;
};

// "<tensor>/grad": the name of a variable's (and of the loss's seed) gradient tensor.
std::string GradientName(absl::string_view tensor_name);

// The gradient tensor of `variable` after AutogradPass, or an invalid id if it has none
// (frozen, not reaching the loss, inference job, pass not run).
TensorId GradientOf(const Graph& graph, TensorId variable);

// (PiecesPerStep, the pieces of one step, is declared in graph.h.)

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_AUTOGRAD_AUTOGRAD_PASS_H_
