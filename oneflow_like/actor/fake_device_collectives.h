// FakeDeviceCollectives: a collective backend over the fake device's memory (tests without a
// GPU), standing in for NCCL: its memory_type() is "cuda", and every call translates the device
// pointers it gets to the fake device's shadow bytes (fake_device_backend.h) before the host
// library (gloo) runs it. A pointer that is not fake-device memory fails the call, so a runtime
// that hands host memory to a device collective is caught. Like NCCL it needs an agreed issue
// order (NeedsIssueOrder), so device plans run under the runtime's CollectiveOrder here too.
#ifndef ONEFLOW_LIKE_ACTOR_FAKE_DEVICE_COLLECTIVES_H_
#define ONEFLOW_LIKE_ACTOR_FAKE_DEVICE_COLLECTIVES_H_

#include <memory>
#include <string>
#include <vector>

#include "oneflow_like/actor/fake_device_backend.h"
#include "oneflow_like/comm/collective.h"

namespace oneflow_like {
namespace actor {

class FakeDeviceCollectives final : public comm::CollectiveBackend {
 public:
  // REQUIRES: `device` outlives this backend.
  FakeDeviceCollectives(std::unique_ptr<comm::CollectiveBackend> host, FakeDeviceBackend* device)
      : host_(std::move(host)), device_(device) {}
  std::string name() const override { return "fake-device(" + host_->name() + ")"; }
  std::string memory_type() const override { return "cuda"; }
  absl::StatusOr<std::unique_ptr<comm::Communicator>> Connect(const std::vector<int32_t>& group,
                                                              const std::string& tag) override;
  absl::StatusOr<std::unique_ptr<comm::Communicator>> ConnectChannel(const std::vector<int32_t>& group,
                                                                     uint64_t channel, const std::string& tag) override;
  bool NeedsIssueOrder() const override { return true; }
  comm::CollectiveBackendStats stats() const override { return host_->stats(); }
  int64_t calls() const;  // calls made through its communicators

 private:
  std::unique_ptr<comm::CollectiveBackend> host_;
  FakeDeviceBackend* device_;
  std::shared_ptr<std::atomic<int64_t>> calls_ = std::make_shared<std::atomic<int64_t>>(0);
};

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_FAKE_DEVICE_COLLECTIVES_H_
