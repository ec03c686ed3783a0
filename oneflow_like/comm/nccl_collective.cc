#include "oneflow_like/comm/nccl_collective.h"

#include "oneflow_like/comm/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace comm {
namespace {

using nccl_internal::Clock;
using nccl_internal::CudaErrorText;
using nccl_internal::GroupCommunicator;
using nccl_internal::HexDecode;
using nccl_internal::HexEncode;
using nccl_internal::LaunchTurns;
using nccl_internal::NewNcclCommunicator;

// A channel (ConnectChannel): forwards every call to its group's shared communicator, its calls
// named "channel <id> '<tag>': ..." in messages. It counts its own calls, so that Flush and the
// destructor wait for this channel's calls (and so for every call of the group issued before
// them: the shared queue completes in issue order), and Flush reports this channel's first
// failure. The shared communicator goes when its last channel does.
class NcclChannel final : public Communicator {
 public:
  NcclChannel(std::shared_ptr<GroupCommunicator> shared, std::string description, std::string label)
      : shared_(std::move(shared)), description_(std::move(description)), label_(std::move(label)),
        calls_(std::make_shared<Calls>()) {}

  ~NcclChannel() override {
    // its calls finish first (each bounded by the timeout); then the shared communicator is
    // released, and destroyed here if this was its last channel
    std::unique_lock<std::mutex> lock(calls_->mu);
    calls_->changed.wait(lock, [&] { return calls_->completed >= calls_->issued; });
  }

  int32_t rank() const override { return shared_->rank(); }
  int32_t size() const override { return shared_->size(); }
  std::string description() const override { return description_; }

  void AllReduce(const void* in, void* out, int64_t count, DataType dtype, CollectiveDone done) override {
    shared_->AllReduceAs(label_, in, out, count, dtype, Track(std::move(done)));
  }
  void AllGather(const void* in, void* out, std::vector<int64_t> counts, DataType dtype, CollectiveDone done) override {
    shared_->AllGatherAs(label_, in, out, std::move(counts), dtype, Track(std::move(done)));
  }
  void ReduceScatter(const void* in, void* out, std::vector<int64_t> counts, DataType dtype,
                     CollectiveDone done) override {
    shared_->ReduceScatterAs(label_, in, out, std::move(counts), dtype, Track(std::move(done)));
  }
  void Broadcast(void* buffer, int64_t count, DataType dtype, int32_t root, CollectiveDone done) override {
    shared_->BroadcastAs(label_, buffer, count, dtype, root, Track(std::move(done)));
  }
  void AllToAll(const void* in, std::vector<int64_t> send_counts, void* out, std::vector<int64_t> recv_counts,
                DataType dtype, CollectiveDone done) override {
    shared_->AllToAllAs(label_, in, std::move(send_counts), out, std::move(recv_counts), dtype,
                        Track(std::move(done)));
  }
  void Send(const void* in, int64_t count, DataType dtype, int32_t peer, CollectiveDone done) override {
    shared_->SendAs(label_, in, count, dtype, peer, Track(std::move(done)));
  }
  void Recv(void* out, int64_t count, DataType dtype, int32_t peer, CollectiveDone done) override {
    shared_->RecvAs(label_, out, count, dtype, peer, Track(std::move(done)));
  }

  absl::Status Flush() override {
    if (shared_->OnWorkerThread()) {
      return absl::FailedPreconditionError(
          absl::StrCat(description_, ": Flush called from a completion callback (it would wait for itself)"));
    }
    std::unique_lock<std::mutex> lock(calls_->mu);
    const uint64_t target = calls_->issued;
    calls_->changed.wait(lock, [&] { return calls_->completed >= target; });
    return calls_->first_error;
  }

 private:
  struct Calls {
    std::mutex mu;
    std::condition_variable changed;
    uint64_t issued = 0;
    uint64_t completed = 0;
    absl::Status first_error;
  };

