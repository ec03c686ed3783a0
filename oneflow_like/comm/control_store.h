// The job's control plane (ControlClient's key-value store, authenticated and token-checked) as
// the RendezvousStore collective backends connect through (collective.h). Keys go under
// `prefix`, so several stores (e.g. one per restart round) never meet.
#ifndef ONEFLOW_LIKE_COMM_CONTROL_STORE_H_
#define ONEFLOW_LIKE_COMM_CONTROL_STORE_H_

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "oneflow_like/comm/collective.h"
#include "oneflow_like/comm/control_client.h"

namespace oneflow_like {
namespace comm {

class ControlStore final : public RendezvousStore {
 public:
  // REQUIRES: client outlives the store.
  ControlStore(ControlClient* client, std::string prefix) : client_(client), prefix_(std::move(prefix)) {}
  absl::Status Set(const std::string& key, const std::string& value) override {
    return client_->Set(absl::StrCat(prefix_, key), value);
  }
  absl::StatusOr<std::string> Get(const std::string& key, int64_t timeout_ms) override {
    return client_->Get(absl::StrCat(prefix_, key), timeout_ms);
  }

 private:
  ControlClient* client_;
  std::string prefix_;
};

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_CONTROL_STORE_H_
