// The gloo backend of the collective interface (collective.h): CPU collectives over TCP with
// Debian's libgloo (the library PyTorch uses on CPU). One gloo device per backend (bound to
// GlooOptions::hostname, the address this node's peers reach it at): by default ours, every
// connection token-checked (GlooTransport::kOl, gloo_ol_transport.h), else gloo's own TCP
// (kGlooTcp); gloo contexts connected as
// full meshes through the RendezvousStore (the job's control plane: token-checked like
// everything else; or an InMemoryStore for ranks that are threads).
//   Connect         a context of the communicator's own
//   ConnectChannel  one context per group, shared by all the group's channels on this backend
//                   (the runtime's COLLECTIVE tasks: one channel per plan collective), each
//                   channel in a tag space of its own (its id modulo 2^channel_bits); a channel
//                   whose tag space another channel of the group holds gets a context of its own
//                   (the rule, decided by the group's member 0: gloo_collective.cc). stats()
//                   counts contexts, channels and fallbacks.
//
//   ASSIGN_OR_RETURN(auto backend, CreateGlooBackend(&store, rank, world, {"127.0.0.1", 30000}));
//   ASSIGN_OR_RETURN(auto comm, backend->Connect({0, 1}, "dp"));
//
// Calls run on the communicator's worker thread (one per communicator, also per channel on a
// shared context: channels run concurrently), one at a time in issue order:
//   AllReduce      gloo::allreduce (ring algorithms chosen by gloo), sum per dtype
//   AllGather      gloo::allgatherv (uneven counts)
//   ReduceScatter  gloo::alltoallv of the blocks, then a local sum of the group's copies of this
//                  member's block: every member sends and receives (n-1)/n of the tensor, as a
//                  ring reduce-scatter does
//   Broadcast      gloo::broadcast;  AllToAll  gloo::alltoallv;  Send / Recv  unbound buffers
// Dtypes: float32, float64, int32, int64 (sums); float16 / bfloat16 sums go through float32.
// Connect first waits (through the store) until every member arrived, then lets gloo connect
// its pairs: with kGlooTcp, gloo's listening ports, which accept their first connection
// unchecked, are open only for that moment (README: garbage at gloo's ports); with kOl every
// connection must present the job token first.
// Timeouts: GlooOptions::timeout_ms bounds connecting and every call (set it from the job's
// heartbeat timeout); a dead peer or garbage on a connection fails the call with the peer's gloo
// message instead of hanging, and every later call on that communicator fails too, on a shared
// context every later call of every channel on it.
#ifndef ONEFLOW_LIKE_COMM_GLOO_COLLECTIVE_H_
#define ONEFLOW_LIKE_COMM_GLOO_COLLECTIVE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "oneflow_like/comm/collective.h"

namespace oneflow_like {
namespace comm {

// What gloo's connections run on.
//   kOl       our TcpTransport (gloo_ol_transport.h): every connection opens with the job
//             token's hello; garbage at a port is refused and the group goes on
//   kGlooTcp  gloo's own TCP transport: a pair's port takes its first connection unchecked,
//             and a crafted gloo message there can abort the process (README)
enum class GlooTransport { kOl, kGlooTcp };
const char* GlooTransportName(GlooTransport transport);  // "ol", "gloo_tcp"
// "ol" or "gloo_tcp"; InvalidArgument naming the choices otherwise.
absl::StatusOr<GlooTransport> ParseGlooTransport(const std::string& name);

struct GlooOptions {
  std::string hostname = "127.0.0.1";  // this node's address for the listeners
  int64_t timeout_ms = 30000;          // connect and per-call timeout
  GlooTransport transport = GlooTransport::kOl;
  // kOl: the token every connection's hello carries (the job's, OL_JOB_TOKEN). Empty: member 0
  // of the world makes a random one and shares it through the store (which must be private to
  // the job: the control plane's is token-checked, an InMemoryStore is the process's).
  std::string job_token;
  // kOl: sends are eager, so a member keeps the messages that arrive before their receive; past
  // this many bytes kept per gloo context, the context fails naming the sender (gloo_ol_context.h).
  int64_t max_early_bytes = int64_t{1} << 30;
  // ConnectChannel: channels of one group share one context (false: each gets its own, as
  // Connect). A channel's tag space is its id modulo 2^channel_bits (1..24); its collective
  // calls count in the other 32 - channel_bits bits of gloo's tag.
  bool share_group_contexts = true;
  int channel_bits = 16;
};

// REQUIRES: store outlives the backend and its communicators; 0 <= rank < world_size.
absl::StatusOr<std::unique_ptr<CollectiveBackend>> CreateGlooBackend(RendezvousStore* store, int32_t rank,
                                                                     int32_t world_size, GlooOptions options = {});

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_GLOO_COLLECTIVE_H_
