// Internal to //oneflow_like/compiler/lower: the Lowerer that LowerToPlan runs (lower.h has
// the rules). Split by feature: expand.cc (sources, compute, sinks, rates, updates), pacing.cc
// (the control input of ops without inputs), boxing_lower.cc (BoxingPlan -> tasks), bucket.cc
// (gradient buckets), values.cc (where a value's registers are; remote registers as mirrors),
// registers.cc (streams, counts, memory).
//
// The lowering tracks *values*: one logical tensor in one layout (placement, NdSbp) at one
// rate, held as one register per device of the placement. GetValue returns the value a
// consumer needs, building boxing / REPEAT / ACCUMULATE tasks on first use and caching it, so
// consumers that need the same layout share one conversion.
//
// One rank (LowerOptions::only_rank): every global decision is made as for the whole plan (the
// values, the boxing plans, the buckets, the collective order), and every emission reserves the
// ids the whole plan gives it, but only the rank's own tasks and registers are built. A value's
// register on device d is a closed form of the emission's first ids (Value::At), so a
// neighbour's register (a transfer's far end) is named without building the neighbour's tasks.
// A range of ranks (LowerRankRange) is lowered the same way with every rank of the range local;
// the boxing plans it takes part in are kept whole (PlanFor), not cut to one rank's part.
#ifndef ONEFLOW_LIKE_COMPILER_LOWER_LOWERING_H_
#define ONEFLOW_LIKE_COMPILER_LOWER_LOWERING_H_

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "oneflow_like/compiler/graph.h"
#include "oneflow_like/compiler/lower/lower.h"
#include "oneflow_like/compiler/lower/plan_builder.h"

namespace oneflow_like {
namespace compiler {
namespace lower_internal {

// A boxing plan and where its tasks fall: each step adds one task per output value (a
// collective one per member), each task one register, in step order; so value v's task and
// register are the boxing's first ids + value_offset[v].
struct PlanLayout {
  std::vector<int32_t> step_offset;       // by step: its first task, relative
  std::vector<int32_t> value_offset;      // by value: its task (= register), relative; -1: a source
  std::vector<int32_t> value_step;        // by value: the step defining it; -1: a source
  std::vector<int32_t> collective_index;  // by step: collective steps before it
  int64_t num_tasks = 0;
  int64_t num_collectives = 0;
  std::vector<bool> aliased_source;       // by source value: some destination device's value
  std::vector<bool> is_destination;       // by value: some destination device's value
  std::vector<int32_t> local_steps;       // one rank: the steps it runs, sends from or joins
  bool collectives_only = false;          // ALL_REDUCE or REDUCE_SCATTER calls alone: bucketable
  std::vector<int64_t> group_volume;      // collectives_only: by step, elements of its group region
  std::vector<int32_t> original_value;    // a reduced plan (one rank): by value, its id in the whole
                                          // plan (names use it); empty: the same ids
};
inline int32_t OriginalValue(const PlanLayout& layout, int32_t v) {
  return layout.original_value.empty() ? v : layout.original_value[v];
}

// plan_cache.cc. `complete` false (lowering one rank that takes no part): plan holds only desc
// and, if collectives_only, its steps' kind, collective and group; layout only the counts,
// aliased_source, is_destination, collectives_only and group_volume.
struct CachedPlan {
  BoxingPlan plan;
  PlanLayout layout;
  bool complete = true;
};

// A plan for a request with its ranks shifted to the lowest node (plan_cache.cc), and kAuto's
// choice for it.
struct CanonicalPlan {
  BoxingPlan plan;
  double point_to_point_seconds = 0, collective_seconds = 0;
  bool use_collective = false;
};

// A register of a value on one device, the slot holding the shard, and its producer task.
struct RegRef {
  int64_t reg = -1;
  int32_t slot = 0;
  int64_t task = -1;
};

// What produced a value's registers (for the names and descs of mirrors).
enum class Origin : int8_t { kTensor, kRepeat, kAccumulate, kBoxed, kBucket };

struct Value {
  Placement placement;
  NdSbp nd_sbp;
  bool step_rate = false;
  int stage = 0;           // stage its tasks work for (the producer's, or a source's first reader's)
  int64_t position = -1;   // program-order index of its producer op (-1: a source)
  bool defined = false;    // produced (native_ entries start undefined)
  TensorId tensor;
  Origin origin = Origin::kTensor;
  // Made from a sum over the step's pieces (an ACCUMULATE of this step, e.g. a gradient summed
  // over micro-batches, the optimizer's outputs): its collectives issue after the pieces.
  bool after_pieces = false;
  // Device d's register: kTensor / kRepeat / kAccumulate: register reg_base + d * reg_stride,
  // task task_base + d. kBoxed: the destination value boxing->plan.dst_values[d]: a source value
  // is src's register, another value v register reg_base + value_offset[v] (task task_base + it).
  // kBucket: per step k of `boxing`, bucket[k] = its bucket's first task / register and the
  // slot; member m of step k is task first_task + m, register first_register + m.
  int64_t task_base = -1, reg_base = -1, reg_stride = 1;
  const CachedPlan* boxing = nullptr;
  const Value* src = nullptr;
  struct BucketStep {
    int64_t first_task = -1, first_register = -1;
    int32_t slot = 0;
  };
  std::vector<BucketStep> bucket;
  int32_t summary = -1;    // its consumers, Lowerer::summaries_ (the count of a mirror)

