#include "oneflow_like/comm/ibverbs_rendezvous.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace oneflow_like {
namespace comm {

absl::Status ConnectIbverbsThroughControlPlane(IbverbsTransport* transport, ControlClient* control,
                                               int64_t timeout_ms) {
  const int32_t self = transport->rank().value();
  const std::vector<std::string> mine = transport->LocalEndpoints();
  for (int32_t peer = 0; peer < transport->world_size(); ++peer) {
    if (peer == self) continue;
    absl::Status published = control->Set(absl::StrCat("ibverbs_endpoint/", self, "/", peer), mine[peer]);
    if (!published.ok()) {
      return absl::Status(published.code(), absl::StrCat("rank ", self, ": publishing the RDMA endpoint for rank ",
                                                         peer, ": ", published.message()));
    }
  }
  std::vector<std::string> for_me(transport->world_size());
  for (int32_t peer = 0; peer < transport->world_size(); ++peer) {
    if (peer == self) continue;
    absl::StatusOr<std::string> line = control->Get(absl::StrCat("ibverbs_endpoint/", peer, "/", self), timeout_ms);
    if (!line.ok()) {
      return absl::Status(line.status().code(), absl::StrCat("rank ", self, ": waiting for the RDMA endpoint of rank ",
                                                             peer, ": ", line.status().message()));
    }
    for_me[peer] = *line;
  }
  return transport->Connect(for_me);
}

}  // namespace comm
}  // namespace oneflow_like
