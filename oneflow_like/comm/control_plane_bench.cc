// Measures the control plane on 127.0.0.1: Add round trips, 4-rank barriers, and how long a
// crashed rank (closed socket) takes to reach another rank's failure handler.
//   bazel run //oneflow_like/comm:control_plane_bench
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "oneflow_like/comm/control_plane.h"
#include "oneflow_like/comm/control_testing.h"

namespace oneflow_like {
namespace comm {
namespace {

double MicrosecondsSince(std::chrono::steady_clock::time_point start, int operations) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / operations;
}

int Run() {
  ControlOptions options = testing_util::TestOptions(4);
  std::unique_ptr<ControlServer> server = ControlServer::Start(options).value();
  std::vector<std::unique_ptr<testing_util::TestRank>> ranks;
  for (int32_t rank = 0; rank < 4; ++rank) ranks.push_back(testing_util::JoinRank(options, *server, rank));

  constexpr int kAdds = 2000;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kAdds; ++i) (void)ranks[1]->client->Add("counter", 1);
  std::printf("Add round trip (1 thread): %.1f us\n", MicrosecondsSince(start, kAdds));

  constexpr int kBarriers = 200;
  start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (auto& rank : ranks) {
    threads.emplace_back([&rank] {
      for (int i = 0; i < kBarriers; ++i) (void)rank->client->Barrier("b", 10000);
    });
  }
  for (auto& thread : threads) thread.join();
  std::printf("4-rank barrier: %.1f us\n", MicrosecondsSince(start, kBarriers));

  const int fake = testing_util::RawConnect(server->port());
  ranks[3].reset();  // frees rank 3 for the fake
  testing_util::RawSend(fake, testing_util::HelloBytes(options.job_token, 3, "fake", 1));
  (void)testing_util::RawReadMessage(fake);
  start = std::chrono::steady_clock::now();
  close(fake);
  const absl::Status failure = ranks[0]->recorder.WaitForFailure();
  std::printf("closed connection -> failure handler: %.1f us (%s)\n", MicrosecondsSince(start, 1),
              std::string(failure.message()).c_str());
  return 0;
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like

int main() { return oneflow_like::comm::Run(); }
