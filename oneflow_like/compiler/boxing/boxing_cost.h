// Alpha-beta cost of a BoxingPlan, for SBP selection and the inspection tool.
//
// Model (an estimate for ranking alternatives):
//   - a transfer of b bytes between ranks of link class c costs alpha(c) + b * beta(c) on the
//     sender and on the receiver; links are full duplex, so a rank's communication time is
//     max(sum of its send times, sum of its receive times);
//   - local steps cost CostConfig::task_overhead_seconds plus their memory traffic at
//     memory_bytes_per_second (slice/concat: read + write; add of k inputs: k reads + 1 write;
//     zeros: one write);
//   - a rank's time is its communication time plus its local time; the plan's time is the
//     maximum over ranks, and at least the time each node's shared NIC needs for the bytes
//     its ranks send (or receive) across nodes at cross_node bandwidth;
//   - a copy between two devices of one rank (host <-> device) costs CopySeconds (the
//     host_device link) on that rank, like a local step;
//   - a collective step (CollectiveExpander) is costed as the ring algorithm it stands for:
//     all-reduce 2(m-1) messages of S/m per member, the others (m-1) messages of S/m, where
//     S is the group's whole tensor bytes, on the link to the next member of the group.
// Example: P -> B of 1 MB on 4 ranks of one node, direct: each rank receives 3 x 1 MB and
// sends 3 x 1 MB; ring: 6 messages of 256 KB each way, about half the time.
//
// Thread-compatible: an accumulator is owned by one caller.
#ifndef ONEFLOW_LIKE_COMPILER_BOXING_BOXING_COST_H_
#define ONEFLOW_LIKE_COMPILER_BOXING_BOXING_COST_H_

#include <array>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "oneflow_like/compiler/boxing/boxing_plan.h"
#include "oneflow_like/compiler/boxing/cost_model.h"

namespace oneflow_like {
namespace compiler {

struct BoxingCostSummary {
  double seconds = 0;                // max(max_rank_seconds, max_nic_seconds)
  double max_rank_seconds = 0;
  double max_nic_seconds = 0;
  Rank critical_rank;                // the slowest rank (lowest id on ties); unset if no steps
  std::array<int64_t, kNumLinkClasses> bytes_by_link{};  // bytes over all transfers, per class
  int64_t total_bytes = 0;           // sum of bytes_by_link
  int64_t max_bytes_sent = 0;        // by any one rank
  int64_t max_bytes_received = 0;    // by any one rank
  int64_t num_transfers = 0;         // point-to-point messages (collectives: their ring messages)
  int64_t num_local_steps = 0;       // slice / add / concat / zeros / copy
  int64_t num_copies = 0;            // host <-> device copies (also counted in num_local_steps)
  int64_t bytes_copied = 0;          // their bytes (not in total_bytes, which is between ranks)

  // "1.234 ms (critical r3), 3.0 MB: same_node 3.0 MB, 12 transfers, 4 local steps"
  // (+ ", 2 copies 1.0 MB" when there are host <-> device copies).
  std::string ToString() const;
};

class BoxingCostAccumulator {
 public:
  explicit BoxingCostAccumulator(const CostConfig* config) : config_(config) {}

  // `count` messages of `bytes` each from src to dst.
  void Transfer(Rank src, Rank dst, int64_t bytes, int64_t count = 1);
  // A local step of `kind` (not kTransfer/kCollective) on `rank` writing `bytes`.
  void Local(StepKind kind, Rank rank, int64_t bytes, int num_inputs);
  // A host <-> device copy of `bytes` on `rank`.
  void Copy(Rank rank, int64_t bytes);
  // A collective over `group` whose whole (per-group) tensor has `group_bytes` bytes.
  void Collective(CollectiveKind kind, const std::vector<Rank>& group, int64_t group_bytes);

  BoxingCostSummary Finish() const;

  // Giving up (to compare schedules without costing the hopeless ones to the end): once the
  // partial cost so far exceeds `seconds`, gave_up() turns true. The cost only grows as steps are
  // added, so a plan given up on costs more than `seconds` in full. Infinity (the default): never.
  void set_give_up_above(double seconds) { give_up_above_ = seconds; }
  bool gave_up() const { return gave_up_; }

 private:
  struct RankState {
    double send_seconds = 0;
    double recv_seconds = 0;
    double local_seconds = 0;
    int64_t bytes_sent = 0;
    int64_t bytes_received = 0;
    bool used = false;
  };
  RankState& At(Rank rank);
  // After `s` grew: gives up if its time (as Finish computes it) exceeds the bound.
  void Check(const RankState& s) {
    if (std::max(s.send_seconds, s.recv_seconds) + s.local_seconds > give_up_above_) gave_up_ = true;
  }

  const CostConfig* config_;
  std::vector<RankState> ranks_;  // indexed by rank value
  absl::flat_hash_map<int32_t, std::pair<int64_t, int64_t>> nic_bytes_;  // node -> (out, in)
  BoxingCostSummary totals_;
  double give_up_above_ = std::numeric_limits<double>::infinity();
  bool gave_up_ = false;
};

// The cost of `plan` under `config` (replays its steps through a BoxingCostAccumulator).
BoxingCostSummary BoxingCost(const BoxingPlan& plan, const CostConfig& config);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_BOXING_BOXING_COST_H_
