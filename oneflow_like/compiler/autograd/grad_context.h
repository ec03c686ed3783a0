// Internal to the autograd pass: the GradContext (core/op_def.h) that turns an op's gradient
// rule into graph ops, and the state the pass keeps while it walks the program backwards.
//
// A gradient rule refers to values by name. GraphGradContext answers with tensor names of the
// graph and *buffers* the ops the rule emits (PendingOp) until the rule returns; Commit then
// adds them to the graph (Graph::AddOp + InferOp) in emission order. Buffering lets the pass
// give a value its final name once it knows what it is: when a rule's output is the only
// gradient contribution a tensor will receive, it is renamed "<tensor>/grad" before commit.
//
// Worked example: differentiating `fc1 = matmul(x, w1)` (w1 trainable, x an input) with
// d(fc1) = "fc1/grad":
//   rule emits matmul(x, fc1/grad, transpose_a=true)  ->  pending op "fc1/grad0", output
//   "fc1/grad0"; SetInputGrad(1, "fc1/grad0"); w1 expects one contribution, so Commit renames
//   the output "w1/grad" and adds  w1/grad = matmul(x, fc1/grad)  named op "fc1/grad0".
// Lazily created on request (also buffered, committed before the rule's own ops):
//   - zero gradients: output_grad(k) of an output that received none -> fill "<out>/zero_grad";
//   - recompute clones: input(i)/output(k) of a tensor produced by an op with recompute=true
//     -> the outputs "<out>/recompute" of the clone op "<op>/recompute" (shared by all rules).
// Every created op takes the placement and stage of the forward op being differentiated.
//
// Not thread-safe; one context per forward op, used once.
#ifndef ONEFLOW_LIKE_COMPILER_AUTOGRAD_GRAD_CONTEXT_H_
#define ONEFLOW_LIKE_COMPILER_AUTOGRAD_GRAD_CONTEXT_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "oneflow_like/compiler/graph.h"

namespace oneflow_like {
namespace compiler {
namespace autograd_internal {

// An op waiting to be added; tensors referred to by name.
struct PendingOp {
  std::string name;
  std::string type;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  AttrMap attrs;
  std::optional<Placement> placement;
  int stage = 0;
  std::map<int, NdSbp> pinned_input_nd_sbp;
  std::map<int, NdSbp> pinned_output_nd_sbp;
};

// Adds `op` (inputs resolved by name) and infers it. Errors name the op.
absl::StatusOr<OpId> AddAndInfer(Graph* graph, const PendingOp& op);

// What the pass knows about the original (forward) tensors, indexed by TensorId value.
struct BackwardState {
  explicit BackwardState(Graph* g) : graph(g) {}
  Graph* graph;
  std::vector<bool> requires_grad;               // depends on a trainable variable
  std::vector<int> expected_contributions;       // uses by active ops that need its gradient
  std::vector<std::vector<std::string>> contributions;  // gradient terms received so far
  std::vector<std::string> final_grad;           // the summed gradient, once known ("" = none)
  std::map<int64_t, std::vector<std::string>> clone_outputs;  // forward op id -> clone outputs
  std::set<std::string> reserved_names;          // names of pending ops and tensors
};

// A name unused by the graph's tensors and ops and by pending ops: `base`, else base_1, ...;
// reserves it.
std::string ReserveName(BackwardState* state, const std::string& base);

class GraphGradContext : public GradContext {
 public:
  // REQUIRES: the gradients of `op`'s outputs are final (state->final_grad) where they exist.
  GraphGradContext(BackwardState* state, OpId op);

  const AttrMap& attrs() const override { return op().attrs; }
  int num_inputs() const override { return static_cast<int>(op().inputs.size()); }
  int num_outputs() const override { return static_cast<int>(op().outputs.size()); }
  const std::string& input(int i) const override;
  const std::string& output(int i) const override;
  const TensorDesc& input_desc(int i) const override { return *graph_->tensor(op().inputs[i]).desc; }
  const TensorDesc& output_desc(int i) const override { return *graph_->tensor(op().outputs[i]).desc; }
  const std::string& output_grad(int i) const override;
  bool needs_input_grad(int i) const override;
  absl::StatusOr<std::vector<std::string>> Emit(const std::string& op_type, const std::vector<std::string>& inputs,
                                                const AttrMap& attrs) override;
  void SetInputGrad(int i, const std::string& value) override;

  // Adds the buffered ops to the graph and records each input gradient as a contribution to
  // its tensor (renaming sole contributions "<tensor>/grad"). Call once, after the rule.
  absl::Status Commit();

 private:
  // The name a backward op reads for forward tensor `t`: t itself, or its recompute clone.
  const std::string& ForwardValue(TensorId t) const;
  // Buffers a clone of recompute op `op` (and of its recompute producers); returns its outputs.
  const std::vector<std::string>& CloneOf(OpId op) const;
  // A fresh name (unused in the graph and among pending names), reserved.
  std::string FreshName(const std::string& base) const;
  void Buffer(PendingOp op) const;
  absl::StatusOr<TensorDesc> DescOf(const std::string& name) const;

  const OpNode& op() const { return graph_->op(op_id_); }

  BackwardState* state_;
  Graph* graph_;
  OpId op_id_;  // the forward op; the graph gains ops only in Commit
  // Caches for the const accessors (which may buffer zero fills and clones; neither can fail).
  mutable std::vector<std::optional<std::string>> input_names_, output_names_, output_grads_;
  mutable std::vector<PendingOp> pending_;
  mutable std::map<std::string, TensorDesc> pending_descs_;
  std::set<std::string> emitted_outputs_;  // outputs of ops the rule emitted (renamable)
  std::vector<std::optional<std::string>> input_grads_;
  int next_grad_op_ = 0;
};

}  // namespace autograd_internal
}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_AUTOGRAD_GRAD_CONTEXT_H_
