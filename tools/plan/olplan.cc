// olplan: what a plan will cost before running it (tools/plan/README.md).
//
//   olplan summary --config configs/gpt_4rank.cfg          # compile from a config, as oltrain
//   olplan memory --model=gpt --dp=8 --tp=8 --pp=8 --n_layer=24 --device-memory 16GiB
//   olplan sbp --job job.txt --op fc1                      # a text-format job (docs/compiler.md)
//   olplan boxing --plan plan.pb --json                    # a plan file (olplan compile --out)
//   olplan compile --config configs/gpt_4rank.cfg --out plan.pb
//   olplan verify --plan plan.pb                           # the whole-plan checks
//
// Exit status: 0; 1 for an error (one line naming what is wrong and where); 2 for bad usage.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "google/protobuf/stubs/logging.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/compiler/driver/compile.h"
#include "oneflow_like/compiler/driver/verify_in_parts.h"
#include "oneflow_like/compiler/plan/plan_verifier.h"
#include "oneflow_like/compiler/text_format.h"
#include "oneflow_like/core/ops/builtin_ops.h"
#include "oneflow_like/train/checkpoint_format.h"
#include "oneflow_like/train/config_file.h"
#include "oneflow_like/train/trainer.h"
#include "oneflow_like/train/trainer_flags.h"
#include "tools/plan/calibrate.h"
#include "tools/plan/plan_buckets.h"
#include "tools/plan/plan_html.h"
#include "tools/plan/plan_report.h"
#include "tools/plan/plan_sim.h"