  CollectiveDone Track(CollectiveDone done) {
    {
      std::lock_guard<std::mutex> lock(calls_->mu);
      ++calls_->issued;
    }
    return [calls = calls_, done = std::move(done)](const absl::Status& status) {
      if (done) done(status);
      {
        std::lock_guard<std::mutex> lock(calls->mu);
        ++calls->completed;
        if (!status.ok() && calls->first_error.ok()) calls->first_error = status;
      }
      calls->changed.notify_all();
    };
  }

  const std::shared_ptr<GroupCommunicator> shared_;
  const std::string description_;
  const std::string label_;
  const std::shared_ptr<Calls> calls_;  // shared with the callbacks in flight
};

// Connect: a communicator of its own per call. ConnectChannel: one communicator per group (its
// rank list), created by the group's first ConnectChannel on this backend, shared by the group's
// channels until the last of them is destroyed; a later ConnectChannel of the group then creates
// the next one. Its rendezvous key depends on the group and on how many communicators this
// backend created for the group before ("nccl-channels/<group ranks>/<n>"): the n-th of every
// member meets the others' n-th, whichever channel each member connects first. Channel ids, as
// in the gloo backend, are never reused on a backend (a second ConnectChannel with an id is
// InvalidArgument, also after the first channel was destroyed or its connect failed).
class NcclBackend final : public CollectiveBackend {
 public:
  NcclBackend(RendezvousStore* store, int32_t rank, int32_t world_size, NcclOptions options)
      : store_(store), rank_(rank), world_size_(world_size), options_(options) {}

  std::string name() const override { return "nccl"; }
  std::string memory_type() const override { return "cuda"; }
  // The channels of a group share one queue, and groups share the device (collective.h).
  bool NeedsIssueOrder() const override { return true; }

  absl::StatusOr<std::unique_ptr<Communicator>> Connect(const std::vector<int32_t>& group,
                                                        const std::string& tag) override {
    const std::string description =
        absl::StrCat("nccl group ", GroupText(group), " '", tag, "' (cuda:", options_.device, ")");
    ASSIGN_OR_RETURN(const int32_t me, Member(group, description));
    std::string key = absl::StrCat("nccl/", HexEncode(tag), "/", absl::StrJoin(group, ","));
    {
      std::lock_guard<std::mutex> lock(mu_);
      absl::StrAppend(&key, "/", connects_[key]++);
    }
    ASSIGN_OR_RETURN(std::unique_ptr<GroupCommunicator> comm, Create(group, me, key, description, /*turns=*/nullptr));
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.contexts;
      ++stats_.channels;
    }
    return std::unique_ptr<Communicator>(std::move(comm));
  }

  absl::StatusOr<std::unique_ptr<Communicator>> ConnectChannel(const std::vector<int32_t>& group, uint64_t channel,
                                                               const std::string& tag) override {
    const std::string description = absl::StrCat("nccl group ", GroupText(group), " channel ", channel, " '", tag,
                                                 "' (cuda:", options_.device, ")");
    ASSIGN_OR_RETURN(const int32_t me, Member(group, description));
    std::shared_ptr<GroupCommunicator> shared;
    std::shared_future<Shared> pending;  // another ConnectChannel's creation, or this one's
    std::promise<Shared> creation;
    int64_t generation = -1;  // >= 0: this call creates the group's communicator
    {
      std::lock_guard<std::mutex> lock(mu_);
      ChannelGroup& g = groups_[group];
      if (!g.channels.insert(channel).second) {
        return absl::InvalidArgumentError(absl::StrCat("nccl: channel ", channel, " of group ", GroupText(group),
                                                       " is already connected on rank ", rank_, " (tag '", tag,
                                                       "')"));
      }
      shared = g.comm.lock();
      if (shared == nullptr) {
        if (!g.creating.valid()) {
          generation = g.created++;
          g.creating = creation.get_future().share();
        }
        pending = g.creating;
      }
    }
    if (generation >= 0) {
      const std::string key = absl::StrCat("nccl-channels/", absl::StrJoin(group, ","), "/", generation);
      const std::string shared_description =
          absl::StrCat("nccl group ", GroupText(group), " (cuda:", options_.device, ", shared by its channels)");
      absl::StatusOr<std::unique_ptr<GroupCommunicator>> made = Create(group, me, key, shared_description, turns_);
      Shared result = made.ok() ? Shared(std::shared_ptr<GroupCommunicator>(std::move(*made))) : Shared(made.status());
      {
        std::lock_guard<std::mutex> lock(mu_);
        ChannelGroup& g = groups_[group];
        if (result.ok()) {
          g.comm = *result;
          ++stats_.contexts;
        }
        g.creating = {};  // later ones find the communicator, or (after a failure) try the next
      }
      creation.set_value(std::move(result));  // wakes the concurrent ConnectChannels of the group
    }
    if (shared == nullptr) {
      // bounded: the creating call gives up after options_.timeout_ms
      const Shared& result = pending.get();
      if (!result.ok()) return result.status();
      shared = *result;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.channels;
    }
    return std::unique_ptr<Communicator>(
        new NcclChannel(std::move(shared), description, absl::StrCat("channel ", channel, " '", tag, "': ")));
  }

  CollectiveBackendStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  using Shared = absl::StatusOr<std::shared_ptr<GroupCommunicator>>;
  struct ChannelGroup {
    std::set<uint64_t> channels;              // ids connected (or tried) on this backend
    std::weak_ptr<GroupCommunicator> comm;     // the group's communicator while a channel holds it
    std::shared_future<Shared> creating;      // valid while a ConnectChannel creates it
    int64_t created = 0;                      // creations started so far (the rendezvous key)
  };

  static std::string GroupText(const std::vector<int32_t>& group) {
    return absl::StrCat("[", absl::StrJoin(group, ","), "]");
  }

  // This rank's position in `group`: InvalidArgument (naming `description`) for a rank out of
  // range or repeated, or a group without this rank.
  absl::StatusOr<int32_t> Member(const std::vector<int32_t>& group, const std::string& description) const {
    int32_t me = -1;
    std::set<int32_t> seen;
    for (size_t k = 0; k < group.size(); ++k) {
      if (group[k] < 0 || group[k] >= world_size_ || !seen.insert(group[k]).second) {
        return absl::InvalidArgumentError(absl::StrCat(description, ": rank ", group[k],
                                                       " is out of range or repeated (world size ", world_size_, ")"));
      }
      if (group[k] == rank_) me = static_cast<int32_t>(k);
    }
    if (me < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(description, ": rank ", rank_, " is not in group ", GroupText(group)));
    }
    return me;
  }

  // The rendezvous under `key` (member 0 publishes the unique id, the others Get it) and the
  // non-blocking ncclCommInitRankConfig, both within options_.timeout_ms. `turns`: the channels'
  // LaunchTurns (null for Connect's communicators, which launch independently).
  absl::StatusOr<std::unique_ptr<GroupCommunicator>> Create(const std::vector<int32_t>& group, int32_t me,
                                                           const std::string& key, const std::string& description,
                                                           std::shared_ptr<LaunchTurns> turns) {
    const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(options_.timeout_ms);
    const int32_t n = static_cast<int32_t>(group.size());
    ncclUniqueId id;
    if (me == 0) {
      const ncclResult_t r = ncclGetUniqueId(&id);
      if (r != ncclSuccess) {
        return absl::UnavailableError(absl::StrCat(description, ": ncclGetUniqueId: ", ncclGetErrorString(r), " (",
                                                   ncclGetLastError(nullptr), ")"));
      }
      RETURN_IF_ERROR(store_->Set(key, HexEncode(std::string(id.internal, sizeof(id.internal)))));
    } else {
      const int64_t left_ms = std::max<int64_t>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
      absl::StatusOr<std::string> hex = store_->Get(key, left_ms);
      if (!hex.ok()) {
        return absl::Status(hex.status().code(),
                            absl::StrCat(description, ": the NCCL unique id of member 0 (rank ", group[0],
                                         ") did not arrive: ", hex.status().message()));
      }
      std::string bytes;
      if (!HexDecode(*hex, &bytes) || bytes.size() != sizeof(id.internal)) {
        return absl::DataLossError(absl::StrCat(description, ": garbage NCCL unique id under '", key, "' (",
                                                hex->size(), " characters; expected ", 2 * sizeof(id.internal),
                                                " hex digits)"));
      }
      std::copy(bytes.begin(), bytes.end(), id.internal);
    }

    cudaError_t e = cudaSetDevice(options_.device);
    if (e != cudaSuccess) {
      return absl::UnavailableError(absl::StrCat(description, ": cudaSetDevice: ", CudaErrorText(e)));
    }
    cudaStream_t stream = nullptr;
    e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
      return absl::UnavailableError(absl::StrCat(description, ": cudaStreamCreateWithFlags: ", CudaErrorText(e)));
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // so that a member that never comes is a timeout, not a hang
    ncclComm_t comm = nullptr;
    ncclResult_t r = ncclCommInitRankConfig(&comm, n, id, me, &config);
    while (r == ncclSuccess || r == ncclInProgress) {
      ncclResult_t state = ncclSuccess;
      r = ncclCommGetAsyncError(comm, &state);
      if (r != ncclSuccess) break;
      if (state == ncclSuccess) {
        return NewNcclCommunicator(me, n, description, options_.device, options_, comm, stream,
                                                  std::move(turns));
      }
      if (state != ncclInProgress) {
        r = state;
        break;
      }
      if (Clock::now() > deadline) {
        ncclCommAbort(comm);
        cudaStreamDestroy(stream);
        return absl::DeadlineExceededError(absl::StrCat(description, ": not every member joined within ",
                                                        options_.timeout_ms, " ms (ncclCommInitRankConfig)"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::string message = absl::StrCat(description, ": ncclCommInitRankConfig: ", ncclGetErrorString(r));
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && *last != '\0') absl::StrAppend(&message, " (", last, ")");
    if (comm != nullptr) ncclCommAbort(comm);
    cudaStreamDestroy(stream);
    return absl::UnavailableError(message);
  }

  RendezvousStore* const store_;
  const int32_t rank_;
  const int32_t world_size_;
  const NcclOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, int64_t> connects_;                    // Connect calls per (tag, group) so far
  std::map<std::vector<int32_t>, ChannelGroup> groups_;        // ConnectChannel's groups
  const std::shared_ptr<LaunchTurns> turns_ = std::make_shared<LaunchTurns>();  // every communicator's
  CollectiveBackendStats stats_;
};

}  // namespace

absl::StatusOr<int32_t> NcclDeviceFromEnv() {
  const char* value = std::getenv("LOCAL_RANK");
  if (value == nullptr || *value == '\0') return 0;
  int32_t device = 0;
  if (!absl::SimpleAtoi(value, &device) || device < 0) {
    return absl::InvalidArgumentError(absl::StrCat("LOCAL_RANK='", value, "' is not a device ordinal"));
  }
  return device;
}

absl::StatusOr<std::unique_ptr<CollectiveBackend>> CreateNcclBackend(RendezvousStore* store, int32_t rank,
                                                                     int32_t world_size, NcclOptions options) {
  if (store == nullptr) return absl::InvalidArgumentError("nccl: no rendezvous store");
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrCat("nccl: rank ", rank, " of world size ", world_size));
  }
  if (options.timeout_ms <= 0 || options.poll_interval_ms <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("nccl: timeout_ms (", options.timeout_ms,
                                                   ") and poll_interval_ms (", options.poll_interval_ms,
                                                   ") must be positive"));
  }
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return absl::UnavailableError(absl::StrCat("no CUDA device: cudaGetDeviceCount: ", CudaErrorText(e)));
  }
  if (count == 0) return absl::UnavailableError("no CUDA device: cudaGetDeviceCount found none");
  if (options.device < 0 || options.device >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl: device ", options.device, " does not exist (", count, " CUDA device(s))"));
  }
  const cudaError_t set = cudaSetDevice(options.device);
  if (set != cudaSuccess) {
    return absl::UnavailableError(absl::StrCat("nccl: cudaSetDevice(", options.device, "): ", CudaErrorText(set)));
  }
  return std::unique_ptr<CollectiveBackend>(new NcclBackend(store, rank, world_size, options));
}

}  // namespace comm
}  // namespace oneflow_like
