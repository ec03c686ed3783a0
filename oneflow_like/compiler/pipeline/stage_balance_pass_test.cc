#include "oneflow_like/compiler/pipeline/stage_balance_pass.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/compiler/text_format.h"
#include "oneflow_like/compiler/verifier.h"

namespace oneflow_like {
namespace compiler {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using testing::ExpectError;

// Layer widths of the chain: layer i is matmul [64, kDims[i-1]] x [kDims[i-1], kDims[i]].
constexpr int64_t kBatch = 64;
const std::vector<int64_t> kDims = {256, 1024, 64, 512, 512, 16, 2048, 32, 128};
constexpr double kFlopsPerSecond = 1e9;

// Eight matmul layers of very unequal size; `config` is the config statement's arguments.
std::string ChainText(const std::string& config, const std::string& extra_h3 = "") {
  std::string text = absl::StrCat("config(", config, ")\n", "x = input(shape=[", kBatch, ",", kDims[0], "])\n");
  for (size_t i = 1; i < kDims.size(); ++i) {
    absl::StrAppend(&text, "w", i, " = variable(shape=[", kDims[i - 1], ",", kDims[i], "])\n");
  }
  for (size_t i = 1; i < kDims.size(); ++i) {
    absl::StrAppend(&text, "h", i, " = matmul(", i == 1 ? "x" : absl::StrCat("h", i - 1), ", w", i, ")",
                    i == 3 ? extra_h3 : "", "\n");
  }
  return text;
}

// FLOP-only pricing, so the test can price layers by hand: 2 * batch * k * n / F seconds.
StageBalanceOptions FlopOnly() {
  StageBalanceOptions options;
  options.cost.flops_per_second = kFlopsPerSecond;
  options.cost.memory_bytes_per_second = 1e30;
  options.cost.task_overhead_seconds = 0;
  return options;
}

double LayerSeconds(size_t layer, int64_t devices) {
  return 2.0 * kBatch * kDims[layer - 1] * kDims[layer] / kFlopsPerSecond / static_cast<double>(devices);
}

// The best bottleneck over every cut of `layer_seconds` into `stages` runs (brute force).
double BruteForceBottleneck(const std::vector<double>& layer_seconds, int stages) {
  const int n = static_cast<int>(layer_seconds.size());
  double best = 1e300;
  std::function<void(int, int, double)> cut = [&](int start, int left, double worst) {
    if (left == 1) {
      double sum = 0;
      for (int i = start; i < n; ++i) sum += layer_seconds[i];
      best = std::min(best, std::max(worst, sum));
      return;
    }
    double sum = 0;
    for (int end = start + 1; end <= n - (left - 1); ++end) {  // this stage takes layers [start, end)
      sum += layer_seconds[end - 1];
      cut(end, left - 1, std::max(worst, sum));
    }
  };
  cut(0, stages, 0);
  return best;
}

std::vector<double> ChainSeconds(int64_t devices) {
  std::vector<double> seconds;
  for (size_t layer = 1; layer < kDims.size(); ++layer) seconds.push_back(LayerSeconds(layer, devices));
  return seconds;
}

class StageBalancePassTest : public ::testing::Test {
 protected:
  Graph Parse(const std::string& text) { return testing::ParseOrDie(text, *registry_); }

