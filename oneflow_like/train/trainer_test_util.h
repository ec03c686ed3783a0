// Helpers for tests that train a GPT through Trainer and compare losses between runs (cpu vs
// device placements, layouts): options for a GPT of given dims, and the losses of N steps.
#ifndef ONEFLOW_LIKE_TRAIN_TRAINER_TEST_UTIL_H_
#define ONEFLOW_LIKE_TRAIN_TRAINER_TEST_UTIL_H_

#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/train/trainer.h"

namespace oneflow_like {
namespace train {
namespace testing {

// One rank, one intra-op thread (runs compare bit for bit), the config's batch.
inline TrainerOptions GptOptions(const models::GptConfig& config, int micro_batches, int64_t watchdog_ms) {
  TrainerOptions o;
  o.model = Workload::kGpt;
  o.gpt = config;
  o.batch = config.batch;
  o.micro_batches = micro_batches;
  o.watchdog_ms = watchdog_ms;
  o.intra_op_threads = 1;
  return o;
}

// The losses of `steps` steps (fewer, with a failure recorded, if a step fails).
inline std::vector<double> RunSteps(Trainer* trainer, int steps) {
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) {
    absl::StatusOr<StepResult> r = trainer->RunStep();
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) break;
    losses.push_back(r->loss);
  }
  return losses;
}

}  // namespace testing
}  // namespace train
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_TRAIN_TRAINER_TEST_UTIL_H_
