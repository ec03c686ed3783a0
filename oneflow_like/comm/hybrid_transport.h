// HybridTransport: one rank's Transport that reaches the ranks of its own node through shared
// memory (ShmTransport, shm_transport.h) and every other rank through another transport (the
// job's TcpTransport). What oltrain uses under olrun unless OL_TRANSPORT=tcp.
//
//   auto hybrid = std::make_unique<HybridTransport>(std::move(shm), std::move(tcp));
//   hybrid->Send(Rank(1), bytes);   // rank 1 on this node: into the shared ring
//   hybrid->Send(Rank(5), bytes);   // rank 5 elsewhere: over TCP
//
// Routing: a destination the ShmTransport serves (this rank and its node's peers) goes there,
// every other one to `remote`; so each directed edge uses one transport and keeps its order.
// Receiving: both transports deliver to the one receiver, never concurrently (one mutex around
// the calls, shared by every receiver SetReceiver installs, so during a swap the old receiver
// and the new one never overlap either), each on its own I/O thread. Do not call SetReceiver
// from inside a receiver: it waits for the transports' deliveries in progress, which wait for
// the mutex that call holds (a deadlock). RegisterMemory / UnregisterMemory go to both;
// TakeBuffer comes from the shared-memory side (buffers of TCP sends are recycled by TCP).
// Error handlers are the transports' own (set them before wrapping).
// Thread-safety: as the two transports; all methods are thread-safe.
#ifndef ONEFLOW_LIKE_COMM_HYBRID_TRANSPORT_H_
#define ONEFLOW_LIKE_COMM_HYBRID_TRANSPORT_H_

#include <memory>
#include <mutex>
#include <string>

#include "oneflow_like/comm/shm_transport.h"
#include "oneflow_like/comm/transport.h"

namespace oneflow_like {
namespace comm {

class HybridTransport : public Transport {
 public:
  // REQUIRES: both non-null, of the same rank and world size.
  HybridTransport(std::unique_ptr<ShmTransport> local, std::unique_ptr<Transport> remote);
  ~HybridTransport() override;

  Rank rank() const override { return local_->rank(); }
  int32_t world_size() const override { return local_->world_size(); }
  void SetReceiver(Receiver receiver) override;
  absl::Status Send(Rank to, absl::string_view payload) override { return Route(to).Send(to, payload); }
  absl::Status SendOwned(Rank to, std::string payload) override { return Route(to).SendOwned(to, std::move(payload)); }
  absl::Status SendRegistered(Rank to, absl::string_view prefix, absl::string_view payload) override {
    return Route(to).SendRegistered(to, prefix, payload);
  }
  absl::Status RegisterMemory(const char* base, size_t bytes) override;
  void UnregisterMemory(const char* base, size_t bytes) override;
  std::string TakeBuffer(size_t bytes) override { return local_->TakeBuffer(bytes); }

  ShmTransport* local() const { return local_.get(); }
  Transport* remote() const { return remote_.get(); }

 private:
  Transport& Route(Rank to) const {
    return local_->Serves(to) ? static_cast<Transport&>(*local_) : *remote_;
  }

  // Held around every receiver call (shared_ptr: the receivers the transports keep share it).
  std::shared_ptr<std::mutex> delivery_mu_ = std::make_shared<std::mutex>();
  std::unique_ptr<ShmTransport> local_;
  std::unique_ptr<Transport> remote_;
};

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_HYBRID_TRANSPORT_H_
