// Connects an IbverbsTransport through the control plane (control_plane.h), so a multi-process
// job can use RDMA for its data plane the way it uses TCP: every rank publishes, for every peer
// p, the endpoint line of its queue pair for p (IbverbsTransport::LocalEndpoints()[p]) under
// the key "ibverbs_endpoint/<rank>/<p>", reads "ibverbs_endpoint/<p>/<rank>" of every peer p
// (blocking Get, up to `timeout_ms`), and calls Connect with them.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<IbverbsTransport> t, IbverbsTransport::Open(options));
//   t->SetReceiver(on_message);   // IbverbsTransport needs one before Connect
//   RETURN_IF_ERROR(ConnectIbverbsThroughControlPlane(t.get(), control_client, 60000));
//
// Errors: those of ControlClient::Set/Get (a peer whose endpoints never appear: DeadlineExceeded
// naming the rank) and of IbverbsTransport::Connect (garbage endpoint lines, hello timeouts).
#ifndef ONEFLOW_LIKE_COMM_IBVERBS_RENDEZVOUS_H_
#define ONEFLOW_LIKE_COMM_IBVERBS_RENDEZVOUS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "oneflow_like/comm/control_client.h"
#include "oneflow_like/comm/ibverbs_transport.h"

namespace oneflow_like {
namespace comm {

absl::Status ConnectIbverbsThroughControlPlane(IbverbsTransport* transport, ControlClient* control,
                                               int64_t timeout_ms);

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_IBVERBS_RENDEZVOUS_H_
