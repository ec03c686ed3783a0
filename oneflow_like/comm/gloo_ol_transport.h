// gloo's transport over ours: a gloo::transport::Device whose contexts talk through a
// TcpTransport (tcp_transport.h) among the context's members, so every connection gloo uses is
// opened by our token-checked hello and carries CRC-32C frames with sequence numbers. Garbage or
// a crafted gloo message sent to a context's port is refused at the hello (counted, logged) and
// the group goes on; with gloo's own TCP transport it can abort the process (README: garbage at
// gloo's ports).
//
//   OlGlooDeviceOptions options;
//   options.bind_address = "10.0.0.5"; options.job_token = token;  // the job's (control plane)
//   std::shared_ptr<gloo::transport::Device> device = CreateOlGlooDevice(options);
//   context->connectFullMesh(store, device);   // gloo::rendezvous::Context, as with gloo's TCP
//
// connectFullMesh: createContext listens (one TcpTransport per context, rank = the member, world
// = the group); each pair's address is that endpoint; once every pair got its peer's address the
// context connects the mesh (the lower member dials), bounded by connect_timeout_ms, and closes
// its listening socket: a connection to the port after that is refused by the kernel. Matching,
// eager sends, copies and failures: gloo_ol_context.h. Only gloo's unbound buffers are
// implemented.
// Thread-safety: the device is immutable; createContext may be called from any thread.
#ifndef ONEFLOW_LIKE_COMM_GLOO_OL_TRANSPORT_H_
#define ONEFLOW_LIKE_COMM_GLOO_OL_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "gloo/transport/device.h"
#include "oneflow_like/comm/tcp_transport.h"

namespace oneflow_like {
namespace comm {

struct OlGlooDeviceOptions {
  std::string bind_address = "127.0.0.1";  // numeric IPv4 the contexts listen on
  std::string job_token;                   // every link's hello carries it (required)
  int64_t connect_timeout_ms = 30000;      // connecting a context's mesh; a stranger's hello
  // Sends are eager (gloo_ol_context.h): a receiver keeps the messages that arrive before their
  // receive. Past this many bytes kept in one context, the context fails naming the sender.
  int64_t max_early_bytes = int64_t{1} << 30;
  // Connections to a context still in their hello while it connects, at most.
  int32_t max_pending_connections = 64;
};

// REQUIRES: options.job_token is not empty.
std::shared_ptr<::gloo::transport::Device> CreateOlGlooDevice(OlGlooDeviceOptions options);

// The TcpTransport options of member `rank`'s links in a context of `size` members: the
// listener closes once the mesh is connected (gloo's contexts take no late peers), a bounded
// number of connections may wait in their hello, and no spare payloads are kept (gloo never
// takes them back). Exposed for tests.
TcpTransportOptions OlGlooMeshOptions(const OlGlooDeviceOptions& options, int rank, int size);

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_GLOO_OL_TRANSPORT_H_
