// RunTraining: the whole run as the oltrain binary does it (a Trainer, stepping, printing,
// sharded checkpoints and resume), for in-process and multi-process runs alike.
//
//   RunOptions run;  run.steps = 100;  run.checkpoint_dir = "/tmp/ckpt";  run.checkpoint_every = 50;
//   RETURN_IF_ERROR(RunTraining(options, run, &registry, std::cout));
//
// Errors: InvalidArgument for bad options (naming them), and those of the Trainer, the
// executor and the checkpoint library. Not thread-safe.
#ifndef ONEFLOW_LIKE_TRAIN_RUN_TRAINING_H_
#define ONEFLOW_LIKE_TRAIN_RUN_TRAINING_H_

#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "oneflow_like/train/trainer.h"

namespace oneflow_like {
namespace train {

// What RunTraining does besides stepping (oltrain's flags; trainer_flags.h).
struct RunOptions {
  int64_t steps = 10;
  int64_t warmup_steps = 1;   // left out of the median step time
  std::string timeline_dir;   // non-empty: write the Chrome trace there
  // Sharded checkpoints (checkpoint.h) into checkpoint_dir/step_NNNNNNNN: every
  // `checkpoint_every` steps (0 = none in between) and after the last step.
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;
  // Start from the newest complete checkpoint in checkpoint_dir (any layout), if one exists:
  // steps continue from its step, data from its position; `steps` is the total to reach.
  bool resume = false;
  // Start step n + 1 before step n's loss is fetched (Trainer::RunStep(start_next)), except
  // before a checkpoint and at the end, so the host's work between steps overlaps compute.
  bool run_ahead = true;
};

// The whole run as the oltrain binary does it. The leader process (every process of a local run;
// rank 0 of a multi-process one) prints the plan summary, one line per step ("step 3 loss
// 7.659348 time 412.3 ms 2484 tokens/s"), checkpoint lines, and the median step time over the
// steps after `warmup_steps`.
absl::Status RunTraining(const TrainerOptions& options, const RunOptions& run, const OpRegistry* registry,
                         std::ostream& out);

// Saves every variable of the trainer's ranks in this process as checkpoint step `step` under
// `root` (all processes call it; it returns once the checkpoint is complete). Returns its dir.
absl::StatusOr<std::string> SaveTrainerCheckpoint(Trainer* trainer, const std::string& root, int64_t step);
// Loads `dir` (saved under any layout) into the trainer's ranks; the next step is its step + 1.
absl::Status LoadTrainerCheckpoint(Trainer* trainer, const std::string& dir);

}  // namespace train
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_TRAIN_RUN_TRAINING_H_
