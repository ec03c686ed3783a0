// compile_bench: compile time and plan size of a GPT-style decoder (24 layers) at growing
// world sizes (dp x tp x pp mixes), with the time of every compiler phase.
//
// Whole plan (default): every rank's plan, as olplan / the in-process runtime compile it. Goal
// (compiler issue): 512 ranks in under 30 s, growth about linear in logical ops x ranks (the
// last column, microseconds per op x rank, roughly flat).
// Per rank (--per-rank, issue 16): what one process of an olrun job compiles: the global passes
// and its own rank's plan (CompileOptions::only_rank). Goal: time and peak memory flat in the
// world size, under 5 s and 300 MB at 16,384 ranks. Each case runs in a child process, so its
// peak RSS (getrusage ru_maxrss) is its own; the lowered ranks are 0 (first stage) and the
// last (the head and the loss).
// Whole-plan checks in parts (--verify-in-parts, issue 16): what `olplan verify` does with a
// job: the plan lowered a range of ranks at a time, each rank checked and hashed, the checks
// across ranks on a compact skeleton. Goal: 4,096 ranks in under 2 minutes and 8 GB; the
// content hash equals the whole plan's.
//
// Usage (build optimized):
//   bazel run -c opt //tools/bench:compile_bench                 # 8, 64, 512 ranks
//   bazel run -c opt //tools/bench:compile_bench -- 8 64         # chosen world sizes
//   bazel run -c opt //tools/bench:compile_bench -- --collective 512   # GPU-style boxing tasks
//   bazel run -c opt //tools/bench:compile_bench -- --per-rank   # 512, 4096, 16384 ranks, one rank each
//   bazel run -c opt //tools/bench:compile_bench -- --per-rank --rank=5 4096
//   bazel run -c opt //tools/bench:compile_bench -- --verify-in-parts 4096 [--ranks-per-part=256]
// A world size W picks the layout of the table below (W must be one of them).
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "oneflow_like/compiler/driver/compile.h"
#include "oneflow_like/compiler/driver/verify_in_parts.h"
#include "oneflow_like/core/op_registry.h"
#include "oneflow_like/core/ops/builtin_ops.h"
#include "oneflow_like/models/gpt.h"

namespace oneflow_like {
namespace {

// CPU seconds of the whole process (all threads) so far: on a loaded machine a phase's CPU time
// is steadier than its wall time (printed beside it on stderr).
double ProcessCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

double PeakRssMb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // KiB on Linux
}

struct Case {
  int64_t world;
  models::ParallelLayout layout;
};

// 24 layers over pp stages (pp divides 24 or, at 16, 1-2 blocks a stage); tp 16 = the heads.
const Case kCases[] = {
    {8, {.dp = 2, .tp = 2, .pp = 2}},
    {64, {.dp = 4, .tp = 4, .pp = 4}},
    {512, {.dp = 8, .tp = 8, .pp = 8}},
    {4096, {.dp = 16, .tp = 16, .pp = 16}},
    {16384, {.dp = 64, .tp = 16, .pp = 16}},
};

struct Options {
  std::vector<int64_t> worlds;
  bool collective = false;
  bool per_rank = false;
  int64_t rank = -1;  // --per-rank: -1 = rank 0 and the last rank
  bool in_parts = false;  // --verify-in-parts: olplan verify's whole-plan checks, a range at a time
  int32_t ranks_per_part = 0;  // --ranks-per-part=N (0: VerifyInParts' default)
};

// The benchmark's job at case `c`: the 24-layer GPT above on its layout.
absl::StatusOr<compiler::Graph> BenchGraph(const Case& c, const OpRegistry& registry) {
  models::GptConfig config{.vocab = 50304, .seq_len = 1024, .n_layer = 24, .n_embd = 1024, .n_head = 16,
                           .batch = 2 * c.layout.dp};
  models::TrainOptions train;
  train.micro_batches = 4;
  return models::BuildGptJob(registry, config, c.layout, train);
}

// --verify-in-parts: what `olplan verify --config ...` does (issue 16): the global passes, then
// the whole plan lowered and checked a range of ranks at a time, and its content hash.
int RunInParts(const Options& opts, const Case& c, const OpRegistry& registry) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<compiler::Graph> graph = BenchGraph(c, registry);
  if (!graph.ok()) {
    std::fprintf(stderr, "compile_bench: %s\n", std::string(graph.status().message()).c_str());
    return 1;
  }
  compiler::CompileOptions options;
  if (opts.collective) options.boxing = compiler::BoxingStyle::kCollective;
  absl::StatusOr<compiler::GlobalDecisions> decisions = compiler::RunGlobalPasses(*std::move(graph), options);
  if (!decisions.ok()) {
    std::fprintf(stderr, "compile_bench: %s\n", std::string(decisions.status().message()).c_str());
    return 1;
  }
  const double passes = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  compiler::InPartsOptions parts;
  parts.ranks_per_part = opts.ranks_per_part;
  const long long world = c.world;
  parts.progress = [world](const std::string& line) {
    std::fprintf(stderr, "  [%lld ranks] %s (peak %.0f MB)\n", world, line.c_str(), PeakRssMb());
  };
  absl::StatusOr<compiler::InPartsReport> report = compiler::VerifyInParts(*decisions, options, parts);
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!report.ok()) {
    std::fprintf(stderr, "compile_bench: %lld ranks: %s\n", world, std::string(report.status().message()).c_str());
    return 1;
  }
  std::map<std::string, double> phase;
  for (const auto& [name, seconds] : report->phase_seconds) phase[name] += seconds;
  char layout[32];
  std::snprintf(layout, sizeof(layout), "%lldx%lldx%lld", static_cast<long long>(c.layout.dp),
                static_cast<long long>(c.layout.tp), static_cast<long long>(c.layout.pp));
  std::printf("%6lld %10s %6d %9lld %10lld %9.1f | %7.2f %9.2f (%6.2f %6.2f) %7.2f %7.2f %7.2f | %7.2f %9.0f  %s\n",
              world, layout, report->ranks_per_part, static_cast<long long>(report->tasks),
              static_cast<long long>(report->registers), report->plan_bytes / 1e6, passes,
              phase["lower_and_check_ranks"], report->lower_seconds, report->check_seconds, phase["across_ranks"],
              phase["memory_reuse"], phase["hash"], total, PeakRssMb(), report->content_hash.c_str());
  if (world == 4096) {
    const bool met = total < 120.0 && PeakRssMb() < 8192.0;
    std::printf("       goal (issue 16): the whole 4096-rank plan verified in under 120 s and 8192 MB: %s\n",
                met ? "met" : "NOT MET");
  }
  std::fflush(stdout);
  return 0;
}

