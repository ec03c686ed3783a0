// The in-process loopback transport: N ranks inside one process (tests, single-process
// multi-rank runs). A LoopbackHub owns one Transport endpoint per rank; Send numbers the
// payload on its edge, checks the sequence on the receiving side and calls the destination
// rank's receiver on the sender's thread with the sender's bytes (no copy), so per-edge order is
// exactly the send order. DeliverRaw takes encoded link bytes (a Frame, transport.h) instead.
//
//   std::unique_ptr<LoopbackHub> hub = LoopbackHub::Create(/*world_size=*/2);
//   hub->endpoint(Rank(1))->SetReceiver(on_message);
//   RETURN_IF_ERROR(hub->endpoint(Rank(0))->Send(Rank(1), bytes));
//
// Ownership: the hub owns its endpoints; they are valid for the hub's lifetime.
// Thread-safety: every method is thread-safe. A send holds its edge's lock while the receiver
// runs, so a receiver must not block and must not Send on the same edge.
#ifndef ONEFLOW_LIKE_COMM_LOOPBACK_TRANSPORT_H_
#define ONEFLOW_LIKE_COMM_LOOPBACK_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "oneflow_like/comm/transport.h"

namespace oneflow_like {
namespace comm {

class LoopbackHub {
 public:
  // REQUIRES: world_size >= 1.
  static std::unique_ptr<LoopbackHub> Create(int32_t world_size);
  ~LoopbackHub();

  int32_t world_size() const { return world_size_; }
  // nullptr for a rank outside [0, world_size).
  Transport* endpoint(Rank rank);

  // Delivers raw wire bytes to rank `to` as if they came off a link: decodes the frame, checks
  // its addressing and sequence number, calls the receiver. For tests of bad input.
  absl::Status DeliverRaw(Rank to, absl::string_view bytes);
  // Number of frames sent on edge from -> to so far.
  uint64_t frames_sent(Rank from, Rank to) const;

 private:
  class Endpoint;
  struct Edge {
    mutable std::mutex mu;
    uint64_t next_send = 0;     // sequence of the next frame to send
    uint64_t next_receive = 0;  // sequence the receiver expects next
  };
  explicit LoopbackHub(int32_t world_size);
  Edge& edge(Rank from, Rank to) const { return *edges_[from.value() * world_size_ + to.value()]; }
  absl::Status Send(Rank from, Rank to, absl::string_view payload);
  absl::Status DeliverLocked(Edge& edge, Rank from, Rank to, uint64_t sequence, absl::string_view payload);
  // Checks rank range; the error names `what` ("destination", "source").
  absl::Status CheckRank(Rank rank, const char* what) const;

  const int32_t world_size_;
  std::vector<std::unique_ptr<Edge>> edges_;  // [from * world_size + to]
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
};

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_LOOPBACK_TRANSPORT_H_
