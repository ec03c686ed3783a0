#include "oneflow_like/comm/hybrid_transport.h"

#include <mutex>
#include <utility>

namespace oneflow_like {
namespace comm {

HybridTransport::HybridTransport(std::unique_ptr<ShmTransport> local, std::unique_ptr<Transport> remote)
    : local_(std::move(local)), remote_(std::move(remote)) {}

HybridTransport::~HybridTransport() {
  // Each transport joins its I/O thread; the shared receiver outlives both (shared_ptr).
  local_.reset();
  remote_.reset();
}

void HybridTransport::SetReceiver(Receiver receiver) {
  struct Shared {
    std::mutex mu;
    Receiver receiver;
  };
  auto shared = std::make_shared<Shared>();
  shared->receiver = std::move(receiver);
  Receiver serialized = [shared](Rank from, absl::string_view payload) {
    std::lock_guard<std::mutex> lock(shared->mu);
    if (shared->receiver) shared->receiver(from, payload);
  };
  local_->SetReceiver(serialized);
  remote_->SetReceiver(std::move(serialized));
}

absl::Status HybridTransport::RegisterMemory(const char* base, size_t bytes) {
  RETURN_IF_ERROR(local_->RegisterMemory(base, bytes));
  return remote_->RegisterMemory(base, bytes);
}

void HybridTransport::UnregisterMemory(const char* base, size_t bytes) {
  local_->UnregisterMemory(base, bytes);
  remote_->UnregisterMemory(base, bytes);
}

}  // namespace comm
}  // namespace oneflow_like
