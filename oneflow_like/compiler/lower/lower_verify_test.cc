// Every plan the lowering tests build passes the plan verifier (structure, streams, collectives,
// memory reuse and the simulated firing rules over two steps).
#include "gtest/gtest.h"
#include "oneflow_like/compiler/lower/lower_test_util.h"
#include "oneflow_like/compiler/plan/plan_verifier.h"
#include "oneflow_like/compiler/test_util.h"

namespace oneflow_like {
namespace compiler {
namespace testing {
namespace {

struct Case {
  std::string name;
  std::string text;
  BoxingStyle boxing = BoxingStyle::kPointToPoint;
  std::vector<std::pair<std::string, std::string>> updates;
};

std::vector<Case> Cases() {
  const std::vector<std::pair<std::string, std::string>> mlp_updates = {{"w2", "w2_new"}, {"buf", "buf_new"}};
  std::vector<Case> cases = {
      {"mlp_1", MlpText(1, 1), BoxingStyle::kPointToPoint, mlp_updates},
      {"mlp_4", MlpText(4, 1), BoxingStyle::kPointToPoint, mlp_updates},
      {"mlp_2x3", MlpText(2, 3), BoxingStyle::kPointToPoint, mlp_updates},
      {"mlp_4_collective", MlpText(4, 1), BoxingStyle::kCollective, mlp_updates},
      {"gpt_block", kGptBlockText},
      {"gpt_block_collective", kGptBlockText, BoxingStyle::kCollective},
      {"cross_placement",
       "x = input(shape=[6,4]) placement=cpu:[0,1] sbp=[S(0)]\n"
       "y = relu(x) placement=cpu:[2,3,4] in_sbp=[[S(0)]] stage=1\noutput(y)\n"},
      {"pipeline",
       "config(name=\"pp\", micro_batches=4)\n"
       "x = input(shape=[8,4]) placement=cpu:[0]\n"
       "w0 = variable(shape=[4,4], init=ones) placement=cpu:[0]\n"
       "w1 = variable(shape=[4,4], init=ones) placement=cpu:[1]\n"
       "h0 = matmul(x, w0) stage=0\n"
       "h1 = matmul(h0, w1) placement=cpu:[1] stage=1\n"
       "g1 = relu(h1) placement=cpu:[1] stage=1\n"
       "d0 = add(g1, h0) placement=cpu:[0] stage=0\n"
       "output(d0)\n"},
  };
  cases.push_back({"broadcast_to_partial",
                   "config(name=\"b2p\", micro_batches=2)\n"
                   "x = input(shape=[8,6]) placement=cpu:[0,1] sbp=[B]\n"
                   "v = variable(shape=[8,6], init=ones) sbp=[B]\n"
                   "y = add(x, v) in_sbp=[[P], [P]]\n"
                   "w = relu(y) in_sbp=[[B]]\n"
                   "output(w)\n"});
  cases.push_back({"three_stages",
                   "config(name=\"pp3\", micro_batches=4)\n"
                   "x = input(shape=[8,4]) placement=cpu:[0]\n"
                   "f0 = relu(x) stage=0\n"
                   "f1 = relu(f0) placement=cpu:[1] stage=1\n"
                   "f2 = relu(f1) placement=cpu:[2] stage=2\n"
                   "b2 = relu(f2) placement=cpu:[2] stage=2\n"
                   "b1 = add(b2, f1) placement=cpu:[1] stage=1\n"
                   "b0 = add(b1, f0) placement=cpu:[0] stage=0\n"
                   "output(b0)\n"});
  for (const char* in_sbp : {"B", "S(0)"}) {
    cases.push_back({std::string("partial_to_") + in_sbp,
                     "a = input(shape=[8,4]) placement=cpu:[0,1,2] sbp=[S(1)]\n"
                     "b = input(shape=[4,6]) placement=cpu:[0,1,2] sbp=[S(0)]\n"
                     "p = matmul(a, b) out_sbp=[[P]]\n"
                     "z = relu(p) in_sbp=[[" + std::string(in_sbp) + "]]\noutput(z)\n"});
  }
  return cases;
}

TEST(LowerVerifyTest, EveryTestPlanPassesTheVerifier) {
  for (const Case& c : Cases()) {
    LowerOptions options;
    options.boxing = c.boxing;
    const PlanProto plan = LowerTextOrDie(c.text, options, [&](Graph* g) {
      for (const auto& [variable, value] : c.updates) AddUpdate(g, variable, value);
    });
    absl::Status status = VerifyPlan(plan);
    EXPECT_TRUE(status.ok()) << c.name << ": " << status;
  }
}

// The verifier is not vacuous on these plans: breaking a lowered plan is caught.
TEST(LowerVerifyTest, BrokenLoweredPlansAreRejected) {
  const PlanProto plan = LowerTextOrDie(MlpText(1, 1), {}, AddMlpUpdates);
  ASSERT_TRUE(VerifyPlan(plan).ok());
  PlanProto no_mirror = plan;
  auto* registers = no_mirror.mutable_rank_plans(0)->mutable_registers();
  for (int i = 0; i < registers->size(); ++i) {
    if (registers->Get(i).has_remote()) {
      registers->DeleteSubrange(i, 1);
      break;
    }
  }
  EXPECT_FALSE(VerifyPlan(no_mirror).ok());
  // x.source after its consumer h on the compute stream of rank 1.
  PlanProto swapped_order = plan;
  TaskProto* source = nullptr;
  TaskProto* consumer = nullptr;
  for (TaskProto& t : *swapped_order.mutable_rank_plans(1)->mutable_tasks()) {
    if (t.name() == "x.source@r1") source = &t;
    if (t.name() == "h@r1") consumer = &t;
  }
  ASSERT_TRUE(source != nullptr && consumer != nullptr);
  const int64_t order = source->order_in_stream();
  source->set_order_in_stream(consumer->order_in_stream());
  consumer->set_order_in_stream(order);
  EXPECT_FALSE(VerifyPlan(swapped_order).ok());
}

}  // namespace
}  // namespace testing
}  // namespace compiler
}  // namespace oneflow_like
