// transport_bench: throughput and latency of comm/TcpTransport between two ranks in ONE process
// over loopback (127.0.0.1), to compare with iperf3 on the same machine (transport_bench.sh);
// with --shm 1 the same figures for comm/ShmTransport (shared-memory rings, --ring_megabytes
// each, 16 by default; what oltrain uses between the ranks of a node).
//
//   (1) throughput: rank 0 sends messages of 1 KiB, 64 KiB, 1 MiB, 16 MiB and 64 MiB to rank 1,
//       keeping a window of at most --window_bytes in flight (the receiver counts delivered
//       bytes; the sender waits while sent - delivered > window). GB/s = payload bytes / time
//       from the first Send until the last byte is delivered (1 GB = 1e9 bytes). Every byte is
//       CRC-checked on the way (TCP), exactly as in a job.
//       Also as the actor runtime sends: a one-slot register with SendRegistered (a 29-byte
//       prefix, the payload written from where it lies, never waiting), and a multi-slot one
//       copied once into a buffer from TakeBuffer and handed over with SendOwned.
//   (2) latency: 64-byte ping-pong driven by the receivers themselves (rank 1 answers every
//       ping from its receiver, rank 0 sends the next ping from its receiver), so no thread
//       hand-off of the caller is measured; round-trip microseconds, median and p99.
// Each figure is the median over --rounds rounds. Machine-readable lines start with "result".
//
// Usage (build optimized):
//   bazel run -c opt //tools/bench:transport_bench -- [--rounds 3] [--megabytes 1024]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "oneflow_like/comm/shm_transport.h"
#include "oneflow_like/comm/tcp_transport.h"

namespace oneflow_like {
namespace comm {
namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  int rounds = 3;
  int64_t megabytes = 1024;                  // payload per size and round (1 KiB: a tenth)
  int64_t window_bytes = int64_t{64} << 20;  // in flight
  int pings = 5000;
  bool shm = false;                           // ShmTransport instead of TcpTransport
  int64_t ring_bytes = int64_t{16} << 20;
  std::vector<size_t> sizes = {size_t{1} << 10, size_t{64} << 10, size_t{1} << 20, size_t{16} << 20, size_t{64} << 20};
};

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

void Check(const absl::Status& status, const char* what) {
  if (!status.ok()) {
    std::fprintf(stderr, "transport_bench: %s: %s\n", what, status.ToString().c_str());
    std::exit(1);
  }
}

class Bench {
 public:
  explicit Bench(const Flags& flags) : flags_(flags) {
    if (flags.shm) {
      ConnectShm();
    } else {
      ConnectTcp();
    }
    ranks_[1]->SetReceiver([this](Rank, absl::string_view payload) {
      if (ponging_) {
        Check(ranks_[1]->Send(Rank(0), payload), "pong");
        return;
      }
      delivered_bytes_.fetch_add(static_cast<int64_t>(payload.size()), std::memory_order_release);
      std::lock_guard<std::mutex> lock(mu_);
      changed_.notify_all();
    });
    ranks_[0]->SetReceiver([this](Rank, absl::string_view payload) { OnPong(payload); });
  }

  ~Bench() {
    // Tearing down one rank breaks the other's link: expected here, so not reported.
    for (int r = 0; r < 2; ++r) {
      if (tcp_[r] != nullptr) tcp_[r]->SetErrorHandler([](const absl::Status&) {});
      if (shm_[r] != nullptr) shm_[r]->SetErrorHandler([](const absl::Status&) {});
    }
  }

