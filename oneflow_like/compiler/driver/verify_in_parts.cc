#include "oneflow_like/compiler/driver/verify_in_parts.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "absl/strings/str_cat.h"
#include "google/protobuf/arena.h"
#include "oneflow_like/compiler/lower/lower.h"
#include "oneflow_like/compiler/plan/plan_hash.h"
#include "oneflow_like/compiler/plan/plan_verifier.h"
#include "oneflow_like/compiler/plan/streamed_verifier.h"

namespace oneflow_like {
namespace compiler {
namespace {

absl::Status Failed(const Graph& graph, const absl::Status& status) {
  return absl::InternalError(absl::StrCat("compiled plan of job '", graph.name(),
                                          "' failed verification (a compiler bug): ", status.message()));
}

class Clock {
 public:
  explicit Clock(InPartsReport* report) : report_(report) {}
  void Done(const std::string& phase) {
    const auto now = std::chrono::steady_clock::now();
    report_->phase_seconds.emplace_back(phase, std::chrono::duration<double>(now - start_).count());
    start_ = now;
  }

 private:
  InPartsReport* report_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

absl::StatusOr<InPartsReport> VerifyInParts(const GlobalDecisions& decisions, const CompileOptions& options,
                                            const InPartsOptions& parts) {
  const Graph& graph = decisions.graph;
  InPartsReport report;
  Clock clock(&report);
  auto progress = [&](const std::string& line) {
    if (parts.progress) parts.progress(line);
  };
  LowerOptions lower_options = LowerOptionsFor(options);
  const int32_t world = options.world_size > 0 ? options.world_size : PlacementWorldSize(graph);
  lower_options.world_size = world;
  const int32_t per_part =
      parts.ranks_per_part > 0 ? parts.ranks_per_part : std::max(1, std::min(256, (world + 7) / 8));
  report.world_size = world;
  report.ranks_per_part = per_part;

  // Pass 1: lower a range at a time; each rank's own checks; keep it serialized.
  PlanProto head;  // job_name, world_size, ranks, pieces_per_step, boxing_choices
  std::vector<std::string> serialized;  // by index into head.ranks()
  std::vector<RankMemoryProto> memory;
  int64_t pieces_per_step = 1;
  std::unique_ptr<StreamedVerifier> streamed;  // made at the first part (world_size, pieces_per_step)
  double lower_seconds = 0, check_seconds = 0;
  for (int32_t first = 0; first < world; first += per_part) {
    const int32_t last = std::min(first + per_part, world) - 1;
    lower_options.only_rank = first;
    lower_options.num_ranks = last - first + 1;
    const auto lower_start = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(std::vector<PlanProto> range, LowerRankRange(graph, lower_options));
    lower_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - lower_start).count();
    const auto check_start = std::chrono::steady_clock::now();
    for (PlanProto& part : range) {
      if (streamed == nullptr) {
        head.set_job_name(part.job_name());
        head.set_world_size(part.world_size());
        *head.mutable_boxing_choices() = part.boxing_choices();
        pieces_per_step = part.pieces_per_step();
        streamed = std::make_unique<StreamedVerifier>(part.world_size(), pieces_per_step, options.plan_verifier);
      }
      if (part.rank_plans_size() == 0) continue;  // a rank without work
      absl::Status checked = streamed->AddRank(part);
      if (!checked.ok()) return Failed(graph, checked);
      const RankPlanProto& rank_plan = part.rank_plans(0);
      if (part.memory_size() != 1) {
        return Failed(graph, absl::InternalError(absl::StrCat("VerifyPlan: the part of rank ", rank_plan.rank(),
                                                              " has ", part.memory_size(),
                                                              " memory entries; a rank with tasks has one")));
      }
      head.add_ranks(rank_plan.rank());
      report.tasks += rank_plan.tasks_size();
      report.registers += rank_plan.registers_size();
      serialized.push_back(DeterministicBytes(rank_plan));
      report.plan_bytes += static_cast<int64_t>(serialized.back().size());
      memory.push_back(std::move(*part.mutable_memory(0)));
    }
    range.clear();
    check_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - check_start).count();
    progress(absl::StrCat("lowered and checked ranks ", first, " .. ", last, " of ",
                          world, " (", report.tasks, " tasks so far)"));
  }
  report.ranks_with_work = head.ranks_size();
  clock.Done("lower_and_check_ranks");
  report.lower_seconds = lower_seconds;
  report.check_seconds = check_seconds;

  // Pass 2: the checks across ranks and the deadlock simulation.
  if (streamed != nullptr) {
    absl::Status across = streamed->Finish();
    if (!across.ok()) return Failed(graph, across);
  }
  clock.Done("across_ranks");

  // Pass 3: memory reuse, rank by rank, with the simulation's counts.
  const PlanVerifierOptions& verify = options.plan_verifier;
  if (streamed != nullptr && verify.steps > 0 && verify.check_memory_reuse) {
    // Each part is parsed into an arena, reset between ranks: millions of small messages are
    // made and dropped in bulk (from malloc, parsing and freeing them took most of this pass).
    google::protobuf::ArenaOptions arena_options;
    arena_options.start_block_size = 1 << 20;
    arena_options.max_block_size = 16 << 20;
    google::protobuf::Arena arena(arena_options);
    for (size_t i = 0; i < serialized.size(); ++i) {
      arena.Reset();
      PlanProto& part = *google::protobuf::Arena::CreateMessage<PlanProto>(&arena);
      part.set_job_name(head.job_name());
      part.set_world_size(head.world_size());
      part.add_ranks(head.ranks(static_cast<int>(i)));
      if (!part.add_rank_plans()->ParseFromString(serialized[i])) {
        return absl::InternalError(absl::StrCat("VerifyInParts: rank ", head.ranks(static_cast<int>(i)),
                                                "'s plan does not parse back"));
      }
      part.set_pieces_per_step(pieces_per_step);
      *part.add_memory() = memory[i];
      part.mutable_per_rank()->set_rank(head.ranks(static_cast<int>(i)));
      absl::Status reuse = streamed->CheckRank(part);
      if (!reuse.ok()) return Failed(graph, reuse);
      if ((i + 1) % 512 == 0) progress(absl::StrCat("memory reuse checked on ", i + 1, " of ", serialized.size(), " ranks"));
    }
  }
  clock.Done("memory_reuse");

  // The whole plan's content hash, from the pieces.
  StreamedPlanHash hash(head);
  for (std::string& bytes : serialized) {
    hash.AddRankPlan(bytes);
    std::string().swap(bytes);
  }
  PlanProto pieces;
  pieces.set_pieces_per_step(pieces_per_step);
  hash.AddFields(pieces);
  for (const OpSbpDecisionProto& d : decisions.sbp_decisions) hash.AddElement(6, d);
  PlanProto rest;
  for (RankMemoryProto& m : memory) *rest.add_memory() = std::move(m);
  *rest.mutable_boxing_choices() = head.boxing_choices();
  report.content_hash = hash.Finish(rest);
  clock.Done("hash");
  return report;
}

}  // namespace compiler
}  // namespace oneflow_like
