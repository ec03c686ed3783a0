// runtime_bench: overhead of the actor runtime (oneflow_like/actor) per act and per message,
// next to PyTorch's eager dispatch of a tiny op, measured in the same run.
//
//   (1) 1 thread : SOURCE -> `hops` TICK actors -> SINK, every task on stream 0, many pieces per
//       step (registers of count 2, so pieces pipeline). Acts per second = every act of the
//       runtime (source + ticks + sink, Runtime::progress()) / wall time of the step.
//   (2) 2 threads: the same chain with the actors alternating between streams 0 and 1.
//   (3) hop latency: ONE piece per step through a chain alternating between two threads
//       (a ping-pong), so exactly one actor works at a time; microseconds per hop = step time /
//       edges of the chain. The same on one thread gives the cost of a same-thread hop.
//   (4) reference: tools/bench/peers/bench_op_overhead.py (PyTorch eager, 1 thread; us per
//       in-place and out-of-place add on 16 floats), run via popen between our repetitions.
//
// TICK is the cheapest task type the runtime has: its body is an empty function; its registers
// are control-only (no slots), except the last tick's output, which carries the 1-float slot the
// SINK fetches. Each figure is the median over --rounds rounds; in each round the runtime
// figures and the PyTorch reference are measured one after another (machines here are shared
// and noisy; compare ratios). Goals (the "Actor runtime" issue): >= 1e6 acts/s on one thread,
// < 5 us per cross-thread hop.
//
// Usage (build optimized; a fastbuild binary measures -O0 code):
//   bazel run -c opt //tools/bench:runtime_bench -- [--rounds 3] [--no_torch] [--spin_polls N]
//       [--torch_script PATH]
// The peer script is found as --torch_script, else in the workspace under `bazel run`
// (BUILD_WORKSPACE_DIRECTORY), else in the binary's runfiles (a data dependency), else as
// tools/bench/peers/bench_op_overhead.py from the current directory (the repository root).
// --spin_polls sets RuntimeEnv.idle_spin_polls (polls of an empty mailbox before a thread
// sleeps; default: the runtime's default; 0 = sleep at once).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "oneflow_like/actor/runtime.h"
#include "oneflow_like/actor/test_plan_builder.h"
#include "oneflow_like/core/allocator.h"

namespace oneflow_like {
namespace actor {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

double Median(std::vector<double> xs) {
  if (xs.empty()) return 0;
  std::sort(xs.begin(), xs.end());
  const size_t n = xs.size();
  return n % 2 == 1 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}

// SOURCE (stream 0) -> tick 0 .. tick hops-1 -> SINK. With `two_streams`, task k of the chain
// (source = 0, sink = hops + 1) runs on stream k % 2, so every edge crosses threads.
PlanProto BuildChain(int hops, int64_t pieces, int32_t count, bool two_streams) {
  const TensorDesc one{DataType::kFloat32, Shape{1}};
  TestPlanBuilder b(/*world_size=*/1, pieces);
  auto stream = [&](int k) { return two_streams ? k % 2 : 0; };
  const int64_t x = b.AddRegister(0, "x", count, {one});
  b.AddSource(0, "x.source", "x", x);
  b.BindInput(0, "x", x, Shape{1});
  int64_t previous = x;
  for (int i = 0; i < hops; ++i) {
    const bool last = i + 1 == hops;
    const int64_t out = last ? b.AddRegister(0, "y", count, {one})
                             : b.AddRegister(0, absl::StrCat("t", i), count, {});  // control only
    b.AddTask(0, TaskProto::TICK, absl::StrCat("tick", i), {previous}, {out}, stream(i + 1));
    previous = out;
  }
  b.AddSink(0, "y.sink", "y", previous)->set_stream_id(stream(hops + 1));
  b.BindOutput(0, "y", previous, Shape{1});
  return b.Build();
}

// One Runtime over a chain plan; Step() feeds the pieces, runs one step and returns its seconds.
class ChainRunner {
 public:
  static std::unique_ptr<ChainRunner> Create(int hops, int64_t pieces, int32_t count, bool two_streams,
                                             int64_t spin_polls) {
    std::unique_ptr<ChainRunner> runner(new ChainRunner());
    runner->pieces_ = pieces;
    RuntimeEnv env;
    env.allocator = &runner->allocator_;
    if (spin_polls >= 0) env.idle_spin_polls = spin_polls;
    absl::StatusOr<std::unique_ptr<Runtime>> runtime =
        Runtime::Create(BuildChain(hops, pieces, count, two_streams), 0, std::move(env));
    if (!runtime.ok()) {
      std::fprintf(stderr, "Runtime::Create failed: %s\n", runtime.status().ToString().c_str());
      std::exit(1);
    }
    runner->runtime_ = *std::move(runtime);
    return runner;
  }

