#include "python/ext/channel_transport.h"

#include <cstring>
#include <utility>

namespace oneflow_like {
namespace python {
namespace {

std::string IdBytes(uint32_t id) {
  std::string out(4, '\0');
  std::memcpy(&out[0], &id, 4);
  return out;
}

}  // namespace

class ChannelHub::Channel : public comm::Transport {
 public:
  Channel(ChannelHub* hub, uint32_t id) : hub_(hub), id_(id), prefix_(IdBytes(id)) {}
  ~Channel() override { hub_->Close(id_); }

  Rank rank() const override { return hub_->transport_->rank(); }
  int32_t world_size() const override { return hub_->transport_->world_size(); }
  void SetReceiver(Receiver receiver) override { hub_->SetReceiver(id_, std::move(receiver)); }
  absl::Status Send(Rank to, absl::string_view payload) override {
    std::string message = hub_->transport_->TakeBuffer(4 + payload.size());
    message.append(prefix_);
    message.append(payload.data(), payload.size());
    return hub_->transport_->SendOwned(to, std::move(message));
  }
  absl::Status SendOwned(Rank to, std::string payload) override { return Send(to, payload); }
  absl::Status RegisterMemory(const char* base, size_t bytes) override {
    return hub_->transport_->RegisterMemory(base, bytes);
  }
  void UnregisterMemory(const char* base, size_t bytes) override { hub_->transport_->UnregisterMemory(base, bytes); }
  absl::Status SendRegistered(Rank to, absl::string_view prefix, absl::string_view payload) override {
    std::string full = prefix_;
    full.append(prefix.data(), prefix.size());
    return hub_->transport_->SendRegistered(to, full, payload);
  }
  std::string TakeBuffer(size_t bytes) override { return hub_->transport_->TakeBuffer(bytes); }

 private:
  ChannelHub* hub_;
  uint32_t id_;
  std::string prefix_;
};

ChannelHub::ChannelHub(comm::Transport* transport) : transport_(transport) {
  transport_->SetReceiver([this](Rank from, absl::string_view bytes) { Deliver(from, bytes); });
}

ChannelHub::~ChannelHub() {
  transport_->SetReceiver([](Rank, absl::string_view) {});
}

std::unique_ptr<comm::Transport> ChannelHub::Open() {
  std::lock_guard<std::mutex> lock(mu_);
  const uint32_t id = next_id_++;
  receivers_[id] = nullptr;
  return std::make_unique<Channel>(this, id);
}

int64_t ChannelHub::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

void ChannelHub::SetReceiver(uint32_t id, comm::Transport::Receiver receiver) {
  std::lock_guard<std::mutex> lock(mu_);
  receivers_[id] = std::make_shared<comm::Transport::Receiver>(std::move(receiver));
}

void ChannelHub::Close(uint32_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  receivers_.erase(id);
}

void ChannelHub::Deliver(Rank from, absl::string_view bytes) {
  std::shared_ptr<comm::Transport::Receiver> receiver;
  {
    std::lock_guard<std::mutex> lock(mu_);
    uint32_t id = 0;
    if (bytes.size() >= 4) std::memcpy(&id, bytes.data(), 4);
    auto it = receivers_.find(id);
    if (bytes.size() < 4 || it == receivers_.end() || it->second == nullptr) {
      ++dropped_;
      return;
    }
    receiver = it->second;
  }
  (*receiver)(from, bytes.substr(4));
}

}  // namespace python
}  // namespace oneflow_like
