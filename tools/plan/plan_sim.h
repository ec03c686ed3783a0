// olplan simulate: a discrete-event simulation of a Plan's actor graph in time, with the
// runtime's own rules (the firing rules of compiler/plan/plan_simulator.h: registers and their
// credits, SOURCE / REPEAT / ACCUMULATE rates, variable update back edges, collective
// rendezvous) plus time (and processor sharing of each node's CPU, see SimOptions): every (rank, stream) runs one firing at a time, in stream order among
// the enabled tasks; a firing takes its inputs and reserves its outputs when it starts and
// emits / returns them when it ends. Durations come from the compiler's cost model:
//   COMPUTE    the op's compute seconds in the chosen SBP candidate (per device)
//   TRANSFER   alpha + bytes x beta of the link class (same node / across nodes); on the same
//              node with a small-message rate (SimOptions), the two-size price of link_price.h;
//              with return_messages, plus the buffer's return message
//   COLLECTIVE a ring over n ranks: 2 (n - 1) (alpha + bytes / n x beta) on the same-node link,
//              bytes = its outputs; a bucket: its parts (ALL_REDUCE), its staging slot
//              (REDUCE_SCATTER)
//   BOXING_*, COPY, ACCUMULATE, SOURCE of an input: a local copy of the bytes they touch
//   others     the per-task overhead
//
//   ASSIGN_OR_RETURN(Simulation sim, SimulatePlanTime(plan, SimOptions{}));
//   sim.step_seconds, sim.idle_fraction, sim.critical_path, sim.TraceJson(rank)
//
// Results are for the last of `steps` simulated steps (the first ones fill the pipeline).
// Errors: InvalidArgument when the plan's rates cannot be derived or the simulation stalls
// (a deadlock: the report names the blocked tasks). Pure function of the plan and options.
#ifndef ONEFLOW_LIKE_TOOLS_PLAN_PLAN_SIM_H_
#define ONEFLOW_LIKE_TOOLS_PLAN_PLAN_SIM_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "oneflow_like/compiler/boxing/cost_model.h"
#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace plan_tool {

