// Pass 2b, optimizer: after AutogradPass, one optimizer op per trainable variable with a
// gradient (GradientOf), per graph.config().optimizer(), plus the state it keeps.
//
//   SGD    momentum buffer "<w>/momentum" (frozen, zeros);
//          op "<w>/sgd_update" = sgd_update(w, w/grad, <w>/momentum){lr, momentum, weight_decay}
//          -> "<w>/new", "<w>/momentum/new".  With momentum 0 there is no buffer: op
//          "<w>/sgd_update" = sgd_plain_update(w, w/grad){lr, weight_decay} -> "<w>/new".
//   ADAM   moments "<w>/adam_m", "<w>/adam_v" (frozen, zeros);
//   ADAMW  op "<w>/adam_update" = adam_update(w, w/grad, m, v, step){lr, beta1 (0.9),
//          beta2 (0.999), epsilon (1e-8), bias_correction (true), weight_decay,
//          decoupled_weight_decay = (kind == ADAMW)}  -> "<w>/new", "<w>/adam_m/new",
//          "<w>/adam_v/new".  ADAM adds weight_decay * w to the gradient (L2, coupled);
//          ADAMW scales w by 1 - lr * weight_decay (decoupled).
//   Step counter (Adam only): one frozen int64 scalar variable per distinct parameter
//          placement, "optimizer/step" (then "optimizer/step_1", ... in order of first use),
//          zero-initialized, and op "<counter>/increment" = step_increment(counter) ->
//          "<counter>/next" = counter + 1. The Adam ops of that placement read "<counter>/next",
//          so step k of training (1-based) uses t = k; "<counter>/next" is the counter's update.
// Every state variable takes the parameter's placement; every optimizer op the parameter's
// placement and the stage of the gradient's producer. Graph::AddVariableUpdate records the
// parameter's and each state's new value (optimizer ops run once per step; see graph.h).
//
// ZeRO-1 (config.zero_stage() == 1): the optimizer state is sharded over the data-parallel
// mesh axis, axis 0 of the parameter's placement hierarchy. For a parameter w of rank >= 1
// whose own pin is absent or B on axis 0, the layout Z = [S(0), rest...] (rest: w's pinned
// Sbp on axes 1.. or B) is used when ValidateNdSbp(Z, w.shape, w.placement) accepts it (every
// shard non-empty): Z pins the state variables (pinned_nd_sbp) and the optimizer op's param,
// grad and state inputs and all its outputs (the step input stays free, B). The boxing
// planner then reduce-scatters the gradient into Z, and all-gathers the updated parameter
// back into w's layout. Other parameters stay unpinned (plain data-parallel update).
// On a mesh of 2+ axes (dp x tp): only a parameter with a pin of its own (the tensor-parallel
// weights, [B, S(k)]) gets Z, and Z's axis 0 splits the first dimension that no other axis of
// Z splits and ValidateNdSbp accepts (else the first dimension it accepts): [B, S(0)] on a
// 2 x 2 mesh -> [S(1), S(0)], a local slice of the rank's block, where [S(0), S(0)] would move
// data both ways. An unpinned parameter there gets no Z: the SBP solver places its state (it
// already splits the large ones over both axes under ZeRO-0), and pinning them [S(0), B] raised
// the GPT's planned peak (optimizer_pass.cc, ZeroShardedLayout). A 1-axis mesh keeps the rule
// above exactly.
// Example: w1 float32[128,256] on cpu:[0,1,2,3], unpinned -> Z = [S(0)]: each rank keeps
// 32 rows of w1/adam_m and w1/adam_v. b float32[2] on the same 4 ranks -> no pins (2 < 4).
//
// ZeRO-2 (config.zero_stage() == 2; FSDP's SHARD_GRAD_OP, "sharded parameters" in
// docs/distributed.md): as ZeRO-1, and the parameter variable itself is pinned to Z, so it is
// stored sharded between steps and its update "<w>/new" (in Z) needs no all-gather after the
// optimizer. Every consumer of the parameter on its placement (forward, backward, recompute
// clones) whose input has no pin of its own is pinned to the gathered layout G = [B, rest...]
// (ZeroGatheredLayout), the layout plain data parallelism computes with: the lowering then
// all-gathers Z -> G once per step in front of the first consumer and every consumer reads that
// one register (live from the first forward use to the last backward use). The next step's
// all-gathers wait only for their own parameter's update, so they overlap the forward pass
// layer by layer instead of ending the step. Parameters without Z (rule above) stay unsharded.
// Only on a 1-axis mesh: on a mesh of 2+ axes ZeRO-2 gives every parameter the ZeRO-1 treatment
// (pinning the readers took their layout away from the SBP solver and raised the planned peak:
// W2 dp2 x tp2 139.5 MiB against ZeRO-1's 129.3). ZeRO (1 or 2) shards nothing over a 1-axis
// mesh on which some variable is pinned split: that axis is tensor parallel (GPT dp 1, tp 2).
// Example: w1 float32[128,256] on cpu:[0,1,2,3] is stored as 32-row shards; h = matmul(x, w1)
// reads w1 as (B) through one all-gather, and so does the backward's dx = dh w1^T.
//
// Variables that already have an update are skipped, so running the pass twice changes
// nothing. Inference jobs (no optimizer) are left alone. REQUIRES: an inferred graph.
// Errors: InvalidArgument if a state variable's name is already used. Deterministic.
#ifndef ONEFLOW_LIKE_COMPILER_AUTOGRAD_OPTIMIZER_PASS_H_
#define ONEFLOW_LIKE_COMPILER_AUTOGRAD_OPTIMIZER_PASS_H_

#include <optional>
#include <string>

#include "oneflow_like/compiler/graph.h"
#include "oneflow_like/compiler/pass.h"

namespace oneflow_like {
namespace compiler {

class OptimizerPass : public Pass {
 public:
  std::string name() const override { return "optimizer"; }
  absl::StatusOr<bool> Run(Graph* graph) override;
};

// The ZeRO-1 layout Z of the optimizer state of `parameter` (rule above), or nullopt when
// the parameter is not sharded. REQUIRES: the parameter has a desc and a placement.
std::optional<NdSbp> ZeroShardedLayout(const TensorNode& parameter);

// ZeRO-2: the layout the consumers of a parameter stored in `zero` read: axis 0 Broadcast, the
// other axes as in `zero`. Example: [S(0), S(1)] -> [B, S(1)].
NdSbp ZeroGatheredLayout(const NdSbp& zero);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_AUTOGRAD_OPTIMIZER_PASS_H_
