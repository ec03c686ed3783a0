// The NCCL backend's communicator over one group (nccl_collective.h describes the behaviour):
// internal to comm's NCCL backend, which nccl_collective.cc builds on it (channels sharing one
// communicator per group, connection, the factory). Split from it by feature: this half owns the
// calls, their checks and the worker thread that launches them and reports their completions.
#ifndef ONEFLOW_LIKE_COMM_NCCL_COMMUNICATOR_H_
#define ONEFLOW_LIKE_COMM_NCCL_COMMUNICATOR_H_

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "oneflow_like/comm/collective.h"
#include "oneflow_like/comm/nccl_collective.h"

namespace oneflow_like {
namespace comm {
namespace nccl_internal {

using Clock = std::chrono::steady_clock;

std::string CudaErrorText(cudaError_t e);
// The unique id's bytes as lowercase hex (the store holds strings), and back (false: not hex).
std::string HexEncode(const std::string& bytes);
bool HexDecode(const std::string& hex, std::string* bytes);

// The order in which the channel communicators of one backend (ConnectChannel's, one per group;
// Connect's launch independently) launch their calls: the order the calls were queued across all
// of them. Each communicator's worker waits for its call's turn
// before it launches (or skips) it, then passes the turn on. Without it, the workers of two groups
// would launch in whatever order they were scheduled, and two ranks could put the kernels of two
// communicators on their devices in opposite orders, which NCCL documents can hang; with it, the
// device sees the order the calls were issued in (the runtime's agreed order: NeedsIssueOrder).
struct LaunchTurns {
  std::mutex mu;
  std::condition_variable passed;
  uint64_t queued = 0;    // turns handed out
  uint64_t launched = 0;  // turns passed
};

// A communicator whose calls can carry a label: the channel they came on ("channel 7 'c7'"),
// named in their messages. OnWorkerThread: whether the caller is its worker (a completion
// callback), where Flush would wait for itself.
class GroupCommunicator : public Communicator {
 public:
  virtual void AllReduceAs(const std::string& label, const void* in, void* out, int64_t count, DataType dtype,
                           CollectiveDone done) = 0;
  virtual void AllGatherAs(const std::string& label, const void* in, void* out, std::vector<int64_t> counts,
                           DataType dtype, CollectiveDone done) = 0;
  virtual void ReduceScatterAs(const std::string& label, const void* in, void* out, std::vector<int64_t> counts,
                               DataType dtype, CollectiveDone done) = 0;
  virtual void BroadcastAs(const std::string& label, void* buffer, int64_t count, DataType dtype, int32_t root,
                           CollectiveDone done) = 0;
  virtual void AllToAllAs(const std::string& label, const void* in, std::vector<int64_t> send_counts, void* out,
                          std::vector<int64_t> recv_counts, DataType dtype, CollectiveDone done) = 0;
  virtual void SendAs(const std::string& label, const void* in, int64_t count, DataType dtype, int32_t peer,
                      CollectiveDone done) = 0;
  virtual void RecvAs(const std::string& label, void* out, int64_t count, DataType dtype, int32_t peer,
                      CollectiveDone done) = 0;
  virtual bool OnWorkerThread() const = 0;
};

// Takes `comm` (initialized) and `stream` (its own); starts the worker. `turns`: the backend's
// LaunchTurns for channel communicators, null for Connect's.
std::unique_ptr<GroupCommunicator> NewNcclCommunicator(int32_t rank, int32_t size, std::string description, int32_t device,
                                                      NcclOptions options, ncclComm_t comm, cudaStream_t stream,
                                                      std::shared_ptr<LaunchTurns> turns);

}  // namespace nccl_internal
}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_NCCL_COMMUNICATOR_H_
