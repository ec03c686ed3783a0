// Sharded checkpoints: every rank saves the shards of the variables it holds (parameters and
// optimizer state, incl. Adam's step counter); a checkpoint saved under one parallel layout
// loads under any other (resharding), each rank reading only the saved bytes it needs.
//
// Directory layout (docs/checkpoint_format.md has every field and a worked example):
//   <root>/step_00000012/rank_0/shards.bin   rank 0's shards, raw row-major bytes, concatenated
//   <root>/step_00000012/rank_0/meta.pb      CheckpointRankProto: per variable its dtype,
//                                            logical shape, saving nd_sbp, box, bytes, CRC-32C
//   <root>/step_00000012/rank_1/...
//   <root>/step_00000012/COMPLETE            written last, atomically: the checkpoint is valid
//
// Saving (multi-process: every process saves its ranks, then one process marks it complete):
//   RETURN_IF_ERROR(SaveRankShards(*runtime, meta, world_size, dir));   // every rank
//   RETURN_IF_ERROR(executor->Barrier("checkpoint"));                    // caller's barrier
//   if (leader) RETURN_IF_ERROR(MarkCheckpointComplete(dir, world_size));
// Loading (any layout; e.g. saved by dp2 x tp2 on 4 ranks, loaded by pp2 on 2 ranks):
//   ASSIGN_OR_RETURN(std::string dir, LatestCheckpoint(root));
//   ASSIGN_OR_RETURN(CheckpointMeta meta, LoadRankShards(runtime, dir));  // every rank
//   trainer->set_next_step(meta.step + 1);
// In one process, SaveSession / LoadSession do this for every rank of a Session.
//
// Resharding, by example: "h0.attn.c_attn.weight" [32, 96] saved as (S(0), S(1)) on a 2 x 2
// mesh is four boxes [0:16, 0:48], [0:16, 48:96], [16:32, 0:48], [16:32, 48:96]. A loader
// holding it as (B, S(1)) on rank 1 wants [0:32, 48:96]: it reads rows 0..15 of the second
// box and rows 16..31 of the fourth, and nothing of the other two. Broadcast copies are
// identical boxes; one of them is read (this rank's own when it has one). Adam step counters
// are matched by role, not name: the compiler makes one per parameter placement
// ("optimizer/step", "optimizer/step_1", ...), so a pp2 plan has two and a pp1 plan one; a
// counter the checkpoint lacks takes the value of the checkpoint's counters (all equal).
// Saved variables the loading plan does not have are ignored.
//
// Errors: InvalidArgument naming the file and/or variable, with a hint, for an incomplete
// checkpoint ("... was it interrupted while saving?"), a missing, truncated or corrupted file
// (CRC-32C mismatch), a variable missing from the checkpoint, a logical shape or dtype
// mismatch, a box not fully covered by the saved shards, or a partial-sum (P) variable at save;
// AlreadyExists when saving into a checkpoint that is already COMPLETE; NotFound from
// LatestCheckpoint when `root` has no complete checkpoint; Internal for failed writes.
//
// Thread-safety: functions are thread-compatible; distinct ranks may save or load the same
// checkpoint concurrently. Save/Load REQUIRE that no step is running on the runtime.
#ifndef ONEFLOW_LIKE_TRAIN_CHECKPOINT_H_
#define ONEFLOW_LIKE_TRAIN_CHECKPOINT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "oneflow_like/actor/runtime.h"
#include "oneflow_like/actor/session.h"

namespace oneflow_like {
namespace train {

struct CheckpointMeta {
  int64_t step = 0;           // the last step trained before saving
  int64_t data_position = 0;  // where the data stream resumes (caller-defined)
  std::string layout;         // e.g. "dp2 tp2 pp1" (informative)
  uint64_t plan_hash = 0;     // the saving plan's hash (informative)
};

struct CheckpointSaveOptions {
  // Each shard's bytes are checksummed in pieces of this size, so a loader reading part of a
  // shard verifies only (and reads only) the pieces it needs. Default 1 MiB.
  int64_t chunk_bytes = int64_t{1} << 20;
};

// What a load read (for tests and logs).
struct CheckpointLoadStats {
  int64_t bytes_read = 0;      // bytes of shards.bin files read (whole checksum chunks)
  int64_t bytes_needed = 0;    // bytes of the variables written into the runtime
  int64_t shards_read = 0;     // saved shards any byte of which was read
};

// Rank `runtime.rank()` writes its variable shards to <dir>/rank_<r>/{shards.bin, meta.pb}
// (temporaries + rename; meta.pb last). Creates directories as needed.
absl::Status SaveRankShards(const actor::Runtime& runtime, const CheckpointMeta& meta, int32_t world_size,
                            const std::string& dir, const CheckpointSaveOptions& options = {});

// After every rank saved: checks that rank_<r>/meta.pb of each of `world_size` ranks exists,
// parses and agrees (rank, world size, step), then atomically writes <dir>/COMPLETE with the
// metas' checksums.
absl::Status MarkCheckpointComplete(const std::string& dir, int32_t world_size);

// Loads this rank's variables from the COMPLETE checkpoint `dir`, saved under any layout, and
// writes them with Runtime::WriteVariableShard. Returns the checkpoint's meta. `stats` may be
// null. Nothing is written into the runtime unless every variable was read and verified.
absl::StatusOr<CheckpointMeta> LoadRankShards(actor::Runtime* runtime, const std::string& dir,
                                              CheckpointLoadStats* stats = nullptr);

// The newest COMPLETE checkpoint under `root` (subdirectories step_<N>, highest N first;
// incomplete ones are skipped), or NotFound.
absl::StatusOr<std::string> LatestCheckpoint(const std::string& root);
// root + "/step_" + step zero-padded to 8 digits: CheckpointDirName("/ck", 12) == "/ck/step_00000012".
std::string CheckpointDirName(const std::string& root, int64_t step);

// Every rank of a Session (ranks without work save an empty rank_<r>), then COMPLETE.
absl::Status SaveSession(const actor::Session& session, const CheckpointMeta& meta, const std::string& dir,
                         const CheckpointSaveOptions& options = {});
// Every rank of a Session. Stats (optional) are summed over ranks.
absl::StatusOr<CheckpointMeta> LoadSession(actor::Session* session, const std::string& dir,
                                           CheckpointLoadStats* stats = nullptr);

}  // namespace train
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_TRAIN_CHECKPOINT_H_
