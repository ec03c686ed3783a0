// Compile time grows about linearly with ops x ranks: a deep data-parallel network with
// per-layer weight gradients all-reduced by collectives, on 64 and 512 ranks.
#include <time.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "oneflow_like/compiler/lower/lower_test_util.h"

namespace oneflow_like {
namespace compiler {
namespace testing {
namespace {

// `layers` x (matmul, gelu, weight gradient as a partial sum, sgd_update) on cpu:0-(ranks-1).
std::string DeepText(int layers, int ranks) {
  std::string text = absl::StrCat("config(name=\"deep\", micro_batches=2)\n", "x0 = input(shape=[", 2 * ranks,
                                  ",16]) placement=cpu:0-", ranks - 1, " sbp=[S(0)]\n",
                                  "dy = input(shape=[", 2 * ranks, ",16]) sbp=[S(0)]\n");
  for (int l = 0; l < layers; ++l) {
    absl::StrAppend(&text, "w", l, " = variable(shape=[16,16], init=normal(0.02))\n");
    absl::StrAppend(&text, "m", l, " = variable(shape=[16,16], init=zeros)\n");
    absl::StrAppend(&text, "h", l, " = matmul(x", l, ", w", l, ")\n");
    absl::StrAppend(&text, "x", l + 1, " = gelu(h", l, ")\n");
    absl::StrAppend(&text, "g", l, " = matmul(x", l, ", dy, transpose_a=true)\n");
    absl::StrAppend(&text, "w", l, "_new, m", l, "_new = sgd_update(w", l, ", g", l, ", m", l, ", lr=0.1)\n");
  }
  absl::StrAppend(&text, "output(x", layers, ")\n");
  return text;
}

// CPU seconds of this process: unlike wall time, not inflated by other tests sharing the cores.
double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double LowerSeconds(int layers, int ranks, int64_t* tasks) {
  LowerOptions options;
  options.boxing = BoxingStyle::kCollective;
  const double start = CpuSeconds();
  const PlanProto plan = LowerTextOrDie(DeepText(layers, ranks), options, [layers](Graph* g) {
    for (int l = 0; l < layers; ++l) {
      AddUpdate(g, absl::StrCat("w", l), absl::StrCat("w", l, "_new"));
      AddUpdate(g, absl::StrCat("m", l), absl::StrCat("m", l, "_new"));
    }
  });
  const double seconds = CpuSeconds() - start;
  *tasks = 0;
  for (const RankPlanProto& r : plan.rank_plans()) *tasks += r.tasks_size();
  EXPECT_EQ(CountTasks(plan, TaskProto::COLLECTIVE, 0), layers);  // one all-reduce per gradient
  return seconds;
}

TEST(LowerScaleTest, GrowsAboutLinearlyWithRanks) {
  int64_t small_tasks = 0, large_tasks = 0;
  const double small = LowerSeconds(24, 64, &small_tasks);
  const double large = LowerSeconds(24, 512, &large_tasks);
  std::cout << "64 ranks: " << small_tasks << " tasks in " << small << " CPU s; 512 ranks: " << large_tasks
            << " tasks in " << large << " CPU s\n";
  EXPECT_EQ(large_tasks, 8 * small_tasks);
  EXPECT_LT(large, 30.0);
  EXPECT_LT(large, 8 * small * 4 + 1.0);  // within 4x of linear (plus noise)
}

}  // namespace
}  // namespace testing
}  // namespace compiler
}  // namespace oneflow_like
