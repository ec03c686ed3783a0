// The whole-plan checks of a world too large to hold its plan (`olplan verify`, issue 16): the
// plan is lowered a range of ranks at a time (LowerRankRange), and each rank's part is checked
// alone, hashed and kept serialized, while a compact skeleton of every rank collects what the
// checks across ranks need (StreamedVerifier: both ends of every transfer, collective order on
// every member, the deadlock simulation, then memory reuse per rank with the simulation's counts).
// No more than one range of ranks is ever held as protos.
//
//   ASSIGN_OR_RETURN(GlobalDecisions decisions, RunGlobalPasses(std::move(graph), options));
//   ASSIGN_OR_RETURN(InPartsReport report, VerifyInParts(decisions, options));
//   // report.content_hash == Compile(graph, options)->content_hash()
//
// The verdict is VerifyPlan's on the whole plan (the same checks and messages; with several
// defects the first one reported may differ), and content_hash is the whole plan's.
// Thread-compatible.
#ifndef ONEFLOW_LIKE_COMPILER_DRIVER_VERIFY_IN_PARTS_H_
#define ONEFLOW_LIKE_COMPILER_DRIVER_VERIFY_IN_PARTS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "oneflow_like/compiler/driver/compile.h"

namespace oneflow_like {
namespace compiler {

struct InPartsOptions {
  // Ranks lowered at once; 0: about an eighth of the world, at most 256 ranks.
  int32_t ranks_per_part = 0;
  // Progress lines on long runs (one per range and pass), e.g. printed to stderr.
  std::function<void(const std::string& line)> progress;
};

struct InPartsReport {
  std::string content_hash;  // the whole plan's (PlanContentHash)
  int32_t world_size = 0;
  int32_t ranks_with_work = 0;
  int64_t tasks = 0;
  int64_t registers = 0;     // entries, mirrors included
  int64_t plan_bytes = 0;    // the rank plans serialized
  int32_t ranks_per_part = 0;
  // "lower_and_check_ranks", "across_ranks", "memory_reuse", "hash": wall seconds.
  std::vector<std::pair<std::string, double>> phase_seconds;
  // Within the first phase: seconds lowering, and checking, hashing and keeping the parts (and
  // destroying them). (Lowering the next range on a second thread while one is checked was
  // slower on this 2-core machine: 149 s against 100 s at 4096 ranks, the two threads slowing
  // each other's allocations and memory traffic, so it runs on one.)
  double lower_seconds = 0;
  double check_seconds = 0;
};

// Lowers `decisions` in ranges of ranks with `options` (its only_rank is ignored), verifies
// with options.plan_verifier (whatever options.verify_plan says) and hashes. The errors of the
// lowering pass through; a failed check is the InternalError of the verifier, prefixed as
// Compile prefixes it.
absl::StatusOr<InPartsReport> VerifyInParts(const GlobalDecisions& decisions, const CompileOptions& options,
                                            const InPartsOptions& parts = {});

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_DRIVER_VERIFY_IN_PARTS_H_
