// olplan calibrate, the link part: the data-plane transport between two ranks of one node
// (comm/TcpTransport over 127.0.0.1, as olrun's ranks use it), measured as the cost model's
// alpha-beta pair for the same-node link class:
//   alpha  half the median round trip of a 64-byte ping-pong (each reply sent from the
//          receiver, so only the link and the wake-ups are timed);
//   beta   1 / the bandwidth of 4 MiB messages, 64 MiB in flight at most, from the first send
//          to the last byte delivered;
//   and a lone 256 KiB message: the median round trip of a 256 KiB ping answered by 64 bytes,
//          less the two alphas, gives its bytes' rate (the socket buffer takes such a message at
//          once; link_price.h prices the sizes between it and the 4 MiB stream).
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
  int pongs = 0, pings_wanted = 0;
  int64_t delivered = 0;
  std::vector<double> round_trips;
  Clock::time_point sent_at;
  std::string ping;
  const std::string pong(64, 'q');
  ranks[1]->SetReceiver([&](Rank, absl::string_view payload) {  // a ping: answer with 64 bytes
    std::lock_guard<std::mutex> lock(mu);
    if (ponging) {
      (void)ranks[1]->Send(Rank(0), pong);
      return;
    }
    delivered += static_cast<int64_t>(payload.size());
    changed.notify_all();
  });
  ranks[0]->SetReceiver([&](Rank, absl::string_view) {  // a pong: time it, send the next ping
    const Clock::time_point now = Clock::now();
    std::lock_guard<std::mutex> lock(mu);
    round_trips.push_back(std::chrono::duration<double>(now - sent_at).count());
    if (++pongs < pings_wanted) {
      sent_at = Clock::now();
      (void)ranks[0]->Send(Rank(1), ping);
    } else {
      changed.notify_all();
    }
  });
  // The median round trip of `count` pings of `ping_bytes`, each answered with 64 bytes.
  auto round_trip = [&](int64_t ping_bytes, int count) -> absl::StatusOr<double> {
    {
      std::lock_guard<std::mutex> lock(mu);
      ping.assign(ping_bytes, 'p');
      pongs = 0;
      pings_wanted = count;
      round_trips.clear();
      sent_at = Clock::now();
    }
    RETURN_IF_ERROR(ranks[0]->Send(Rank(1), ping));
    std::unique_lock<std::mutex> lock(mu);
    if (!changed.wait_for(lock, std::chrono::seconds(30), [&] { return pongs >= pings_wanted; })) {
      return absl::DeadlineExceededError("olplan calibrate: the loopback ping-pong did not finish in 30 s");
    }
    std::sort(round_trips.begin(), round_trips.end());
    return round_trips[round_trips.size() / 2];
  };
  LinkMeasurement m;
  ASSIGN_OR_RETURN(const double small_trip, round_trip(64, pings));
  m.alpha_seconds = small_trip / 2;
  // A lone message of kSmallMessageBytes: its one-way time is the round trip less the 64-byte
  // pong's alpha; beyond its own alpha, the bytes moved at small_bytes_per_second.
  ASSIGN_OR_RETURN(const double message_trip, round_trip(kSmallMessageBytes, std::max(20, pings / 4)));
  const double message_bytes_seconds = message_trip - 2 * m.alpha_seconds;
  m.small_bytes_per_second = message_bytes_seconds > 0 ? static_cast<double>(kSmallMessageBytes) / message_bytes_seconds : 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    ponging = false;
  }

  // `total` bytes in messages of `message` bytes, at most kWindow in flight: payload bytes per
  // second from the first send to the last byte delivered.
  constexpr int64_t kWindow = int64_t{64} << 20;
  auto bandwidth = [&](int64_t message_bytes, int64_t total) -> absl::StatusOr<double> {
    const std::string message(message_bytes, 'x');
    {
      std::lock_guard<std::mutex> lock(mu);
      delivered = 0;
    }
    const Clock::time_point start = Clock::now();
    int64_t sent = 0;
    while (sent < total) {
      {
        std::unique_lock<std::mutex> lock(mu);
        changed.wait(lock, [&] { return sent - delivered < kWindow; });
      }
      RETURN_IF_ERROR(ranks[0]->Send(Rank(1), message));
      sent += message_bytes;
    }
    std::unique_lock<std::mutex> lock(mu);
    if (!changed.wait_for(lock, std::chrono::seconds(60), [&] { return delivered >= sent; })) {
      return absl::DeadlineExceededError("olplan calibrate: the loopback bandwidth run did not finish in 60 s");
    }
    return static_cast<double>(sent) / std::chrono::duration<double>(Clock::now() - start).count();
  };
  ASSIGN_OR_RETURN(const double stream_64, bandwidth(64, int64_t{64} * pings * 10));
  m.message_seconds = stream_64 > 0 ? 64.0 / stream_64 : 0;
  ASSIGN_OR_RETURN(m.bytes_per_second, bandwidth(kLargeMessageBytes, bytes));
  for (auto& r : ranks) r->SetReceiver([](Rank, absl::string_view) {});
  return m;
}

}  // namespace plan_tool
}  // namespace oneflow_like
