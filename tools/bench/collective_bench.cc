// collective_bench: all-reduce throughput of our gloo backend (comm/gloo_collective.h), one
// process per rank, to compare with torch.distributed's gloo backend (collective_bench_torch.py,
// same flags, same output) in the same run: collective_bench.sh runs both.
//
// Rendezvous is the job's own path: rank 0 starts a ControlServer on --port, every rank connects
// a ControlClient and the gloo backend meets through a ControlStore (as train/rank_executor.cc).
// For each size: --warmup untimed all-reduces, then --iters timed ones, float32 sums, in place
// (torch's all_reduce is in place too), each waited for before the next starts. After the first
// call every 4099th element is checked (sum over ranks of rank + 1); later calls multiply the
// values by the world size (finite for the iteration counts used here; speed does not care).
// Rank 0 prints one line per size:
//   result all_reduce <bytes> <median seconds> <algorithmic bandwidth bytes/s> <iters> <min seconds>
// algorithmic bandwidth = bytes / median time (the tensor size, not the bytes on the wire); the
// fastest call is there too (on a loaded machine it is the steadier estimate).
//
// Usage (build optimized; one process per rank):
//   collective_bench --rank 0 --world 2 --port 29600 [--host 127.0.0.1] [--sizes_mib 16,256]
//                    [--iters 20,5] [--warmup 2] [--timeout_ms 60000] [--out_of_place 0]
// --out_of_place 1: `in` and `out` are different buffers (the actor runtime's usual call; torch
// has no such call, so it is ours alone). In that mode values stay the first call's sums.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "oneflow_like/comm/control_plane.h"
#include "oneflow_like/comm/control_store.h"
#include "oneflow_like/comm/gloo_collective.h"

namespace oneflow_like {
namespace comm {
namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  int32_t rank = -1;
  int32_t world = 2;
  int32_t port = 0;
  std::string host = "127.0.0.1";
  std::vector<int64_t> sizes_mib = {16, 256};
  std::vector<int64_t> iters = {20, 5};  // one per size (the last repeats)
  int64_t warmup = 2;
  int64_t timeout_ms = 60000;
  bool out_of_place = false;  // our extra mode: `in` and `out` apart (torch's call is in place)
  GlooTransport transport = GlooOptions().transport;  // --gloo_transport ol | gloo_tcp
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "collective_bench: %s\n", what.c_str());
  std::exit(1);
}
void Check(const absl::Status& status, const char* what) {
  if (!status.ok()) Die(std::string(what) + ": " + status.ToString());
}

std::vector<int64_t> ParseList(const std::string& flag, const std::string& text) {
  std::vector<int64_t> values;
  for (absl::string_view piece : absl::StrSplit(text, ',')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(piece, &v) || v <= 0) Die("bad " + flag + " '" + text + "'");
    values.push_back(v);
  }
  return values;
}

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; i += 2) {
    const std::string name = argv[i];
    if (i + 1 >= argc) Die("flag " + name + " needs a value");
    const std::string value = argv[i + 1];
    int64_t number = 0;
    const bool numeric = absl::SimpleAtoi(value, &number);
    if (name == "--rank" && numeric) flags.rank = static_cast<int32_t>(number);
    else if (name == "--world" && numeric) flags.world = static_cast<int32_t>(number);
    else if (name == "--port" && numeric) flags.port = static_cast<int32_t>(number);
    else if (name == "--host") flags.host = value;
    else if (name == "--sizes_mib") flags.sizes_mib = ParseList(name, value);
    else if (name == "--iters") flags.iters = ParseList(name, value);
    else if (name == "--warmup" && numeric) flags.warmup = number;
    else if (name == "--timeout_ms" && numeric) flags.timeout_ms = number;
    else if (name == "--out_of_place" && numeric) flags.out_of_place = number != 0;
    else if (name == "--gloo_transport") {
      absl::StatusOr<GlooTransport> transport = ParseGlooTransport(value);
      Check(transport.status(), "--gloo_transport");
      flags.transport = *transport;
    }
    else Die("unknown flag or bad value: " + name + " " + value);
  }
  if (flags.rank < 0 || flags.rank >= flags.world || flags.port <= 0) Die("need --rank in [0, --world) and --port");
  return flags;
}

