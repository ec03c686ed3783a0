// The compiler's cost model: turns bytes moved between ranks and an op's OpCost into seconds.
//
// Communication is alpha-beta per link class: sending b bytes over a link of class c takes
// alpha(c) + b * beta(c) seconds. The class of a pair of ranks is
//   kSameProcess  the same rank (e.g. a copy between two buffers),
//   kSameNode     two ranks on one machine (loopback TCP / shared memory),
//   kCrossNode    two machines (a 10 GbE-class network).
// Ranks are grouped into nodes by `rank_to_node` when given, else by rank / ranks_per_node.
//
// Compute is a roofline: max(flops / flops_per_second, bytes / memory_bytes_per_second) plus a
// fixed per-task overhead. The defaults describe the CPU world this project runs in (a few
// cores per rank, TCP between processes); they are estimates for ranking alternatives, not
// predictions to the microsecond. Every number is a field, so tests and tools can change it.
//
// A copy between two devices of one rank (host <-> device, a COPY task) is priced on its own
// link, `host_device` (PCIe on a GPU machine; a memcpy on CPU profiles): CopySeconds.
//
// Example: with the defaults, moving 1 MB between two ranks of one node costs
// 30e-6 + 1e6 / 1.5e9 ~= 0.70 ms; across nodes 50e-6 + 1e6 / 1.1e9 ~= 0.96 ms.
//
// All functions are pure and thread-safe.
#ifndef ONEFLOW_LIKE_COMPILER_BOXING_COST_MODEL_H_
#define ONEFLOW_LIKE_COMPILER_BOXING_COST_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_like/core/ids.h"
#include "oneflow_like/core/op_def.h"

namespace oneflow_like {
namespace compiler {

enum class LinkClass : int32_t { kSameProcess = 0, kSameNode = 1, kCrossNode = 2 };
constexpr int kNumLinkClasses = 3;
// "same_process", "same_node", "cross_node".
std::string LinkClassName(LinkClass c);

// Latency and inverse bandwidth of one link class.
struct LinkParams {
  double alpha_seconds = 0;          // fixed cost per message
  double beta_seconds_per_byte = 0;  // 1 / bandwidth
};

struct CostConfig {
  // Same rank: a memcpy between buffers of one process (~5 GB/s effective for large copies,
  // ~1 us to hand a buffer between two threads).
  LinkParams same_process{1e-6, 1.0 / 5e9};
  // Two processes on one machine over loopback TCP: ~1.5 GB/s effective, ~30 us per message
  // (syscalls, wakeups, the transport's framing).
  LinkParams same_node{30e-6, 1.0 / 1.5e9};
  // Two machines over 10 GbE: 1.25 GB/s raw, ~1.1 GB/s effective, ~50 us per message.
  // The node's NIC is shared: BoxingCost also bounds the time by the bytes all ranks of a node
  // send (or receive) across nodes at this bandwidth.
  LinkParams cross_node{50e-6, 1.0 / 1.1e9};
  // Host <-> device within one rank (a COPY task: cpu <-> cuda over PCIe). The default is a
  // host memcpy (~5 GB/s, ~1 us), what a copy between two host buffers costs; GPU profiles set
  // the PCIe figures (olplan: host_device_alpha_seconds, host_device_bytes_per_second), CPU
  // profiles the calibrated memcpy rate.
  LinkParams host_device{1e-6, 1.0 / 5e9};

  // Ranks r and s share a node iff r / ranks_per_node == s / ranks_per_node ...
  int32_t ranks_per_node = 8;
  // ... unless this is non-empty: then rank r is on node rank_to_node[r] (ranks beyond the end
  // are alone on their own node).
  std::vector<int32_t> rank_to_node;

  // Per rank: sustained FLOP/s of a few CPU cores running float32 kernels, and DRAM bandwidth.
  double flops_per_second = 20e9;
  double memory_bytes_per_second = 10e9;
  // Fixed cost of running one task (actor dispatch, kernel call), added to every compute task.
  double task_overhead_seconds = 2e-6;

  const LinkParams& link(LinkClass c) const;
};

// The node of `rank` under `config` (see CostConfig).
int32_t NodeOf(Rank rank, const CostConfig& config);

// The link class between ranks a and b. REQUIRES: both valid.
LinkClass Classify(Rank a, Rank b, const CostConfig& config);

// alpha + bytes * beta on `link`.
double TransferSeconds(int64_t bytes, LinkClass link, const CostConfig& config);

// alpha + bytes * beta of host_device: one host <-> device copy of `bytes`.
double CopySeconds(int64_t bytes, const CostConfig& config);

// Time of a local memory-bound step touching `bytes` (reads + writes), without task overhead.
double LocalCopySeconds(double bytes, const CostConfig& config);

// Roofline time of one op on one device: overhead + max(flops / F, bytes_moved / BW).
double ComputeSeconds(const OpCost& cost, const CostConfig& config);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_BOXING_COST_MODEL_H_
