// Sample jobs for the pipeline tests. Test-only.
#ifndef ONEFLOW_LIKE_COMPILER_PIPELINE_TEST_JOBS_H_
#define ONEFLOW_LIKE_COMPILER_PIPELINE_TEST_JOBS_H_

namespace oneflow_like {
namespace compiler {
namespace testing {

// A 4-layer MLP trained with SGD, 2 micro-batches, whose only placements are the stage
// placements cpu:[0] and cpu:[1]. Its first matmul h1 (x[32,512] x w1[512,512]) dominates, so
// the balanced cut puts h1 alone in stage 0 and everything after it (up to `loss`) in stage 1.
extern const char kTwoStageMlpText[];

}  // namespace testing
}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_PIPELINE_TEST_JOBS_H_
