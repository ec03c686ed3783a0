// Tests only: the small GPT jobs the driver and plan tests compile under every layout kind (the
// per-rank compile, the streamed verifier, verification in parts), one description of a case
// and one way to build it.
//
//   GptTestCase c{"dp2_tp2_pp2_zero1", {.dp = 2, .tp = 2, .pp = 2}, /*micro_batches=*/4, /*zero=*/1};
//   ASSIGN_OR_RETURN(GlobalDecisions decisions, GptTestDecisions(c, registry));
//   ASSIGN_OR_RETURN(PlanProto whole, LowerDecisions(decisions, GptTestOptions(c)));
#ifndef ONEFLOW_LIKE_COMPILER_DRIVER_GPT_TEST_CASE_H_
#define ONEFLOW_LIKE_COMPILER_DRIVER_GPT_TEST_CASE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "oneflow_like/compiler/driver/compile.h"
#include "oneflow_like/core/op_registry.h"
#include "oneflow_like/models/gpt.h"

namespace oneflow_like {
namespace compiler {

struct GptTestCase {
  std::string name;
  models::ParallelLayout layout;
  int32_t micro_batches = 0;
  int32_t zero_stage = 0;
  bool recompute = false;
  BoxingStyle boxing = BoxingStyle::kPointToPoint;
  int64_t n_layer = 2;
  int64_t batch = 0;  // per piece; 0 = 2 per dp rank
  int32_t compute_streams = 1;
  int32_t world_size = 0;  // 0: the layout's
};

// The case's CompileOptions: its boxing, compute streams and world, and 2 KiB gradient buckets
// (several buckets on these small models).
CompileOptions GptTestOptions(const GptTestCase& c);

// The case's GPT (vocab 64, seq_len 8, n_embd 16, 2 heads) after the global passes, compiled
// with GptTestOptions(c).
absl::StatusOr<GlobalDecisions> GptTestDecisions(const GptTestCase& c, const OpRegistry& registry);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_DRIVER_GPT_TEST_CASE_H_