struct SimOptions {
  int64_t steps = 3;
  compiler::CostConfig cost;
  bool free_links = false;       // transfers and collectives take no time (tests of the schedule)
  // The ranks of one node (cost.ranks_per_node) share its CPU: the CPU work running there at
  // once (every firing but transfers and collectives) progresses at 1 / (how many run), the
  // cost model's seconds being those of the whole machine (olplan calibrate measures so).
  bool processor_sharing = true;
  // With cores_per_node > 0 the sharing counts cores: a matmul firing uses `gemm_threads` cores
  // (its BLAS threads) and runs at gemm_threads / profile_gemm_threads of the cost model's speed
  // (the profile's GEMM rate was measured with profile_gemm_threads threads); every other firing
  // is one thread at the cost model's speed (memory figures are one thread's), and those share
  // the node's memory bandwidth. When the firings running on a node ask for more cores than it
  // has, each gets its share. 0: the whole-machine model above.
  int32_t cores_per_node = 0;
  int32_t gemm_threads = 1;
  int32_t profile_gemm_threads = 1;
  // A memory-bound firing (not a matmul) whose registers (inputs and outputs: one firing's
  // bytes) fit in `cache_bytes` (a core's L2) shares no memory bandwidth: each core has its own
  // L2, and two threads copying 1 MiB buffers here get twice one thread's rate together, while
  // two copying 128 MiB buffers get 1.1x (DRAM). Its seconds stay the cost model's. 0: every
  // memory-bound firing shares the bandwidth.
  int64_t cache_bytes = 0;
  // ... provided the node's working set (the memory blocks of its ranks) fits in its last-level
  // cache of `llc_bytes`: else the bytes come from DRAM whatever the firing's size (two threads
  // copying buffers of 32 MiB in all here still get twice one thread's rate; 48 MiB: 1.4x;
  // 256 MiB: 1.1x). 0: the L2 rule alone.
  int64_t llc_bytes = 0;
  // All ranks run as threads of one process (oltrain without olrun): transfers are memory copies
  // (the same-process link), not loopback TCP.
  bool in_process = false;
  // A TRANSFER also pays the runtime's second message: the buffer's return to the producer
  // (kReturned, no payload) after the consumer is done; the link prices one message, the runtime
  // sends two per transfer (timelines: a 'send returned' for every 'send ready'). Between
  // processes the return costs `return_message_seconds` on the same node (a 64-byte message in a
  // stream, olplan calibrate; 0: the link's alpha) and alpha across nodes; in one process the
  // two messages between threads cost a firing's overhead each.
  bool return_messages = false;
  double return_message_seconds = 0;
  // The same-node link (loopback TCP) as measured at two message sizes (olplan calibrate): a
  // message of `same_node_small_message_bytes` moves at this rate, one of
  // `same_node_large_message_bytes` at the cost model's same-node rate; MessagePrice
  // (link_price.h) prices the sizes between and beyond. 0: the cost model's alpha-beta alone.
  double same_node_small_bytes_per_second = 0;
  int64_t same_node_small_message_bytes = int64_t{256} << 10;
  int64_t same_node_large_message_bytes = int64_t{4} << 20;
  // Registers the memory planner put in overlapping bytes take turns, as the runtime makes them
  // (a producer waits for the register sharing its bytes: "shared bytes" in timelines).
  bool byte_sharing = true;
  bool record_trace = true;      // per-firing records (trace, critical path); off for huge plans
  // The driver (oltrain, nn.Graph) feeds a step's inputs after the previous step returned: input
  // sources of step k+1 wait for the end of step k plus this fixed per-step cost (feed, start,
  // wake-up, fetch; olplan calibrate measures it).
  double step_overhead_seconds = 0;
  // A firing enabled by a message from another thread (stream or rank) starts no earlier than
  // this after the message: waking a sleeping thread (olplan calibrate measures it).
  double wakeup_seconds = 0;
  // Per op name: compute seconds per step overriding the plan's SBP decisions (OpSecondsFor).
  std::map<std::string, double> op_compute_seconds;
};

// For each op of `plan`: the compute seconds (per step) of the SBP signature `plan` chose, as
// priced in `priced` (the same job compiled with other costs, e.g. a machine profile). Ops whose
// signature `priced` did not consider are left out.
std::map<std::string, double> OpSecondsFor(const PlanProto& plan, const PlanProto& priced);

struct StreamStat {
  int32_t rank = 0;
  int32_t stream = 0;
  std::string kind;              // compute / copy / comm
  double busy_seconds = 0;       // within the last step
  double utilization = 0;        // busy / step
};

struct Firing {
  int32_t task = -1;             // index into the plan's tasks (rank order, then task order)
  double start = 0, end = 0;
  int32_t cause = -1;            // the firing whose end enabled this one (critical path)
};

struct Simulation {
  double step_seconds = 0;               // the last step
  std::vector<double> step_end;          // when every task finished step k
  double idle_fraction = 0;              // mean over compute streams of 1 - busy / step (pipeline bubble + waits)
  std::vector<StreamStat> streams;
  std::vector<std::string> critical_path;  // the chain of firings that ended the last step, first to last
  int64_t firings = 0;
  double simulator_seconds = 0;          // wall time of the simulation
  std::vector<Firing> trace;             // when record_trace
  std::vector<std::pair<int32_t, std::string>> task_names;  // index -> (rank, name)
  std::vector<int32_t> task_streams;     // index -> stream id
  // Chrome trace JSON of one rank's firings ({"traceEvents": [...]}), times in microseconds.
  std::string TraceJson(int32_t rank) const;
};

absl::StatusOr<Simulation> SimulatePlanTime(const PlanProto& plan, const SimOptions& options = {});

std::string SimulationText(const Simulation& sim, int max_streams = 8);
std::string SimulationJson(const Simulation& sim);

}  // namespace plan_tool
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_TOOLS_PLAN_PLAN_SIM_H_
