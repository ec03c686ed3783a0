// Test helpers for the lowering tests: text graph -> annotated graph -> PlanProto, and queries
// over a PlanProto (tasks of a type per rank, registers by name). Test-only.
#ifndef ONEFLOW_LIKE_COMPILER_LOWER_LOWER_TEST_UTIL_H_
#define ONEFLOW_LIKE_COMPILER_LOWER_LOWER_TEST_UTIL_H_

#include <functional>
#include <string>
#include <vector>

#include "oneflow_like/compiler/lower/lower.h"

namespace oneflow_like {
namespace compiler {
namespace testing {

// Parses and infers `text` (CHECK-fails on error), calls `edit` (e.g. to add variable updates
// or remove an annotation) after the test annotation when given, then lowers.
absl::StatusOr<PlanProto> LowerText(const std::string& text, const LowerOptions& options = {},
                                    const std::function<void(Graph*)>& edit = nullptr, bool annotate = true);
// LowerText that CHECK-fails on error.
PlanProto LowerTextOrDie(const std::string& text, const LowerOptions& options = {},
                         const std::function<void(Graph*)>& edit = nullptr);
// Adds the update `variable` <- `new_value` (by tensor names; CHECK-fails on error).
void AddUpdate(Graph* graph, const std::string& variable, const std::string& new_value);

// The annotated graph LowerText lowers (`registry` must outlive it).
Graph AnnotatedGraph(const std::string& text, const OpRegistry& registry,
                     const std::function<void(Graph*)>& edit = nullptr);

// Lowers `graph` whole and once per rank (options.only_rank = 0 .. world_size - 1) and expects,
// byte for byte, every per-rank plan's rank plan, memory entry and plan-level fields to equal
// the whole plan's, its per_rank facts to match the other ranks' plans (step-rate mirrors, inputs,
// output holders), and the parts merged (MergeRankPlans) to equal the whole plan; and every part
// of LowerRankRange over ranges of 2 and 3 ranks and the whole world to equal its rank's own
// lowering, byte for byte. Returns the whole plan (empty if lowering failed).
PlanProto ExpectPerRankMatchesWhole(const Graph& graph, LowerOptions options);

// A data-parallel MLP on cpu:[0,1] with a hand-written weight gradient of its second layer (a
// partial sum) and an SGD update of w2 and its momentum buffer `buf` (job seed 5):
//   x[8,4] S(0), dy[8,3] S(0); h = matmul(x, w1[4,6]); a = relu(h); y = matmul(a, w2[6,3]);
//   dw2 = matmul(a, dy, transpose_a); w2_new, buf_new = sgd_update(w2, dw2, buf); output(y).
std::string MlpText(int micro_batches, int accumulation_steps = 1);
// Adds the updates w2 <- w2_new and buf <- buf_new of MlpText.
void AddMlpUpdates(Graph* graph);

const RankPlanProto& RankPlan(const PlanProto& plan, int rank);  // CHECK-fails if absent
// Tasks of `type` on `rank` (all ranks if rank < 0), in plan order.
std::vector<const TaskProto*> TasksOfType(const PlanProto& plan, TaskProto::Type type, int rank = -1);
int CountTasks(const PlanProto& plan, TaskProto::Type type, int rank = -1);
// The task named `name` (e.g. "y@r0"); CHECK-fails if absent.
const TaskProto& FindTask(const PlanProto& plan, const std::string& name);
// The register produced on `rank` with id `id` (not a mirror); null if absent.
const RegisterProto* FindLocalRegister(const PlanProto& plan, int rank, int64_t id);
// The register named `name` produced on its rank; CHECK-fails if absent.
const RegisterProto& FindRegisterByName(const PlanProto& plan, const std::string& name);
// Mirrors (remote registers) held by `rank`.
std::vector<const RegisterProto*> Mirrors(const PlanProto& plan, int rank);

}  // namespace testing
}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_LOWER_LOWER_TEST_UTIL_H_
