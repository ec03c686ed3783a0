#include "oneflow_like/comm/hybrid_transport.h"

#include <memory>
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
  // One mutex for every receiver ever installed: while the two transports switch over one after
  // the other, the old receiver (still called by one) and the new one (already called by the
  // other) take turns too.
  auto shared = std::make_shared<Receiver>(std::move(receiver));
  Receiver serialized = [mu = delivery_mu_, shared](Rank from, absl::string_view payload) {
    std::lock_guard<std::mutex> lock(*mu);
    if (*shared) (*shared)(from, payload);
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
