#include "tools/plan/calibrate.h"

#include "tools/plan/calibrate_link.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "oneflow_like/actor/session.h"
#include "oneflow_like/compiler/driver/compile.h"
#include "oneflow_like/compiler/text_format.h"
#include "oneflow_like/core/eager.h"
#include "oneflow_like/train/checkpoint_format.h"

namespace oneflow_like {
namespace plan_tool {
namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

template <typename F>
double BestOf(int reps, F f) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const double t0 = Now();
    f();
    best = std::min(best, Now() - t0);
  }
  return best;
}

struct TimedPlan {
  double seconds_per_step = 0;
  int64_t tasks = 0;
};

// Compiles the one-input job `text` and times its steps in an actor::Session (best of 3 runs of
// `steps` steps after a warm-up run): feed `input` a [1] float, run, fetch `output` if not "".
absl::StatusOr<TimedPlan> TimeSteps(const OpRegistry& registry, const std::string& text, const std::string& input,
                                    const std::string& output, int steps) {
  ASSIGN_OR_RETURN(compiler::Graph graph, compiler::ParseGraph(text, registry));
  ASSIGN_OR_RETURN(PlanProto plan, compiler::Compile(std::move(graph)));
  ASSIGN_OR_RETURN(std::unique_ptr<actor::Session> session, actor::Session::Create(plan, &registry));
  Tensor x(DataType::kFloat32, Shape({1}));
  x.data<float>()[0] = 1;
  absl::Status status;
  auto run = [&] {
    for (int i = 0; i < steps && status.ok(); ++i) {
      status = session->Feed(input, x);
      if (status.ok()) status = session->RunStep();
      if (status.ok() && !output.empty()) status = session->Fetch(output).status();
    }
  };
  run();  // warm-up
  const double t = BestOf(3, run);
  RETURN_IF_ERROR(status);
  RETURN_IF_ERROR(session->Close());
  TimedPlan timed{t / steps, 0};
  for (const RankPlanProto& r : plan.rank_plans()) timed.tasks += r.tasks_size();
  return timed;
}

}  // namespace

absl::StatusOr<Profile> Calibrate(const OpRegistry& registry, const std::function<void(const std::string&)>& log) {
  Profile p;
  {  // GEMM through the registry's kernel
    const int64_t n = 1024;
    Tensor a(DataType::kFloat32, Shape({n, n})), b(DataType::kFloat32, Shape({n, n}));
    for (int64_t i = 0; i < n * n; ++i) {
      a.data<float>()[i] = static_cast<float>(i % 7) * 0.1f;
      b.data<float>()[i] = static_cast<float>(i % 5) * 0.1f;
    }
    absl::Status status;
    const double t = BestOf(5, [&] { status = RunOp(registry, "matmul", {a, b}).status(); });
    RETURN_IF_ERROR(status);
    p.flops_per_second = 2.0 * n * n * n / t;
    p.cores = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
    p.gemm_threads = BlasThreadsFromEnv(p.cores);
    log(absl::StrFormat("matmul 1024^3: %.1f GFLOP/s with %d BLAS thread(s) on %d core(s)", p.flops_per_second / 1e9,
                        p.gemm_threads, p.cores));
  }
  {  // memory
    const size_t bytes = size_t{128} << 20;
    std::vector<char> src(bytes, 1), dst(bytes, 0);
    const double t = BestOf(5, [&] { std::memcpy(dst.data(), src.data(), bytes); });
    p.memory_bytes_per_second = 2.0 * bytes / t;
    log(absl::StrFormat("memcpy 128 MiB: %.1f GB/s (read + write)", p.memory_bytes_per_second / 1e9));
  }
  {  // the caches: olplan simulate lets small memory-bound firings share no memory bandwidth
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE), l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l2 > 0) p.cache_bytes = l2;
    if (l3 > 0) p.llc_bytes = l3;
    log(absl::StrFormat("caches: L2 %d KiB per core, last level %d KiB", l2 > 0 ? l2 >> 10 : 0, l3 > 0 ? l3 >> 10 : 0));
  }
  {  // per-actor overhead: a chain of tiny ops in the runtime
    const int ops = 64;
    std::string text = "config(name=\"overhead\")\nx0 = input(shape=[1]) placement=cpu:[0]\n";
    for (int i = 1; i <= ops; ++i) absl::StrAppend(&text, "x", i, " = relu(x", i - 1, ")\n");
    absl::StrAppend(&text, "output(x", ops, ")\n");
    ASSIGN_OR_RETURN(TimedPlan chain, TimeSteps(registry, text, "x0", "", 50));
    p.task_overhead_seconds = chain.seconds_per_step / (ops + 2);
    log(absl::StrFormat("runtime: %.2f us per actor firing (%d-op chain)", p.task_overhead_seconds * 1e6, ops));
  }
  {  // per-step cost of the driver: a one-op plan, feed + run + fetch
    const std::string text = "config(name=\"step\")\nx = input(shape=[1]) placement=cpu:[0]\ny = relu(x)\noutput(y)\n";
    ASSIGN_OR_RETURN(TimedPlan step, TimeSteps(registry, text, "x", "y", 200));
    p.step_overhead_seconds = step.seconds_per_step;
    log(absl::StrFormat("driver: %.1f us per step (feed, run, fetch of a one-op plan)", p.step_overhead_seconds * 1e6));
  }
  {  // wake-up latency: a chain of tiny ops hopping between two ranks (threads) of one process
    const int hops = 32;
    std::string text = "config(name=\"hops\")\nx0 = input(shape=[1]) placement=cpu:[0]\n";
    for (int i = 1; i <= hops; ++i) absl::StrAppend(&text, "x", i, " = relu(x", i - 1, ") placement=cpu:[", i % 2, "]\n");
    absl::StrAppend(&text, "output(x", hops, ")\n");
    ASSIGN_OR_RETURN(TimedPlan chain, TimeSteps(registry, text, "x0", "", 50));
    // each hop: a transfer and a compute firing on the other rank, two thread wake-ups
    const double beyond = chain.seconds_per_step - p.step_overhead_seconds - chain.tasks * p.task_overhead_seconds;
    p.wakeup_seconds = std::max(0.0, beyond / (2.0 * hops));
    log(absl::StrFormat("wake-up: %.1f us per message to another thread (%d hops between 2 ranks)", p.wakeup_seconds * 1e6, hops));
  }
  {  // the same-node link: olrun's ranks talk over TcpTransport on 127.0.0.1
    ASSIGN_OR_RETURN(LinkMeasurement link, MeasureLoopbackLink(/*pings=*/2000, /*bytes=*/int64_t{512} << 20));
    p.same_node_alpha_seconds = link.alpha_seconds;
    p.same_node_bytes_per_second = link.bytes_per_second;
    p.same_node_small_bytes_per_second = link.small_bytes_per_second;
    p.same_node_small_message_bytes = kSmallMessageBytes;
    p.same_node_message_seconds = link.message_seconds;
    log(absl::StrFormat("same-node link (TCP over 127.0.0.1): %.1f us per message, %.2f GB/s in %d MiB messages, "
                        "%.2f GB/s in %d KiB messages, %.1f us per 64-byte message in a stream",
                        link.alpha_seconds * 1e6, link.bytes_per_second / 1e9, kLargeMessageBytes >> 20,
                        link.small_bytes_per_second / 1e9, kSmallMessageBytes >> 10, link.message_seconds * 1e6));
  }
  return p;
}