  // Runs the pass and checks what must hold of every balanced chain.
  void BalanceAndCheck(Graph* g, const std::vector<std::string>& placements, int64_t devices) {
    StageBalancePass pass(FlopOnly());
    absl::StatusOr<bool> changed = pass.Run(g);
    ASSERT_TRUE(changed.ok()) << changed.status();
    EXPECT_TRUE(*changed);
    ASSERT_TRUE(VerifyGraph(*g).ok()) << VerifyGraph(*g);
    const int num_stages = static_cast<int>(placements.size());
    std::vector<double> stage_seconds(num_stages, 0);
    int previous = 0;
    for (size_t layer = 1; layer < kDims.size(); ++layer) {
      const OpNode& op = g->op(g->FindOp(absl::StrCat("h", layer)));
      EXPECT_GE(op.stage, previous) << op.name;  // non-decreasing in program order ...
      EXPECT_LE(op.stage, previous + 1) << op.name;  // ... and contiguous
      previous = op.stage;
      ASSERT_TRUE(op.placement.has_value());
      EXPECT_EQ(op.placement->ToString(), placements[op.stage]) << op.name;
      EXPECT_EQ(g->tensor(op.outputs[0]).placement->ToString(), placements[op.stage]) << op.name;
      EXPECT_EQ(g->tensor(g->FindTensor(absl::StrCat("w", layer))).placement, op.placement) << op.name;
      stage_seconds[op.stage] += LayerSeconds(layer, devices);
    }
    EXPECT_EQ(previous, num_stages - 1);
    EXPECT_EQ(g->tensor(g->FindTensor("x")).placement->ToString(), placements[0]);
    const double bottleneck = *std::max_element(stage_seconds.begin(), stage_seconds.end());
    EXPECT_NEAR(bottleneck, BruteForceBottleneck(ChainSeconds(devices), num_stages), 1e-12);

    const StageBalanceReport& report = pass.report();
    ASSERT_EQ(report.stages.size(), placements.size());
    EXPECT_NEAR(report.bottleneck_seconds, bottleneck, 1e-12);
    for (int s = 0; s < num_stages; ++s) {
      EXPECT_EQ(report.stages[s].placement.ToString(), placements[s]);
      EXPECT_NEAR(report.stages[s].seconds, stage_seconds[s], 1e-12);
      for (OpId id : report.stages[s].ops) EXPECT_EQ(g->op(id).stage, s);
    }
  }

