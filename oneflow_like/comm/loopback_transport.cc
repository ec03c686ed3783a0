#include "oneflow_like/comm/loopback_transport.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace oneflow_like {
namespace comm {

class LoopbackHub::Endpoint final : public Transport {
 public:
  Endpoint(LoopbackHub* hub, Rank rank) : hub_(hub), rank_(rank) {}
  Rank rank() const override { return rank_; }
  int32_t world_size() const override { return hub_->world_size(); }
  void SetReceiver(Receiver receiver) override {
    std::lock_guard<std::mutex> lock(mu_);
    receiver_ = std::make_shared<Receiver>(std::move(receiver));
  }
  absl::Status Send(Rank to, absl::string_view payload) override { return hub_->Send(rank_, to, payload); }
  // The receiver has copied what it keeps once Send returns, so the buffer goes back to a small
  // pool for TakeBuffer: large payloads then reuse memory instead of page-faulting fresh pages.
  absl::Status SendOwned(Rank to, std::string payload) override {
    absl::Status status = hub_->Send(rank_, to, payload);
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (pool_.size() < kPoolBuffers) pool_.push_back(std::move(payload));
    return status;
  }
  std::string TakeBuffer(size_t bytes) override {
    {
      std::lock_guard<std::mutex> lock(pool_mu_);
      for (size_t i = 0; i < pool_.size(); ++i) {
        if (pool_[i].capacity() < bytes) continue;
        std::string buffer = std::move(pool_[i]);
        pool_.erase(pool_.begin() + static_cast<std::ptrdiff_t>(i));
        buffer.clear();
        return buffer;
      }
    }
    return Transport::TakeBuffer(bytes);
  }

  std::shared_ptr<Receiver> receiver() const {
    std::lock_guard<std::mutex> lock(mu_);
    return receiver_;
  }

 private:
  LoopbackHub* hub_;
  Rank rank_;
  mutable std::mutex mu_;
  std::shared_ptr<Receiver> receiver_;  // null until SetReceiver
  static constexpr size_t kPoolBuffers = 8;
  std::mutex pool_mu_;
  std::vector<std::string> pool_;  // sent payloads kept for TakeBuffer
};

std::unique_ptr<LoopbackHub> LoopbackHub::Create(int32_t world_size) {
  return std::unique_ptr<LoopbackHub>(new LoopbackHub(world_size < 1 ? 1 : world_size));
}

LoopbackHub::LoopbackHub(int32_t world_size) : world_size_(world_size) {
  for (int32_t i = 0; i < world_size * world_size; ++i) edges_.push_back(std::make_unique<Edge>());
  for (int32_t r = 0; r < world_size; ++r) endpoints_.push_back(std::make_unique<Endpoint>(this, Rank(r)));
}

LoopbackHub::~LoopbackHub() = default;

Transport* LoopbackHub::endpoint(Rank rank) {
  if (!CheckRank(rank, "endpoint").ok()) return nullptr;
  return endpoints_[rank.value()].get();
}

absl::Status LoopbackHub::CheckRank(Rank rank, const char* what) const {
  if (rank.value() < 0 || rank.value() >= world_size_) {
    return absl::InvalidArgumentError(absl::StrCat("loopback transport: ", what, " rank ", rank.value(),
                                                   " is outside the world [0, ", world_size_, ")"));
  }
  return absl::OkStatus();
}

absl::Status LoopbackHub::Send(Rank from, Rank to, absl::string_view payload) {
  RETURN_IF_ERROR(CheckRank(to, "destination"));
  Edge& e = edge(from, to);
  std::lock_guard<std::mutex> lock(e.mu);
  // The payload goes to the receiver as it is: encoding a frame and decoding it again (two
  // checksums, three copies) cost a 256 KiB register about 0.3 ms in one-process runs. The
  // decoder of link bytes is exercised by DeliverRaw.
  RETURN_IF_ERROR(DeliverLocked(e, from, to, e.next_send, payload));
  ++e.next_send;
  return absl::OkStatus();
}

absl::Status LoopbackHub::DeliverRaw(Rank to, absl::string_view bytes) {
  RETURN_IF_ERROR(CheckRank(to, "destination"));
  ASSIGN_OR_RETURN(Frame frame, DecodeFrame(bytes));
  RETURN_IF_ERROR(CheckRank(frame.from, "source"));
  if (frame.to != to) {
    return absl::InvalidArgumentError(
        absl::StrCat("frame addressed to rank ", frame.to.value(), " arrived at rank ", to.value()));
  }
  Edge& e = edge(frame.from, to);
  std::lock_guard<std::mutex> lock(e.mu);
  return DeliverLocked(e, frame.from, frame.to, frame.sequence, frame.payload);
}

absl::Status LoopbackHub::DeliverLocked(Edge& e, Rank from, Rank to, uint64_t sequence, absl::string_view payload) {
  if (sequence != e.next_receive) {
    return absl::DataLossError(absl::StrCat("edge ", from.value(), " -> ", to.value(), ": frame sequence ",
                                            sequence, " arrived, expected ", e.next_receive,
                                            " (a frame was lost, duplicated or reordered)"));
  }
  std::shared_ptr<Transport::Receiver> receiver = endpoints_[to.value()]->receiver();
  if (receiver == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", to.value(), " has no receiver installed (SetReceiver before sending to it)"));
  }
  ++e.next_receive;
  (*receiver)(from, payload);
  return absl::OkStatus();
}

uint64_t LoopbackHub::frames_sent(Rank from, Rank to) const {
  if (!CheckRank(from, "source").ok() || !CheckRank(to, "destination").ok()) return 0;
  Edge& e = edge(from, to);
  std::lock_guard<std::mutex> lock(e.mu);
  return e.next_send;
}

}  // namespace comm
}  // namespace oneflow_like