namespace oneflow_like {
namespace {

constexpr char kUsage[] = R"(usage: olplan COMMAND INPUT [options]

Commands:
  summary   ranks, placements, pieces, ops/tasks/registers per rank, bytes moved per step (per
            link class), planned peak memory per rank, a serial step-time estimate
  memory    per rank: the planned peak, what owns the bytes, the largest registers;
            --device-memory SIZE: fits / does not fit, and levers recompiled to show their effect
  sbp       per op the chosen SBP signature; --op NAME: every candidate with its cost breakdown
  boxing    every inserted SBP/placement transform: transition, pattern, bytes, seconds
  simulate  a discrete-event simulation of the actor graph (registers, credits, streams, the cost
            model's compute and alpha-beta link times): step time, idle fraction of the compute
            streams (pipeline bubble), busiest streams, critical path; --trace-dir DIR writes a
            predicted Chrome trace per rank; --sim-steps N (3); --free-links (no link cost);
            the ranks of a node (--ranks-per-node) share its CPU unless --no-sharing;
            registers the memory planner overlaps take turns as in the runtime unless
            --no-byte-sharing;
            --in-process: all ranks are threads of one process (transfers are copies, not TCP);
            --blas-threads N: a matmul's threads per rank (default: OPENBLAS_NUM_THREADS in
            one process, the node's cores / its ranks under olrun)
  diff A B  what changed between two plans (each a plan file, a .txt job or a .cfg config):
            SBP per op, boxing added/removed with bytes, placements, tasks, registers, per-rank
            peak memory, the serial estimate, traffic per link class
  calibrate measure this machine (matmul FLOP/s, memory bandwidth, per-actor overhead, the
            same-node TCP link at two message sizes) and save
            the profile every later compile and prediction uses (--profile FILE; default
            ~/.cache/oneflow_like/olplan_profile.txt)
  html      one self-contained page (overview, memory chart, SBP table, predicted timeline);
            --out FILE (default olplan.html); opens in any browser with no server
  compile   compile only; --out FILE writes the plan (a serialized PlanProto)
  verify    the whole-plan checks (producers, transfers, collective order, deadlock simulation,
            memory reuse) and the whole plan's content hash; a job or config is lowered a range
            of ranks at a time (--ranks-per-part N, default an eighth of the world, at most 256),
            so a 4096-rank plan is checked in a few GB; a plan file is checked whole; a per-rank
            plan file (compiled with only_rank): the checks its rank can make alone

Input (one of):
  --plan FILE              a plan file (olplan compile --out, or graph.plan.serialize() in Python)
  --job FILE               a job in the compiler's text format [--world N]
  --config FILE [flags]    an oltrain config file; oltrain flags override its fields
  oltrain flags            e.g. --model=gpt --dp=8 --tp=8 --pp=8 --n_layer=24 (oltrain --help)

Options:
  --json                   machine-readable output
  --device-memory SIZE     e.g. 16GiB, 80GB, 512MiB (memory)
  --op NAME                one op (sbp)
  --ranks-per-node N       link classes: ranks r and s share a node when r/N == s/N (the
                           profile's ranks_per_node, else 8)
  --out FILE               (compile) where to write the plan
  --profile FILE           the cost profile to use / to write (calibrate); predictions are priced
                           with it (default ~/.cache/oneflow_like/olplan_profile.txt when present)
  --profile-sbp            the SBP search uses the profile too (oltrain does not yet: without this
                           flag olplan analyzes the plan oltrain compiles)
)";

struct Args {
  std::string command;
  std::string plan_path, job_path, config_path, out_path, op, device_memory, trace_dir, profile;
  int64_t steps = 3;
  bool free_links = false;
  bool no_sharing = false;
  bool no_byte_sharing = false;
  bool in_process = false;
  bool profile_sbp = false;
  bool json = false;
  int32_t world = 0;
  int32_t ranks_per_node = 0;  // 0: the profile's, else 8
  int32_t ranks_per_part = 0;  // verify: 0 = VerifyInParts' default
  std::vector<std::string> trainer_flags;
  std::vector<std::string> positional;  // diff A B
  int32_t blas_threads = 0;               // --blas-threads (0: from the environment / olrun's share)
  // Set in Main from the profile (olplan calibrate). The SBP search uses the profile's costs
  // only with --profile-sbp, since oltrain compiles with the compiler's defaults and olplan must
  // analyze the plan oltrain will run; predictions are always priced with it (sim_cost).
  compiler::CostConfig sbp_cost, sim_cost;
  std::optional<plan_tool::Profile> machine;
};

absl::StatusOr<Args> ParseArgs(int argc, char** argv) {
  Args a;
  if (argc < 2) return absl::InvalidArgumentError("no command");
  a.command = argv[1];
  auto value = [&](int* i, const std::string& arg, const std::string& name) -> absl::StatusOr<std::string> {
    if (arg.rfind(name + "=", 0) == 0) return arg.substr(name.size() + 1);
    if (*i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(name, " needs a value"));
    return std::string(argv[++*i]);
  };
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    auto is = [&](const std::string& name) { return arg == name || arg.rfind(name + "=", 0) == 0; };
    if (arg == "--json") {
      a.json = true;
    } else if (arg == "--free-links") {
      a.free_links = true;
    } else if (arg == "--no-sharing") {
      a.no_sharing = true;
    } else if (arg == "--no-byte-sharing") {
      a.no_byte_sharing = true;
    } else if (arg == "--in-process") {
      a.in_process = true;
    } else if (arg == "--profile-sbp") {
      a.profile_sbp = true;
    } else if (is("--profile")) {
      ASSIGN_OR_RETURN(a.profile, value(&i, arg, "--profile"));
    } else if (is("--trace-dir")) {
      ASSIGN_OR_RETURN(a.trace_dir, value(&i, arg, "--trace-dir"));
    } else if (is("--sim-steps")) {
      ASSIGN_OR_RETURN(std::string v, value(&i, arg, "--sim-steps"));
      if (!absl::SimpleAtoi(v, &a.steps) || a.steps < 2 || a.steps > 1000) {
        return absl::InvalidArgumentError(absl::StrCat("--sim-steps: expected an integer in [2, 1000], got '", v, "'"));
      }
    } else if (is("--plan")) {
      ASSIGN_OR_RETURN(a.plan_path, value(&i, arg, "--plan"));
    } else if (is("--job")) {
      ASSIGN_OR_RETURN(a.job_path, value(&i, arg, "--job"));
    } else if (is("--config")) {
      ASSIGN_OR_RETURN(a.config_path, value(&i, arg, "--config"));
    } else if (is("--out")) {
      ASSIGN_OR_RETURN(a.out_path, value(&i, arg, "--out"));
    } else if (is("--op")) {
      ASSIGN_OR_RETURN(a.op, value(&i, arg, "--op"));
    } else if (is("--device-memory")) {
      ASSIGN_OR_RETURN(a.device_memory, value(&i, arg, "--device-memory"));
    } else if (is("--blas-threads")) {
      ASSIGN_OR_RETURN(std::string v, value(&i, arg, "--blas-threads"));
      if (!absl::SimpleAtoi(v, &a.blas_threads) || a.blas_threads < 1 || a.blas_threads > 4096) {
        return absl::InvalidArgumentError(absl::StrCat("--blas-threads: expected a positive integer, got '", v, "'"));
      }
    } else if (is("--world") || is("--ranks-per-node") || is("--ranks-per-part")) {
      const std::string name = is("--world") ? "--world" : is("--ranks-per-node") ? "--ranks-per-node" : "--ranks-per-part";
      ASSIGN_OR_RETURN(std::string v, value(&i, arg, name));
      int32_t n = 0;
      if (!absl::SimpleAtoi(v, &n) || n < 1) return absl::InvalidArgumentError(absl::StrCat(name, ": expected a positive integer, got '", v, "'"));
      (name == "--world" ? a.world : name == "--ranks-per-node" ? a.ranks_per_node : a.ranks_per_part) = n;
    } else if (!arg.empty() && arg[0] != '-' && a.command == "diff") {
      a.positional.push_back(arg);
    } else {
      a.trainer_flags.push_back(arg);
    }
  }
  return a;
}

struct Job {
  std::unique_ptr<compiler::Graph> graph;  // null for a plan file
  train::TrainerOptions trainer;           // for levers (trainer input)
  bool from_trainer = false;
};

absl::StatusOr<PlanProto> ReadPlanFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string bytes, train::ReadWholeFile(path));
  PlanProto plan;
  if (bytes.empty() || !plan.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a plan file (it does not parse as a PlanProto; write one with "
                                                   "`olplan compile ... --out FILE`)"));
  }
  // A per-rank plan (oltrain under olrun compiles its own rank's alone) gets the checks one rank can make.
  absl::Status verified = plan.has_per_rank() ? compiler::VerifyRankPlan(plan) : compiler::VerifyPlan(plan);
  if (!verified.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a valid plan (corrupt or truncated?): ", verified.message()));
  }
  return plan;
}

