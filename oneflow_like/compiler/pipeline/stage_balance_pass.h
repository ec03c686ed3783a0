// StageBalancePass: automatic pipeline stages. When the job's config lists stage placements
// (JobConfigProto.stage_placements, text format `config(stages=[cpu:[0,1], cpu:[2,3]])`), the
// pass cuts the ops, in program order, into S = stage_placements.size() contiguous stages whose
// most expensive stage is as cheap as possible (stage_partition.h: exact, then most even), and
// sets for every op OpNode::stage = s and OpNode::placement = stage_placements[s]. Without
// stage placements it does nothing and returns false.
//
// Where it runs: FIRST, on the graph as built or parsed (before the first InferPass, before
// autograd). Two reasons: the user's own op placements can only be told apart from inferred
// ones before inference, and a job whose only placements are the stage placements would fail
// inference ("no placement") without this pass. It infers shapes on a scratch copy to price
// the ops, places the graph, then runs InferPass itself, so it leaves an inferred graph that
// VerifyGraph accepts (the driver's InferPass after it changes nothing).
//
// Backward and optimizer ops are created later by the autograd / optimizer passes, which give
// every gradient op its forward op's stage and placement: balancing the forward ops balances
// the backward too (a backward op costs about twice its forward op).
//
// Cost of op i in stage s: ComputeSeconds(OpDef::Cost on the logical shapes, with flops and
// bytes divided by the number of devices of stage_placements[s]) + variable_byte_seconds x the
// bytes of the variables it reads. Relative weights only; a stage costs the sum of its ops'.
//
// Tensors: op outputs take their op's placement; an input or variable without a placement
// takes its first consumer's (in program order); sources the user placed keep their placement
// (boxing moves them). Pinned SBPs must validate on the new placements.
//
// Worked example (stages=[cpu:[0], cpu:[1]]):
//   x = input(shape=[64,512])
//   w1 = variable(shape=[512,512])  w2 = variable(shape=[512,8])  w3 = variable(shape=[8,8])
//   h1 = matmul(x, w1)      # 33.6 MFLOP: the bottleneck, alone in stage 0 on cpu:[0]
//   h2 = matmul(h1, w2)     #  0.5 MFLOP  \ stage 1 on cpu:[1]
//   h3 = matmul(h2, w3)     #  8 kFLOP    /
// x and w1 go to cpu:[0] with h1; w2, w3 to cpu:[1]. report() lists both stages.
//
// Constraints: an op's own stage (non-zero; 0 reads as "unset") or placement restricts it to the
// stages with that index / placement; the cut is the best one that honors them. So running the
// pass again keeps the cut (the assigned stages now constrain it) and returns false.
//
// Errors (InvalidArgument naming the op or tensor, with a hint): an op whose stage/placement
// matches no stage, or constrained ops that no contiguous cut can order; fewer ops than stages;
// a pinned SBP that does not fit its stage's placement (e.g. 2 SBPs on a 1-D stage); shape
// errors (from inference). FailedPrecondition if the graph already has variable updates (the
// pass must run before autograd). Not thread-safe; deterministic.
#ifndef ONEFLOW_LIKE_COMPILER_PIPELINE_STAGE_BALANCE_PASS_H_
#define ONEFLOW_LIKE_COMPILER_PIPELINE_STAGE_BALANCE_PASS_H_

#include <string>
#include <vector>

#include "oneflow_like/compiler/boxing/cost_model.h"
#include "oneflow_like/compiler/graph.h"
#include "oneflow_like/compiler/pass.h"

namespace oneflow_like {
namespace compiler {

struct StageBalanceOptions {
  CostConfig cost;                   // prices each op's FLOPs and bytes (cost_model.h defaults)
  double variable_byte_seconds = 0;  // extra cost per byte of variables an op reads; 0 = compute only
};

// The cut the pass chose, for tools and tests.
struct StageBalanceReport {
  struct Stage {
    Placement placement;
    std::vector<OpId> ops;  // in program order
    double seconds = 0;     // the sum of its ops' costs on this stage
  };
  std::vector<Stage> stages;     // empty when the pass did nothing
  double bottleneck_seconds = 0;  // max over stages

  // One line per stage: "stage 1 on cpu:[2,3]: 4 ops (fc3 .. loss), 1.25 ms".
  std::string ToString(const Graph& graph) const;
};

class StageBalancePass : public Pass {
 public:
  explicit StageBalancePass(StageBalanceOptions options = {}) : options_(std::move(options)) {}

  std::string name() const override { return "stage_balance"; }
  absl::StatusOr<bool> Run(Graph* graph) override;

  // The cut of the last Run (empty if it did nothing or failed).
  const StageBalanceReport& report() const { return report_; }

 private:
  StageBalanceOptions options_;
  StageBalanceReport report_;
};

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_PIPELINE_STAGE_BALANCE_PASS_H_
