// The full W2 workload (gpt-tiny, batch 8, AdamW) for 20 steps on one device through the graph
// evaluator, against tools/bench/peers/gpt_loss_curve_portable_T1.txt (printed with 6 decimals
// by `bench_gpt.py --threads 1 --curve 20 --init portable`). Tagged manual: about a minute
// of eager CPU kernels; run it explicitly:
//   bazel test //oneflow_like/models:gpt_w2_curve_test --test_output=all
#include <iomanip>
#include <iostream>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/autograd/training_test_util.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/models/reference_eval.h"

namespace oneflow_like {
namespace models {
namespace {

const std::vector<double> kTorchCurve = {7.658984, 7.672317, 7.659348, 7.661208, 7.703438, 7.654378, 7.631918,
                                         7.578002, 7.635099, 7.557652, 7.609737, 7.547920, 7.469312, 7.497873,
                                         7.467278, 7.475063, 7.503623, 7.420498, 7.490644, 7.457494};

TEST(GptW2CurveTest, First20LossesEqualTorchPortableCurve) {
  std::unique_ptr<OpRegistry> registry = compiler::testing::BuiltinRegistry();
  const GptConfig w2;  // vocab 2048, seq 128, 4 layers, 256 wide, 4 heads, batch 8
  absl::StatusOr<compiler::Graph> g = BuildGptJob(*registry, w2, ParallelLayout{});
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(compiler::testing::RunTrainingPasses(&*g, /*with_optimizer=*/true).ok());
  absl::StatusOr<std::vector<double>> losses = EvaluateGptLosses(*g, w2, static_cast<int64_t>(kTorchCurve.size()));
  ASSERT_TRUE(losses.ok()) << losses.status();
  for (size_t step = 0; step < kTorchCurve.size(); ++step) {
    // The reference has 6 decimals; measured (2026-11-23): |diff| <= 1.4e-6 over the 20 steps.
    // With the tanh gelu instead, steps 6, 13 and 15-17 are off by 5e-6 .. 2.5e-5.
    EXPECT_NEAR((*losses)[step], kTorchCurve[step], 5e-6) << "step " << step;
    std::cout << std::setprecision(8) << "step " << step << " oneflow_like " << (*losses)[step] << " torch "
              << kTorchCurve[step] << "\n";
  }
}

}  // namespace
}  // namespace models
}  // namespace oneflow_like
