// Lowered plans executed by the runtime (actor/session.h, all ranks in this process), checked
// against hand computations: the boxing transitions, point-to-point and as COLLECTIVE tasks
// (gloo), and a
// data-parallel SGD step with micro-batches against the same job on one device.
// Tagged manual in BUILD (the runtime package may be mid-edit); run it by name.
#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "oneflow_like/actor/session.h"
#include "oneflow_like/compiler/lower/lower_test_util.h"
#include "oneflow_like/compiler/test_util.h"

namespace oneflow_like {
namespace compiler {
namespace testing {
namespace {

Tensor Random(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> digit(-9, 9);
  std::vector<float> values(shape.elem_count());
  for (float& v : values) v = static_cast<float>(digit(rng)) / 4;
  return Tensor::FromVector(shape, values);
}

// The threaded executor (one thread per stream per rank), as in real runs.
absl::StatusOr<std::unique_ptr<actor::Session>> Open(const PlanProto& plan, const OpRegistry* registry) {
  actor::SessionOptions options;
  options.watchdog_timeout_ms = 5000;
  options.deterministic = false;
  return actor::Session::Create(plan, registry, options);
}

// a[6,4] S(1) and b[4,5] S(0) on `placement` give p = a b as a partial sum; the consumer
// reads it as `in_sbp` on `dst` (or p's placement). Fetched relu(p) must equal relu(a b).
TEST(LowerRuntimeTest, BoxedPartialSumsMatchTheReference) {
  struct Case {
    std::string placement, in_sbp, dst;
    BoxingStyle boxing;
  };
  const std::vector<Case> cases = {
      {"cpu:[0,1]", "B", "", BoxingStyle::kPointToPoint},
      {"cpu:[0,1,2]", "S(0)", "", BoxingStyle::kPointToPoint},
      {"cpu:[0,1,2]", "S(1)", "", BoxingStyle::kPointToPoint},
      {"cpu:[0,1]", "S(0)", "cpu:[2,3,4]", BoxingStyle::kPointToPoint},
      // COLLECTIVE tasks through gloo: all_reduce, reduce_scatter along rows and along columns
      {"cpu:[0,1]", "B", "", BoxingStyle::kCollective},
      {"cpu:[0,1,2]", "S(0)", "", BoxingStyle::kCollective},
      {"cpu:[0,1,2]", "S(1)", "", BoxingStyle::kCollective},
      {"cpu:[0,1,2,3]", "B", "", BoxingStyle::kCollective},
  };
  std::unique_ptr<OpRegistry> registry = BuiltinRegistry();
  const Tensor a = Random(Shape{6, 4}, 1), b = Random(Shape{4, 5}, 2);
  std::vector<float> expected(30, 0.0f);
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 5; ++j) {
      float sum = 0;
      for (int k = 0; k < 4; ++k) sum += a.data<float>()[i * 4 + k] * b.data<float>()[k * 5 + j];
      expected[i * 5 + j] = std::max(sum, 0.0f);
    }
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.placement + " P -> " + c.in_sbp + " " + c.dst +
                 (c.boxing == BoxingStyle::kCollective ? " collective" : " p2p"));
    LowerOptions options;
    options.boxing = c.boxing;
    const std::string dst = c.dst.empty() ? "" : " placement=" + c.dst;
    absl::StatusOr<PlanProto> plan = LowerText("a = input(shape=[6,4]) placement=" + c.placement +
                                                   " sbp=[S(1)]\nb = input(shape=[4,5]) sbp=[S(0)]\n"
                                                   "p = matmul(a, b) out_sbp=[[P]]\n"
                                                   "y = relu(p)" + dst + " in_sbp=[[" + c.in_sbp + "]]\noutput(y)\n",
                                               options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    int collectives = 0;
    for (const RankPlanProto& rank : plan->rank_plans()) {
      for (const TaskProto& task : rank.tasks()) collectives += task.type() == TaskProto::COLLECTIVE;
    }
    EXPECT_EQ(collectives > 0, c.boxing == BoxingStyle::kCollective);
    absl::StatusOr<std::unique_ptr<actor::Session>> session = Open(*plan, registry.get());
    ASSERT_TRUE(session.ok()) << session.status();
    ASSERT_TRUE((*session)->Feed("a", a).ok());
    ASSERT_TRUE((*session)->Feed("b", b).ok());
    absl::Status ran = (*session)->RunStep();
    ASSERT_TRUE(ran.ok()) << ran;
    absl::StatusOr<Tensor> y = (*session)->Fetch("y");
    ASSERT_TRUE(y.ok()) << y.status();
    const std::vector<float> got = y->ToVector<float>();
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-4) << "element " << i;
    EXPECT_TRUE((*session)->Close().ok());
  }
}

// The data-parallel MLP of lower_test_util (4 micro-batches, SGD with momentum on w2) run for
// two steps on cpu:[0,1] and on cpu:[0]: outputs and the updated w2 agree.
void TrainTwoWays(bool reuse_memory) {
  std::unique_ptr<OpRegistry> registry = BuiltinRegistry();
  std::string one_device = MlpText(4);
  for (size_t at = one_device.find("cpu:[0,1]"); at != std::string::npos; at = one_device.find("cpu:[0,1]")) {
    one_device.replace(at, 9, "cpu:[0]");
  }
  std::vector<std::vector<float>> w2, y;
  LowerOptions options;
  options.reuse_memory = reuse_memory;
  for (const std::string& text : {MlpText(4), one_device}) {
    const PlanProto plan = LowerTextOrDie(text, options, AddMlpUpdates);
    absl::StatusOr<std::unique_ptr<actor::Session>> session = Open(plan, registry.get());
    ASSERT_TRUE(session.ok()) << session.status();
    absl::StatusOr<Tensor> initial = (*session)->ReadVariable("w2");
    ASSERT_TRUE(initial.ok()) << initial.status();
    for (int step = 0; step < 2; ++step) {
      for (int piece = 0; piece < 4; ++piece) {
        ASSERT_TRUE((*session)->Feed("x", Random(Shape{8, 4}, 10 * step + piece)).ok());
        ASSERT_TRUE((*session)->Feed("dy", Random(Shape{8, 3}, 100 + 10 * step + piece)).ok());
      }
      absl::Status ran = (*session)->RunStep();
      ASSERT_TRUE(ran.ok()) << ran;
    }
    absl::StatusOr<Tensor> fetched = (*session)->Fetch("y", 3);
    ASSERT_TRUE(fetched.ok()) << fetched.status();
    y.push_back(fetched->ToVector<float>());
    absl::StatusOr<Tensor> w = (*session)->ReadVariable("w2");
    ASSERT_TRUE(w.ok()) << w.status();
    w2.push_back(w->ToVector<float>());
    double moved = 0;  // the updates were applied
    for (size_t i = 0; i < w2.back().size(); ++i) moved += std::abs(w2.back()[i] - initial->data<float>()[i]);
    EXPECT_GT(moved, 1e-3);
    EXPECT_TRUE((*session)->Close().ok());
  }
  ASSERT_EQ(w2.size(), 2u);
  for (size_t i = 0; i < w2[0].size(); ++i) EXPECT_NEAR(w2[0][i], w2[1][i], 1e-4) << "w2 element " << i;
  for (size_t i = 0; i < y[0].size(); ++i) EXPECT_NEAR(y[0][i], y[1][i], 1e-4) << "y element " << i;
}

TEST(LowerRuntimeTest, DataParallelTrainingMatchesOneDeviceWithoutMemoryReuse) { TrainTwoWays(false); }

// Lifetime-based reuse: the runtime fires ready actors in any order, but actors whose registers
// share bytes take turns in task order, so a next piece cannot overwrite bytes still being read.
TEST(LowerRuntimeTest, DataParallelTrainingMatchesOneDeviceWithMemoryReuse) { TrainTwoWays(true); }

}  // namespace
}  // namespace testing
}  // namespace compiler
}  // namespace oneflow_like