int32_t BlasThreadsFromEnv(int32_t cores) {
  for (const char* name : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"}) {
    const char* v = getenv(name);
    int32_t n = 0;
    if (v != nullptr && absl::SimpleAtoi(v, &n) && n > 0) return n;
  }
  return std::max(1, cores);
}

std::string DefaultProfilePath() {
  const char* home = getenv("HOME");
  return absl::StrCat(home != nullptr ? home : "/tmp", "/.cache/oneflow_like/olplan_profile.txt");
}

absl::Status SaveProfile(const Profile& p, const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  const std::string text = absl::StrFormat(
      "# olplan calibrate profile (host %s, unix time %d)\nflops_per_second = %.6g\nmemory_bytes_per_second = %.6g\n"
      "task_overhead_seconds = %.6g\nstep_overhead_seconds = %.6g\nwakeup_seconds = %.6g\ncores = %d\n"
      "gemm_threads = %d\n",
      host, static_cast<int64_t>(std::time(nullptr)), p.flops_per_second, p.memory_bytes_per_second, p.task_overhead_seconds,
      p.step_overhead_seconds, p.wakeup_seconds, p.cores, p.gemm_threads);
  std::string extra;  // the optional keys that are set
  for (const auto& [key, value] : {std::pair<const char*, double>{"cache_bytes", static_cast<double>(p.cache_bytes)},
                                   {"llc_bytes", static_cast<double>(p.llc_bytes)},
                                   {"same_node_alpha_seconds", p.same_node_alpha_seconds},
                                   {"same_node_bytes_per_second", p.same_node_bytes_per_second},
                                   {"same_node_small_bytes_per_second", p.same_node_small_bytes_per_second},
                                   {"same_node_message_seconds", p.same_node_message_seconds},
                                   {"same_node_small_message_bytes", static_cast<double>(p.same_node_small_message_bytes)},
                                   {"cross_node_alpha_seconds", p.cross_node_alpha_seconds},
                                   {"cross_node_bytes_per_second", p.cross_node_bytes_per_second},
                                   {"ranks_per_node", static_cast<double>(p.ranks_per_node)},
                                   {"device_per_rank", p.device_per_rank ? 1.0 : 0.0},
                                   {"host_device_alpha_seconds", p.host_device_alpha_seconds},
                                   {"host_device_bytes_per_second", p.host_device_bytes_per_second}}) {
    if (value > 0) absl::StrAppend(&extra, absl::StrFormat("%s = %.9g\n", key, value));
  }
  return train::WriteFileAtomically(path, text + extra);
}