// `trainer`: the job's oltrain flags (defaults for a text job).
absl::StatusOr<PlanProto> CompileGraph(compiler::Graph graph, const Args& a, const train::TrainerOptions& trainer) {
  compiler::CompileOptions options = train::CompileOptionsFor(trainer);
  options.world_size = a.world;
  options.cost = a.sbp_cost;
  options.verify_plan = a.command != "verify";  // verify checks the plan once, below
  options.on_phase = [](const std::string& phase, double seconds) {
    if (seconds > 1.0) std::fprintf(stderr, "olplan: %s took %.1f s\n", phase.c_str(), seconds);
  };
  return compiler::Compile(std::move(graph), options);
}

absl::StatusOr<Job> LoadJob(const Args& a, const OpRegistry& registry);
int Fail(const absl::Status& status);

// olplan verify --job / --config: the whole-plan checks, lowered a range of ranks at a time.
int VerifyJobInParts(const Args& a, const OpRegistry& registry) {
  absl::StatusOr<Job> job = LoadJob(a, registry);
  if (!job.ok()) return Fail(job.status());
  compiler::CompileOptions options = train::CompileOptionsFor(job->trainer);
  options.world_size = a.world;
  options.cost = a.sbp_cost;
  absl::StatusOr<compiler::GlobalDecisions> decisions = compiler::RunGlobalPasses(compiler::Graph(*job->graph), options);
  if (!decisions.ok()) return Fail(decisions.status());
  compiler::InPartsOptions parts;
  parts.ranks_per_part = a.ranks_per_part;
  parts.progress = [](const std::string& line) { std::fprintf(stderr, "olplan: %s\n", line.c_str()); };
  absl::StatusOr<compiler::InPartsReport> report = compiler::VerifyInParts(*decisions, options, parts);
  if (!report.ok()) return Fail(report.status());
  double seconds = 0;
  for (const auto& [phase, s] : report->phase_seconds) seconds += s;
  std::printf("plan %s: verified (producers, both ends of every transfer, collective order, deadlock simulation, "
              "memory reuse) on %d ranks (%d with work), %lld tasks, %lld registers, %.1f MB serialized; lowered "
              "%d ranks at a time in %.1f s\n",
              report->content_hash.c_str(), report->world_size, report->ranks_with_work,
              static_cast<long long>(report->tasks), static_cast<long long>(report->registers),
              report->plan_bytes / 1e6, report->ranks_per_part, seconds);
  return 0;
}

