#include "oneflow_like/train/run_training.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "oneflow_like/compiler/plan/plan_bytes.h"
#include "oneflow_like/core/status.h"
#include "oneflow_like/train/checkpoint.h"

namespace oneflow_like {
namespace train {
namespace {

std::string LayoutText(const models::ParallelLayout& l) { return absl::StrCat("dp", l.dp, " tp", l.tp, " pp", l.pp); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

absl::StatusOr<std::string> SaveTrainerCheckpoint(Trainer* trainer, const std::string& root, int64_t step) {
  StepExecutor* exec = trainer->executor();
  const std::string dir = CheckpointDirName(root, step);
  CheckpointMeta meta;
  meta.step = step;
  meta.data_position = step + 1;  // the data of step s is a function of s: resume at the next one
  meta.layout = LayoutText(trainer->options().layout);
  meta.plan_hash = std::strtoull(trainer->plan().content_hash().c_str(), nullptr, 16);
  // A checkpoint of the same step from an earlier run goes first, so a crash mid-save can never
  // leave its COMPLETE marker next to new, partial shards.
  if (exec->leader()) {
    std::error_code error;
    std::filesystem::remove_all(dir, error);
    if (error) return absl::InternalError(absl::StrCat("checkpoint: cannot replace ", dir, ": ", error.message()));
  }
  RETURN_IF_ERROR(exec->Barrier(absl::StrCat("checkpoint_begin_", step)));
  for (actor::Runtime* runtime : exec->local_runtimes()) {
    RETURN_IF_ERROR(SaveRankShards(*runtime, meta, exec->world_size(), dir));
  }
  RETURN_IF_ERROR(exec->Barrier(absl::StrCat("checkpoint_saved_", step)));
  if (exec->leader()) RETURN_IF_ERROR(MarkCheckpointComplete(dir, exec->world_size()));
  RETURN_IF_ERROR(exec->Barrier(absl::StrCat("checkpoint_complete_", step)));
  return dir;
}

absl::Status LoadTrainerCheckpoint(Trainer* trainer, const std::string& dir) {
  int64_t step = -1;
  for (actor::Runtime* runtime : trainer->executor()->local_runtimes()) {
    ASSIGN_OR_RETURN(CheckpointMeta meta, LoadRankShards(runtime, dir));
    step = meta.step;
  }
  trainer->set_next_step(step + 1);
  return absl::OkStatus();
}

// The stream threads' loads of this process's ranks (actor::Runtime::ThreadLoads), keyed
// "r<rank> <thread>".
std::map<std::string, actor::Runtime::ThreadLoad> ThreadLoads(const Trainer& trainer) {
  std::map<std::string, actor::Runtime::ThreadLoad> loads;
  for (const actor::Runtime* runtime : trainer.executor()->local_runtimes()) {
    if (runtime == nullptr) continue;
    for (const actor::Runtime::ThreadLoad& load : runtime->ThreadLoads()) {
      loads[absl::StrCat("r", runtime->rank().value(), " ", load.name)] = load;
    }
  }
  return loads;
}

// One line: each thread's busy share of the timed window, per step and per act (threads that
// did not act are left out), e.g. "r0 cuda:0/stream 0 busy 85% (82.1 ms, 1730 acts a step, 47 us an act)".
std::string ThreadLoadLine(const std::map<std::string, actor::Runtime::ThreadLoad>& before,
                           const std::map<std::string, actor::Runtime::ThreadLoad>& after, double seconds, int steps) {
  std::vector<std::string> parts;
  for (const auto& [key, load] : after) {
    auto it = before.find(key);
    const int64_t busy = load.busy_micros - (it == before.end() ? 0 : it->second.busy_micros);
    const int64_t acts = load.acts - (it == before.end() ? 0 : it->second.acts);
    if (acts <= 0 || seconds <= 0 || steps <= 0) continue;
    parts.push_back(absl::StrFormat("%s busy %.0f%% (%.1f ms, %.0f acts a step, %.1f us an act)", key,
                                    100.0 * busy / (1e6 * seconds), busy / 1e3 / steps,
                                    static_cast<double>(acts) / steps, static_cast<double>(busy) / acts));
  }
  if (parts.empty()) return "";
  return absl::StrCat("host threads over the timed steps: ", absl::StrJoin(parts, "; "), "\n");
}

absl::Status RunTraining(const TrainerOptions& options, const RunOptions& run, const OpRegistry* registry,
                         std::ostream& out) {
  TrainerOptions o = options;
  o.record_timeline = o.record_timeline || !run.timeline_dir.empty();
  if (run.resume && run.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError("--resume needs --checkpoint_dir (where to look for checkpoints)");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, Trainer::Create(o, registry));
  const bool leader = trainer->executor()->leader();
  if (leader) out << trainer->PlanSummary() << std::flush;
  if (run.resume) {
    absl::StatusOr<std::string> latest = LatestCheckpoint(run.checkpoint_dir);
    if (latest.ok()) {
      RETURN_IF_ERROR(LoadTrainerCheckpoint(trainer.get(), *latest));
      if (leader) out << "resumed from " << *latest << ": continuing at step " << trainer->next_step() << "\n";
    } else if (absl::IsNotFound(latest.status())) {
      if (leader) out << "resume: no complete checkpoint in " << run.checkpoint_dir << "; starting at step 0\n";
    } else {
      return latest.status();
    }
  }
  std::vector<double> times;
  const int64_t timed_from = trainer->next_step() + run.warmup_steps;
  std::map<std::string, actor::Runtime::ThreadLoad> loads_before;  // at the first timed step's start
  absl::Time timed_start = absl::Now(), timed_end = timed_start;
  std::map<std::string, actor::Runtime::ThreadLoad> loads_after;
  while (trainer->next_step() < run.steps) {
    // (Under run-ahead the first timed step may have started already: its early part is outside
    // the window, as it is outside the step times.)
    if (trainer->next_step() == timed_from) {
      loads_before = ThreadLoads(*trainer);
      timed_start = absl::Now();
    }
    // Run ahead (start the next step before this one's loss is fetched) unless this step is
    // the last or a checkpoint follows it: a checkpoint reads the variables between steps.
    const int64_t step = trainer->next_step();
    const bool checkpoint_after = !run.checkpoint_dir.empty() && run.checkpoint_every > 0 &&
                                  (step + 1) % run.checkpoint_every == 0;
    const bool start_next = run.run_ahead && step + 1 < run.steps && !checkpoint_after;
    ASSIGN_OR_RETURN(StepResult r, trainer->RunStep(start_next));
    if (leader) {
      out << absl::StrFormat("step %d loss %.6f time %.1f ms %.0f %s\n", r.step, r.loss, 1e3 * r.seconds,
                             r.items_per_second, trainer->item_unit())
          << std::flush;
    }
    if (r.step >= timed_from) times.push_back(r.seconds);
    const bool last = trainer->next_step() >= run.steps;
    if (last) {  // the window of the thread loads ends here, before a final checkpoint
      loads_after = ThreadLoads(*trainer);
      timed_end = absl::Now();
    }
    if (!run.checkpoint_dir.empty() && (last || (run.checkpoint_every > 0 && (r.step + 1) % run.checkpoint_every == 0))) {
      ASSIGN_OR_RETURN(std::string dir, SaveTrainerCheckpoint(trainer.get(), run.checkpoint_dir, r.step));
      if (leader) out << "checkpoint: step " << r.step << " saved to " << dir << "\n" << std::flush;
    }
  }
  if (!times.empty() && leader) {
    const double median = Median(times);
    // Planned blocks plus the staging of mirrors (as olplan memory counts): the largest over the
    // plan's ranks (this process's own under olrun, where the plan is per rank).
    int64_t peak = 0;
    for (int32_t rank : trainer->plan().ranks()) peak = std::max(peak, compiler::RankPeakBytes(trainer->plan(), rank));
    // The allocators' real high-water marks of this process's ranks (olplan's memory check).
    int64_t measured = 0, device_used = -1;
    for (const actor::Runtime* runtime : trainer->executor()->local_runtimes()) {
      if (runtime != nullptr && runtime->allocator() != nullptr) measured = std::max(measured, runtime->allocator()->peak_bytes());
      // Device ranks: their device memory in use, measured by the backend (the host allocator
      // above holds only host buffers there).
      if (runtime == nullptr) continue;
      absl::StatusOr<std::map<int32_t, int64_t>> used = runtime->DeviceBytesInUse();
      if (!used.ok()) {  // a report, not the run's result: say so and go on
        out << "device memory in use: not measured (" << used.status().message() << ")\n";
        continue;
      }
      for (const auto& [device, bytes] : *used) device_used = std::max(device_used, bytes);
    }
    out << absl::StrFormat(
        "RESULT median_ms_per_step=%.2f %s=%.0f steps_timed=%d planned_peak_mib_per_rank=%.1f "
        "measured_peak_mib_per_rank=%.1f\n",
        1e3 * median, trainer->item_unit(), trainer->items_per_step() / median, times.size(),
        static_cast<double>(peak) / (1 << 20), static_cast<double>(measured) / (1 << 20));
    if (device_used >= 0) {  // the planned peak above is the device's there
      out << absl::StrFormat("device memory in use at the end: %.1f MiB (planned peak %.1f MiB; the rest is the "
                             "libraries' workspaces and pools)\n",
                             static_cast<double>(device_used) / (1 << 20), static_cast<double>(peak) / (1 << 20));
    }
    out << ThreadLoadLine(loads_before, loads_after, absl::ToDoubleSeconds(timed_end - timed_start),
                          static_cast<int>(times.size()));
  }
  if (!run.timeline_dir.empty()) {
    ASSIGN_OR_RETURN(std::vector<std::string> paths, trainer->WriteTimeline(run.timeline_dir));
    for (const std::string& path : paths) out << "timeline: " << path << "\n";
  }
  return trainer->executor()->Close();
}

}  // namespace train
}  // namespace oneflow_like
