#include "oneflow_like/actor/collective_order.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace oneflow_like {
namespace actor {

absl::StatusOr<std::unique_ptr<CollectiveOrder>> CollectiveOrder::Create(std::vector<Call> calls,
                                                                         int64_t pieces_per_step) {
  pieces_per_step = std::max<int64_t>(1, pieces_per_step);
  // The rank's 1F1B order of its pieces: `in_flight` - 1 forwards, then a forward and a
  // backward in turn, then the last backwards.
  int64_t in_flight = 0;
  for (const Call& call : calls) {
    if (call.phase != CollectiveParams::PER_PIECE) continue;
    const int64_t mine = std::max<int64_t>(1, call.pieces_in_flight);
    if (in_flight != 0 && mine != in_flight) {
      return absl::InvalidArgumentError(absl::StrCat(
          "collective task '", call.name, "' (global_order ", call.global_order, ") keeps ", mine,
          " piece(s) in flight, another call of this rank ", in_flight,
          ": one rank, one 1F1B order (a rank working for two pipeline stages?)"));
    }
    in_flight = mine;
  }
  const int64_t ahead = std::min(std::max<int64_t>(in_flight, 1), pieces_per_step) - 1;
  std::vector<int64_t> forward_slot(pieces_per_step), backward_slot(pieces_per_step);
  {
    int64_t slot = 0, f = 0, b = 0;
    for (; f < ahead; ++f) forward_slot[f] = slot++;
    while (b < pieces_per_step) {
      if (f < pieces_per_step) forward_slot[f++] = slot++;
      backward_slot[b++] = slot++;
    }
  }
  std::vector<Entry> sequence;
  absl::flat_hash_map<int64_t, int32_t> by_order;
  for (int32_t c = 0; c < static_cast<int32_t>(calls.size()); ++c) {
    const Call& call = calls[c];
    auto refuse = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat("collective task '", call.name, "' (global_order ",
                                                     call.global_order, "): ", why));
    };
    if (auto [it, fresh] = by_order.emplace(call.global_order, c); !fresh) {
      return refuse(absl::StrCat("task '", calls[it->second].name, "' has the same global_order"));
    }
    switch (call.phase) {
      case CollectiveParams::PER_PIECE:
        if (call.firings_per_step != pieces_per_step) {
          return refuse(absl::StrCat("its issue phase is PER_PIECE but it fires ", call.firings_per_step,
                                     " time(s) a step, not pieces_per_step = ", pieces_per_step,
                                     " (a plan compiled before issue phases? compile it again)"));
        }
        for (int64_t k = 0; k < pieces_per_step; ++k) {
          sequence.push_back(Entry{call.backward ? backward_slot[k] : forward_slot[k], call.global_order, c, k});
        }
        break;
      case CollectiveParams::BEFORE_PIECES:
      case CollectiveParams::AFTER_PIECES:
        if (call.firings_per_step != 1) {
          return refuse(absl::StrCat("its issue phase is ", CollectiveParams::IssuePhase_Name(call.phase),
                                     " but it fires ", call.firings_per_step, " times a step, not once"));
        }
        sequence.push_back(Entry{call.phase == CollectiveParams::BEFORE_PIECES ? -1 : 2 * pieces_per_step,
                                 call.global_order, c, 0});
        break;
      case CollectiveParams::UNPLACED:
        return refuse(
            "it fires once per piece on a value summed over the step's pieces, so no issue order agreed by "
            "every rank places it (the backend needs one: NCCL); box that value before it is repeated");
      default:
        return refuse(absl::StrCat("unknown issue phase ", static_cast<int>(call.phase)));
    }
  }
  std::sort(sequence.begin(), sequence.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.slot, a.global_order) < std::tie(b.slot, b.global_order);
  });
  std::vector<std::vector<int64_t>> position(calls.size());
  for (int32_t c = 0; c < static_cast<int32_t>(calls.size()); ++c) {
    position[c].resize(static_cast<size_t>(calls[c].firings_per_step));
  }
  for (size_t i = 0; i < sequence.size(); ++i) {
    position[sequence[i].call][sequence[i].firing_in_step] = static_cast<int64_t>(i);
  }
  return std::unique_ptr<CollectiveOrder>(new CollectiveOrder(std::move(calls), std::move(sequence), std::move(position)));
}

CollectiveOrder::CollectiveOrder(std::vector<Call> calls, std::vector<Entry> sequence,
                                 std::vector<std::vector<int64_t>> position)
    : calls_(std::move(calls)), sequence_(std::move(sequence)), position_(std::move(position)) {}

