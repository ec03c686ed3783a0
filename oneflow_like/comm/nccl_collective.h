// The NCCL backend of the collective interface (collective.h): communicators over CUDA devices,
// one process (or thread) per device. Built only where the CUDA toolkit is (the Bazel targets are
// tagged "manual"; .ci/run builds them when /usr/local/cuda/bin/nvcc exists).
//
//   InMemoryStore store;                       // or the job's control-plane store
//   NcclOptions options;
//   options.device = local_rank;               // LOCAL_RANK picks the GPU (NcclDeviceFromEnv)
//   ASSIGN_OR_RETURN(auto backend, CreateNcclBackend(&store, rank, world, options));
//   ASSIGN_OR_RETURN(auto comm, backend->Connect({0, 1}, "dp0"));   // every member calls it
//   // or a channel of the group's one communicator (the runtime's COLLECTIVE tasks):
//   ASSIGN_OR_RETURN(auto channel, backend->ConnectChannel({0, 1}, /*channel=*/7, "collective/7"));
//   comm->AllReduce(d_in, d_out, n, DataType::kFloat32, done);       // device pointers
//
// Connect: a communicator of its own. Member 0 of the group calls ncclGetUniqueId and publishes
// it (hex) in the store under "nccl/<hex of tag>/<group ranks>/<n>" (n: how many times this
// backend connected this group and tag before, so the n-th Connect of every member meets the
// others' n-th); the others Get it. Then ncclCommInitRankConfig, non-blocking, polled until
// every member joined; past `timeout_ms` it is aborted and Connect returns DeadlineExceeded
// naming the group.
// ConnectChannel: a channel of the group's communicator, one per group (its rank list) on this
// backend. The group's first ConnectChannel creates it as Connect does, under the key
// "nccl-channels/<group ranks>/<n>" (n: communicators this backend created for the group
// before), which does not depend on the channel, so the members meet whichever channel each
// connects first; ConnectChannels of the group that come meanwhile (from other threads) wait for
// that creation and share its result, a failure included. The communicator lives until the last
// of its channels is destroyed; after that (or after a failed creation) the group's next
// ConnectChannel creates the next one (the n-th of every member meets the others' n-th, so the
// members drop a group's channels together before connecting new ones). A channel id already
// connected on the group (also one destroyed, or whose connect failed: ids are not reused, as in
// the gloo backend) is InvalidArgument naming the group and the channel.
// stats(): contexts = communicators created (Connect's and one per group for the channels),
// channels = communicators handed out, fallbacks = 0.
//
// Channels: the calls of all channels of a group go into its communicator's one queue and run
// on its one stream in the order they are issued, whichever channel each came on; messages name
// the channel ("channel 7 'collective/7': AllReduce of ..."). So every member must issue the
// calls of a group's channels in one agreed order, and the calls of its groups in an order
// consistent across members (NeedsIssueOrder() is true); the runtime issues in the plan's agreed
// order (actor/collective_order.h). A failure of the communicator (an NCCL error, a timeout)
// fails the calls of every channel of the group. A channel's Flush waits for that channel's
// calls, and so, the queue being in order, for every call of the group issued before them
// (possibly for a long queue of other channels' calls); it reports that channel's first failure.
// Destroying a channel waits for its calls.
// Launch order: the channel communicators of one backend (one per group) launch their calls on
// the device in the order the calls were queued across all of them -- each worker waits for its
// call's turn -- so the device gets the kernels of two groups in the agreed issue order, not in
// the order the workers happened to run (Connect's communicators launch independently). So a
// channel call's `done` must not block on another group's channel of the same backend (its
// Flush, its destruction): that channel's next call may wait for a turn behind this worker.
//
// Each communicator owns a CUDA stream (cudaStreamNonBlocking) on its device, and one worker
// thread that does everything else, so a call only queues and returns:
//   - the worker takes calls in issue order, checks them (dtype, counts, root / peer, device
//     pointers), enqueues the NCCL op(s) on the stream, records a CUDA event after them and
//     queues a host function that wakes the worker when the stream reaches it;
//   - completions: the oldest in-flight call is done when its event is (cudaEventQuery), and its
//     `done` runs on the worker thread, in issue order. Calls that failed their checks complete
//     in the same order (InvalidArgument) and do not break the communicator.
//   - errors and timeouts: while calls are in flight the worker wakes at least every
//     `poll_interval_ms` to ask ncclCommGetAsyncError (a peer whose connection broke gives an
//     error, not a hang) and to check the oldest call's deadline: `timeout_ms` after it became
//     the oldest (so a long queue behind a slow call never times out by waiting). On an error or
//     a timeout the communicator calls ncclCommAbort (so the device kernels return), fails the
//     call (Unavailable naming the NCCL error and ncclGetLastError, or DeadlineExceeded) and
//     every later one with the same status, as collective.h requires.
// Mapping: AllReduce -> ncclAllReduce(sum); AllGather -> ncclAllGather when every count is the
// same, else one ncclBroadcast per member into its offset inside a group; ReduceScatter ->
// ncclReduceScatter when even, else one ncclReduce(sum) of each member's block to that member
// inside a group; Broadcast -> ncclBroadcast; AllToAll -> ncclSend/ncclRecv pairs inside a group
// (the own block by cudaMemcpyAsync on the stream); Send / Recv -> ncclSend / ncclRecv (a peer
// other than this member). Zero-element transfers enqueue nothing (every member skips them
// alike). Dtypes: float32, float64, int32, int64, float16, bfloat16; bool is InvalidArgument.
// Unlike gloo, a lone Send occupies the stream until the peer's matching Recv runs (so do the
// calls behind it): two members that both Send to each other first wait until the timeout.
// Exchanges go through AllToAll (sends and receives in one group), or one side receives first.
//
// Buffers: device memory of this communicator's device (or memory it can address), whose
// contents are ready when the call is issued (the stream does not wait for other streams); they
// are complete for every stream once `done` ran.
// Threading: calls may come from any thread (they are queued under a mutex). `done` may issue new
// calls, but must not call Flush (FailedPrecondition) or destroy its communicator. Destroying a
// communicator waits for the calls issued (each bounded by the timeout), then finalizes the NCCL
// communicator (or aborts it after a failure) and frees the stream; destroy every member's
// communicators at about the same time, after the callbacks of the last calls.
// CreateNcclBackend, Connect, a ConnectChannel that creates the group's communicator and the
// destructor (of a channel: the group's last one's) make `device` the calling thread's current
// one.
// Sources: nccl_collective.cc (the backend: Connect, channels sharing a group's communicator,
// the rendezvous), nccl_communicator.{h,cc} (one communicator: its calls, checks and worker).
// Tests: nccl_collective_test (on GPUs; skips without one) and nccl_collective_fake_test (the
// same tests over nccl_fake.cc, an in-process fake of the CUDA runtime and NCCL).
#ifndef ONEFLOW_LIKE_COMM_NCCL_COLLECTIVE_H_
#define ONEFLOW_LIKE_COMM_NCCL_COLLECTIVE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "oneflow_like/comm/collective.h"

namespace oneflow_like {
namespace comm {

struct NcclOptions {
  // CUDA device ordinal of this rank. One device per rank: two members of one group on the
  // same device is an NCCL error. The caller picks it, usually from LOCAL_RANK.
  int32_t device = 0;
  // Connect (store wait and communicator creation) and every call: DeadlineExceeded past it.
  int64_t timeout_ms = 300000;
  // How often the worker checks ncclCommGetAsyncError and the deadline while calls are in flight
  // (completions themselves wake it at once).
  int64_t poll_interval_ms = 10;
};

// The device LOCAL_RANK names (0 when unset); InvalidArgument for a value that is not a
// non-negative integer.
absl::StatusOr<int32_t> NcclDeviceFromEnv();

// Checks the arguments and the device: InvalidArgument for a bad rank, world size, device or
// timeout; Unavailable "no CUDA device: ..." when the CUDA runtime finds no device (no GPU, no
// driver) or the device cannot be selected. `store` must outlive the backend.
absl::StatusOr<std::unique_ptr<CollectiveBackend>> CreateNcclBackend(RendezvousStore* store, int32_t rank,
                                                                     int32_t world_size, NcclOptions options);

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_NCCL_COLLECTIVE_H_
