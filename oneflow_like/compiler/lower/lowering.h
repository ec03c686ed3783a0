// Internal to //oneflow_like/compiler/lower: the Lowerer that LowerToPlan runs (lower.h has
// the rules). Split by feature: expand.cc (sources, compute, sinks, rates, updates),
// boxing_lower.cc (BoxingPlan -> tasks), bucket.cc (gradient buckets), registers.cc (streams,
// counts, memory).
//
// The lowering tracks *values*: one logical tensor in one layout (placement, NdSbp) at one
// rate, held as one register per device of the placement. GetValue returns the value a
// consumer needs, building boxing / REPEAT / ACCUMULATE tasks on first use and caching it, so
// consumers that need the same layout share one conversion.
#ifndef ONEFLOW_LIKE_COMPILER_LOWER_LOWERING_H_
#define ONEFLOW_LIKE_COMPILER_LOWER_LOWERING_H_

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "oneflow_like/compiler/graph.h"
#include "oneflow_like/compiler/lower/lower.h"
#include "oneflow_like/compiler/lower/plan_builder.h"

namespace oneflow_like {
namespace compiler {
namespace lower_internal {

struct Value {
  Placement placement;
  NdSbp nd_sbp;
  bool step_rate = false;
  int stage = 0;           // stage its tasks work for (the producer's, or a source's first reader's)
  int64_t position = -1;   // program-order index of its producer op (-1: a source)
  std::vector<int64_t> registers;  // per device, parallel-id order; slot 0 holds the shard
  std::vector<int32_t> slots;      // per device where the shard is not slot 0 (a bucket), else empty
  int32_t SlotOf(size_t device) const { return slots.empty() ? 0 : slots[device]; }
};

// A collective step's geometry (logical_dims, group_region, input / output regions; no kind,
// ranks or order). REQUIRES: step is a kCollective step of plan with a non-empty group.
CollectiveParams CollectiveGeometry(const BoxingPlan& plan, const BoxingStep& step);

// Program-order facts the register-count rule needs.
struct StageInfo {
  int num_stages = 1;
  std::vector<int> stage_at;  // stage of the op at each program position
  // prefix[s][p] = number of ops of stage s among positions [0, p).
  std::vector<std::vector<int32_t>> prefix;
  // Whether an op of a stage other than `stage` lies at a position in (lo, hi).
  bool OtherStageBetween(int stage, int64_t lo, int64_t hi) const;
};
StageInfo ComputeStageInfo(const Graph& graph);

class Lowerer {
 public:
  Lowerer(const Graph& graph, const LowerOptions& options);
  absl::StatusOr<PlanProto> Run();

 private:
  absl::Status CheckPreconditions() const;
  // expand.cc
  void EmitSources();
  absl::Status EmitOp(OpId op_id);
  absl::Status EmitSinks();
  absl::Status EmitUpdates();
  absl::StatusOr<const Value*> GetValue(TensorId tensor, const Placement& placement, const NdSbp& nd_sbp,
                                        bool step_rate);
  // REPEAT (step -> piece) or ACCUMULATE (piece -> step) per device of `in`.
  Value EmitRateChange(TensorId tensor, const Value& in, TaskProto::Type type);
  TaskInfo NewTask(TaskProto::Type type, Rank rank, DeviceType device, const std::string& name,
                   const std::string& op_name, int stage, int64_t position) const;
  // boxing_lower.cc
  // The boxing plan of `tensor` from `src`'s layout to (placement, nd_sbp), memoized; under
  // kAuto the cheaper expansion, the choice recorded in choices_ (counted when `use`).
  absl::StatusOr<const BoxingPlan*> PlanFor(TensorId tensor, const Value& src, const Placement& placement,
                                            const NdSbp& nd_sbp, bool use);
  absl::StatusOr<Value> EmitBoxing(TensorId tensor, const Value& src, const Placement& placement,
                                   const NdSbp& nd_sbp);
  // bucket.cc
  absl::Status EmitGradientBuckets(int64_t first_optimizer_position);

  const Graph& graph_;
  LowerOptions options_;
  std::unique_ptr<BoxingExpander> expander_;
  std::unique_ptr<BoxingExpander> collective_expander_;  // kAuto: the alternative
  std::map<std::string, BoxingChoiceProto> choices_;     // kAuto: by transition
  int64_t pieces_per_step_ = 1;
  bool multi_rate_ = false;  // pieces_per_step_ > 1
  std::vector<int64_t> position_of_op_;      // by OpId
  std::vector<int> first_reader_stage_;      // by TensorId
  PlanBuilder builder_;
  std::vector<Value> native_;                // by TensorId: what its producer delivers
  std::vector<std::vector<int64_t>> holder_tasks_;  // by TensorId (variables): per device
  using ValueKey = std::tuple<int64_t, Placement, NdSbp, bool>;
  absl::node_hash_map<ValueKey, Value> values_;
  int64_t next_collective_order_ = 0;
  bool buckets_emitted_ = false;
  // Boxing plans by request (name excluded): the layers of a deep model repeat the same
  // transitions, and the planner's cost grows with the placement size.
  absl::node_hash_map<std::string, BoxingPlan> plan_cache_;  // node: PlanFor hands out pointers
  std::vector<TensorBindingProto> bindings_;  // in creation order
  std::vector<int32_t> binding_rank_;         // the rank of each entry of bindings_
};

}  // namespace lower_internal
}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_LOWER_LOWERING_H_
