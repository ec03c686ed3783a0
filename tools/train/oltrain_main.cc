// oltrain: the end-to-end trainer binary (flags: oneflow_like/train/trainer_flags.h; run with
// --help; config files: oneflow_like/train/config_file.h).
// - Started by the launcher (tools/olrun sets WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT,
//   OL_JOB_TOKEN): this process runs its rank of the plan; the ranks talk over TCP. Before
//   training, every rank runs the preflight checks (train/preflight.h; a failure exits 3). In a
//   restart round (OL_RESTART_ROUND > 0, olrun --max-restarts) it resumes from the newest
//   complete checkpoint in --checkpoint_dir.
// - Started directly: all ranks of the plan run in this process as threads.
//   bazel run -c opt //tools/train:oltrain -- --model=gpt --steps=5
//   tools/olrun --nproc-per-node 4 --config configs/gpt_4rank.cfg
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "tools/train/oltrain_main.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "oneflow_like/core/ops/builtin_ops.h"
#include "oneflow_like/train/config_file.h"
#include "oneflow_like/train/distributed.h"
#include "oneflow_like/train/preflight.h"
#include "oneflow_like/train/rank_executor.h"
#include "oneflow_like/train/run_training.h"
#include "oneflow_like/train/trainer.h"
#include "oneflow_like/train/trainer_flags.h"

namespace {

using namespace oneflow_like;

constexpr int kExitPreflight = 3;  // olrun's contract: a preflight failure is not restarted

// Flags, or a config file (--config FILE) with the other flags as overrides.
absl::StatusOr<train::TrainerFlags> ParseArgs(const std::vector<std::string>& args) {
  std::vector<std::string> rest;
  std::string config;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind("--config=", 0) == 0) {
      config = args[i].substr(9);
    } else if (args[i] == "--config" && i + 1 < args.size()) {
      config = args[++i];
    } else {
      rest.push_back(args[i]);
    }
  }
  if (config.empty()) return train::ParseTrainerFlags(args);
  return train::ParseTrainerConfig(config, rest);
}

int RunDistributed(train::TrainerOptions options, const train::RunOptions& run, const OpRegistry* registry) {
  absl::StatusOr<train::DistributedEnv> env = train::DistributedEnvFromEnviron();
  if (!env.ok()) {
    std::cerr << "oltrain: " << env.status().message() << "\n";
    return 2;
  }
  const models::ParallelLayout& l = options.layout;
  if (l.dp * l.tp * l.pp != env->world_size) {
    std::cerr << "oltrain: the layout dp=" << l.dp << " x tp=" << l.tp << " x pp=" << l.pp << " needs "
              << l.dp * l.tp * l.pp << " ranks, but WORLD_SIZE is " << env->world_size
              << " (olrun --nnodes x --nproc-per-node)\n";
    return 2;
  }
  absl::StatusOr<std::unique_ptr<train::DistributedContext>> context = train::DistributedContext::Create(*env);
  if (!context.ok()) {
    std::cerr << "oltrain: rank " << env->rank << ": " << context.status() << "\n";
    std::cerr.flush();
    std::_Exit(1);  // peers learn it from the control plane; skip destructors of half-built links
  }
  train::DistributedContext* ctx = context->get();
  train::PreflightOptions preflight;
  preflight.checkpoint_dir = run.checkpoint_dir;
  options.executor_factory = [ctx, preflight](const PlanProto& plan, const OpRegistry* reg,
                                              actor::SessionOptions session)
      -> absl::StatusOr<std::unique_ptr<train::StepExecutor>> {
    RETURN_IF_ERROR(train::RunPreflight(plan, preflight, ctx));
    return train::CreateRankExecutor(plan, reg, std::move(session), ctx);
  };
  options.only_rank = env->rank;  // each process compiles its own rank's plan (issue 16)
  train::RunOptions this_round = run;
  if (env->restart_round > 0) {
    // olrun restarted the job after a failure: continue from the newest complete checkpoint.
    this_round.resume = run.resume || !run.checkpoint_dir.empty();
    if (env->rank == 0 && run.checkpoint_dir.empty()) {
      std::cerr << "oltrain: restart round " << env->restart_round
                << " without --checkpoint_dir: training starts again at step 0\n";
    }
  }
  const absl::Status status = train::RunTraining(options, this_round, registry, std::cout);
  std::cout.flush();
  if (!status.ok()) {
    ctx->Abort(std::string(status.message()));
    std::cerr << "oltrain: rank " << env->rank << " failed: " << status << "\n";
    std::cerr.flush();
    // peers may be gone mid-protocol: no orderly teardown. Preflight failures exit 3: olrun does
    // not restart a job that cannot work -- also when this rank only saw its link to the failing
    // peer close before the control plane relayed that peer's preflight failure (up to 500 ms).
    bool preflight = train::IsPreflightFailure(status);
    for (int i = 0; !preflight && absl::IsUnavailable(status) && i < 50; ++i) {
      preflight = train::IsPreflightFailure(ctx->failure());
      if (!preflight) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::_Exit(preflight ? kExitPreflight : 1);
  }
  context->reset();
  return 0;
}

}  // namespace

namespace oneflow_like {

int OltrainMain(int argc, char** argv, actor::DeviceBackend* device_backend,
                decltype(actor::SessionOptions::collective_factory) collective_factory,
                const absl::Status& no_backend_reason) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<train::TrainerFlags> flags = ParseArgs(args);
  if (!flags.ok()) {
    std::cerr << "oltrain: " << flags.status().message() << "\n";
    return 2;
  }
  if (flags->help) {
    std::cout << train::TrainerUsage();
    return 0;
  }
  if (device_backend == nullptr && !no_backend_reason.ok() && flags->options.layout.device != DeviceType::kCpu) {
    std::cerr << "oltrain: --device=" << DeviceTypeName(flags->options.layout.device)
              << " was requested, but this process has no backend for it: " << no_backend_reason.message() << "\n";
    return kExitPreflight;
  }
  flags->options.device_backend = device_backend;
  flags->options.collective_factory = std::move(collective_factory);
  train::RunOptions run;
  run.steps = flags->steps;
  run.warmup_steps = flags->warmup_steps;
  run.timeline_dir = flags->timeline_dir;
  run.checkpoint_dir = flags->checkpoint_dir;
  run.checkpoint_every = flags->checkpoint_every;
  run.resume = flags->resume;
  run.run_ahead = flags->run_ahead;
  OpRegistry registry;
  absl::Status status = RegisterBuiltinOps(&registry);
  if (status.ok() && train::LaunchedByLauncher()) return RunDistributed(flags->options, run, &registry);
  if (status.ok()) status = train::RunTraining(flags->options, run, &registry, std::cout);
  if (!status.ok()) {
    std::cerr << "oltrain: " << status << "\n";
    return 1;
  }
  return 0;
}

}  // namespace oneflow_like
