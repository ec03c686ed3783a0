// Training jobs as config files (configs/*.cfg): an INI-like text of [section] headers and
// `field = value` lines ('#' starts a comment), read into the same TrainerFlags as oltrain's
// command line. Every field maps to one flag (trainer_flags.h), so a config and the flags mean
// exactly the same thing; flags given after --config override the file's fields.
//
//   # configs/gpt_tiny.cfg
//   [model]
//   kind = gpt
//   n_layer = 2
//   [parallel]
//   dp = 2
//
//   ASSIGN_OR_RETURN(TrainerFlags f, ParseTrainerConfig("configs/gpt_tiny.cfg", {"--steps=5"}));
//
// Sections and fields (configs/README.md documents each):
//   [model]      kind (mlp|gpt), vocab, seq_len, n_layer, n_embd, n_head, init, gelu, width, depth
//   [data]       source (synthetic|text), path, batch, data_batches
//   [parallel]   dp, tp, pp, micro_batches, grad_accum, zero_stage, boxing, recompute, reuse_memory,
//                compute_streams
//   [optimizer]  kind (adamw for gpt, sgd for mlp), lr
//   [train]      steps, warmup, seed, watchdog_ms, timeline
//   [checkpoint] dir, every, resume
// Errors: InvalidArgument naming the file, line, section and field: an unknown section or
// field (listing the known ones), a duplicate field, a line that is not `field = value`, a bad
// value ("configs/x.cfg:7: [parallel] dp: expected an integer, got 'two'"), an unreadable
// file. Stateless and thread-safe.
#ifndef ONEFLOW_LIKE_TRAIN_CONFIG_FILE_H_
#define ONEFLOW_LIKE_TRAIN_CONFIG_FILE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "oneflow_like/train/trainer_flags.h"

namespace oneflow_like {
namespace train {

// The flags ("--dp=2", ...) a config text stands for; `source` names it in errors.
absl::StatusOr<std::vector<std::string>> ConfigToFlags(const std::string& text, const std::string& source);

// Reads `path`, then applies `overrides` (command-line flags) on top.
absl::StatusOr<TrainerFlags> ParseTrainerConfig(const std::string& path, const std::vector<std::string>& overrides);

}  // namespace train
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_TRAIN_CONFIG_FILE_H_
