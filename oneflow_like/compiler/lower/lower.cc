#include "oneflow_like/compiler/lower/lower.h"

#include <algorithm>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/lower/lowering.h"
#include "oneflow_like/compiler/lower/registers.h"

namespace oneflow_like {
namespace compiler {

uint64_t DeriveInitializerSeed(uint64_t job_seed, const std::string& tensor_name, uint64_t given_seed) {
  if (given_seed != 0) return given_seed;
  uint64_t hash = 14695981039346656037ull;  // FNV-1a-64
  for (char c : absl::StrCat(job_seed, ":", tensor_name)) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash == 0 ? 1 : hash;
}

namespace lower_internal {
namespace {

absl::Status NotLowerable(const std::string& what, const std::string& missing) {
  return absl::InternalError(absl::StrCat("lowering needs an inferred, SBP-annotated graph: ", what, " ", missing));
}

absl::Status CheckLayout(const std::string& what, const NdSbp& nd_sbp, const TensorDesc& desc,
                         const Placement& placement) {
  absl::Status s = ValidateNdSbp(nd_sbp, desc.shape, placement, /*allow_empty_shards=*/true);
  if (!s.ok()) return NotLowerable(what, absl::StrCat("has an invalid layout: ", s.message()));
  return absl::OkStatus();
}

}  // namespace

Lowerer::Lowerer(const Graph& graph, const LowerOptions& options)
    : graph_(graph),
      options_(options),
      pieces_per_step_(PiecesPerStep(graph.config())),
      builder_(options.only_rank, options.only_rank < 0 ? 1 : std::max(1, options.num_ranks)),
      native_(graph.num_tensors()),
      holder_tasks_(graph.num_tensors(), -1) {
  if (options.boxing == BoxingStyle::kCollective) {
    expander_ = std::make_unique<CollectiveExpander>(options.boxing_options);
  } else {
    expander_ = std::make_unique<PointToPointExpander>(options.boxing_options);
  }
  if (options.boxing == BoxingStyle::kAuto) {
    collective_expander_ = std::make_unique<CollectiveExpander>(options.boxing_options);
  }
  multi_rate_ = pieces_per_step_ > 1;
  position_of_op_.assign(graph.num_ops(), -1);
  for (size_t p = 0; p < graph.op_order().size(); ++p) position_of_op_[graph.op_order()[p].value()] = p;
  // The collectives' issue order (SetIssueFields).
  num_stages_ = ComputeStageInfo(graph).num_stages;
  for (OpId id : graph.op_order()) {
    const OpNode& op = graph.op(id);
    if (!op.placement) continue;
    for (Rank r : op.placement->ranks()) {
      auto [it, fresh] = stage_of_rank_.emplace(r.value(), op.stage);
      if (!fresh && it->second != op.stage) one_stage_per_rank_ = false;
      auto [low, first] = min_stage_of_rank_.emplace(r.value(), op.stage);
      if (!first) low->second = std::min(low->second, op.stage);
    }
  }
  if (!graph.config().loss().empty()) {
    const TensorId loss = graph.FindTensor(graph.config().loss());
    if (loss.valid() && graph.tensor(loss).producer.valid()) {
      loss_position_ = position_of_op_[graph.tensor(loss).producer.value()];
    }
  }
  // 1F1B issue slots only where the register counts make that order feasible (a review found
  // deadlocks otherwise): the loss on the last stage and every forward edge from a stage to the
  // same or a later one (the 1F1B shape); no input read only after the loss on an earlier stage
  // (its register has count 1, so its next piece waits for that backward reader). Else every
  // stage keeps 1 piece in flight. Memory reuse keeps a stage's forward and backward bytes
  // apart where it keeps more than one piece in flight (PhaseSplit), so it is no obstacle.
  pipeline_issue_order_ = multi_rate_ && num_stages_ > 1 && one_stage_per_rank_ && loss_position_ >= 0;
  if (pipeline_issue_order_) {
    const OpNode& loss_op = graph.op(graph.op_order()[loss_position_]);
    pipeline_issue_order_ = loss_op.stage == num_stages_ - 1;
    for (OpId id : graph.op_order()) {
      const OpNode& op = graph.op(id);
      if (position_of_op_[id.value()] > loss_position_) break;
      for (TensorId in : op.inputs) {
        const TensorNode& t = graph.tensor(in);
        if (t.producer.valid() && graph.op(t.producer).stage > op.stage) pipeline_issue_order_ = false;
      }
    }
    for (const TensorNode& t : graph.tensors()) {
      if (!t.is_input || t.consumers.empty()) continue;
      bool only_backward = true;
      int min_stage = num_stages_;
      for (const TensorUse& use : t.consumers) {
        only_backward = only_backward && position_of_op_[use.op.value()] > loss_position_;
        min_stage = std::min(min_stage, graph.op(use.op).stage);
      }
      if (only_backward && min_stage < num_stages_ - 1) pipeline_issue_order_ = false;
    }
  }
  // compute_streams 2: the ops whose outputs only optimizers read (weight and bias gradients;
  // not e.g. a layer norm's backward, whose input gradient the rest of backward waits for).
  side_stream_op_.assign(graph.num_ops(), false);
  if (options.compute_streams > 1) {
    for (OpId id : graph.op_order()) {
      const OpNode& op = graph.op(id);
      if (op.def->is_optimizer || op.inputs.empty() || op.outputs.empty()) continue;
      bool only_optimizers = true;
      for (TensorId output : op.outputs) {
        const TensorNode& t = graph.tensor(output);
        only_optimizers = only_optimizers && !t.consumers.empty() && !t.is_output;
        for (const TensorUse& use : t.consumers) only_optimizers = only_optimizers && graph.op(use.op).def->is_optimizer;
      }
      side_stream_op_[id.value()] = only_optimizers;
    }
  }
  first_reader_stage_.assign(graph.num_tensors(), 0);
  for (const TensorNode& t : graph.tensors()) {
    int stage = -1;
    for (const TensorUse& use : t.consumers) {
      const int s = graph.op(use.op).stage;
      stage = stage < 0 ? s : std::min(stage, s);
    }
    first_reader_stage_[t.id.value()] = std::max(stage, 0);
  }
}

absl::Status Lowerer::CheckPreconditions() const {
  for (const TensorNode& t : graph_.tensors()) {
    const std::string what = graph_.Describe(t.id);
    if (!t.desc.has_value()) return NotLowerable(what, "has no desc (run the infer pass)");
    if (!t.placement.has_value()) return NotLowerable(what, "has no placement (run the infer pass)");
    if (!t.nd_sbp.has_value()) return NotLowerable(what, "has no nd_sbp (run SBP selection)");
    RETURN_IF_ERROR(CheckLayout(what, *t.nd_sbp, *t.desc, *t.placement));
  }
  for (OpId id : graph_.op_order()) {
    const OpNode& op = graph_.op(id);
    const std::string what = graph_.Describe(id);
    if (!op.placement.has_value()) return NotLowerable(what, "has no placement (run the infer pass)");
    if (!op.nd_sbp_signature.has_value()) return NotLowerable(what, "has no nd_sbp_signature (run SBP selection)");
    const NdSbpSignature& sig = *op.nd_sbp_signature;
    if (sig.inputs.size() != op.inputs.size() || sig.outputs.size() != op.outputs.size()) {
      return NotLowerable(what, absl::StrCat("has a signature for ", sig.inputs.size(), " inputs and ",
                                             sig.outputs.size(), " outputs, not ", op.inputs.size(), " and ",
                                             op.outputs.size()));
    }
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      RETURN_IF_ERROR(CheckLayout(absl::StrCat(what, " input ", i), sig.inputs[i],
                                  *graph_.tensor(op.inputs[i]).desc, *op.placement));
    }
    for (size_t j = 0; j < op.outputs.size(); ++j) {
      const TensorNode& out = graph_.tensor(op.outputs[j]);
      if (*out.nd_sbp != sig.outputs[j] || *out.placement != *op.placement) {
        return NotLowerable(graph_.Describe(out.id),
                            absl::StrCat("has layout ", out.placement->ToString(), " ", NdSbpText(*out.nd_sbp),
                                         " but its producer ", what, " delivers ", op.placement->ToString(), " ",
                                         NdSbpText(sig.outputs[j])));
      }
    }
  }
  for (const VariableUpdate& update : graph_.variable_updates()) {
    if (!graph_.has_tensor(update.variable) || !graph_.tensor(update.variable).is_variable ||
        !graph_.has_tensor(update.new_value) || graph_.tensor(update.new_value).is_source()) {
      return absl::InternalError("lowering: a variable update does not pair a variable with an op output");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int32_t> Lowerer::WorldSize(const PlanProto& plan) const {
  // Ranks with tasks: those of the plan, or (one rank) of every placement, which all get tasks.
  int32_t needed = plan.ranks().empty() ? 0 : plan.ranks(plan.ranks_size() - 1) + 1;
  if (builder_.partial()) needed = PlacementWorldSize(graph_);
  int32_t world_size = options_.world_size;
  if (world_size == 0) world_size = needed;
  if (world_size < needed) {
    return absl::InvalidArgumentError(absl::StrCat("lowering '", graph_.name(), "': world_size ", world_size,
                                                   " but placements use rank ", needed - 1,
                                                   " (hint: raise world_size or leave it 0)"));
  }
  if (builder_.partial() && builder_.end_rank() > world_size) {
    if (builder_.num_ranks() > 1) {
      return absl::InvalidArgumentError(absl::StrCat("lowering '", graph_.name(), "': ranks ", builder_.first_rank(),
                                                     " .. ", builder_.end_rank() - 1, " run past the world of ",
                                                     world_size, " ranks"));
    }
    return absl::InvalidArgumentError(absl::StrCat("lowering '", graph_.name(), "': only_rank ",
                                                   builder_.first_rank(), " is outside the world of ", world_size,
                                                   " ranks"));
  }
  return world_size;
}

void Lowerer::FillPerRank(const RankPlanProto* rank_plan, const std::vector<int64_t>& step_rate_local,
                          PerRankProto* per_rank) const {
  if (rank_plan != nullptr) {
    for (const RegisterProto& reg : rank_plan->registers()) {  // in id order
      if (!reg.has_remote()) continue;
      auto facts = mirror_facts_.find(reg.id());
      const bool step_rate = facts != mirror_facts_.end()
                                 ? facts->second.step_rate
                                 : std::binary_search(step_rate_local.begin(), step_rate_local.end(), reg.id());
      if (step_rate) per_rank->add_step_rate_mirrors(reg.id());
    }
  }
  for (const TensorNode& t : graph_.tensors()) {
    if (t.is_input) per_rank->add_inputs(t.name);
    if (!t.is_output) continue;
    OutputHoldersProto* holders = per_rank->add_outputs();
    holders->set_tensor_name(t.name);
    std::vector<int32_t> ranks;
    for (Rank r : t.placement->ranks()) ranks.push_back(r.value());
    std::sort(ranks.begin(), ranks.end());
    for (int32_t r : ranks) holders->add_ranks(r);
  }
}

absl::StatusOr<PlanProto> Lowerer::Run() {
  const int64_t alignment = options_.alignment;
  if (alignment < 1 || (alignment & (alignment - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("lowering '", graph_.name(), "': alignment ", alignment,
                                                   " is not a power of two (hint: 64)"));
  }
  RETURN_IF_ERROR(CheckPreconditions());
  EmitSources();
  for (OpId id : graph_.op_order()) {
    if (first_backward_task_ < 0 && loss_position_ >= 0 && position_of_op_[id.value()] > loss_position_) {
      first_backward_task_ = builder_.ReserveTasks(0);  // the next id (PhaseSplit)
    }
    if (graph_.op(id).def->is_optimizer && !buckets_emitted_) {
      buckets_emitted_ = true;
      RETURN_IF_ERROR(EmitGradientBuckets(position_of_op_[id.value()]));
    }
    RETURN_IF_ERROR(EmitOp(id));
  }
  RETURN_IF_ERROR(EmitSinks());
  RETURN_IF_ERROR(EmitUpdates());

  AssignStreams(&builder_);
  const StageInfo stages = ComputeStageInfo(graph_);
  const PhaseSplit phases{first_backward_task_, loss_position_,         stages.num_stages,
                          pieces_per_step_,     options_.max_register_count, min_stage_of_rank_};
  AssignRegisterCounts(stages, pieces_per_step_, options_.max_register_count, phases, &builder_);
  if (builder_.partial()) CountMirrors(stages);
  ASSIGN_OR_RETURN(std::vector<RankMemory> memory,
                   AssignMemory(options_.alignment, options_.reuse_memory, phases, &builder_));

  PlanProto plan;
  plan.set_job_name(graph_.name());
  plan.set_pieces_per_step(pieces_per_step_);
  RETURN_IF_ERROR(builder_.Assemble(&plan, &step_rate_local_mirrors_));
  for (auto& [rank, ids] : step_rate_local_mirrors_) std::sort(ids.begin(), ids.end());
  AddMemoryBlocks(memory, &plan);
  std::map<int32_t, RankPlanProto*> by_rank;
  for (RankPlanProto& r : *plan.mutable_rank_plans()) by_rank[r.rank()] = &r;
  for (size_t b = 0; b < bindings_.size(); ++b) *by_rank[binding_rank_[b]]->add_bindings() = bindings_[b];
  ASSIGN_OR_RETURN(const int32_t world_size, WorldSize(plan));
  plan.set_world_size(world_size);
  for (auto& [transition, choice] : choices_) *plan.add_boxing_choices() = choice;
  if (builder_.partial() && builder_.num_ranks() == 1) {
    const int32_t rank = builder_.first_rank();
    plan.mutable_per_rank()->set_rank(rank);
    FillPerRank(plan.rank_plans().empty() ? nullptr : &plan.rank_plans(0), step_rate_local_mirrors_[rank],
                plan.mutable_per_rank());
  }
  return plan;
}

absl::StatusOr<std::vector<PlanProto>> Lowerer::RunRange() {
  ASSIGN_OR_RETURN(PlanProto plan, Run());
  std::vector<PlanProto> parts(builder_.num_ranks());
  int index = 0;  // into plan.ranks / rank_plans / memory
  for (int32_t r = builder_.first_rank(); r < builder_.end_rank(); ++r) {
    PlanProto& part = parts[r - builder_.first_rank()];
    part.set_job_name(plan.job_name());
    part.set_world_size(plan.world_size());
    part.set_pieces_per_step(plan.pieces_per_step());
    *part.mutable_boxing_choices() = plan.boxing_choices();
    part.mutable_per_rank()->set_rank(r);
    const bool has_work = index < plan.ranks_size() && plan.ranks(index) == r;
    if (has_work) {
      part.add_ranks(r);
      *part.add_rank_plans() = std::move(*plan.mutable_rank_plans(index));
      if (index < plan.memory_size()) *part.add_memory() = std::move(*plan.mutable_memory(index));
      ++index;
    }
    FillPerRank(has_work ? &part.rank_plans(0) : nullptr, step_rate_local_mirrors_[r], part.mutable_per_rank());
  }
  return parts;
}

}  // namespace lower_internal

int32_t PlacementWorldSize(const Graph& graph) {
  int32_t needed = 0;
  auto add = [&](const Placement& p) {
    for (Rank r : p.ranks()) needed = std::max(needed, r.value() + 1);
  };
  for (const TensorNode& t : graph.tensors()) {
    if (t.is_source()) add(*t.placement);
  }
  const Placement* last = nullptr;
  for (OpId id : graph.op_order()) {
    const Placement& p = *graph.op(id).placement;
    if (last == nullptr || !(p == *last)) add(p);
    last = &p;
  }
  return needed;
}

absl::StatusOr<PlanProto> LowerToPlan(const Graph& graph, const LowerOptions& options) {
  if (options.num_ranks != 1) {
    return absl::InvalidArgumentError(absl::StrCat("lowering '", graph.name(), "': num_ranks ", options.num_ranks,
                                                   " (LowerToPlan makes one plan; LowerRankRange makes several)"));
  }
  lower_internal::Lowerer lowerer(graph, options);
  return lowerer.Run();
}

absl::StatusOr<std::vector<PlanProto>> LowerRankRange(const Graph& graph, const LowerOptions& options) {
  if (options.only_rank < 0 || options.num_ranks < 1 ||
      options.num_ranks > std::numeric_limits<int32_t>::max() - options.only_rank) {
    return absl::InvalidArgumentError(absl::StrCat("lowering '", graph.name(), "': a range of ranks needs only_rank >= 0 "
                                                   "and num_ranks >= 1, not ", options.only_rank, " and ",
                                                   options.num_ranks));
  }
  lower_internal::Lowerer lowerer(graph, options);
  return lowerer.RunRange();
}

}  // namespace compiler
}  // namespace oneflow_like
