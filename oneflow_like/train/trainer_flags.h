// Command-line flags of the oltrain binary (tools/train/oltrain.cc), parsed into
// TrainerOptions. Accepts "--name=value" and "--name value"; booleans also as bare "--name".
//
//   ASSIGN_OR_RETURN(TrainerFlags flags, ParseTrainerFlags({"--model=gpt", "--dp", "2"}));
//   // flags.options.model == Workload::kGpt, flags.options.layout.dp == 2, flags.steps == 10
//
// Errors: InvalidArgument naming the flag: an unknown flag ("unknown flag '--dpp'"), a missing
// or malformed value ("--steps: expected an integer, got 'ten'"), or a value out of range.
// Stateless and thread-safe.
#ifndef ONEFLOW_LIKE_TRAIN_TRAINER_FLAGS_H_
#define ONEFLOW_LIKE_TRAIN_TRAINER_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "oneflow_like/train/trainer.h"

namespace oneflow_like {
namespace train {

struct TrainerFlags {
  TrainerOptions options;
  int64_t steps = 10;        // --steps
  int64_t warmup_steps = 1;  // --warmup: first steps left out of the median step time
  std::string timeline_dir;  // --timeline DIR: write DIR/timeline.json (Chrome trace)
  bool help = false;         // --help / -h
  std::string config_path;   // --config FILE (read by oltrain; see config_file.h)
  // Checkpoints (checkpoint.h): every N steps (0 = only at the end when a dir is given) into
  // checkpoint_dir/step_NNNNNNNN; --resume starts from the newest complete one there.
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;
  bool resume = false;
  bool run_ahead = true;
};

// `args` excludes the program name.
absl::StatusOr<TrainerFlags> ParseTrainerFlags(const std::vector<std::string>& args);

// The --help text.
std::string TrainerUsage();

}  // namespace train
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_TRAIN_TRAINER_FLAGS_H_
