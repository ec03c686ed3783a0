// oltrain: the end-to-end trainer binary (flags: oneflow_like/train/trainer_flags.h; run with
// --help). All ranks of the compiled plan run in this process as threads.
//   bazel run -c opt //tools/train:oltrain -- --model=gpt --steps=5
#include <iostream>
#include <string>
#include <vector>

#include "oneflow_like/core/ops/builtin_ops.h"
#include "oneflow_like/train/trainer.h"
#include "oneflow_like/train/trainer_flags.h"

int main(int argc, char** argv) {
  using namespace oneflow_like;
  const std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<train::TrainerFlags> flags = train::ParseTrainerFlags(args);
  if (!flags.ok()) {
    std::cerr << "oltrain: " << flags.status().message() << "\n";
    return 2;
  }
  if (flags->help) {
    std::cout << train::TrainerUsage();
    return 0;
  }
  OpRegistry registry;
  absl::Status status = RegisterBuiltinOps(&registry);
  if (status.ok()) {
    status = train::RunTraining(flags->options, flags->steps, flags->warmup_steps, flags->timeline_dir, &registry,
                                std::cout);
  }
  if (!status.ok()) {
    std::cerr << "oltrain: " << status << "\n";
    return 1;
  }
  return 0;
}