  RegRef At(int64_t device) const;
  int32_t SlotOf(int64_t device) const { return At(device).slot; }
};

// "<base>@r<rank>": the names of tasks and registers.
std::string RankName(const std::string& base, Rank rank);
// Device `index`'s shard of `logical` laid out as (placement, nd_sbp).
TensorDesc ShardDesc(const TensorDesc& logical, const NdSbp& nd_sbp, const Placement& placement, int64_t index);
// The register name suffix of an origin: "" (a tensor), ".repeated", ".accumulated".
const char* OriginSuffix(Origin origin);

// The stages and positions of the ops reading a register: what its count depends on.
struct ConsumerSummary {
  int min_stage = 0, max_stage = -1;  // max < min: none
  int64_t first = -1, last = -1;      // positions >= 0 only
  void Add(int stage, int64_t position);
  void Merge(const ConsumerSummary& other);
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
  // A range of ranks (LowerRankRange): Run, cut into one per-rank plan per rank of the range.
  absl::StatusOr<std::vector<PlanProto>> RunRange();

 private:
  absl::Status CheckPreconditions() const;
  absl::StatusOr<int32_t> WorldSize(const PlanProto& plan) const;
  // One rank: the facts about other ranks its runtime needs (plan.proto PerRankProto), from its
  // rank plan (null: no work) and the step-rate registers of the range it mirrors (sorted).
  void FillPerRank(const RankPlanProto* rank_plan, const std::vector<int64_t>& step_rate_local,
                   PerRankProto* per_rank) const;
  // Whether a rank of `placement` is lowered here (always for the whole plan).
  bool Touches(const Placement& placement) const;
  // expand.cc
  void EmitSources();
  absl::Status EmitOp(OpId op_id);
  absl::Status EmitSinks();
  absl::Status EmitUpdates();
  absl::StatusOr<const Value*> GetValue(TensorId tensor, const Placement& placement, const NdSbp& nd_sbp,
                                        bool step_rate);
  // REPEAT (step -> piece) or ACCUMULATE (piece -> step) per device of `in`.
  Value EmitRateChange(TensorId tensor, const Value& in, TaskProto::Type type);
  // CollectiveParams.issue_phase of a collective boxing `v` (docs/plan_format.md "Collective
  // issue order"): one piece (all of them when the plan has one piece a step), before or after
  // the pieces, or UNPLACED (piece-rate but made from a sum over the step's pieces).
  CollectiveParams::IssuePhase IssuePhaseOf(const Value& v) const {
    if (!multi_rate_) return CollectiveParams::PER_PIECE;
    if (v.step_rate) return v.after_pieces ? CollectiveParams::AFTER_PIECES : CollectiveParams::BEFORE_PIECES;
    return v.after_pieces ? CollectiveParams::UNPLACED : CollectiveParams::PER_PIECE;
  }
  // Sets the issue fields of a collective boxing `v` (phase; for PER_PIECE the 1F1B slot facts).
  void SetIssueFields(const Value& v, CollectiveParams* params) const;
  TaskInfo NewTask(TaskProto::Type type, Rank rank, DeviceType device, const std::string& name,
                   const std::string& op_name, int stage, int64_t position) const;
  // The devices of placement whose register / task this lowering builds: every device for the
  // whole plan, the rank's own (if any) for one rank, those of the range's ranks for a range.
  std::vector<int64_t> EmittedDevices(const Placement& placement) const;
  int32_t NewSummary();
  // pacing.cc: per device of the op (placement order), the register pacing it (an op without
  // inputs); GetValue's side effects in the order the whole lowering makes them.
  // `after_pieces`: set when a pacing value is made from a sum over the step's pieces (the op's
  // outputs then are too: Value::after_pieces).
  absl::StatusOr<std::vector<int64_t>> PacingRegisters(const OpNode& op, int64_t position, bool* after_pieces);
  // plan_cache.cc: the boxing plan of `tensor` from `src`'s layout to (placement, nd_sbp),
  // memoized; under kAuto the cheaper expansion, the choice recorded in choices_ (counted when
  // `use`).
  absl::StatusOr<const CachedPlan*> PlanFor(TensorId tensor, const Value& src, const Placement& placement,
                                            const NdSbp& nd_sbp, bool use);
  absl::StatusOr<CachedPlan> PlanForOneRank(const TensorNode& t, const Value& src, const Placement& placement,
                                            const NdSbp& nd_sbp);
  // boxing_lower.cc
  absl::StatusOr<Value> EmitBoxing(TensorId tensor, const Value& src, const Placement& placement,
                                   const NdSbp& nd_sbp);
  // bucket.cc
  absl::Status EmitGradientBuckets(int64_t first_optimizer_position);
  // values.cc: one rank: the mirror of another rank's register: `value`'s on `device`, or value
  // v of a boxing (`owner`: its result's summary; `device`: v is the result's register on that
  // device, whose readers include those of values boxed from it that reuse it; -1: not known),
  // before a local TRANSFER reads it.
  absl::Status AddValueMirror(const Value& value, int64_t device);
  void AddBoxingMirror(const CachedPlan& boxing, const Value& src, int64_t first_register, int64_t first_task,
                       int32_t owner, int32_t v, int64_t device = -1);
  // Sets the count of every mirror (rule in lower.h) from the summaries of its readers.
  void CountMirrors(const StageInfo& stages);