  void ConnectTcp() {
    for (int r = 0; r < 2; ++r) {
      TcpTransportOptions options;
      options.rank = r;
      options.world_size = 2;
      options.job_token = "transport-bench";
      absl::StatusOr<std::unique_ptr<TcpTransport>> t = TcpTransport::Listen(options);
      Check(t.status(), "listen");
      tcp_[r] = t->get();
      ranks_[r] = std::move(*t);
    }
    const std::vector<std::string> endpoints = {tcp_[0]->endpoint(), tcp_[1]->endpoint()};
    auto connected = std::async(std::launch::async, [&] { return tcp_[1]->Connect(endpoints); });
    Check(tcp_[0]->Connect(endpoints), "connect rank 0");
    Check(connected.get(), "connect rank 1");
  }

  void ConnectShm() {
    for (int r = 0; r < 2; ++r) {
      ShmTransportOptions options;
      options.rank = r;
      options.world_size = 2;
      options.peers = {1 - r};
      options.job_token = "transport-bench";
      options.ring_bytes = static_cast<uint64_t>(flags_.ring_bytes);
      absl::StatusOr<std::unique_ptr<ShmTransport>> t = ShmTransport::Listen(options);
      Check(t.status(), "listen");
      shm_[r] = t->get();
      ranks_[r] = std::move(*t);
    }
    const std::vector<std::string> endpoints = {shm_[0]->endpoint(), shm_[1]->endpoint()};
    auto connected = std::async(std::launch::async, [&] { return shm_[1]->Connect(endpoints); });
    Check(shm_[0]->Connect(endpoints), "connect rank 0");
    Check(connected.get(), "connect rank 1");
  }

  // GB/s for one round of `size`-byte messages; mode 0: Send, 1: copy + SendOwned, 2:
  // SendRegistered (the runtime's two paths).
  double Throughput(size_t size, int mode = 0) {
    const std::string payload(size, 'x');
    int64_t total = flags_.megabytes << 20;
    if (size < 4096) total /= 10;
    const int64_t messages = std::max<int64_t>(4, total / static_cast<int64_t>(size));
    const int64_t window = std::max<int64_t>(flags_.window_bytes, 2 * static_cast<int64_t>(size));
    delivered_bytes_.store(0);
    const Clock::time_point start = Clock::now();
    int64_t sent = 0;
    for (int64_t i = 0; i < messages; ++i) {
      if (sent - delivered_bytes_.load(std::memory_order_acquire) > window) {
        std::unique_lock<std::mutex> lock(mu_);
        changed_.wait(lock, [&] { return sent - delivered_bytes_.load(std::memory_order_acquire) <= window; });
      }
      if (mode == 1) {
        std::string wire = ranks_[0]->TakeBuffer(size);
        wire.append(payload);
        Check(ranks_[0]->SendOwned(Rank(1), std::move(wire)), "send");
      } else if (mode == 2) {  // the payload stays unchanged until delivered: the contract holds
        Check(ranks_[0]->SendRegistered(Rank(1), absl::string_view(payload).substr(0, 29),
                                        absl::string_view(payload).substr(std::min<size_t>(29, size))),
              "send");
      } else {
        Check(ranks_[0]->Send(Rank(1), payload), "send");
      }
      sent += static_cast<int64_t>(size);
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      changed_.wait(lock, [&] { return delivered_bytes_.load(std::memory_order_acquire) == sent; });
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return static_cast<double>(sent) / seconds / 1e9;
  }

  // Round-trip times of 64-byte ping-pongs, in microseconds.
  std::vector<double> PingPong() {
    round_trips_.clear();
    pings_left_ = flags_.pings;
    ponging_ = true;
    done_ = false;
    last_ = Clock::now();
    Check(ranks_[0]->Send(Rank(1), std::string(64, 'p')), "ping");
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return done_; });
    ponging_ = false;
    return round_trips_;
  }