// Compiles one case (whole plan, or rank `rank`'s) and prints its row.
int RunCase(const Options& opts, const Case& c, int64_t rank, const OpRegistry& registry) {
  const int64_t world = c.world;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<compiler::Graph> graph = BenchGraph(c, registry);
  if (!graph.ok()) {
    std::fprintf(stderr, "compile_bench: %s\n", std::string(graph.status().message()).c_str());
    return 1;
  }
  const double build = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  compiler::CompileOptions options;
  if (opts.collective) options.boxing = compiler::BoxingStyle::kCollective;
  options.only_rank = static_cast<int32_t>(rank);
  double cpu_mark = ProcessCpuSeconds();
  options.on_phase = [world, rank, &cpu_mark](const std::string& phase, double seconds) {
    const double cpu = ProcessCpuSeconds();
    std::fprintf(stderr, "  [%lld ranks%s] %-14s %7.2f s  (cpu %7.2f s)\n", static_cast<long long>(world),
                 rank >= 0 ? (" rank " + std::to_string(rank)).c_str() : "", phase.c_str(), seconds, cpu - cpu_mark);
    cpu_mark = cpu;
  };
  compiler::CompileReport report;
  absl::StatusOr<PlanProto> plan = compiler::Compile(*std::move(graph), options, &report);
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!plan.ok()) {
    std::fprintf(stderr, "compile_bench: %lld ranks: %s\n", static_cast<long long>(world),
                 std::string(plan.status().message()).c_str());
    return 1;
  }
  std::fprintf(stderr, "  [%lld ranks%s] content_hash %s%s%s\n", static_cast<long long>(world),
               rank >= 0 ? (" rank " + std::to_string(rank)).c_str() : "", plan->content_hash().c_str(),
               rank >= 0 ? "  agreement " : "", rank >= 0 ? plan->per_rank().agreement().digest().c_str() : "");
  std::map<std::string, double> phase;
  for (const auto& [name, seconds] : report.phase_seconds) phase[name] += seconds;
  int64_t tasks = 0, registers = 0;
  for (const RankPlanProto& r : plan->rank_plans()) {
    tasks += r.tasks_size();
    registers += r.registers_size();
  }
  const double passes = phase["stage_balance"] + phase["infer_shapes"] + phase["autograd"] + phase["optimizer"];
  char layout[32];
  std::snprintf(layout, sizeof(layout), "%lldx%lldx%lld", static_cast<long long>(c.layout.dp),
                static_cast<long long>(c.layout.tp), static_cast<long long>(c.layout.pp));
  if (rank >= 0) {
    std::printf("%6lld %10s %6lld %8lld %7lld %10lld %9.2f | %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f | %7.2f %9.0f\n",
                static_cast<long long>(world), layout, static_cast<long long>(rank),
                static_cast<long long>(report.num_logical_ops), static_cast<long long>(tasks),
                static_cast<long long>(registers), plan->ByteSizeLong() / 1e6, build, passes, phase["sbp_selection"],
                phase["lower"], phase["verify_plan"], phase["seal"], total, PeakRssMb());
    if (world == 16384) {
      const bool met = total < 5.0 && PeakRssMb() < 300.0;
      std::printf("       goal (issue 16): one rank of 16384 in under 5 s and 300 MB: %s\n", met ? "met" : "NOT MET");
    }
  } else {
    const double us_per = 1e6 * total / (static_cast<double>(report.num_logical_ops) * world);
    std::printf("%6lld %10s %8lld %9lld %10lld %9.1f | %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f | %7.2f %10.2f %9.0f\n",
                static_cast<long long>(world), layout, static_cast<long long>(report.num_logical_ops),
                static_cast<long long>(tasks), static_cast<long long>(registers), plan->ByteSizeLong() / 1e6, build,
                passes, phase["sbp_selection"], phase["lower"], phase["verify_plan"], phase["seal"], total, us_per,
                PeakRssMb());
  }
  std::fflush(stdout);
  return 0;
}

