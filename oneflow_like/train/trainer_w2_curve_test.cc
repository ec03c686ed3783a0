// W2 (gpt-tiny, batch 8, portable init, AdamW) trained by the trainer (compile + Session, one
// rank) for 20 steps against tools/bench/peers/gpt_loss_curve_portable_T1.txt (torch 1.13,
// `bench_gpt.py --threads 1 --curve 20 --init portable`, 6 decimals). Tagged manual (~10-60 s
// of real training); run it explicitly:
//   bazel test -c opt //oneflow_like/train:trainer_w2_curve_test --test_output=all
#include <cmath>
#include <iomanip>
#include <iostream>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/train/trainer.h"

namespace oneflow_like {
namespace train {
namespace {

const std::vector<double> kTorchCurve = {7.658984, 7.672317, 7.659348, 7.661208, 7.703438, 7.654378, 7.631918,
                                         7.578002, 7.635099, 7.557652, 7.609737, 7.547920, 7.469312, 7.497873,
                                         7.467278, 7.475063, 7.503623, 7.420498, 7.490644, 7.457494};

TEST(TrainerW2CurveTest, First20LossesEqualTorchPortableCurve) {
  std::unique_ptr<OpRegistry> registry = compiler::testing::BuiltinRegistry();
  TrainerOptions o;
  o.model = Workload::kGpt;  // W2 defaults: portable init, exact gelu, batch 8, AdamW 3e-4
  absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(o, registry.get());
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  double worst = 0;
  for (size_t step = 0; step < kTorchCurve.size(); ++step) {
    absl::StatusOr<StepResult> r = (*trainer)->RunStep();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_NEAR(r->loss, kTorchCurve[step], 1e-4) << "step " << step;
    worst = std::max(worst, std::abs(r->loss - kTorchCurve[step]));
    std::cout << std::setprecision(8) << "step " << step << " oneflow_like " << r->loss << " torch "
              << kTorchCurve[step] << " (" << 1e3 * r->seconds << " ms)\n";
  }
  std::cout << "max |diff| = " << worst << "\n";
}

}  // namespace
}  // namespace train
}  // namespace oneflow_like
