// The same-node link of olplan's profile, measured (calibrate_link.cc has the method):
//   ASSIGN_OR_RETURN(LinkMeasurement m, MeasureLoopbackLink(2000, int64_t{256} << 20));
//   profile.same_node_alpha_seconds = m.alpha_seconds;
#ifndef ONEFLOW_LIKE_TOOLS_PLAN_CALIBRATE_LINK_H_
#define ONEFLOW_LIKE_TOOLS_PLAN_CALIBRATE_LINK_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace oneflow_like {
namespace plan_tool {

// The message sizes of the two bandwidth measurements.
inline constexpr int64_t kLargeMessageBytes = int64_t{4} << 20;
inline constexpr int64_t kSmallMessageBytes = int64_t{256} << 10;

struct LinkMeasurement {
  double alpha_seconds = 0;           // one-way latency of a small message
  double bytes_per_second = 0;        // sustained payload bandwidth of kLargeMessageBytes messages
  double small_bytes_per_second = 0;  // a lone kSmallMessageBytes message: bytes / (its time - alpha)
  // A stream of 64-byte messages one way: seconds per message (the sender's and the receiver's
  // work on one message, overlapped across messages, without the wait for a sleeping receiver
  // that alpha includes).
  double message_seconds = 0;
};

// Two TcpTransports of this process over 127.0.0.1: `pings` 64-byte round trips, pings / 4
// (at least 20) round trips of a 256 KiB ping and a 64-byte pong, a stream of `pings` * 10
// 64-byte messages, then `bytes` of 4 MiB messages. Errors: a transport that cannot listen / connect, or a run past its timeout.
absl::StatusOr<LinkMeasurement> MeasureLoopbackLink(int pings, int64_t bytes);

}  // namespace plan_tool
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_TOOLS_PLAN_CALIBRATE_LINK_H_