int Run(const Options& opts) {
  OpRegistry registry;
  absl::Status registered = RegisterBuiltinOps(&registry);
  if (!registered.ok()) {
    std::fprintf(stderr, "compile_bench: %s\n", std::string(registered.message()).c_str());
    return 1;
  }
  std::printf("GPT decoder: 24 layers, n_embd 1024, 16 heads, seq 1024, vocab 50304, 2 sequences per dp rank,\n"
              "4 micro-batches, AdamW; %s boxing; %s; times in seconds, peak RSS in MB (getrusage)\n\n",
              opts.collective ? "collective (GPU/NCCL-style)" : "CPU point-to-point",
              opts.in_parts   ? "whole-plan checks in parts (olplan verify: VerifyInParts)"
              : opts.per_rank ? "per rank: one process's compile of its own rank (only_rank)"
                              : "whole plan");
  if (opts.in_parts) {
    std::printf("%6s %10s %6s %9s %10s %9s | %7s %9s (%6s %6s) %7s %7s %7s | %7s %9s  %s\n", "ranks", "dp.tp.pp",
                "part", "tasks", "registers", "plan MB", "passes", "lower+chk", "lower", "check", "across", "reuse",
                "hash", "total", "peak MB", "content_hash");
  } else if (opts.per_rank) {
    std::printf("%6s %10s %6s %8s %7s %10s %9s | %7s %7s %7s %7s %7s %7s | %7s %9s\n", "ranks", "dp.tp.pp", "rank",
                "ops", "tasks", "registers", "plan MB", "build", "passes", "sbp", "lower", "verify", "seal", "total",
                "peak MB");
  } else {
    std::printf("%6s %10s %8s %9s %10s %9s | %7s %7s %7s %7s %7s %7s | %7s %10s %9s\n", "ranks", "dp.tp.pp", "ops",
                "tasks", "registers", "plan MB", "build", "passes", "sbp", "lower", "verify", "seal", "total",
                "us/op/rank", "peak MB");
  }
  std::fflush(stdout);
  for (int64_t world : opts.worlds) {
    const Case* c = nullptr;
    for (const Case& k : kCases) {
      if (k.world == world) c = &k;
    }
    if (c == nullptr) {
      std::fprintf(stderr, "compile_bench: no layout for %lld ranks (use 8, 64, 512, 4096 or 16384)\n",
                   static_cast<long long>(world));
      return 2;
    }
    std::vector<int64_t> ranks = {-1};
    if (opts.per_rank) ranks = opts.rank >= 0 ? std::vector<int64_t>{opts.rank} : std::vector<int64_t>{0, world - 1};
    for (int64_t rank : ranks) {
      const pid_t child = fork();  // each case's peak RSS is its own
      if (child < 0) {
        std::perror("compile_bench: fork");
        return 1;
      }
      if (child == 0) std::_Exit(opts.in_parts ? RunInParts(opts, *c, registry) : RunCase(opts, *c, rank, registry));
      int status = 0;
      if (waitpid(child, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace oneflow_like

int main(int argc, char** argv) {
  oneflow_like::Options opts;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--collective") {
      opts.collective = true;
    } else if (arg == "--per-rank") {
      opts.per_rank = true;
    } else if (arg == "--verify-in-parts") {
      opts.in_parts = true;
    } else if (arg.rfind("--ranks-per-part=", 0) == 0) {
      opts.ranks_per_part = std::atoi(arg.c_str() + 17);
    } else if (arg.rfind("--rank=", 0) == 0) {
      opts.rank = std::atoll(arg.c_str() + 7);
    } else {
      opts.worlds.push_back(std::atoll(argv[i]));
    }
  }
  if (opts.worlds.empty()) {
    opts.worlds = opts.per_rank    ? std::vector<int64_t>{512, 4096, 16384}
                  : opts.in_parts ? std::vector<int64_t>{512, 4096}
                                  : std::vector<int64_t>{8, 64, 512};
  }
  return oneflow_like::Run(opts);
}