  // Returns {seconds, acts} of one step.
  std::pair<double, int64_t> Step() {
    Tensor piece(DataType::kFloat32, Shape{1});
    piece.data<float>()[0] = 1.0f;
    for (int64_t p = 0; p < pieces_; ++p) Check(runtime_->FeedShard("x", piece));
    const int64_t acts_before = runtime_->progress();
    const Clock::time_point begin = Clock::now();
    Check(runtime_->StartStep());
    // Poll without stealing a core from the actor threads (2 vCPUs).
    while (!runtime_->StepDone()) {
      Check(runtime_->status());
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    const double seconds = Seconds(begin, Clock::now());
    const int64_t acts = runtime_->progress() - acts_before;
    Check(runtime_->TakeFetched("y").status());
    return {seconds, acts};
  }

 private:
  ChainRunner() = default;
  static void Check(const absl::Status& status) {
    if (!status.ok()) {
      std::fprintf(stderr, "runtime_bench: %s\n", status.ToString().c_str());
      std::exit(1);
    }
  }
  CpuAllocator allocator_;
  std::unique_ptr<Runtime> runtime_;
  int64_t pieces_ = 1;
};

// Acts per second of one step of `runner` (one warm-up step on creation by the caller).
double ActsPerSecond(ChainRunner* runner) {
  const auto [seconds, acts] = runner->Step();
  return static_cast<double>(acts) / seconds;
}

// Microseconds per hop: `steps` one-piece steps, median step time / edges.
double MicrosPerHop(ChainRunner* runner, int hops, int steps) {
  std::vector<double> times;
  for (int s = 0; s < steps; ++s) times.push_back(runner->Step().first);
  return Median(times) * 1e6 / (hops + 1);
}

struct TorchResult {
  double inplace_us = 0, outofplace_us = 0, empty_loop_us = 0;
  bool ok = false;
};

// Where the PyTorch peer is (see the header); `flag` is --torch_script's value ("" if not given).
std::string PeerScript(const std::string& flag, const char* argv0) {
  if (!flag.empty()) return flag;
  const std::string relative = "tools/bench/peers/bench_op_overhead.py";
  std::vector<std::string> candidates;
  if (const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY")) {
    candidates.push_back(absl::StrCat(workspace, "/", relative));
  }
  candidates.push_back(absl::StrCat(argv0, ".runfiles/oneflow_like/", relative));
  for (const std::string& path : candidates) {
    if (access(path.c_str(), R_OK) == 0) return path;
  }
  return relative;
}

TorchResult RunTorch(const std::string& script, int reps) {
  TorchResult result;
  const std::string command = absl::StrCat("/usr/bin/python3 '", script,
                                           "' --threads 1 --n 1000 --warmup 5 --reps ", reps, " 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char line[1024];
  while (std::fgets(line, sizeof(line), pipe) != nullptr) {
    const char* median = std::strstr(line, "median=");
    if (std::strncmp(line, "RESULT", 6) != 0 || median == nullptr) continue;
    const double us = std::atof(median + 7);
    if (std::strstr(line, "variant=add_inplace") != nullptr) result.inplace_us = us;
    if (std::strstr(line, "variant=add_outofplace") != nullptr) result.outofplace_us = us;
    if (std::strstr(line, "variant=python_empty_loop") != nullptr) result.empty_loop_us = us;
  }
  result.ok = pclose(pipe) == 0 && result.inplace_us > 0;
  return result;
}

int Main(int argc, char** argv) {
  int rounds = 3;
  bool torch = true;
  int64_t spin_polls = -1;  // the runtime's default
  std::string torch_script;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--spin_polls") == 0 && i + 1 < argc) spin_polls = std::atoll(argv[++i]);
    if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = std::max(1, std::atoi(argv[++i]));
    if (std::strcmp(argv[i], "--no_torch") == 0) torch = false;
    if (std::strcmp(argv[i], "--torch_script") == 0 && i + 1 < argc) torch_script = argv[++i];
  }
  torch_script = PeerScript(torch_script, argv[0]);
  // Throughput chains: 64 ticks, enough pieces for ~1-2 s per step at a few million acts/s.
  constexpr int kChainHops = 64;
  constexpr int64_t kChainPieces = 60000;  // 60000 * 66 = 3.96M acts per step
  // Latency chains: one piece through 1000 hops, several steps.
  constexpr int kLatencyHops = 1000;
  constexpr int kLatencySteps = 100;

  auto one_thread = ChainRunner::Create(kChainHops, kChainPieces, /*count=*/2, /*two_streams=*/false, spin_polls);
  auto two_threads = ChainRunner::Create(kChainHops, kChainPieces, /*count=*/2, /*two_streams=*/true, spin_polls);
  auto ping_pong = ChainRunner::Create(kLatencyHops, /*pieces=*/1, /*count=*/1, /*two_streams=*/true, spin_polls);
  auto same_thread = ChainRunner::Create(kLatencyHops, /*pieces=*/1, /*count=*/1, /*two_streams=*/false, spin_polls);
  for (ChainRunner* r : {one_thread.get(), two_threads.get()}) r->Step();  // warm-up
  for (ChainRunner* r : {ping_pong.get(), same_thread.get()}) r->Step();

  std::vector<double> acts1, acts2, hop_cross, hop_same, torch_in, torch_out, torch_empty;
  for (int round = 0; round < rounds; ++round) {
    acts1.push_back(ActsPerSecond(one_thread.get()));
    acts2.push_back(ActsPerSecond(two_threads.get()));
    hop_cross.push_back(MicrosPerHop(ping_pong.get(), kLatencyHops, kLatencySteps));
    hop_same.push_back(MicrosPerHop(same_thread.get(), kLatencyHops, kLatencySteps));
    if (torch) {
      const TorchResult t = RunTorch(torch_script, /*reps=*/11);
      if (!t.ok) {
        std::printf("PyTorch reference %s failed (is /usr/bin/python3 with torch installed?); use --no_torch\n",
                    torch_script.c_str());
        torch = false;
      } else {
        torch_in.push_back(t.inplace_us);
        torch_out.push_back(t.outofplace_us);
        torch_empty.push_back(t.empty_loop_us);
      }
    }
    std::printf("round %d: 1-thread %.0f acts/s, 2-thread %.0f acts/s, cross-thread hop %.2f us, "
                "same-thread hop %.3f us",
                round + 1, acts1.back(), acts2.back(), hop_cross.back(), hop_same.back());
    if (torch) std::printf(", torch add_ %.3f us/op", torch_in.back());
    std::printf("\n");
    std::fflush(stdout);
  }

  const double a1 = Median(acts1), a2 = Median(acts2), hc = Median(hop_cross), hs = Median(hop_same);
  const double us1 = 1e6 / a1, us2 = 1e6 / a2;
  std::printf("\nidle_spin_polls: %s\n", spin_polls < 0 ? "runtime default" : std::to_string(spin_polls).c_str());
  std::printf("actor runtime vs PyTorch eager, median of %d rounds (TICK chains of %d actors, %lld pieces; "
              "latency: %d hops x %d steps of 1 piece)\n",
              rounds, kChainHops + 2, static_cast<long long>(kChainPieces), kLatencyHops, kLatencySteps);
  std::printf("%-44s %14s %12s %10s\n", "measure", "value", "us/event", "goal");
  std::printf("%-44s %14.0f %12.3f %10s %s\n", "(1) acts/s, 1 thread (1 stream)", a1, us1, ">=1e6",
              a1 >= 1e6 ? "met" : "MISSED");
  std::printf("%-44s %14.0f %12.3f %10s\n", "(2) acts/s, 2 threads (alternating streams)", a2, us2, "");
  std::printf("%-44s %14s %12.3f %10s %s\n", "(3) cross-thread hop latency (ping-pong)", "", hc, "<5 us",
              hc < 5 ? "met" : "MISSED");
  std::printf("%-44s %14s %12.3f %10s\n", "    same-thread hop latency (1 piece)", "", hs, "");
  if (!torch_in.empty()) {
    const double ti = Median(torch_in), to = Median(torch_out), te = Median(torch_empty);
    std::printf("%-44s %14s %12.3f %10s\n", "torch eager add_ on 16 floats (in-place)", "", ti, "");
    std::printf("%-44s %14s %12.3f %10s\n", "torch eager x + y on 16 floats (allocates)", "", to, "");
    std::printf("%-44s %14s %12.3f %10s\n", "python empty loop (interpreter share)", "", te, "");
    std::printf("\nratios (torch us/op divided by runtime us/event; > 1 = runtime cheaper):\n");
    std::printf("  act on 1 thread      vs torch add_: %.2fx   vs torch x+y: %.2fx\n", ti / us1, to / us1);
    std::printf("  act on 2 threads     vs torch add_: %.2fx   vs torch x+y: %.2fx\n", ti / us2, to / us2);
    std::printf("  cross-thread hop     vs torch add_: %.2fx   vs torch x+y: %.2fx\n", ti / hc, to / hc);
  }
  return 0;
}

}  // namespace
}  // namespace actor
}  // namespace oneflow_like

int main(int argc, char** argv) { return oneflow_like::actor::Main(argc, argv); }