  std::unique_ptr<OpRegistry> registry_ = testing::BuiltinRegistry();
};

TEST_F(StageBalancePassTest, TwoStagesReachTheBruteForceOptimum) {
  Graph g = Parse(ChainText("stages=[cpu:[0], cpu:[1]]"));
  BalanceAndCheck(&g, {"cpu:[0]", "cpu:[1]"}, 1);
  // By hand: layer FLOPs are proportional to 262144, 65536, 32768, 262144, 8192, 32768, 65536,
  // 4096 (sum 733184); the best cut is after layer 3 (360448 | 372736).
  EXPECT_EQ(g.op(g.FindOp("h3")).stage, 0);
  EXPECT_EQ(g.op(g.FindOp("h4")).stage, 1);
}

TEST_F(StageBalancePassTest, FourStagesOnTwoDevicesEach) {
  const std::vector<std::string> placements = {"cpu:[0,1]", "cpu:[2,3]", "cpu:[4,5]", "cpu:[6,7]"};
  Graph g = Parse(ChainText(absl::StrCat("micro_batches=4, stages=[", absl::StrJoin(placements, ", "), "]")));
  BalanceAndCheck(&g, placements, 2);
}

TEST_F(StageBalancePassTest, RunningAgainKeepsTheCut) {
  Graph g = Parse(ChainText("stages=[cpu:[0], cpu:[1], cpu:[2], cpu:[3]]"));
  ASSERT_TRUE(StageBalancePass(FlopOnly()).Run(&g).ok());
  const std::string once = PrintGraph(g);
  absl::StatusOr<bool> again = StageBalancePass(FlopOnly()).Run(&g);
  ASSERT_TRUE(again.ok()) << again.status();  // the assigned stages now act as explicit ones
  EXPECT_FALSE(*again);
  EXPECT_EQ(PrintGraph(g), once);
}

TEST_F(StageBalancePassTest, VariableBytesCanDominateTheCost) {
  StageBalanceOptions options = FlopOnly();
  options.cost.flops_per_second = 1e30;  // compute is free: balance the parameter bytes
  options.variable_byte_seconds = 1;
  Graph g = Parse(ChainText("stages=[cpu:[0], cpu:[1], cpu:[2]]"));
  StageBalancePass pass(options);
  ASSERT_TRUE(pass.Run(&g).ok());
  std::vector<double> bytes;  // float32 weights [kDims[i-1], kDims[i]]
  for (size_t layer = 1; layer < kDims.size(); ++layer) bytes.push_back(4.0 * kDims[layer - 1] * kDims[layer]);
  EXPECT_NEAR(pass.report().bottleneck_seconds, BruteForceBottleneck(bytes, 3), 1e-6);
  std::vector<double> stage_bytes(3, 0);
  for (size_t layer = 1; layer < kDims.size(); ++layer) {
    stage_bytes[g.op(g.FindOp(absl::StrCat("h", layer))).stage] += bytes[layer - 1];
  }
  EXPECT_NEAR(*std::max_element(stage_bytes.begin(), stage_bytes.end()), BruteForceBottleneck(bytes, 3), 1e-6);
}

TEST_F(StageBalancePassTest, ReportNamesEveryStage) {
  Graph g = Parse(ChainText("stages=[cpu:[0], cpu:[1]]"));
  StageBalancePass pass(FlopOnly());
  ASSERT_TRUE(pass.Run(&g).ok());
  EXPECT_EQ(pass.report().ToString(g),
            "stage 0 on cpu:[0]: 3 ops (h1 .. h3), 46.1 ms\n"
            "stage 1 on cpu:[1]: 5 ops (h4 .. h8), 47.7 ms\n");
}

TEST_F(StageBalancePassTest, NoStagePlacementsIsANoOp) {
  Graph g = Parse(ChainText("seed=1") + "");
  const JobProto before = g.ToJobProto();
  StageBalancePass pass(FlopOnly());
  absl::StatusOr<bool> changed = pass.Run(&g);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_TRUE(MessageDifferencer::Equals(before, g.ToJobProto()));
  EXPECT_TRUE(pass.report().stages.empty());
}

TEST_F(StageBalancePassTest, Deterministic) {
  const std::string text = ChainText("stages=[cpu:[0], cpu:[1], cpu:[2]]");
  Graph a = Parse(text), b = Parse(text);
  ASSERT_TRUE(StageBalancePass().Run(&a).ok());
  ASSERT_TRUE(StageBalancePass().Run(&b).ok());
  EXPECT_EQ(PrintGraph(a), PrintGraph(b));
  EXPECT_TRUE(MessageDifferencer::Equals(a.ToJobProto(), b.ToJobProto()));
}

TEST_F(StageBalancePassTest, ExplicitPlacementsConstrainTheCut) {
  // Unconstrained, h3 ends stage 0; placing it on cpu:[1] forces the cut before it.
  Graph g = Parse(ChainText("stages=[cpu:[0], cpu:[1]]", " placement=cpu:[1]"));
  ASSERT_TRUE(StageBalancePass(FlopOnly()).Run(&g).ok());
  EXPECT_EQ(g.op(g.FindOp("h2")).stage, 0);
  EXPECT_EQ(g.op(g.FindOp("h3")).stage, 1);
  EXPECT_TRUE(VerifyGraph(g).ok());
}

TEST_F(StageBalancePassTest, ExplicitStagesConstrainTheCut) {
  Graph g = Parse(ChainText("stages=[cpu:[0], cpu:[1]]", " stage=1"));
  ASSERT_TRUE(StageBalancePass(FlopOnly()).Run(&g).ok());
  EXPECT_EQ(g.op(g.FindOp("h2")).stage, 0);
  EXPECT_EQ(g.op(g.FindOp("h3")).stage, 1);
  EXPECT_EQ(g.op(g.FindOp("h3")).placement->ToString(), "cpu:[1]");
}

TEST_F(StageBalancePassTest, UserPlacedSourcesKeepTheirPlacement) {
  std::string text = ChainText("stages=[cpu:[0], cpu:[1]]");
  text.replace(text.find("w8 = variable(shape=[32,128])"), 29, "w8 = variable(shape=[32,128]) placement=cpu:[5]");
  Graph g = Parse(text);
  ASSERT_TRUE(StageBalancePass(FlopOnly()).Run(&g).ok());
  EXPECT_EQ(g.tensor(g.FindTensor("w8")).placement->ToString(), "cpu:[5]");
  EXPECT_EQ(g.op(g.FindOp("h8")).placement->ToString(), "cpu:[1]");
  EXPECT_TRUE(VerifyGraph(g).ok());
}

TEST_F(StageBalancePassTest, PinnedSbpMustFitTheStagePlacement) {
  Graph g = Parse(ChainText("stages=[cpu:[0,1], cpu:[2,3]]", " sbp=[S(0), B]"));
  ExpectError(StageBalancePass(FlopOnly()).Run(&g).status(), absl::StatusCode::kInvalidArgument,
              {"tensor 'h3'", "[S(0), B]", "cpu:[0,1]", "stage 0", "2 SBP(s)", "hint"});
  // The same pin on a 2-D mesh per stage is fine.
  Graph mesh = Parse(ChainText("stages=[cpu:[[0,1],[2,3]], cpu:[[4,5],[6,7]]]", " sbp=[S(0), B]"));
  absl::StatusOr<bool> changed = StageBalancePass(FlopOnly()).Run(&mesh);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(VerifyGraph(mesh).ok());
}

TEST_F(StageBalancePassTest, Errors) {
  Graph tiny = Parse("config(stages=[cpu:[0], cpu:[1], cpu:[2]])\nx = input(shape=[4])\ny = relu(x)\nz = relu(y)\n");
  ExpectError(StageBalancePass().Run(&tiny).status(), absl::StatusCode::kInvalidArgument,
              {"3 stages", "only 2 op(s)", "hint"});

  Graph staged = Parse(ChainText("stages=[cpu:[0], cpu:[1]]", " stage=2"));
  ExpectError(StageBalancePass().Run(&staged).status(), absl::StatusCode::kInvalidArgument,
              {"matmul 'h3' has stage=2", "none of the 2 stage placements", "hint"});

  Graph elsewhere = Parse(ChainText("stages=[cpu:[0], cpu:[1]]", " placement=cpu:[7]"));
  ExpectError(StageBalancePass().Run(&elsewhere).status(), absl::StatusCode::kInvalidArgument,
              {"matmul 'h3' has placement=cpu:[7]", "none of the 2 stage placements [cpu:[0], cpu:[1]]", "hint"});

  Graph disagree = Parse(ChainText("stages=[cpu:[0], cpu:[1]]", " placement=cpu:[0] stage=1"));
  ExpectError(StageBalancePass().Run(&disagree).status(), absl::StatusCode::kInvalidArgument,
              {"matmul 'h3' has stage=1, placement=cpu:[0]", "none of"});

  std::string backwards_text = ChainText("stages=[cpu:[0], cpu:[1]]", " placement=cpu:[1]");
  backwards_text.replace(backwards_text.find("h5 = matmul(h4, w5)"), 19, "h5 = matmul(h4, w5) placement=cpu:[0]");
  Graph backwards = Parse(backwards_text);
  ExpectError(StageBalancePass().Run(&backwards).status(), absl::StatusCode::kInvalidArgument,
              {"matmul 'h5' has placement=cpu:[0] (stage <= 0)", "comes after matmul 'h3' with placement=cpu:[1]",
               "hint"});

  Graph bad_shapes = Parse("config(stages=[cpu:[0]])\nx = input(shape=[4,3])\nw = variable(shape=[4,3])\ny = matmul(x, w)\n");
  ExpectError(StageBalancePass().Run(&bad_shapes).status(), absl::StatusCode::kInvalidArgument, {"matmul 'y'"});
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