// 64-byte aligned, as the runtime's allocator (core/allocator.h) and torch's CPU allocator give.
using Buffer = std::unique_ptr<float[], decltype(&std::free)>;
Buffer Filled(int64_t count, float value) {
  const size_t bytes = (static_cast<size_t>(count) * sizeof(float) + 63) / 64 * 64;
  Buffer buffer(static_cast<float*>(std::aligned_alloc(64, bytes)), &std::free);
  if (buffer == nullptr) Die("out of memory");
  std::fill(buffer.get(), buffer.get() + count, value);
  return buffer;
}

// One all-reduce of `in` into `out` (the same buffer or not), waited for; its status.
absl::Status AllReduce(Communicator* comm, const float* in, float* out, int64_t count) {
  std::promise<absl::Status> done;
  comm->AllReduce(in, out, count, DataType::kFloat32, [&](const absl::Status& s) { done.set_value(s); });
  return done.get_future().get();
}

int Main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  ControlOptions options;
  options.master_address = flags.host;
  options.master_port = flags.port;
  options.job_token = "collective-bench";
  options.world_size = flags.world;
  options.heartbeat_timeout_ms = flags.timeout_ms;
  std::unique_ptr<ControlServer> server;
  if (flags.rank == 0) {
    absl::StatusOr<std::unique_ptr<ControlServer>> started = ControlServer::Start(options);
    Check(started.status(), "control server");
    server = std::move(*started);
  }
  absl::StatusOr<std::unique_ptr<ControlClient>> client = ControlClient::Connect(options, flags.rank, flags.host);
  Check(client.status(), "control client");
  ControlStore store(client->get(), "bench/");
  GlooOptions gloo;
  gloo.hostname = flags.host;
  gloo.timeout_ms = flags.timeout_ms;
  gloo.transport = flags.transport;
  gloo.job_token = options.job_token;
  absl::StatusOr<std::unique_ptr<CollectiveBackend>> backend = CreateGlooBackend(&store, flags.rank, flags.world, gloo);
  Check(backend.status(), "gloo backend");
  std::vector<int32_t> group;
  for (int32_t r = 0; r < flags.world; ++r) group.push_back(r);
  absl::StatusOr<std::unique_ptr<Communicator>> comm = (*backend)->Connect(group, "bench");
  Check(comm.status(), "connect");

  float expect = 0;
  for (int32_t r = 0; r < flags.world; ++r) expect += static_cast<float>(r + 1);
  for (size_t k = 0; k < flags.sizes_mib.size(); ++k) {
    const int64_t bytes = flags.sizes_mib[k] << 20;
    const int64_t count = bytes / 4;
    const int64_t iters = flags.iters[std::min(k, flags.iters.size() - 1)];
    Buffer data = Filled(count, static_cast<float>(flags.rank + 1));
    Buffer input(nullptr, &std::free);
    if (flags.out_of_place) input = Filled(count, static_cast<float>(flags.rank + 1));
    const float* in = flags.out_of_place ? input.get() : data.get();
    Check(AllReduce(comm->get(), in, data.get(), count), "first all-reduce");
    for (int64_t i = 0; i < count; i += 4099) {
      if (data[i] != expect) Die("wrong sum at element " + std::to_string(i) + ": " + std::to_string(data[i]));
    }
    if (data[count - 1] != expect) Die("wrong sum at the last element");
    for (int64_t i = 1; i < flags.warmup; ++i) Check(AllReduce(comm->get(), in, data.get(), count), "warmup");
    std::vector<double> seconds;
    for (int64_t i = 0; i < iters; ++i) {
      const Clock::time_point start = Clock::now();
      Check(AllReduce(comm->get(), in, data.get(), count), "timed all-reduce");
      seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    std::sort(seconds.begin(), seconds.end());
    const double median = seconds[seconds.size() / 2];
    if (flags.rank == 0) {
      std::printf("result all_reduce %lld %.6f %.6e %lld %.6f\n", static_cast<long long>(bytes), median, bytes / median,
                  static_cast<long long>(iters), seconds.front());
      std::fflush(stdout);
    }
  }
  Check((*comm)->Flush(), "flush");
  Check((*client)->Barrier("done", flags.timeout_ms), "final barrier");
  return 0;
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like

int main(int argc, char** argv) { return oneflow_like::comm::Main(argc, argv); }