  const Graph& graph_;
  LowerOptions options_;
  std::unique_ptr<BoxingExpander> expander_;
  std::unique_ptr<BoxingExpander> collective_expander_;  // kAuto: the alternative
  std::map<std::string, BoxingChoiceProto> choices_;     // kAuto: by transition
  int64_t pieces_per_step_ = 1;
  bool multi_rate_ = false;  // pieces_per_step_ > 1
  std::vector<int64_t> position_of_op_;      // by OpId
  std::vector<bool> side_stream_op_;         // by OpId: compute_streams 2, its tasks on stream 4
  std::vector<int> first_reader_stage_;      // by TensorId
  PlanBuilder builder_;
  std::vector<Value> native_;                // by TensorId: what its producer delivers
  std::vector<int64_t> holder_tasks_;        // by TensorId (variables): the first holder task
  using ValueKey = std::tuple<int64_t, Placement, NdSbp, bool>;
  absl::node_hash_map<ValueKey, Value> values_;
  int64_t next_collective_order_ = 0;
  // Issue order facts (SetIssueFields): stages, whether every rank works for one stage only,
  // and the program position of the loss's producer (-1: no loss; later ops are backward).
  int num_stages_ = 1;
  bool one_stage_per_rank_ = true;
  std::map<int32_t, int> stage_of_rank_;  // the stage of the ops each rank runs
  std::map<int32_t, int> min_stage_of_rank_;  // the lowest stage of the ops placed on each rank
  int64_t first_backward_task_ = -1;  // id of the first task emitted for an op after the loss (-1: none)
  int64_t loss_position_ = -1;
  bool pipeline_issue_order_ = false;  // stages keep more than 1 piece in flight in the issue order
  bool buckets_emitted_ = false;
  // Boxing plans by request (name excluded) and by canonical (shifted) request (plan_cache.cc).
  absl::node_hash_map<std::string, CachedPlan> plan_cache_;  // node: PlanFor hands out pointers
  absl::node_hash_map<std::string, CanonicalPlan> canonical_;
  absl::node_hash_map<std::string, BoxingShape> shapes_;  // one rank: by canonical request
  std::vector<TensorBindingProto> bindings_;  // in creation order
  std::vector<int32_t> binding_rank_;         // the rank of each entry of bindings_
  // One rank: mirror counts. summaries_[value.summary]: the ops reading the value;
  // aliases_[summary]: (summary, boxing) of boxed values whose destinations reuse some of its
  // registers; mirror_readers_: per mirror, the summaries of the values holding it;
  // pacing_readers_: by register, the (stage, position) of ops it paces.
  std::vector<ConsumerSummary> summaries_;
  absl::flat_hash_map<int32_t, std::vector<std::pair<int32_t, const PlanLayout*>>> aliases_;
  struct MirrorFacts {
    int stage = 0;
    int64_t position = -1;
    bool step_rate = false;
    std::vector<std::pair<int32_t, int64_t>> summaries;  // (summary, device: -1 = no aliases)
  };
  std::map<int64_t, MirrorFacts> mirror_facts_;
  absl::flat_hash_map<int64_t, std::vector<std::pair<int, int64_t>>> pacing_readers_;
  // A range: per rank, its mirrors of step-rate registers made in the range (PlanBuilder::Assemble).
  std::map<int32_t, std::vector<int64_t>> step_rate_local_mirrors_;
};

}  // namespace lower_internal
}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_LOWER_LOWERING_H_
