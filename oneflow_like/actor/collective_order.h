// CollectiveOrder: the one order in which a rank issues its collective calls when the backend
// needs every member to issue them in an agreed order (CollectiveBackend::NeedsIssueOrder:
// NCCL, whose channels share the group's communicator and stream; or
// RuntimeEnv::order_collectives, to rehearse it on gloo).
//
// The order (docs/plan_format.md, "Collective issue order"): firing n of a COLLECTIVE task that
// fires F times a step is firing k = n % F of step s = n / F, and gets the key
//   (s, slot, global_order)   slot = the place of piece k's forward (or backward, when the call
//                                    boxes a value of the backward pass) in the rank's 1F1B order
//                                    of N = pieces_per_step pieces with issue_pieces_in_flight
//                                    forwards ahead (1: F0 B0 F1 B1 ...) for a PER_PIECE call,
//                                    -1 for BEFORE_PIECES, 2N for AFTER_PIECES (F = 1).
// Every member of a call computes the same key (the same step and firing; phase and
// global_order come from CollectiveParams, which the members share), so on every rank the
// calls of one group come in the same order, and so do the calls of two groups that share
// ranks. The keys follow the dataflow: a call whose input depends on another's output has a
// later key (a later step; or a later piece; or, in the same piece, a later global_order, which
// the compiler gives in topological order), and a producer's firing that waits for a consumer
// to return a register buffer feeds a later piece than the consumer's firing. So the call a
// rank waits for never waits, through the data or through back-pressure, for a call held back
// behind it. UNPLACED calls (piece-rate values made from a sum over the step's pieces) have no
// such key: Create refuses a plan with one.
//
// Issue: every firing submits its ticket (its position in the rank's key order) with a closure
// that hands the call to the library (or reports an error); closures run in ticket order, each
// once every earlier ticket's closure ran, on the thread that submitted it or the one that
// submitted the ticket before it (never under a lock, so a closure may submit again).
//
// Connections: bodies add theirs (AddConnection) and issue nothing before every one finished
// (Connected / WaitConnected): a library that creates a group's communicator while another
// group's kernels already spin on the device can hang (NCCL's init allocates device memory).
//
// Close (the runtime, before its bodies go): held closures are dropped, later ones too, and it
// returns once no closure runs, so none runs on a destroyed body. Not from inside a closure.
//
// Thread-safe. The runtime owns one per rank; bodies hold a pointer (it outlives them).
#ifndef ONEFLOW_LIKE_ACTOR_COLLECTIVE_ORDER_H_
#define ONEFLOW_LIKE_ACTOR_COLLECTIVE_ORDER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace actor {

class CollectiveOrder {
 public:
  struct Call {
    std::string name;  // the task's, for messages
    CollectiveParams::IssuePhase phase = CollectiveParams::PER_PIECE;
    int64_t global_order = 0;
    int64_t firings_per_step = 1;
    int64_t pieces_in_flight = 1;  // PER_PIECE: CollectiveParams.issue_pieces_in_flight (0 = 1)
    bool backward = false;         // PER_PIECE: CollectiveParams.issue_backward
  };
  // `calls`: the rank's COLLECTIVE tasks (index = the `call` of Ticket). InvalidArgument naming
  // the task for an UNPLACED phase, a rate that does not match the phase (PER_PIECE: firing
  // pieces_per_step times a step; BEFORE / AFTER_PIECES: once), two calls with one
  // global_order, or PER_PIECE calls with different pieces in flight (one 1F1B order a rank).
  static absl::StatusOr<std::unique_ptr<CollectiveOrder>> Create(std::vector<Call> calls, int64_t pieces_per_step);

  // The ticket of firing `firing` (0, 1, ... over the run) of calls[call].
  int64_t Ticket(int32_t call, int64_t firing) const;
  // Runs `issue` once every ticket below `ticket` was issued (see above). Each ticket once.
  void Issue(int64_t ticket, std::function<void()> issue);
  // Tickets issued so far.
  int64_t issued() const;
  // `ready` says without blocking whether a connection finished (ok or not), `wait` waits for
  // it; both must stay callable until the order is destroyed (capture futures by value).
  void AddConnection(std::function<bool()> ready, std::function<void()> wait);
  bool Connected();       // every connection added so far finished
  void WaitConnected();   // blocks until Connected()
  void Close();
  // For hang reports: "issued 12 collective calls; next: 'x' (global_order 3) step 1 piece 0;
  // held back: 2 ('y' ..., ...)", or "" when nothing is held back.
  std::string Describe() const;
  // The keys of one step in order, as "name@slot" (tests, docs).
  std::vector<std::string> StepSequence() const;
  // One step's calls in order, as "piece 1 forward: 'name' (global_order 7)" (olplan).
  std::vector<std::string> StepText() const;

 private:
  struct Entry {
    int64_t slot;  // the key's middle term
    int64_t global_order;
    int32_t call;
    int64_t firing_in_step;  // = the piece for PER_PIECE calls
  };
  CollectiveOrder(std::vector<Call> calls, std::vector<Entry> sequence, std::vector<std::vector<int64_t>> position);
  std::string TicketText(int64_t ticket) const;
  std::string PlaceText(const Entry& e) const;  // "before the pieces", "piece 2 backward", ...

  const std::vector<Call> calls_;
  const std::vector<Entry> sequence_;                // one step's firings in key order
  const std::vector<std::vector<int64_t>> position_;  // [call][firing in step] -> index in sequence_
  mutable std::mutex mu_;
  int64_t next_ = 0;       // the next ticket to issue
  bool draining_ = false;  // a thread runs closures
  bool closed_ = false;
  std::condition_variable drained_;                 // draining_ became false
  std::map<int64_t, std::function<void()>> held_;  // submitted ahead of their turn
  std::vector<std::pair<std::function<bool()>, std::function<void()>>> connections_;
  std::atomic<bool> connected_{false};  // every connection finished (cached once true)
};

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_COLLECTIVE_ORDER_H_
