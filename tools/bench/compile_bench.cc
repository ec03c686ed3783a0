// compile_bench: compile time and plan size of a GPT-style decoder (24 layers) at growing
// world sizes (dp x tp x pp mixes), with the time of every compiler phase.
//
// Goal (compiler issue): 512 ranks in under 30 s on this machine, and growth about linear in
// logical ops x ranks: the last column (microseconds per op x rank) should stay roughly flat.
//
// Usage (build optimized):
//   bazel run -c opt //tools/bench:compile_bench                 # 8, 64, 512 ranks
//   bazel run -c opt //tools/bench:compile_bench -- 8 64         # chosen world sizes
//   bazel run -c opt //tools/bench:compile_bench -- --collective 512   # GPU-style boxing tasks
// A world size W picks the layout of the table below (W must be one of them).
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "oneflow_like/compiler/driver/compile.h"
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

struct Case {
  int64_t world;
  models::ParallelLayout layout;
};

const Case kCases[] = {
    {8, {.dp = 2, .tp = 2, .pp = 2}},
    {64, {.dp = 4, .tp = 4, .pp = 4}},
    {512, {.dp = 8, .tp = 8, .pp = 8}},
};

int Run(const std::vector<int64_t>& worlds, bool collective) {
  OpRegistry registry;
  absl::Status registered = RegisterBuiltinOps(&registry);
  if (!registered.ok()) {
    std::fprintf(stderr, "compile_bench: %s\n", std::string(registered.message()).c_str());
    return 1;
  }
  std::printf("GPT decoder: 24 layers, n_embd 1024, 16 heads, seq 1024, vocab 50304, 2 sequences per dp rank,\n"
              "4 micro-batches, AdamW; %s boxing; times in seconds\n\n",
              collective ? "collective (GPU/NCCL-style)" : "CPU point-to-point");
  std::printf("%6s %10s %8s %9s %10s %9s | %7s %7s %7s %7s %7s %7s | %7s %10s\n", "ranks", "dp.tp.pp", "ops",
              "tasks", "registers", "plan MB", "build", "passes", "sbp", "lower", "verify", "seal", "total",
              "us/op/rank");
  for (int64_t world : worlds) {
    const Case* c = nullptr;
    for (const Case& k : kCases) {
      if (k.world == world) c = &k;
    }
    if (c == nullptr) {
      std::fprintf(stderr, "compile_bench: no layout for %lld ranks (use 8, 64 or 512)\n", static_cast<long long>(world));
      return 2;
    }
    const auto start = std::chrono::steady_clock::now();
    models::GptConfig config{.vocab = 50304, .seq_len = 1024, .n_layer = 24, .n_embd = 1024, .n_head = 16,
                             .batch = 2 * c->layout.dp};
    models::TrainOptions train;
    train.micro_batches = 4;
    absl::StatusOr<compiler::Graph> graph = models::BuildGptJob(registry, config, c->layout, train);
    if (!graph.ok()) {
      std::fprintf(stderr, "compile_bench: %s\n", std::string(graph.status().message()).c_str());
      return 1;
    }
    const double build = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    compiler::CompileOptions options;
    if (collective) options.boxing = compiler::BoxingStyle::kCollective;
    double cpu_mark = ProcessCpuSeconds();
    options.on_phase = [world, &cpu_mark](const std::string& phase, double seconds) {
      const double cpu = ProcessCpuSeconds();
      std::fprintf(stderr, "  [%lld ranks] %-14s %7.2f s  (cpu %7.2f s)\n", static_cast<long long>(world),
                   phase.c_str(), seconds, cpu - cpu_mark);
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
    std::fprintf(stderr, "  [%lld ranks] content_hash %s\n", static_cast<long long>(world),
                 plan->content_hash().c_str());
    std::map<std::string, double> phase;
    for (const auto& [name, seconds] : report.phase_seconds) phase[name] += seconds;
    int64_t tasks = 0, registers = 0;
    for (const RankPlanProto& r : plan->rank_plans()) {
      tasks += r.tasks_size();
      registers += r.registers_size();
    }
    const double passes = phase["infer_shapes"] + phase["autograd"] + phase["optimizer"];
    const double us_per = 1e6 * total / (static_cast<double>(report.num_logical_ops) * world);
    char layout[32];
    std::snprintf(layout, sizeof(layout), "%lldx%lldx%lld", static_cast<long long>(c->layout.dp),
                  static_cast<long long>(c->layout.tp), static_cast<long long>(c->layout.pp));
    std::printf("%6lld %10s %8lld %9lld %10lld %9.1f | %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f | %7.2f %10.2f\n",
                static_cast<long long>(world), layout, static_cast<long long>(report.num_logical_ops),
                static_cast<long long>(tasks), static_cast<long long>(registers), plan->ByteSizeLong() / 1e6, build,
                passes, phase["sbp_selection"], phase["lower"], phase["verify_plan"], phase["seal"], total, us_per);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace oneflow_like

int main(int argc, char** argv) {
  std::vector<int64_t> worlds;
  bool collective = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--collective") {
      collective = true;
    } else {
      worlds.push_back(std::atoll(argv[i]));
    }
  }
  if (worlds.empty()) worlds = {8, 64, 512};
  return oneflow_like::Run(worlds, collective);
}
