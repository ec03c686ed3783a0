// The price of one message on a link measured at two message sizes (olplan calibrate measures
// the same-node TcpTransport so): a small message of `small_message_bytes` moves at
// `small_bytes_per_second`, a large one of `large_message_bytes` at `large_bytes_per_second`.
// Over loopback TCP the two differ by about 2x: a message the socket buffer takes at once
// (256 KiB) is copied in and out of cache-resident buffers, while a 4 MiB one exceeds the socket
// buffer (the sender blocks and the two sides take turns) and the caches. A message of B bytes:
//   alpha + min(B, S) / small_rate + max(0, B - S) x rest_beta
// where S = small_message_bytes and rest_beta is chosen so that a large message costs exactly
// alpha + L / large_rate: both measurements are reproduced, the price is continuous and grows
// with B. Without a small-message rate (an older or hand-written profile), it is the cost
// model's alpha + B / large_rate.
//
//   MessagePrice link{19e-6, 3.3e9, 4 << 20, 8.0e9, 256 << 10};
//   double s = link.Seconds(256 << 10);   // 19 us + 32.8 us
#ifndef ONEFLOW_LIKE_TOOLS_PLAN_LINK_PRICE_H_
#define ONEFLOW_LIKE_TOOLS_PLAN_LINK_PRICE_H_

#include <cstdint>

namespace oneflow_like {
namespace plan_tool {

struct MessagePrice {
  double alpha_seconds = 0;
  double large_bytes_per_second = 0;         // 0: the link is free of per-byte cost
  int64_t large_message_bytes = int64_t{4} << 20;
  double small_bytes_per_second = 0;         // 0: not measured (one rate for every size)
  int64_t small_message_bytes = int64_t{256} << 10;

  bool has_small_rate() const {
    return small_bytes_per_second > 0 && small_message_bytes > 0 && large_message_bytes > small_message_bytes;
  }
  // Seconds of one message of `bytes` (the formula above).
  double Seconds(int64_t bytes) const;
};

}  // namespace plan_tool
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_TOOLS_PLAN_LINK_PRICE_H_