absl::StatusOr<Profile> LoadProfile(const std::string& path) {
  if (!std::filesystem::exists(path)) return absl::NotFoundError(absl::StrCat(path, ": no profile (run `olplan calibrate`)"));
  ASSIGN_OR_RETURN(std::string text, train::ReadWholeFile(path));
  Profile p;
  p.path = path;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    double value = 0;
    if (kv.size() != 2 || !absl::SimpleAtod(absl::StripAsciiWhitespace(kv[1]), &value) || value < 0) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": expected 'key = non-negative number'"));
    }
    const std::string key(absl::StripAsciiWhitespace(kv[0]));
    if (key == "flops_per_second") p.flops_per_second = value;
    else if (key == "memory_bytes_per_second") p.memory_bytes_per_second = value;
    else if (key == "cache_bytes") p.cache_bytes = static_cast<int64_t>(value);
    else if (key == "llc_bytes") p.llc_bytes = static_cast<int64_t>(value);
    else if (key == "task_overhead_seconds") p.task_overhead_seconds = value;
    else if (key == "step_overhead_seconds") p.step_overhead_seconds = value;
    else if (key == "wakeup_seconds") p.wakeup_seconds = value;
    else if (key == "same_node_alpha_seconds") p.same_node_alpha_seconds = value;
    else if (key == "same_node_bytes_per_second") p.same_node_bytes_per_second = value;
    else if (key == "same_node_small_bytes_per_second") p.same_node_small_bytes_per_second = value;
    else if (key == "same_node_message_seconds") p.same_node_message_seconds = value;
    else if (key == "same_node_small_message_bytes") p.same_node_small_message_bytes = static_cast<int64_t>(value);
    else if (key == "cross_node_alpha_seconds") p.cross_node_alpha_seconds = value;
    else if (key == "cross_node_bytes_per_second") p.cross_node_bytes_per_second = value;
    else if (key == "cores" || key == "gemm_threads" || key == "ranks_per_node" || key == "device_per_rank") {
      if (value != static_cast<int32_t>(value) || value > 1 << 20 || (key == "device_per_rank" && value > 1)) {
        return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": ", key, " must be a whole number",
                                                       key == "device_per_rank" ? " (0 or 1)" : ""));
      }
      const int32_t whole = static_cast<int32_t>(value);
      if (key == "cores") p.cores = whole;
      else if (key == "gemm_threads") p.gemm_threads = whole;
      else if (key == "ranks_per_node") p.ranks_per_node = whole;
      else p.device_per_rank = whole == 1;
    }
    else if (key == "host_device_alpha_seconds") p.host_device_alpha_seconds = value;
    else if (key == "host_device_bytes_per_second") p.host_device_bytes_per_second = value;
    else return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": unknown key '", key, "'"));
  }
  return p;
}

void ApplyProfile(const Profile& p, compiler::CostConfig* cost) {
  if (p.flops_per_second > 0) cost->flops_per_second = p.flops_per_second;
  if (p.memory_bytes_per_second > 0) cost->memory_bytes_per_second = p.memory_bytes_per_second;
  if (p.task_overhead_seconds > 0) cost->task_overhead_seconds = p.task_overhead_seconds;
  if (p.same_node_alpha_seconds > 0) cost->same_node.alpha_seconds = p.same_node_alpha_seconds;
  if (p.same_node_bytes_per_second > 0) cost->same_node.beta_seconds_per_byte = 1.0 / p.same_node_bytes_per_second;
  if (p.cross_node_alpha_seconds > 0) cost->cross_node.alpha_seconds = p.cross_node_alpha_seconds;
  if (p.cross_node_bytes_per_second > 0) cost->cross_node.beta_seconds_per_byte = 1.0 / p.cross_node_bytes_per_second;
  if (p.ranks_per_node > 0) cost->ranks_per_node = p.ranks_per_node;
  // Host <-> device copies: the profile's link (PCIe on a GPU machine), else a host memcpy at the
  // measured rate (memory_bytes_per_second counts the bytes read and written: 2 per byte copied).
  if (p.host_device_alpha_seconds > 0) cost->host_device.alpha_seconds = p.host_device_alpha_seconds;
  if (p.host_device_bytes_per_second > 0) {
    cost->host_device.beta_seconds_per_byte = 1.0 / p.host_device_bytes_per_second;
  } else if (p.memory_bytes_per_second > 0) {
    cost->host_device.beta_seconds_per_byte = 2.0 / p.memory_bytes_per_second;
  }
}

}  // namespace plan_tool
}  // namespace oneflow_like
