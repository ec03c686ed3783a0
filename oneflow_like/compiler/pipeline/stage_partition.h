// The stage-cut problem behind automatic pipelining, as a pure function: cut a sequence of n
// items (ops in program order) into S non-empty contiguous runs, run s going to stage s, so that
// the most expensive stage is as cheap as possible.
//
// Costs may depend on the stage (a stage on 4 devices runs an op faster than one on 2), so
// cost[s][i] is the seconds item i takes when it lands in stage s; a stage costs the sum of its
// items' costs there. Items may be restricted to some stages (an op the user placed on a
// placement that only some stages have).
//
// The cut is exact: a dynamic program over (stages used, items covered) first finds the
// smallest possible bottleneck B, then, among the cuts whose every stage costs <= B, picks the
// one with the smallest sum of squared stage costs (the most even one). Ties keep the later cut
// point. O(S * n * w) time where w is the number of items a stage spans (n^2 at worst), O(S * n)
// memory. Deterministic.
//
// Worked example, the same costs on every stage:
//   [2, 1, 8, 1, 1] into 2 stages: [2,1 | 8,1,1], bottleneck 10 (the other cuts give 11);
//                   into 3 stages: [2,1 | 8 | 1,1], bottleneck 8; into 5: one item each;
//                   into 6: InvalidArgument (a stage would be empty).
//   [6, 1, 2, 3] into 3 stages: [6 | 1 | 2,3] and [6 | 1,2 | 3] both reach the bottleneck 6;
//                   the second is more even (36+9+9 < 36+1+25) and is chosen.
#ifndef ONEFLOW_LIKE_COMPILER_PIPELINE_STAGE_PARTITION_H_
#define ONEFLOW_LIKE_COMPILER_PIPELINE_STAGE_PARTITION_H_

#include <vector>

#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace compiler {

struct StagePartitionProblem {
  // cost[s][i] >= 0: seconds of item i in stage s. S = cost.size() >= 1 rows of n items each.
  std::vector<std::vector<double>> cost;
  // Empty, or one entry per item: allowed[i] empty = any stage, else allowed[i][s] says whether
  // item i may land in stage s (S entries).
  std::vector<std::vector<bool>> allowed;
};

struct StagePartition {
  std::vector<int> stage_of;          // per item: its stage, non-decreasing, 0 .. S-1 all used
  std::vector<double> stage_seconds;  // per stage: the sum of its items' costs there
  double bottleneck_seconds = 0;      // max of stage_seconds (the optimum)
};

// InvalidArgument: no stages, rows of different lengths, a negative or non-finite cost, fewer
// items than stages, or no cut that respects `allowed`.
absl::StatusOr<StagePartition> PartitionStages(const StagePartitionProblem& problem);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_PIPELINE_STAGE_PARTITION_H_
