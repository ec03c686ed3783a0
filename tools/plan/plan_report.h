// What a compiled Plan will do and cost, read from the Plan alone (olplan's reports):
//   Summarize  ranks, stages, pieces, ops / tasks / registers per rank, bytes moved per step
//              (total and per link class), planned peak memory per rank, a serial step-time
//              estimate from the compiler's cost model;
//   memory     per rank the planned peak, the bytes by what owns them (parameters, optimizer
//              state, activations, gradients, communication buffers, ...) and the largest
//              registers; per device where a rank's blocks are on two (a cpu data source
//              feeding a cuda placement: RankMemoryProto.devices);
//   SBP        per op the chosen signature and every candidate with its cost breakdown;
//   boxing     every transform SBP selection priced (transition, pattern, bytes, seconds) and
//              the boxing tasks the lowering emitted for it.
//
//   ASSIGN_OR_RETURN(PlanSummary s, Summarize(plan, ReportOptions{}));
//   std::cout << SummaryText(s);        // or SummaryJson(s)
//
// Everything is computed from the plan's tasks, registers (count x buffer bytes), bindings and
// SBP decisions; firings per step come from actor/plan_rates.h. Errors: InvalidArgument for a
// plan whose rates cannot be derived (run VerifyPlan first: olplan does). Pure functions.
#ifndef ONEFLOW_LIKE_TOOLS_PLAN_PLAN_REPORT_H_
#define ONEFLOW_LIKE_TOOLS_PLAN_PLAN_REPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace plan_tool {

struct ReportOptions {
  int32_t ranks_per_node = 8;  // link classes: ranks r, s share a node when r / n == s / n
};

struct RegisterUse {
  std::string name;
  std::string category;
  int64_t bytes = 0;  // count x buffer bytes
};

// One device of a rank whose memory blocks are on several devices.
struct DeviceBytes {
  std::string device;          // "cuda:0"
  int64_t planned_bytes = 0;   // its blocks
  int64_t naive_bytes = 0;     // its registers without reuse
  friend bool operator==(const DeviceBytes& a, const DeviceBytes& b) {
    return a.device == b.device && a.planned_bytes == b.planned_bytes && a.naive_bytes == b.naive_bytes;
  }
};

struct RankReport {
  int32_t rank = 0;
  int64_t planned_bytes = 0;     // the peak: planned blocks + transfer staging
  int64_t block_bytes = 0;       // the memory planner's blocks
  int64_t staging_bytes = 0;     // mirrors of remote registers (the runtime stages them itself)
  int64_t naive_bytes = 0;       // every local register its own bytes (no staging)
  int64_t persistent_bytes = 0;  // blocks that live across steps (variables)
  int64_t tasks = 0;
  int64_t registers = 0;
  int64_t compute_tasks = 0;
  std::map<std::string, int64_t> tasks_by_type;
  std::map<std::string, int64_t> bytes_by_category;  // naive bytes by owner
  std::vector<RegisterUse> largest;                   // the biggest registers, largest first
  int64_t bytes_received_per_step = 0;
  std::vector<DeviceBytes> devices;  // empty unless the rank's blocks are on several devices
  // What `--device-memory` is compared with: where the rank's blocks are on the host and an
  // accelerator, the accelerator's planned blocks (the host side lives in the machine's memory);
  // else planned_bytes.
  int64_t device_bytes = 0;
};

struct PlanSummary {
  std::string job_name;
  std::string hash;
  int32_t world_size = 0;
  int64_t ranks_with_work = 0;
  int64_t pieces_per_step = 1;
  int32_t stages = 1;
  int64_t logical_ops = 0;
  int64_t tasks = 0;
  int64_t registers = 0;
  std::vector<std::string> placements;              // distinct placements of the ops
  int64_t bytes_per_step = 0;                       // all TRANSFER payloads of a step
  std::map<std::string, int64_t> bytes_by_link;     // "intra-node", "inter-node"
  double serial_estimate_seconds = 0;               // sum over ops of the cost model's seconds
  std::vector<RankReport> ranks;                    // ranks with work, ascending
  int64_t peak_bytes = 0;                           // max over ranks of planned_bytes
  int32_t peak_rank = 0;
  int64_t peak_device_bytes = 0;                    // max over ranks of device_bytes
};

struct SbpCandidate {
  std::vector<std::string> inputs, outputs;  // NdSbp text per input / output
  double compute_seconds = 0, comm_seconds = 0, total_seconds = 0;
  std::vector<std::string> comm;  // per boxed input: "in0 (S(0)) -> all_gather 4.0 KiB 1.2 us"
  std::string rejected_reason;
  bool chosen = false;
};
struct SbpDecision {
  std::string op_name, op_type;
  std::vector<SbpCandidate> candidates;
};

struct BoxingEntry {
  std::string op_name;   // the consuming op (the first, when the boxing feeds several)
  int32_t input = 0;
  std::string tensor;    // the boxed logical tensor ("" in plans compiled before it was recorded)
  // Further readers ("op input N") of the same boxing: the lowering boxes a tensor once per
  // target layout, so it is listed (and counted) once.
  std::vector<std::string> also_read_by;
  std::string from, to;  // NdSbp of the producer / of the consumer's input
  std::string pattern;   // e.g. all_reduce, all_gather, cross_placement
  double bytes = 0;      // per device, as priced by SBP selection
  double seconds = 0;
};

absl::StatusOr<PlanSummary> Summarize(const PlanProto& plan, const ReportOptions& options = {});
std::vector<SbpDecision> SbpDecisions(const PlanProto& plan);
std::vector<BoxingEntry> BoxingEntries(const PlanProto& plan);

std::string SummaryText(const PlanSummary& s);
std::string SummaryJson(const PlanSummary& s);
std::string MemoryText(const PlanSummary& s, int64_t device_memory_bytes);  // 0: no fit check
std::string MemoryJson(const PlanSummary& s, int64_t device_memory_bytes);
std::string SbpText(const std::vector<SbpDecision>& decisions, const std::string& only_op);
std::string SbpJson(const std::vector<SbpDecision>& decisions, const std::string& only_op);
std::string BoxingText(const std::vector<BoxingEntry>& entries);
std::string BoxingJson(const std::vector<BoxingEntry>& entries);

// What changed from plan A to plan B: SBP per op, boxing added / removed (bytes), placements,
// tasks and registers, per-rank peak memory, the serial estimate, traffic per link class.
std::string DiffText(const PlanProto& a, const PlanProto& b, const ReportOptions& options = {});
std::string DiffJson(const PlanProto& a, const PlanProto& b, const ReportOptions& options = {});

// "16GiB", "512MiB", "1.5GB", "2048" (bytes) -> bytes; InvalidArgument naming the text.
absl::StatusOr<int64_t> ParseBytes(const std::string& text);
std::string HumanBytes(double bytes);

}  // namespace plan_tool
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_TOOLS_PLAN_PLAN_REPORT_H_
