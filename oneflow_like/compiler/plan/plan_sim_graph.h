// Internal to the plan simulator and the verifiers: the compact graph the firing rules of
// plan_simulator.h run on, and its builder. SimulatePlan builds it from a whole plan's
// PlanIndex; StreamedVerifier (streamed_verifier.h) builds it one per-rank part at a time and
// holds it across ranks, so it holds only what the rules need, in dense arrays (CSR lists, int32
// indices; no object per task or register):
//   tasks      in plan order (ranks ascending, then as listed): kind, REPEAT / ACCUMULATE count,
//              rendezvous (COLLECTIVE), in-edges, produced registers;
//   registers  producing entries in plan order: count, producer, consumer edges;
//   edges      one per (register, consumer task present in the plan), register by register.
//
// Example: x.source -> r_x -> {A, B} gives tasks [source, A, B], register [r_x (producer 0,
// edges 0, 1)], edges [(r_x, A), (r_x, B)], A's in-edges [0], B's [1], source's outputs [r_x].
//
// Thread-compatible. The builder reads the plans it is given only during each call.
#ifndef ONEFLOW_LIKE_COMPILER_PLAN_PLAN_SIM_GRAPH_H_
#define ONEFLOW_LIKE_COMPILER_PLAN_PLAN_SIM_GRAPH_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "oneflow_like/compiler/plan/plan_index.h"
#include "oneflow_like/compiler/plan/plan_simulator.h"
#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace compiler {

// id -> index (int32), dense while ids are small and non-negative (as the lowering assigns them:
// 0, 1, 2, ... plan-wide, interleaved across ranks), hashed otherwise. Find: -1 if absent.
class IdTable {
 public:
  int32_t Find(int64_t id) const;
  // Inserts id -> index unless present; returns the index already there, or -1 if inserted.
  int32_t Insert(int64_t id, int32_t index);
  int64_t size() const { return size_; }

 private:
  std::vector<int32_t> dense_;
  absl::flat_hash_map<int64_t, int32_t> sparse_;
  int64_t size_ = 0;
};

struct SimGraph {
  // kOther: any other task (input-less ones are paced as plan_simulator.h says).
  enum Kind : uint8_t { kInputSource, kHolder, kRepeat, kAccumulate, kOther, kCollective };
  int64_t pieces_per_step = 1;

  std::vector<uint8_t> kind;          // by task
  std::vector<int32_t> count;         // by task: REPEAT / ACCUMULATE count, else 1
  std::vector<int32_t> rendezvous;    // by task: kCollective's call, else -1
  std::vector<int64_t> in_start;      // task t's in-edges: in_edges[in_start[t], in_start[t+1])
  std::vector<int32_t> in_edges;
  std::vector<int64_t> out_start;     // task t's produced registers, likewise
  std::vector<int32_t> out_registers;

  std::vector<int32_t> register_count;  // by register, >= 1
  std::vector<int32_t> producer;        // by register: task index, -1 if not in the plan
  std::vector<int64_t> edge_start;      // register r's edges: [edge_start[r], edge_start[r+1])
  std::vector<int32_t> edge_task;       // by edge
  std::vector<int32_t> edge_register;   // by edge

  // Member tasks of each collective call (same CollectiveParams.ranks and global_order).
  std::vector<std::vector<int32_t>> rendezvous_members;

  int64_t num_tasks() const { return static_cast<int64_t>(kind.size()); }
  int64_t num_registers() const { return static_cast<int64_t>(register_count.size()); }
};

// Builds a SimGraph rank by rank. Task and register ids must be unique in what is added (the
// callers check it first); the producing entries' consumer and producer ids are resolved by
// Finish, so a consumer on a rank added later is found.
class SimGraphBuilder {
 public:
  explicit SimGraphBuilder(int64_t pieces_per_step) { graph_.pieces_per_step = pieces_per_step; }

  // Adds `rank_plan`'s tasks and producing registers. `index` holds `rank_plan` (a whole plan's
  // or a per-rank part's index): it says which SOURCE is a variable holder.
  void AddRank(const PlanIndex& index, const RankPlanProto& rank_plan);
  // Resolves consumers and producers (ids of tasks never added are dropped) and returns the
  // graph. The id tables stay for TaskIndex / RegisterIndex.
  SimGraph Finish();

  int32_t TaskIndex(int64_t task_id) const { return tasks_.Find(task_id); }
  int32_t RegisterIndex(int64_t register_id) const { return registers_.Find(register_id); }
  int64_t num_tasks() const { return graph_.num_tasks(); }
  int64_t num_registers() const { return graph_.num_registers(); }

 private:
  SimGraph graph_;
  IdTable tasks_;
  IdTable registers_;
  std::vector<int64_t> producer_ids_;  // by register, until Finish
  std::vector<int64_t> consumer_ids_;  // by edge, until Finish
  std::map<std::pair<std::vector<int32_t>, int64_t>, int32_t> rendezvous_of_;
};

// Names of tasks and registers by index, for the simulation's report.
class SimLabels {
 public:
  virtual ~SimLabels() = default;
  // PlanIndex::TaskLabel / RegisterLabel of task `t` / register `r` of the graph.
  virtual std::string TaskLabel(int64_t t) const = 0;
  virtual std::string RegisterLabel(int64_t r) const = 0;
};

// The firing rules of plan_simulator.h on `graph` for `steps` (>= 1) steps; fills the
// *_by_index counts (by task index of the graph), not the per-id maps.
PlanSimulation RunSimulation(const SimGraph& graph, const SimLabels& labels, int64_t steps,
                             int max_reported_tasks);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_PLAN_PLAN_SIM_GRAPH_H_
