#include "oneflow_like/compiler/boxing/boxing_cost.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"

namespace oneflow_like {
namespace compiler {

std::string BoxingCostSummary::ToString() const {
  std::string out = absl::StrFormat("%.3f ms", seconds * 1e3);
  if (critical_rank.valid()) absl::StrAppend(&out, " (critical r", critical_rank.value(), ")");
  absl::StrAppend(&out, absl::StrFormat(", %.3f MB", total_bytes / 1e6));
  for (int c = 0; c < kNumLinkClasses; ++c) {
    if (bytes_by_link[c] == 0) continue;
    absl::StrAppend(&out, absl::StrFormat(": %s %.3f MB", LinkClassName(static_cast<LinkClass>(c)),
                                          bytes_by_link[c] / 1e6));
  }
  absl::StrAppend(&out, ", ", num_transfers, " transfers, ", num_local_steps, " local steps");
  if (num_copies > 0) absl::StrAppend(&out, absl::StrFormat(", %d copies %.3f MB", num_copies, bytes_copied / 1e6));
  return out;
}

BoxingCostAccumulator::RankState& BoxingCostAccumulator::At(Rank rank) {
  CHECK(rank.valid()) << "boxing cost: invalid rank";
  const size_t r = static_cast<size_t>(rank.value());
  if (r >= ranks_.size()) ranks_.resize(r + 1);
  ranks_[r].used = true;
  return ranks_[r];
}

void BoxingCostAccumulator::Transfer(Rank src, Rank dst, int64_t bytes, int64_t count) {
  const LinkClass link = Classify(src, dst, *config_);
  const double seconds = static_cast<double>(count) * TransferSeconds(bytes, link, *config_);
  const int64_t total = bytes * count;
  RankState& s = At(src);
  s.send_seconds += seconds;
  s.bytes_sent += total;
  Check(s);
  RankState& d = At(dst);
  d.recv_seconds += seconds;
  d.bytes_received += total;
  Check(d);
  totals_.bytes_by_link[static_cast<int>(link)] += total;
  totals_.num_transfers += count;
  if (link == LinkClass::kCrossNode) {
    const int64_t out = nic_bytes_[NodeOf(src, *config_)].first += total;
    const int64_t in = nic_bytes_[NodeOf(dst, *config_)].second += total;
    if (std::max(out, in) * config_->cross_node.beta_seconds_per_byte > give_up_above_) gave_up_ = true;
  }
}

void BoxingCostAccumulator::Local(StepKind kind, Rank rank, int64_t bytes, int num_inputs) {
  double traffic = 0;
  switch (kind) {
    case StepKind::kSlice:
    case StepKind::kConcat: traffic = 2.0 * bytes; break;
    case StepKind::kAdd: traffic = static_cast<double>(num_inputs + 1) * bytes; break;
    case StepKind::kZeros: traffic = static_cast<double>(bytes); break;
    default: LOG(FATAL) << "not a local step: " << StepKindName(kind);
  }
  RankState& s = At(rank);
  s.local_seconds += config_->task_overhead_seconds + LocalCopySeconds(traffic, *config_);
  Check(s);
  ++totals_.num_local_steps;
}

void BoxingCostAccumulator::Copy(Rank rank, int64_t bytes) {
  RankState& s = At(rank);
  s.local_seconds += CopySeconds(bytes, *config_);
  Check(s);
  ++totals_.num_local_steps;
  ++totals_.num_copies;
  totals_.bytes_copied += bytes;
}

void BoxingCostAccumulator::Collective(CollectiveKind kind, const std::vector<Rank>& group, int64_t group_bytes) {
  const int64_t m = static_cast<int64_t>(group.size());
  if (m < 2) return;
  const int64_t chunk = (group_bytes + m - 1) / m;
  const int64_t messages = kind == CollectiveKind::kAllReduce ? 2 * (m - 1) : m - 1;
  for (int64_t i = 0; i < m; ++i) Transfer(group[i], group[(i + 1) % m], chunk, messages);
}

BoxingCostSummary BoxingCostAccumulator::Finish() const {
  BoxingCostSummary out = totals_;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    const RankState& s = ranks_[r];
    if (!s.used) continue;
    const double t = std::max(s.send_seconds, s.recv_seconds) + s.local_seconds;
    if (!out.critical_rank.valid() || t > out.max_rank_seconds) {
      out.max_rank_seconds = t;
      out.critical_rank = Rank(static_cast<int32_t>(r));
    }
    out.max_bytes_sent = std::max(out.max_bytes_sent, s.bytes_sent);
    out.max_bytes_received = std::max(out.max_bytes_received, s.bytes_received);
  }
  for (const auto& node : nic_bytes_) {
    const int64_t bytes = std::max(node.second.first, node.second.second);
    out.max_nic_seconds = std::max(out.max_nic_seconds, bytes * config_->cross_node.beta_seconds_per_byte);
  }
  out.seconds = std::max(out.max_rank_seconds, out.max_nic_seconds);
  out.total_bytes = 0;
  for (int64_t b : out.bytes_by_link) out.total_bytes += b;
  return out;
}

BoxingCostSummary BoxingCost(const BoxingPlan& plan, const CostConfig& config) {
  BoxingCostAccumulator acc(&config);
  for (const BoxingStep& s : plan.steps) {
    switch (s.kind) {
      case StepKind::kTransfer: acc.Transfer(s.peer, s.rank, s.bytes); break;
      case StepKind::kCopy: acc.Copy(s.rank, s.bytes); break;
      case StepKind::kCollective: {
        // The group's whole tensor: all outputs of an all-gather/all-reduce are it; for
        // reduce-scatter and all-to-all the outputs partition it.
        int64_t group_bytes = 0;
        if (s.collective == CollectiveKind::kAllGather || s.collective == CollectiveKind::kAllReduce) {
          group_bytes = s.bytes;
        } else {
          const int64_t elem = SizeOf(plan.desc.dtype);
          for (size_t k = 0; k < s.group.size(); ++k) group_bytes += plan.values[s.output + k].region.elem_count() * elem;
        }
        acc.Collective(s.collective, s.group, group_bytes);
        break;
      }
      default: acc.Local(s.kind, s.rank, s.bytes, static_cast<int>(s.inputs.size())); break;
    }
  }
  return acc.Finish();
}

}  // namespace compiler
}  // namespace oneflow_like