absl::StatusOr<Job> LoadJob(const Args& a, const OpRegistry& registry) {
  Job job;
  if (!a.job_path.empty()) {
    ASSIGN_OR_RETURN(std::string text, train::ReadWholeFile(a.job_path));
    absl::StatusOr<compiler::Graph> graph = compiler::ParseGraph(text, registry);
    if (!graph.ok()) return absl::InvalidArgumentError(absl::StrCat(a.job_path, ": ", graph.status().message()));
    job.graph = std::make_unique<compiler::Graph>(*std::move(graph));
    return job;
  }
  absl::StatusOr<train::TrainerFlags> flags =
      a.config_path.empty() ? train::ParseTrainerFlags(a.trainer_flags) : train::ParseTrainerConfig(a.config_path, a.trainer_flags);
  RETURN_IF_ERROR(flags.status());
  job.trainer = flags->options;
  job.from_trainer = true;
  ASSIGN_OR_RETURN(train::TrainerJob built, train::BuildTrainerJob(job.trainer, registry));
  job.graph = std::move(built.graph);
  return job;
}

// A plan from a path: a text job (.txt / .job), an oltrain config (.cfg) or a plan file.
absl::StatusOr<PlanProto> LoadAny(const std::string& path, const Args& a, const OpRegistry& registry) {
  auto ends = [&](const std::string& suffix) {
    return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends(".txt") || ends(".job") || ends(".cfg")) {
    Args one = a;
    one.job_path = ends(".cfg") ? "" : path;
    one.config_path = ends(".cfg") ? path : "";
    ASSIGN_OR_RETURN(Job job, LoadJob(one, registry));
    return CompileGraph(std::move(*job.graph), a, job.trainer);
  }
  return ReadPlanFile(path);
}

