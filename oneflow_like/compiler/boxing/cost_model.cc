#include "oneflow_like/compiler/boxing/cost_model.h"

#include <algorithm>

#include "glog/logging.h"

namespace oneflow_like {
namespace compiler {

std::string LinkClassName(LinkClass c) {
  switch (c) {
    case LinkClass::kSameProcess: return "same_process";
    case LinkClass::kSameNode: return "same_node";
    case LinkClass::kCrossNode: return "cross_node";
  }
  return "unknown";
}

const LinkParams& CostConfig::link(LinkClass c) const {
  switch (c) {
    case LinkClass::kSameProcess: return same_process;
    case LinkClass::kSameNode: return same_node;
    case LinkClass::kCrossNode: return cross_node;
  }
  LOG(FATAL) << "unknown link class " << static_cast<int>(c);
  return cross_node;
}

int32_t NodeOf(Rank rank, const CostConfig& config) {
  CHECK(rank.valid()) << "NodeOf an invalid rank";
  const int32_t r = rank.value();
  if (!config.rank_to_node.empty()) {
    if (static_cast<size_t>(r) < config.rank_to_node.size()) return config.rank_to_node[r];
    return -1 - r;  // not listed: alone on its own node (negative ids never clash with listed ones)
  }
  return r / std::max<int32_t>(1, config.ranks_per_node);
}

LinkClass Classify(Rank a, Rank b, const CostConfig& config) {
  if (a == b) return LinkClass::kSameProcess;
  return NodeOf(a, config) == NodeOf(b, config) ? LinkClass::kSameNode : LinkClass::kCrossNode;
}

double TransferSeconds(int64_t bytes, LinkClass link, const CostConfig& config) {
  const LinkParams& p = config.link(link);
  return p.alpha_seconds + static_cast<double>(bytes) * p.beta_seconds_per_byte;
}

double CopySeconds(int64_t bytes, const CostConfig& config) {
  return config.host_device.alpha_seconds + static_cast<double>(bytes) * config.host_device.beta_seconds_per_byte;
}

double LocalCopySeconds(double bytes, const CostConfig& config) {
  return bytes / config.memory_bytes_per_second;
}

double ComputeSeconds(const OpCost& cost, const CostConfig& config) {
  const double flop_time = cost.flops / config.flops_per_second;
  const double memory_time = cost.bytes_moved / config.memory_bytes_per_second;
  return config.task_overhead_seconds + std::max(flop_time, memory_time);
}

}  // namespace compiler
}  // namespace oneflow_like