int64_t CollectiveOrder::Ticket(int32_t call, int64_t firing) const {
  const int64_t per_step = calls_[call].firings_per_step;
  return firing / per_step * static_cast<int64_t>(sequence_.size()) + position_[call][firing % per_step];
}

void CollectiveOrder::Issue(int64_t ticket, std::function<void()> issue) {
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) {
    lock.unlock();
    issue = nullptr;  // dropped outside the lock
    return;
  }
  held_.emplace(ticket, std::move(issue));
  if (draining_) return;  // the draining thread runs it in its turn
  draining_ = true;
  while (!closed_ && !held_.empty() && held_.begin()->first == next_) {
    std::function<void()> next = std::move(held_.begin()->second);
    held_.erase(held_.begin());
    ++next_;
    lock.unlock();
    next();
    next = nullptr;
    lock.lock();
  }
  draining_ = false;
  drained_.notify_all();
}

void CollectiveOrder::Close() {
  std::map<int64_t, std::function<void()>> dropped;
  std::vector<std::pair<std::function<bool()>, std::function<void()>>> connections;
  {
    std::unique_lock<std::mutex> lock(mu_);
    closed_ = true;
    dropped.swap(held_);
    connections.swap(connections_);
    drained_.wait(lock, [this] { return !draining_; });
  }
}

void CollectiveOrder::AddConnection(std::function<bool()> ready, std::function<void()> wait) {
  std::lock_guard<std::mutex> lock(mu_);
  connections_.emplace_back(std::move(ready), std::move(wait));
  connected_ = false;
}

bool CollectiveOrder::Connected() {
  if (connected_.load()) return true;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& connection : connections_) {
    if (!connection.first()) return false;
  }
  connected_ = true;
  return true;
}

void CollectiveOrder::WaitConnected() {
  std::vector<std::pair<std::function<bool()>, std::function<void()>>> connections;
  {
    std::lock_guard<std::mutex> lock(mu_);
    connections = connections_;  // copies keep the futures alive
  }
  for (const auto& connection : connections) connection.second();
}

int64_t CollectiveOrder::issued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_;
}

std::string CollectiveOrder::TicketText(int64_t ticket) const {
  const int64_t n = static_cast<int64_t>(sequence_.size());
  const Entry& e = sequence_[ticket % n];
  const Call& call = calls_[e.call];
  const std::string piece = call.phase == CollectiveParams::BEFORE_PIECES  ? "before the pieces"
                            : call.phase == CollectiveParams::AFTER_PIECES ? "after the pieces"
                            : absl::StrCat("piece ", e.firing_in_step, call.backward ? " backward" : "");
  return absl::StrCat("'", calls_[e.call].name, "' (global_order ", e.global_order, ") step ", ticket / n, " ", piece);
}

std::string CollectiveOrder::Describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (held_.empty() || sequence_.empty()) return "";
  std::string text = absl::StrCat("collective issue order: issued ", next_, " call(s); the next is ",
                                  TicketText(next_), ", not yet fired; held back behind it: ", held_.size());
  int shown = 0;
  for (const auto& [ticket, issue] : held_) {
    if (++shown > 3) {
      absl::StrAppend(&text, ", ...");
      break;
    }
    absl::StrAppend(&text, shown == 1 ? " (" : ", ", TicketText(ticket));
  }
  absl::StrAppend(&text, ")");
  return text;
}

std::string CollectiveOrder::PlaceText(const Entry& e) const {
  const Call& call = calls_[e.call];
  if (call.phase == CollectiveParams::BEFORE_PIECES) return "before the pieces";
  if (call.phase == CollectiveParams::AFTER_PIECES) return "after the pieces";
  return absl::StrCat("piece ", e.firing_in_step, call.backward ? " backward" : " forward");
}

std::vector<std::string> CollectiveOrder::StepText() const {
  std::vector<std::string> out;
  for (const Entry& e : sequence_) {
    out.push_back(absl::StrCat(PlaceText(e), ": '", calls_[e.call].name, "' (global_order ", e.global_order, ")"));
  }
  return out;
}

std::vector<std::string> CollectiveOrder::StepSequence() const {
  std::vector<std::string> out;
  for (const Entry& e : sequence_) out.push_back(absl::StrCat(calls_[e.call].name, "@", e.slot));
  return out;
}

}  // namespace actor
}  // namespace oneflow_like