// Levers against a plan that does not fit: each recompiled, its peak reported.
std::string Levers(const Job& job, const OpRegistry& registry, const Args& a, int64_t device_memory, bool json) {
  struct Lever {
    std::string name;
    absl::StatusOr<std::unique_ptr<compiler::Graph>> graph;
  };
  std::vector<Lever> levers;
  if (job.from_trainer) {
    auto variant = [&](const std::string& name, auto change) {
      train::TrainerOptions o = job.trainer;
      if (!change(&o)) return;
      absl::StatusOr<train::TrainerJob> built = train::BuildTrainerJob(o, registry);
      levers.push_back({name, built.ok() ? absl::StatusOr<std::unique_ptr<compiler::Graph>>(std::move(built->graph))
                                         : absl::StatusOr<std::unique_ptr<compiler::Graph>>(built.status())});
    };
    variant("ZeRO-1 (--zero_stage=1)", [](train::TrainerOptions* o) {
      if (o->zero_stage >= 1 || o->layout.dp < 2) return false;
      o->zero_stage = 1;
      return true;
    });
    variant("ZeRO-2, sharded parameters (--zero_stage=2)", [](train::TrainerOptions* o) {
      if (o->zero_stage >= 2 || o->layout.dp < 2) return false;
      o->zero_stage = 2;
      return true;
    });
    variant("recompute (--recompute)", [](train::TrainerOptions* o) {
      if (o->recompute || o->model != train::Workload::kGpt) return false;
      o->recompute = true;
      return true;
    });
    variant("twice the micro-batches (--micro_batches)", [](train::TrainerOptions* o) {
      o->micro_batches = std::max(1, o->micro_batches) * 2;
      return true;
    });
  } else if (job.graph != nullptr) {
    auto variant = [&](const std::string& name, auto change) {
      auto g = std::make_unique<compiler::Graph>(*job.graph);
      if (!change(g->mutable_config())) return;
      levers.push_back({name, std::move(g)});
    };
    variant("ZeRO-1 (config zero_stage=1)", [](JobConfigProto* c) {
      if (c->zero_stage() >= 1 || !c->has_optimizer()) return false;
      c->set_zero_stage(1);
      return true;
    });
    variant("ZeRO-2, sharded parameters (config zero_stage=2)", [](JobConfigProto* c) {
      if (c->zero_stage() >= 2 || !c->has_optimizer()) return false;
      c->set_zero_stage(2);
      return true;
    });
    variant("twice the micro-batches (config micro_batches)", [](JobConfigProto* c) {
      c->set_micro_batches(std::max(1, c->micro_batches()) * 2);
      return true;
    });
  }
  std::string out = json ? "" : "levers (each recompiled):\n";
  std::vector<std::string> rows;
  for (Lever& l : levers) {
    std::string result;
    bool fits = false;
    int64_t peak = -1;
    absl::StatusOr<PlanProto> plan = l.graph.ok() ? CompileGraph(std::move(**l.graph), a, job.trainer)
                                                  : absl::StatusOr<PlanProto>(l.graph.status());
    if (plan.ok()) {
      absl::StatusOr<plan_tool::PlanSummary> s = plan_tool::Summarize(*plan);
      if (s.ok()) {
        peak = s->peak_device_bytes;
        fits = peak <= device_memory;
      }
    }
    if (json) {
      rows.push_back(absl::StrCat("{\"lever\":\"", l.name, "\",\"peak_bytes\":", peak, ",\"fits\":", fits ? "true" : "false",
                                  plan.ok() ? "" : ",\"error\":\"does not compile\"", "}"));
    } else if (!plan.ok()) {
      absl::StrAppend(&out, "  ", l.name, ": does not compile (", plan.status().message().substr(0, 160), ")\n");
    } else {
      absl::StrAppend(&out, "  ", l.name, ": peak ", plan_tool::HumanBytes(static_cast<double>(peak)), fits ? "  fits\n" : "  still does not fit\n");
    }
  }
  if (levers.empty() && !json) absl::StrAppend(&out, "  (none: a plan file cannot be recompiled; give --config, flags or --job)\n");
  return json ? absl::StrCat("[", absl::StrJoin(rows, ","), "]") : out;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "olplan: %s\n", std::string(status.message()).c_str());
  return 1;
}

