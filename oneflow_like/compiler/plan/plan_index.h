// Internal to the plan verifier and simulator: lookup tables over a PlanProto by id, and the
// labels every error message uses to name a rank, task or register.
//
// PlanIndex::Build checks only what indexing needs (ranks match, task ids unique, register ids
// unique per rank and, for producing entries, across the plan); the other invariants are
// checked by plan_verifier.cc. The index points into the plan, which must outlive it.
//
// Example: in the worked example of docs/plan_format.md, FindTask(16) is rank 1's TRANSFER
// "dw.transfer", FindRegister(4) is rank 0's register 4 (the producing entry) and
// FindEntry(1, 4) is rank 1's mirror of it; TaskLabel(...) gives
// "rank 1 task 16 'dw.transfer' (TRANSFER)".
#ifndef ONEFLOW_LIKE_COMPILER_PLAN_PLAN_INDEX_H_
#define ONEFLOW_LIKE_COMPILER_PLAN_PLAN_INDEX_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace compiler {

class PlanIndex {
 public:
  // REQUIRES: `plan` outlives the index.
  static absl::StatusOr<PlanIndex> Build(const PlanProto& plan);

  const PlanProto& plan() const { return *plan_; }
  // A per-rank plan (PlanProto.per_rank set): the other ranks' tasks and registers are absent.
  bool partial() const { return plan_->has_per_rank(); }
  int64_t num_tasks() const { return static_cast<int64_t>(tasks_.size()); }
  // Tasks in plan order (rank by rank, then as listed); a task's index is its position here.
  const TaskProto& task(int64_t index) const { return *tasks_[index]; }
  // -1 if absent.
  int64_t TaskIndex(int64_t task_id) const;
  const TaskProto* FindTask(int64_t task_id) const;
  // The producing (non-mirror) entry of register `id`, nullptr if none.
  const RegisterProto* FindRegister(int64_t id) const;
  // The entry of `id` on `rank` (producing or mirror), nullptr if none.
  const RegisterProto* FindEntry(int32_t rank, int64_t id) const;
  // nullptr if `rank` has no plan.
  const RankPlanProto* FindRank(int32_t rank) const;
  // Producing entries in plan order, and the rank that holds each.
  const std::vector<std::pair<int32_t, const RegisterProto*>>& producing_registers() const {
    return registers_;
  }
  // The position of register `id`'s producing entry in producing_registers(), -1 if none.
  int64_t ProducingIndex(int64_t id) const;
  // True for a SOURCE task bound to a VARIABLE on its rank (the variable holder).
  bool IsVariableHolder(const TaskProto& task) const;

  // "rank 0 task 12 'fc1.matmul@r0' (COMPUTE)".
  static std::string TaskLabel(const TaskProto& task);
  // "register 17 'x/out' on rank 0" (mirrors: "mirror register 17 'x/out' on rank 1").
  static std::string RegisterLabel(int32_t rank, const RegisterProto& reg);

 private:
  // Ids are looked up in dense tables indexed by id when the ids are small and non-negative (as
  // the lowering assigns them: 0, 1, 2, ...), else in hash maps; both give the same answers.
  const PlanProto* plan_ = nullptr;
  std::vector<const TaskProto*> tasks_;
  std::vector<bool> holder_;  // by task index: IsVariableHolder
  std::vector<int64_t> dense_task_index_;               // by task id, -1: none
  absl::flat_hash_map<int64_t, int64_t> task_index_;    // ids outside the dense table
  std::vector<std::pair<int32_t, const RegisterProto*>> registers_;
  std::vector<int64_t> dense_producing_;                // by register id: index into registers_
  absl::flat_hash_map<int64_t, int64_t> producing_;     // ids outside the dense table

  // Every entry that is not the producing entry found through the tables above: mirrors.
  absl::flat_hash_map<std::pair<int32_t, int64_t>, const RegisterProto*> entries_;
  absl::flat_hash_map<int32_t, const RankPlanProto*> ranks_;
};

// Size in bytes of one element of `dtype`; 0 for DT_INVALID or an unknown value.
int64_t DataTypeBytes(DataTypeProto dtype);

// "f32[2,3]"-style text of a slot, for messages.
std::string SlotText(const TensorDescProto& desc);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_PLAN_PLAN_INDEX_H_
