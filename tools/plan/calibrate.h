// olplan calibrate: measures this machine once and saves a profile that later predictions and
// the SBP search use (olplan loads it for every compile; `--profile FILE` picks another):
//   flops_per_second         the registry's matmul kernel (OpenBLAS sgemm) on 1024^3 float32
//   memory_bytes_per_second  memcpy of 128 MiB (bytes read + written per second)
//   cache_bytes              a core's L2 (sysconf): olplan simulate lets memory-bound firings
//                            whose bytes fit run without sharing the memory bandwidth (two
//                            threads copying 1 MiB buffers here get 2x one thread's rate, 128 MiB
//                            ones 1.1x; plan_sim.h); absent: every memory-bound firing shares it
//   llc_bytes                the last-level cache (sysconf): the L2 rule holds on a node whose
//                            ranks' memory blocks fit in it (plan_sim.h)
//   task_overhead_seconds    one actor firing in the runtime: a chain of 64 tiny ops, timed
//                            per step in an actor::Session, divided by the ops
//   step_overhead_seconds    one step of a one-op plan (feed, run, fetch): the driver's fixed cost
//   wakeup_seconds           a chain of tiny ops alternating between two ranks in one process:
//                            per hop, beyond the firings' own cost (a thread woken by a message)
//   cores, gemm_threads      the machine's cores and the BLAS threads of the matmul measurement
//                            (the simulator's core-aware processor sharing, plan_sim.h)
//   same_node_alpha_seconds, same_node_bytes_per_second
//                            two TcpTransports over 127.0.0.1 (olrun's ranks): half a 64-byte
//                            round trip, and the bandwidth of 4 MiB messages (calibrate_link.h)
//   same_node_small_bytes_per_second, same_node_small_message_bytes
//                            the bandwidth of 256 KiB messages on the same link: olplan simulate
//                            prices a same-node message by its size between the two
//                            (link_price.h); absent: every size at same_node_bytes_per_second
//   same_node_message_seconds
//                            a stream of 64-byte messages on the same link: seconds per message
//                            (olplan simulate prices the runtime's return of a transferred buffer,
//                            a message without payload, at it); absent: at same_node_alpha_seconds
// The cross-node link keeps the cost model's 10 GbE figures unless a profile sets them. A hand-written profile describes a machine that is not this one (e.g.
// tools/plan/profiles/h100.txt: an 8-GPU H100 node on InfiniBand) with the optional keys
//   same_node_alpha_seconds, same_node_bytes_per_second     link within a node (NVLink)
//   cross_node_alpha_seconds, cross_node_bytes_per_second   link across nodes (one NIC per rank)
//   ranks_per_node                                          ranks sharing a node's links
//   device_per_rank = 1                                     each rank owns its device (a GPU):
//                                                           ranks never share compute
//   host_device_alpha_seconds, host_device_bytes_per_second a copy between host and device
//                                                           of one rank (COPY tasks; PCIe).
//                                                           Absent: a host memcpy at the
//                                                           calibrated memory_bytes_per_second
//                                                           (which counts read + write)
//
// Profile file: "key = value" lines (the keys above, plus host and date as comments).
#ifndef ONEFLOW_LIKE_TOOLS_PLAN_CALIBRATE_H_
#define ONEFLOW_LIKE_TOOLS_PLAN_CALIBRATE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "oneflow_like/compiler/boxing/cost_model.h"
#include "oneflow_like/core/op_registry.h"

namespace oneflow_like {
namespace plan_tool {

struct Profile {
  double flops_per_second = 0;
  double memory_bytes_per_second = 0;
  int64_t cache_bytes = 0;             // a core's L2 (0: unknown, an older profile)
  int64_t llc_bytes = 0;               // the last-level cache (0: unknown)
  double task_overhead_seconds = 0;
  double step_overhead_seconds = 0;  // feed + run + fetch of a one-op step: the driver's fixed cost
  double wakeup_seconds = 0;         // a message to another thread: until it runs the next firing
  int32_t cores = 0;                 // the machine's cores (0: unknown, an older profile)
  int32_t gemm_threads = 0;          // BLAS threads of the flops_per_second measurement
  // Optional (0 = the cost model's default; `olplan calibrate` leaves them 0).
  double same_node_alpha_seconds = 0, same_node_bytes_per_second = 0;
  double same_node_small_bytes_per_second = 0;  // messages of same_node_small_message_bytes
  double same_node_message_seconds = 0;         // a 64-byte message in a stream
  int64_t same_node_small_message_bytes = 0;
  double cross_node_alpha_seconds = 0, cross_node_bytes_per_second = 0;
  int32_t ranks_per_node = 0;
  bool device_per_rank = false;
  double host_device_alpha_seconds = 0, host_device_bytes_per_second = 0;  // optional, like the links
  std::string path;  // where it was read from / written to
};

// Measures (a few seconds). `log` gets one progress line per measurement.
absl::StatusOr<Profile> Calibrate(const OpRegistry& registry, const std::function<void(const std::string&)>& log);
absl::Status SaveProfile(const Profile& profile, const std::string& path);
// NotFound when the file does not exist; InvalidArgument naming the line for a malformed one.
absl::StatusOr<Profile> LoadProfile(const std::string& path);
// ~/.cache/oneflow_like/olplan_profile.txt
std::string DefaultProfilePath();
void ApplyProfile(const Profile& profile, compiler::CostConfig* cost);
// The BLAS threads a process gets: OPENBLAS_NUM_THREADS, else OMP_NUM_THREADS, else `cores`
// (OpenBLAS's default: one per core).
int32_t BlasThreadsFromEnv(int32_t cores);

}  // namespace plan_tool
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_TOOLS_PLAN_CALIBRATE_H_
