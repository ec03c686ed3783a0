// olplan calibrate, the link part: the data-plane transport between two ranks of one node
// (comm/TcpTransport over 127.0.0.1, as olrun's ranks use it), measured as the cost model's
// alpha-beta pair for the same-node link class:
//   alpha  half the median round trip of a 64-byte ping-pong (each reply sent from the
//          receiver, so only the link and the wake-ups are timed);
//   beta   1 / the bandwidth of 4 MiB messages, 64 MiB in flight at most, from the first send
//          to the last byte delivered.
#include "tools/plan/calibrate_link.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "oneflow_like/comm/tcp_transport.h"

namespace oneflow_like {
namespace plan_tool {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

absl::StatusOr<LinkMeasurement> MeasureLoopbackLink(int pings, int64_t bytes) {
  std::unique_ptr<comm::TcpTransport> ranks[2];
  for (int r = 0; r < 2; ++r) {
    comm::TcpTransportOptions options;
    options.rank = r;
    options.world_size = 2;
    options.job_token = "olplan-calibrate";
    ASSIGN_OR_RETURN(ranks[r], comm::TcpTransport::Listen(options));
    ranks[r]->SetErrorHandler([](const absl::Status&) {});  // tearing one down breaks the other: expected
  }
  const std::vector<std::string> endpoints = {ranks[0]->endpoint(), ranks[1]->endpoint()};
  auto connected = std::async(std::launch::async, [&] { return ranks[1]->Connect(endpoints); });
  RETURN_IF_ERROR(ranks[0]->Connect(endpoints));
  RETURN_IF_ERROR(connected.get());

  std::mutex mu;
  std::condition_variable changed;
  bool ponging = true;
  int pongs = 0;
  int64_t delivered = 0;
  std::vector<double> round_trips;
  Clock::time_point sent_at;
  const std::string ping(64, 'p');
  ranks[1]->SetReceiver([&](Rank, absl::string_view payload) {
    std::lock_guard<std::mutex> lock(mu);
    if (ponging) {
      (void)ranks[1]->Send(Rank(0), payload);
      return;
    }
    delivered += static_cast<int64_t>(payload.size());
    changed.notify_all();
  });
  ranks[0]->SetReceiver([&](Rank, absl::string_view) {  // a pong: time it, send the next ping
    const Clock::time_point now = Clock::now();
    std::lock_guard<std::mutex> lock(mu);
    round_trips.push_back(std::chrono::duration<double>(now - sent_at).count());
    if (++pongs < pings) {
      sent_at = Clock::now();
      (void)ranks[0]->Send(Rank(1), ping);
    } else {
      changed.notify_all();
    }
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    sent_at = Clock::now();
  }
  RETURN_IF_ERROR(ranks[0]->Send(Rank(1), ping));
  {
    std::unique_lock<std::mutex> lock(mu);
    if (!changed.wait_for(lock, std::chrono::seconds(30), [&] { return pongs >= pings; })) {
      return absl::DeadlineExceededError("olplan calibrate: the loopback ping-pong did not finish in 30 s");
    }
    ponging = false;
  }
  LinkMeasurement m;
  std::sort(round_trips.begin(), round_trips.end());
  m.alpha_seconds = round_trips[round_trips.size() / 2] / 2;

  constexpr int64_t kMessage = int64_t{4} << 20, kWindow = int64_t{64} << 20;
  const std::string message(kMessage, 'x');
  const Clock::time_point start = Clock::now();
  int64_t sent = 0;
  while (sent < bytes) {
    {
      std::unique_lock<std::mutex> lock(mu);
      changed.wait(lock, [&] { return sent - delivered < kWindow; });
    }
    RETURN_IF_ERROR(ranks[0]->Send(Rank(1), message));
    sent += kMessage;
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    if (!changed.wait_for(lock, std::chrono::seconds(60), [&] { return delivered >= sent; })) {
      return absl::DeadlineExceededError("olplan calibrate: the loopback bandwidth run did not finish in 60 s");
    }
  }
  m.bytes_per_second = static_cast<double>(sent) / std::chrono::duration<double>(Clock::now() - start).count();
  for (auto& r : ranks) r->SetReceiver([](Rank, absl::string_view) {});
  return m;
}

}  // namespace plan_tool
}  // namespace oneflow_like