int Main(int argc, char** argv) {
  google::protobuf::SetLogHandler(nullptr);  // a corrupt plan file gets our one-line error, not protobuf's log
  if (argc >= 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" || std::string(argv[1]) == "help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  absl::StatusOr<Args> args = ParseArgs(argc, argv);
  if (!args.ok()) {
    std::fprintf(stderr, "olplan: %s\n\n%s", std::string(args.status().message()).c_str(), kUsage);
    return 2;
  }
  Args& a = *args;
  const std::vector<std::string> commands = {"summary", "memory", "sbp", "boxing", "compile", "verify", "diff", "simulate",
                                             "calibrate", "html"};
  if (std::find(commands.begin(), commands.end(), a.command) == commands.end()) {
    std::fprintf(stderr, "olplan: unknown command '%s' (summary, memory, sbp, boxing, simulate, diff, html, compile, verify, calibrate)\n", a.command.c_str());
    return 2;
  }
  int64_t device_memory = 0;
  if (!a.device_memory.empty()) {
    absl::StatusOr<int64_t> parsed = plan_tool::ParseBytes(a.device_memory);
    if (!parsed.ok()) return Fail(absl::InvalidArgumentError(absl::StrCat("--device-memory: ", parsed.status().message())));
    device_memory = *parsed;
  }
  OpRegistry registry;
  if (absl::Status s = RegisterBuiltinOps(&registry); !s.ok()) return Fail(s);
  const std::string profile_path = a.profile.empty() ? plan_tool::DefaultProfilePath() : a.profile;
  if (a.command == "calibrate") {
    absl::StatusOr<plan_tool::Profile> p =
        plan_tool::Calibrate(registry, [](const std::string& line) { std::printf("  %s\n", line.c_str()); });
    if (!p.ok()) return Fail(p.status());
    if (absl::Status s = plan_tool::SaveProfile(*p, profile_path); !s.ok()) return Fail(s);
    std::printf("saved %s (used by every later olplan compile and prediction)\n", profile_path.c_str());
    return 0;
  }
  {
    absl::StatusOr<plan_tool::Profile> p = plan_tool::LoadProfile(profile_path);
    if (p.ok()) {
      plan_tool::ApplyProfile(*p, &a.sim_cost);
      if (a.profile_sbp) plan_tool::ApplyProfile(*p, &a.sbp_cost);
      a.machine = *p;
      if (a.ranks_per_node == 0) a.ranks_per_node = p->ranks_per_node;
      std::fprintf(stderr, "olplan: cost profile %s (%.1f GFLOP/s, %.1f GB/s, %.2f us per firing%s)\n", profile_path.c_str(),
                   p->flops_per_second / 1e9, p->memory_bytes_per_second / 1e9, p->task_overhead_seconds * 1e6,
                   p->device_per_rank ? ", a device per rank" : "");
    } else if (!a.profile.empty() || p.status().code() != absl::StatusCode::kNotFound) {
      return Fail(p.status());
    }
  }
  if (a.ranks_per_node == 0) a.ranks_per_node = 8;
  if (a.command == "diff") {
    if (a.positional.size() != 2) {
      std::fprintf(stderr, "olplan: diff takes two plans: olplan diff A B (plan files, .txt jobs or .cfg configs)\n");
      return 2;
    }
    std::vector<PlanProto> plans;
    for (const std::string& path : a.positional) {
      absl::StatusOr<PlanProto> p = LoadAny(path, a, registry);
      if (!p.ok()) return Fail(p.status());
      plans.push_back(*std::move(p));
    }
    plan_tool::ReportOptions options;
    options.ranks_per_node = a.ranks_per_node;
    std::fputs((a.json ? plan_tool::DiffJson(plans[0], plans[1], options) : plan_tool::DiffText(plans[0], plans[1], options)).c_str(),
               stdout);
    return 0;
  }
  if (a.command == "verify" && a.plan_path.empty()) return VerifyJobInParts(a, registry);
  Job job;
  PlanProto plan;
  if (!a.plan_path.empty()) {
    absl::StatusOr<PlanProto> read = ReadPlanFile(a.plan_path);
    if (!read.ok()) return Fail(read.status());
    plan = *std::move(read);
  } else {
    absl::StatusOr<Job> loaded = LoadJob(a, registry);
    if (!loaded.ok()) return Fail(loaded.status());
    job = *std::move(loaded);
    absl::StatusOr<PlanProto> compiled = CompileGraph(compiler::Graph(*job.graph), a, job.trainer);
    if (!compiled.ok()) return Fail(compiled.status());
    plan = *std::move(compiled);
  }
  if (a.command == "compile") {
    if (!a.out_path.empty()) {
      if (absl::Status s = train::WriteFileAtomically(a.out_path, plan.SerializeAsString()); !s.ok()) return Fail(s);
    }
    std::printf("compiled plan %s: %d ranks, %d pieces per step%s\n", plan.content_hash().c_str(), plan.world_size(),
                static_cast<int>(std::max<int64_t>(1, plan.pieces_per_step())),
                a.out_path.empty() ? "" : (" -> " + a.out_path).c_str());
    return 0;
  }
  if (a.command == "verify") {
    if (plan.has_per_rank()) {  // checked by ReadPlanFile
      std::printf("plan %s of rank %d alone: verified (its tasks, registers, memory, stream order, collectives' "
                  "geometry); the checks across ranks need the whole plan (olplan verify --config/--job)\n",
                  plan.content_hash().c_str(), plan.per_rank().rank());
      return 0;
    }
    absl::Status s = compiler::VerifyPlan(plan);
    if (!s.ok()) return Fail(s);
    std::printf("plan %s: verified (producers, transfers, collective order, deadlock simulation)\n", plan.content_hash().c_str());
    return 0;
  }
  plan_tool::ReportOptions options;
  options.ranks_per_node = a.ranks_per_node;
  if (a.command == "sbp") {
    std::vector<plan_tool::SbpDecision> decisions = plan_tool::SbpDecisions(plan);
    std::string out = a.json ? plan_tool::SbpJson(decisions, a.op) : plan_tool::SbpText(decisions, a.op);
    if (!a.op.empty() && out.find(a.op) == std::string::npos) {
      return Fail(absl::NotFoundError(absl::StrCat("the plan has no op named '", a.op, "' (olplan sbp lists them)")));
    }
    std::fputs(out.c_str(), stdout);
    return 0;
  }
  if (a.command == "simulate" || a.command == "html") {
    plan_tool::SimOptions sim_options;
    sim_options.steps = a.steps;
    sim_options.free_links = a.free_links;
    sim_options.processor_sharing = !a.no_sharing;
    sim_options.byte_sharing = !a.no_byte_sharing;
    sim_options.in_process = a.in_process;
    sim_options.return_messages = true;  // the runtime returns every transferred buffer by a message
    sim_options.cost = a.sim_cost;
    if (a.machine.has_value()) {
      // A device per rank (a GPU profile): ranks never share compute.
      if (a.machine->device_per_rank) sim_options.processor_sharing = false;
      sim_options.step_overhead_seconds = a.machine->step_overhead_seconds;
      sim_options.wakeup_seconds = a.machine->wakeup_seconds;
      sim_options.cache_bytes = a.machine->cache_bytes;
      sim_options.llc_bytes = a.machine->llc_bytes;
      sim_options.return_message_seconds = a.machine->same_node_message_seconds;
      if (a.machine->same_node_small_bytes_per_second > 0 && a.machine->same_node_small_message_bytes > 0) {
        sim_options.same_node_small_bytes_per_second = a.machine->same_node_small_bytes_per_second;
        sim_options.same_node_small_message_bytes = a.machine->same_node_small_message_bytes;
      }
      if (a.machine->cores > 0 && a.machine->gemm_threads > 0) {  // core-aware sharing
        sim_options.cores_per_node = a.machine->cores;
        sim_options.profile_gemm_threads = a.machine->gemm_threads;
        // In one process: the process's BLAS threads (OPENBLAS_NUM_THREADS; the truthfulness
        // bench runs multi-rank jobs with 1); under olrun each rank gets its share of the
        // node's cores, as olrun sets it.
        const int32_t ranks_here = std::max(1, std::min(a.ranks_per_node, plan.world_size()));
        sim_options.gemm_threads = a.blas_threads > 0  ? a.blas_threads
                                   : a.in_process      ? plan_tool::BlasThreadsFromEnv(a.machine->cores)
                                                       : std::max(1, a.machine->cores / ranks_here);
      }
    }
    if (a.machine.has_value() && job.graph != nullptr && !a.profile_sbp) {
      // Price the plan's ops with the profile: the same job compiled with the profile's costs
      // gives every op's compute seconds per SBP signature; take the one this plan chose.
      compiler::CompileOptions priced = train::CompileOptionsFor(job.trainer);
      priced.world_size = a.world;
      priced.cost = a.sim_cost;
      priced.verify_plan = false;
      absl::StatusOr<PlanProto> calibrated = compiler::Compile(compiler::Graph(*job.graph), priced);
      if (calibrated.ok()) sim_options.op_compute_seconds = plan_tool::OpSecondsFor(plan, *calibrated);
    }
    sim_options.cost.ranks_per_node = a.ranks_per_node;
    int64_t tasks = 0;
    for (const RankPlanProto& r : plan.rank_plans()) tasks += r.tasks_size();
    sim_options.record_trace = tasks * a.steps * std::max<int64_t>(1, plan.pieces_per_step()) < 20000000;
    absl::StatusOr<plan_tool::Simulation> sim = plan_tool::SimulatePlanTime(plan, sim_options);
    if (a.command == "html") {
      absl::StatusOr<plan_tool::PlanSummary> summary = plan_tool::Summarize(plan, options);
      if (!summary.ok()) return Fail(summary.status());
      if (!sim.ok()) std::fprintf(stderr, "olplan: no timeline: %s\n", std::string(sim.status().message()).c_str());
      const std::string out = a.out_path.empty() ? "olplan.html" : a.out_path;
      const std::string page = plan_tool::HtmlPage(*summary, plan_tool::SbpDecisions(plan), sim.ok() ? &*sim : nullptr);
      if (absl::Status s = train::WriteFileAtomically(out, page); !s.ok()) return Fail(s);
      std::printf("wrote %s (%s; open it in a browser)\n", out.c_str(), plan_tool::HumanBytes(static_cast<double>(page.size())).c_str());
      return 0;
    }
    if (!sim.ok()) return Fail(sim.status());
    if (!a.trace_dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(a.trace_dir, ec);
      if (ec) return Fail(absl::InvalidArgumentError(absl::StrCat("--trace-dir ", a.trace_dir, ": ", ec.message())));
      for (int32_t rank : plan.ranks()) {
        const std::string path = absl::StrCat(a.trace_dir, "/predicted.rank", rank, ".json");
        if (absl::Status s = train::WriteFileAtomically(path, sim->TraceJson(rank)); !s.ok()) return Fail(s);
      }
      std::fprintf(stderr, "olplan: wrote %d predicted traces to %s\n", plan.ranks_size(), a.trace_dir.c_str());
    }
    std::fputs((a.json ? plan_tool::SimulationJson(*sim) : plan_tool::SimulationText(*sim)).c_str(), stdout);
    return 0;
  }
  if (a.command == "boxing") {
    std::vector<plan_tool::BoxingEntry> entries = plan_tool::BoxingEntries(plan);
    std::fputs((a.json ? plan_tool::BoxingJson(entries) : plan_tool::BoxingText(entries)).c_str(), stdout);
    if (!a.json) std::fputs(plan_tool::BucketText(plan).c_str(), stdout);
    if (!a.json) std::fputs(plan_tool::IssueOrderText(plan).c_str(), stdout);
    if (!a.json && plan.boxing_choices_size() > 0) {  // --boxing=auto: how each transition was lowered
      std::printf("lowering (--boxing=auto), point-to-point vs one collective per group:\n");
      for (const BoxingChoiceProto& c : plan.boxing_choices()) {
        std::printf("  %s x%d: %s (point-to-point %.1f us, collective %s)\n", c.transition().c_str(),
                    static_cast<int>(c.uses()), c.chosen().c_str(), c.point_to_point_seconds() * 1e6,
                    c.collective_seconds() > 0 ? absl::StrFormat("%.1f us", c.collective_seconds() * 1e6).c_str()
                                               : "none");
      }
    }
    return 0;
  }
  absl::StatusOr<plan_tool::PlanSummary> summary = plan_tool::Summarize(plan, options);
  if (!summary.ok()) return Fail(summary.status());
  if (a.command == "summary") {
    std::fputs((a.json ? plan_tool::SummaryJson(*summary) : plan_tool::SummaryText(*summary)).c_str(), stdout);
    return 0;
  }
  // memory
  const bool fits = device_memory <= 0 || summary->peak_device_bytes <= device_memory;
  if (a.json) {
    std::string body = plan_tool::MemoryJson(*summary, device_memory);
    if (!fits) {
      body.pop_back();  // newline
      body.pop_back();  // closing brace
      body += ",\"levers\":" + Levers(job, registry, a, device_memory, true) + "}\n";
    }
    std::fputs(body.c_str(), stdout);
  } else {
    std::fputs(plan_tool::MemoryText(*summary, device_memory).c_str(), stdout);
    if (!fits) std::fputs(Levers(job, registry, a, device_memory, false).c_str(), stdout);
  }
  return 0;
}

}  // namespace
}  // namespace oneflow_like

int main(int argc, char** argv) { return oneflow_like::Main(argc, argv); }