 private:
  void OnPong(absl::string_view payload) {  // rank 0's I/O thread
    const Clock::time_point now = Clock::now();
    round_trips_.push_back(std::chrono::duration<double, std::micro>(now - last_).count());
    last_ = now;
    if (--pings_left_ > 0) {
      Check(ranks_[0]->Send(Rank(1), payload), "ping");
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    changed_.notify_all();
  }

  const Flags flags_;
  std::unique_ptr<Transport> ranks_[2];
  TcpTransport* tcp_[2] = {nullptr, nullptr};
  ShmTransport* shm_[2] = {nullptr, nullptr};
  std::atomic<int64_t> delivered_bytes_{0};
  std::mutex mu_;
  std::condition_variable changed_;
  std::atomic<bool> ponging_{false};
  // Ping-pong state, touched by rank 0's I/O thread while a ping-pong runs.
  std::vector<double> round_trips_;
  int pings_left_ = 0;
  Clock::time_point last_;
  bool done_ = false;  // guarded by mu_
};

int Main(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string name = argv[i];
    const int64_t value = std::atoll(argv[i + 1]);
    if (name == "--rounds") flags.rounds = static_cast<int>(value);
    else if (name == "--megabytes") flags.megabytes = value;
    else if (name == "--window_megabytes") flags.window_bytes = value << 20;
    else if (name == "--pings") flags.pings = static_cast<int>(value);
    else if (name == "--size") flags.sizes = {static_cast<size_t>(value)};
    else if (name == "--shm") flags.shm = value != 0;
    else if (name == "--ring_megabytes") flags.ring_bytes = value << 20;
    else {
      std::fprintf(stderr, "usage: transport_bench [--rounds N] [--megabytes M] [--window_megabytes W] [--pings P] "
                           "[--size BYTES] [--shm 0|1] [--ring_megabytes R]\n");
      return 2;
    }
  }
  Bench bench(flags);
  bench.Throughput(1 << 20);  // warm-up
  if (flags.shm) {
    std::printf("ShmTransport (%lld MiB rings), 2 ranks in one process, median of %d rounds\n",
                static_cast<long long>(flags.ring_bytes >> 20), flags.rounds);
  } else {
    std::printf("TcpTransport, 2 ranks in one process over 127.0.0.1, median of %d rounds\n", flags.rounds);
  }
  for (size_t size : flags.sizes) {
    std::vector<double> rounds;
    for (int r = 0; r < flags.rounds; ++r) rounds.push_back(bench.Throughput(size));
    std::printf("result throughput %zu %.3f   (%zu KiB messages: %.2f GB/s; rounds %.2f .. %.2f)\n", size,
                Median(rounds), size >> 10, Median(rounds), *std::min_element(rounds.begin(), rounds.end()),
                *std::max_element(rounds.begin(), rounds.end()));
    std::fflush(stdout);
  }
  for (size_t size : flags.sizes) {
    std::vector<double> rounds;
    for (int r = 0; r < flags.rounds; ++r) rounds.push_back(bench.Throughput(size, /*mode=*/1));
    std::printf("result owned_throughput %zu %.3f   (%zu KiB messages, copy + SendOwned as the runtime: %.2f GB/s)\n",
                size, Median(rounds), size >> 10, Median(rounds));
    rounds.clear();
    for (int r = 0; r < flags.rounds; ++r) rounds.push_back(bench.Throughput(size, /*mode=*/2));
    std::printf("result registered_throughput %zu %.3f   (%zu KiB messages, SendRegistered: %.2f GB/s)\n", size,
                Median(rounds), size >> 10, Median(rounds));
    std::fflush(stdout);
  }
  std::vector<double> medians;
  std::vector<double> p99s;
  for (int r = 0; r < flags.rounds; ++r) {
    std::vector<double> trips = bench.PingPong();
    std::sort(trips.begin(), trips.end());
    medians.push_back(trips[trips.size() / 2]);
    p99s.push_back(trips[trips.size() * 99 / 100]);
  }
  std::printf("result latency_us %.1f %.1f   (64-byte round trip: median %.1f us, p99 %.1f us)\n", Median(medians),
              Median(p99s), Median(medians), Median(p99s));
  return 0;
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like

int main(int argc, char** argv) { return oneflow_like::comm::Main(argc, argv); }
