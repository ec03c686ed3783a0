// Preflight: the checks every rank of a multi-process job makes after the rendezvous and before
// it builds its runtime, so that a job that cannot work stops at once with one line naming the
// node instead of failing (or being restarted) mid-training:
//   1. every rank runs the same trainer binary (CRC-32C and size of /proc/self/exe vs rank 0's);
//   2. every rank compiled the same job (DistributedContext::CheckPlan: the job agreement of
//      per-rank plans, else the content hash, vs rank 0's; plan_agreement.h);
//   3. the planned memory of the node's ranks (the plan's planned_bytes of ranks n*L .. n*L+L-1;
//      with per-rank plans, where a plan knows its own rank's memory alone, each rank publishes it)
//      fits the memory the node has (MemAvailable of /proc/meminfo; OL_MEM_AVAILABLE_BYTES
//      overrides it, for tests); checked by each node's local rank 0;
//   4. with checkpoints on: the checkpoint directory is writable on every node and shared by all
//      of them: rank 0 writes a marker file with a random nonce into it, and each node's local
//      rank 0 must read that very nonce there (a node with another directory, or a local disk
//      where a shared file system was meant, does not see it).
// Then a barrier; rank 0 removes its marker.
//
//   PreflightOptions preflight;  preflight.checkpoint_dir = run.checkpoint_dir;
//   RETURN_IF_ERROR(RunPreflight(plan, preflight, ctx));   // every rank, before CreateRankExecutor
//
// A failure is FailedPrecondition with a message starting "preflight: node N (host h, rank R): ",
// e.g. "preflight: node 1 (host b, rank 2): the checkpoint directory /ckpt is not shared with
// node 0: rank 0's marker /ckpt/.olpreflight-1a2b is missing here; every node must see the same
// directory (a shared file system)". The caller aborts the job with it (peers stop naming it).
// Not thread-safe; call once per rank.
#ifndef ONEFLOW_LIKE_TRAIN_PREFLIGHT_H_
#define ONEFLOW_LIKE_TRAIN_PREFLIGHT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "oneflow_like/core/proto/plan.pb.h"
#include "oneflow_like/train/distributed.h"

namespace oneflow_like {
namespace train {

struct PreflightOptions {
  std::string checkpoint_dir;  // "" = checkpoints off: the directory is not checked
};

absl::Status RunPreflight(const PlanProto& plan, const PreflightOptions& options, DistributedContext* context);

// True for a status produced by (or relaying) a preflight failure: restarting cannot help.
bool IsPreflightFailure(const absl::Status& status);

// Pieces, exposed for tests.
// "crc32c:xxxxxxxx size:N" of the file at `path`.
absl::StatusOr<std::string> FileFingerprint(const std::string& path);
// The MemAvailable line of /proc/meminfo text, in bytes; NotFound without one.
absl::StatusOr<int64_t> ParseMemAvailable(const std::string& meminfo);
// OL_MEM_AVAILABLE_BYTES if set, else /proc/meminfo's MemAvailable.
absl::StatusOr<int64_t> NodeMemoryAvailable();
// Sum of the plan's planned host bytes over ranks [first, first + count): planned_bytes, or where a
// rank lists its devices, those of its cpu blocks (accelerator memory is not the node's RAM).
int64_t PlannedBytesOfRanks(const PlanProto& plan, int32_t first, int32_t count);

}  // namespace train
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_TRAIN_PREFLIGHT_H_
