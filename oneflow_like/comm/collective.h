// The collective interface: a communicator per group of ranks (all-reduce, all-gather,
// reduce-scatter, broadcast, all-to-all, send / recv), asynchronous, with one implementation per
// library: gloo over TCP on CPU (gloo_collective.h) and NCCL on CUDA devices
// (nccl_collective.h, compiled where the CUDA toolkit is). The runtime's COLLECTIVE actors use
// it; nothing here knows actors or plans.
//
//   InMemoryStore store;                       // or ControlStore over the job's control plane
//   ASSIGN_OR_RETURN(auto backend, CreateGlooBackend(&store, rank, world, GlooOptions{}));
//   ASSIGN_OR_RETURN(auto comm, backend->Connect({0, 1, 2}, "tp0"));   // every member calls it
//   // or, sharing the group's connections with its other channels (one per plan collective):
//   ASSIGN_OR_RETURN(auto channel, backend->ConnectChannel({0, 1, 2}, /*channel=*/7, "collective/7"));
//   comm->AllReduce(in, out, n, DataType::kFloat32, [](absl::Status s) { ... });
//   RETURN_IF_ERROR(comm->Flush());            // or wait for the callbacks
//
// Semantics (every backend):
//   - Calls are queued and return at once; they run one at a time in the order they were
//     issued, on the communicator's own thread (or device stream). Every member of the group
//     must issue the same calls in the same order (the compiler fixes one global order).
//   - `done` runs exactly once per call, on the communicator's thread, after the call finished
//     with the buffers (success) or failed; the caller must keep the buffers alive until then.
//     A failed call (a peer died, a timeout, a garbage message) fails every later call too.
//   - Counts are in elements of `dtype`; uneven splits give one count per member, in group
//     order. In-place is allowed where `in == out` (AllReduce) or the caller's own slice
//     (AllGather: `in` == out + offset of this member).
//   - Reductions are sums (the only reduction the compiler's boxing needs: P -> B / P -> S).
// Errors: InvalidArgument for a bad call (dtype the backend lacks, counts that do not match the
// group), DeadlineExceeded when a peer is silent past the timeout, Unavailable / DataLoss for a
// broken connection or garbage on it; the message names the group and the call.
#ifndef ONEFLOW_LIKE_COMM_COLLECTIVE_H_
#define ONEFLOW_LIKE_COMM_COLLECTIVE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <condition_variable>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "oneflow_like/core/data_type.h"

namespace oneflow_like {
namespace comm {

// Where backends exchange addresses and unique ids at connection time.
class RendezvousStore {
 public:
  virtual ~RendezvousStore() = default;
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;
  // Blocks until `key` is set; DeadlineExceeded after `timeout_ms`.
  virtual absl::StatusOr<std::string> Get(const std::string& key, int64_t timeout_ms) = 0;
};

// A store inside one process (tests; several ranks as threads of one process).
class InMemoryStore final : public RendezvousStore {
 public:
  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, int64_t timeout_ms) override;

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

using CollectiveDone = std::function<void(const absl::Status&)>;

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int32_t rank() const = 0;  // this member's position in the group
  virtual int32_t size() const = 0;
  // "gloo group [0,1,2] 'tp0'": for messages.
  virtual std::string description() const = 0;

  // out[i] = sum over members of in[i], `count` elements; in == out allowed.
  virtual void AllReduce(const void* in, void* out, int64_t count, DataType dtype, CollectiveDone done) = 0;
  // out = the members' inputs concatenated in group order; member k gives counts[k] elements.
  virtual void AllGather(const void* in, void* out, std::vector<int64_t> counts, DataType dtype,
                         CollectiveDone done) = 0;
  // in: sum(counts) elements on every member; out: this member's block (counts[rank()]
  // elements, at offset sum(counts[0..rank())) of the sum over members.
  virtual void ReduceScatter(const void* in, void* out, std::vector<int64_t> counts, DataType dtype,
                             CollectiveDone done) = 0;
  // buffer on `root` (a group rank) copied to every member's buffer.
  virtual void Broadcast(void* buffer, int64_t count, DataType dtype, int32_t root, CollectiveDone done) = 0;
  // Member j receives send_counts[j] elements from each member's `in` (blocks in group order) and
  // puts member k's block at offset sum(recv_counts[0..k)) of `out`.
  virtual void AllToAll(const void* in, std::vector<int64_t> send_counts, void* out, std::vector<int64_t> recv_counts,
                        DataType dtype, CollectiveDone done) = 0;
  // Point-to-point inside the group, matched in issue order per pair.
  virtual void Send(const void* in, int64_t count, DataType dtype, int32_t peer, CollectiveDone done) = 0;
  virtual void Recv(void* out, int64_t count, DataType dtype, int32_t peer, CollectiveDone done) = 0;

  // Blocks until every call issued so far finished; the first failure, if any.
  virtual absl::Status Flush() = 0;
};

// What a backend connected so far (tests, logs).
struct CollectiveBackendStats {
  int64_t contexts = 0;   // the library's communicators / contexts (each a set of connections)
  int64_t channels = 0;   // communicators handed out by Connect and ConnectChannel
  int64_t fallbacks = 0;  // ConnectChannel communicators that got a context of their own
};

class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;
  virtual std::string name() const = 0;  // "gloo", "nccl"
  // Where the buffers of its calls live: "cpu" (host memory: gloo) or a device type ("cuda":
  // NCCL takes device pointers). The runtime gives a COLLECTIVE task on a device a backend of
  // that device's memory only.
  virtual std::string memory_type() const { return "cpu"; }
  // A communicator over `group` (global ranks, in group order; this backend's rank among
  // them) with connections of its own. Every member calls Connect with the same group and tag;
  // blocks until all are connected or the timeout passed (DeadlineExceeded naming the missing
  // members' group).
  virtual absl::StatusOr<std::unique_ptr<Communicator>> Connect(const std::vector<int32_t>& group,
                                                                const std::string& tag) = 0;
  // A communicator (a "channel") that may share its connections with the other channels of the
  // same group on this backend (gloo: one context per group). `channel` identifies it: the same
  // on every member, distinct among the group's channels (the plan's CollectiveParams.global_order).
  // Semantics as Connect's: calls of one channel run in issue order; unless NeedsIssueOrder(),
  // channels run concurrently and independently, whatever order the members issue them in. A
  // failure of the shared connections (a dead or silent peer) fails every channel on them.
  // Default: Connect.
  virtual absl::StatusOr<std::unique_ptr<Communicator>> ConnectChannel(const std::vector<int32_t>& group,
                                                                       uint64_t channel, const std::string& tag) {
    (void)channel;
    return Connect(group, tag);
  }
  // Whether every member must issue its calls in one agreed order: the calls of all channels of
  // a group (they share one queue: NCCL's channels share the group's communicator and stream),
  // and the calls of different groups in an order consistent across members (NCCL: kernels of
  // two communicators on one device can wait for each other otherwise). The runtime then issues
  // a rank's collectives in the plan's issue order (actor/collective_order.h). false (gloo):
  // channels are independent, each with its own worker and tags.
  virtual bool NeedsIssueOrder() const { return false; }
  virtual CollectiveBackendStats stats() const { return {}; }
};

// Validation shared by backends: counts per member, a known dtype. InvalidArgument naming `what`.
absl::Status CheckCounts(const std::vector<int64_t>& counts, int32_t group_size, const std::string& what);
int64_t SumCounts(const std::vector<int64_t>& counts);

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_COLLECTIVE_H_
