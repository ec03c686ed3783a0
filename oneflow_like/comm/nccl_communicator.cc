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
namespace nccl_internal {

std::string CudaErrorText(cudaError_t e) { return absl::StrCat(cudaGetErrorName(e), ": ", cudaGetErrorString(e)); }

std::string HexEncode(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool HexDecode(const std::string& hex, std::string* bytes) {
  if (hex.size() % 2 != 0) return false;
  bytes->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = HexDigit(hex[i]), lo = HexDigit(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    bytes->push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}

namespace {


// Calls enqueued on the stream and not yet completed, at most (each holds a CUDA event).
constexpr size_t kMaxInFlight = 256;





std::string CountsText(const std::vector<int64_t>& counts) { return absl::StrCat("[", absl::StrJoin(counts, ","), "]"); }

bool AllEqual(const std::vector<int64_t>& counts) {
  return std::all_of(counts.begin(), counts.end(), [&](int64_t c) { return c == counts.front(); });
}

std::vector<int64_t> Offsets(const std::vector<int64_t>& counts) {
  std::vector<int64_t> offsets(counts.size(), 0);
  for (size_t k = 1; k < counts.size(); ++k) offsets[k] = offsets[k - 1] + counts[k - 1];
  return offsets;
}

absl::StatusOr<ncclDataType_t> NcclType(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kFloat64: return ncclFloat64;
    case DataType::kInt32: return ncclInt32;
    case DataType::kInt64: return ncclInt64;
    case DataType::kFloat16: return ncclFloat16;
    case DataType::kBFloat16: return ncclBfloat16;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "dtype ", DataTypeName(dtype), " is not supported by nccl (float32, float64, int32, int64, float16, bfloat16)"));
  }
}

// What the worker does for one call: `check` validates it (InvalidArgument; the communicator
// stays usable), `launch` enqueues it on the stream (an error breaks the communicator).
struct Call {
  std::string name;
  std::function<absl::Status()> check;
  std::function<absl::Status()> launch;
  CollectiveDone done;
  uint64_t turn = 0;  // LaunchTurns
};


// State shared by callers, the worker and the host functions the stream runs (which may outlive
// the communicator, hence shared_ptr).
struct Mailbox {
  std::mutex mu;
  std::condition_variable wake;     // the worker: a call, a completion, stop
  std::condition_variable flushed;  // Flush: `completed` moved
  std::deque<Call> pending;
  uint64_t signals = 0;  // completions announced by the stream's host functions
  uint64_t issued = 0;
  uint64_t completed = 0;
  absl::Status first_error;
  bool stop = false;
};

void CUDART_CB WakeWorker(void* data) {  // a CUDA host function: no CUDA calls in here
  auto* mailbox = static_cast<std::shared_ptr<Mailbox>*>(data);
  {
    std::lock_guard<std::mutex> lock((*mailbox)->mu);
    ++(*mailbox)->signals;
  }
  (*mailbox)->wake.notify_all();
  delete mailbox;
}

class NcclCommunicator final : public GroupCommunicator {
 public:
  NcclCommunicator(int32_t rank, int32_t size, std::string description, int32_t device, NcclOptions options,
                   ncclComm_t comm, cudaStream_t stream, std::shared_ptr<LaunchTurns> turns)
      : rank_(rank), size_(size), description_(std::move(description)), device_(device), options_(options),
        comm_(comm), stream_(stream), mailbox_(std::make_shared<Mailbox>()), turns_(std::move(turns)) {
    worker_ = std::thread([this] { Run(); });
    worker_id_ = worker_.get_id();
  }

  ~NcclCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mailbox_->mu);
      mailbox_->stop = true;
    }
    mailbox_->wake.notify_all();
    worker_.join();  // it finishes every call issued (each bounded by the timeout)
    cudaSetDevice(device_);
    if (comm_ != nullptr) Finalize();
    for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
    cudaStreamDestroy(stream_);
  }

  int32_t rank() const override { return rank_; }
  int32_t size() const override { return size_; }
  std::string description() const override { return description_; }

  void AllReduce(const void* in, void* out, int64_t count, DataType dtype, CollectiveDone done) override {
    AllReduceAs("", in, out, count, dtype, std::move(done));
  }
  void AllGather(const void* in, void* out, std::vector<int64_t> counts, DataType dtype, CollectiveDone done) override {
    AllGatherAs("", in, out, std::move(counts), dtype, std::move(done));
  }
  void ReduceScatter(const void* in, void* out, std::vector<int64_t> counts, DataType dtype,
                     CollectiveDone done) override {
    ReduceScatterAs("", in, out, std::move(counts), dtype, std::move(done));
  }
  void Broadcast(void* buffer, int64_t count, DataType dtype, int32_t root, CollectiveDone done) override {
    BroadcastAs("", buffer, count, dtype, root, std::move(done));
  }
  void AllToAll(const void* in, std::vector<int64_t> send_counts, void* out, std::vector<int64_t> recv_counts,
                DataType dtype, CollectiveDone done) override {
    AllToAllAs("", in, std::move(send_counts), out, std::move(recv_counts), dtype, std::move(done));
  }
  void Send(const void* in, int64_t count, DataType dtype, int32_t peer, CollectiveDone done) override {
    SendAs("", in, count, dtype, peer, std::move(done));
  }
  void Recv(void* out, int64_t count, DataType dtype, int32_t peer, CollectiveDone done) override {
    RecvAs("", out, count, dtype, peer, std::move(done));
  }

  absl::Status Flush() override {
    if (OnWorkerThread()) {
      return absl::FailedPreconditionError(
          absl::StrCat(description_, ": Flush called from a completion callback (it would wait for itself)"));
    }
    std::unique_lock<std::mutex> lock(mailbox_->mu);
    const uint64_t target = mailbox_->issued;
    mailbox_->flushed.wait(lock, [&] { return mailbox_->completed >= target; });
    return mailbox_->first_error;
  }

  // Whether the caller is the worker thread (the one that runs the `done` callbacks).
  bool OnWorkerThread() const override { return std::this_thread::get_id() == worker_id_; }

  // The calls, each with `label` in front of its name in messages (a channel's: "channel 5
  // 'collective/5': "; "" for the communicator's own calls).
  void AllReduceAs(const std::string& label, const void* in, void* out, int64_t count, DataType dtype,
                   CollectiveDone done) override {
    const std::string name = absl::StrCat(label, "AllReduce of ", count, " ", DataTypeName(dtype));
    Submit(
        name,
        [=] {
          RETURN_IF_ERROR(CheckCount(count, "count"));
          RETURN_IF_ERROR(NcclType(dtype).status());
          RETURN_IF_ERROR(CheckPointer(in, count, "in"));
          return CheckPointer(out, count, "out");
        },
        [=] {
          if (count == 0) return absl::OkStatus();
          const ncclDataType_t t = *NcclType(dtype);
          return Enqueue(name, "ncclAllReduce", false,
                         [&] { return ncclAllReduce(in, out, count, t, ncclSum, comm_, stream_); });
        },
        std::move(done));
  }

  void AllGatherAs(const std::string& label, const void* in, void* out, std::vector<int64_t> counts, DataType dtype,
                   CollectiveDone done) override {
    const std::string name = absl::StrCat(label, "AllGather of ", CountsText(counts), " ", DataTypeName(dtype));
    Submit(
        name,
        [=] {
          RETURN_IF_ERROR(CheckCounts(counts, size_, "counts"));
          RETURN_IF_ERROR(NcclType(dtype).status());
          RETURN_IF_ERROR(CheckPointer(in, counts[rank_], "in"));
          return CheckPointer(out, SumCounts(counts), "out");
        },
        [=] {
          if (SumCounts(counts) == 0) return absl::OkStatus();
          const ncclDataType_t t = *NcclType(dtype);
          char* const base = static_cast<char*>(out);
          const int64_t elem = SizeOf(dtype);
          if (AllEqual(counts)) {
            return Enqueue(name, "ncclAllGather", false,
                           [&] { return ncclAllGather(in, base, counts[0], t, comm_, stream_); });
          }
          const std::vector<int64_t> offsets = Offsets(counts);
          return Enqueue(name, "ncclBroadcast", true, [&] {
            for (int32_t k = 0; k < size_; ++k) {
              if (counts[k] == 0) continue;
              char* const block = base + offsets[k] * elem;
              const void* send = k == rank_ ? in : block;
              const ncclResult_t r = ncclBroadcast(send, block, counts[k], t, k, comm_, stream_);
              if (r != ncclSuccess && r != ncclInProgress) return r;
            }
            return ncclSuccess;
          });
        },
        std::move(done));
  }

  void ReduceScatterAs(const std::string& label, const void* in, void* out, std::vector<int64_t> counts,
                       DataType dtype, CollectiveDone done) override {
    const std::string name = absl::StrCat(label, "ReduceScatter of ", CountsText(counts), " ", DataTypeName(dtype));
    Submit(
        name,
        [=] {
          RETURN_IF_ERROR(CheckCounts(counts, size_, "counts"));
          RETURN_IF_ERROR(NcclType(dtype).status());
          RETURN_IF_ERROR(CheckPointer(in, SumCounts(counts), "in"));
          return CheckPointer(out, counts[rank_], "out");
        },
        [=] {
          if (SumCounts(counts) == 0) return absl::OkStatus();
          const ncclDataType_t t = *NcclType(dtype);
          if (AllEqual(counts)) {
            return Enqueue(name, "ncclReduceScatter", false,
                           [&] { return ncclReduceScatter(in, out, counts[0], t, ncclSum, comm_, stream_); });
          }
          const std::vector<int64_t> offsets = Offsets(counts);
          const char* const base = static_cast<const char*>(in);
          const int64_t elem = SizeOf(dtype);
          return Enqueue(name, "ncclReduce", true, [&] {
            for (int32_t k = 0; k < size_; ++k) {
              if (counts[k] == 0) continue;
              void* const recv = k == rank_ ? out : nullptr;  // only the root's is used
              const ncclResult_t r =
                  ncclReduce(base + offsets[k] * elem, recv, counts[k], t, ncclSum, k, comm_, stream_);
              if (r != ncclSuccess && r != ncclInProgress) return r;
            }
            return ncclSuccess;
          });
        },
        std::move(done));
  }

  void BroadcastAs(const std::string& label, void* buffer, int64_t count, DataType dtype, int32_t root,
                   CollectiveDone done) override {
    const std::string name = absl::StrCat(label, "Broadcast of ", count, " ", DataTypeName(dtype), " from member ", root);
    Submit(
        name,
        [=] {
          RETURN_IF_ERROR(CheckCount(count, "count"));
          RETURN_IF_ERROR(CheckMember(root, "root"));
          RETURN_IF_ERROR(NcclType(dtype).status());
          return CheckPointer(buffer, count, "buffer");
        },
        [=] {
          if (count == 0) return absl::OkStatus();
          const ncclDataType_t t = *NcclType(dtype);
          return Enqueue(name, "ncclBroadcast", false,
                         [&] { return ncclBroadcast(buffer, buffer, count, t, root, comm_, stream_); });
        },
        std::move(done));
  }

  void AllToAllAs(const std::string& label, const void* in, std::vector<int64_t> send_counts, void* out,
                  std::vector<int64_t> recv_counts, DataType dtype, CollectiveDone done) override {
    const std::string name = absl::StrCat(label, "AllToAll sending ", CountsText(send_counts), " receiving ",
                                          CountsText(recv_counts), " ", DataTypeName(dtype));
    Submit(
        name,
        [=] {
          RETURN_IF_ERROR(CheckCounts(send_counts, size_, "send_counts"));
          RETURN_IF_ERROR(CheckCounts(recv_counts, size_, "recv_counts"));
          if (send_counts[rank_] != recv_counts[rank_]) {
            return absl::InvalidArgumentError(absl::StrCat("this member sends itself ", send_counts[rank_],
                                                           " elements but receives ", recv_counts[rank_]));
          }
          RETURN_IF_ERROR(NcclType(dtype).status());
          RETURN_IF_ERROR(CheckPointer(in, SumCounts(send_counts), "in"));
          return CheckPointer(out, SumCounts(recv_counts), "out");
        },
        [=] {
          const ncclDataType_t t = *NcclType(dtype);
          const int64_t elem = SizeOf(dtype);
          const std::vector<int64_t> send_offsets = Offsets(send_counts), recv_offsets = Offsets(recv_counts);
          const char* const send_base = static_cast<const char*>(in);
          char* const recv_base = static_cast<char*>(out);
          if (send_counts[rank_] > 0) {  // the own block: a copy on the same stream
            const cudaError_t e =
                cudaMemcpyAsync(recv_base + recv_offsets[rank_] * elem, send_base + send_offsets[rank_] * elem,
                                send_counts[rank_] * elem, cudaMemcpyDeviceToDevice, stream_);
            if (e != cudaSuccess) return CudaStatus(e, name, "cudaMemcpyAsync");
          }
          bool any_peer = false;
          for (int32_t k = 0; k < size_; ++k) {
            if (k != rank_ && (send_counts[k] > 0 || recv_counts[k] > 0)) any_peer = true;
          }
          if (!any_peer) return absl::OkStatus();
          return Enqueue(name, "ncclSend/ncclRecv", true, [&] {
            for (int32_t k = 0; k < size_; ++k) {
              if (k == rank_) continue;
              if (send_counts[k] > 0) {
                const ncclResult_t r =
                    ncclSend(send_base + send_offsets[k] * elem, send_counts[k], t, k, comm_, stream_);
                if (r != ncclSuccess && r != ncclInProgress) return r;
              }
              if (recv_counts[k] > 0) {
                const ncclResult_t r =
                    ncclRecv(recv_base + recv_offsets[k] * elem, recv_counts[k], t, k, comm_, stream_);
                if (r != ncclSuccess && r != ncclInProgress) return r;
              }
            }
            return ncclSuccess;
          });
        },
        std::move(done));
  }

  void SendAs(const std::string& label, const void* in, int64_t count, DataType dtype, int32_t peer,
              CollectiveDone done) override {
    const std::string name = absl::StrCat(label, "Send of ", count, " ", DataTypeName(dtype), " to member ", peer);
    Submit(
        name, [=] { return CheckPointToPoint(in, count, dtype, peer); },
        [=] {
          if (count == 0) return absl::OkStatus();
          const ncclDataType_t t = *NcclType(dtype);
          return Enqueue(name, "ncclSend", false, [&] { return ncclSend(in, count, t, peer, comm_, stream_); });
        },
        std::move(done));
  }

  void RecvAs(const std::string& label, void* out, int64_t count, DataType dtype, int32_t peer, CollectiveDone done) override {
    const std::string name = absl::StrCat(label, "Recv of ", count, " ", DataTypeName(dtype), " from member ", peer);
    Submit(
        name, [=] { return CheckPointToPoint(out, count, dtype, peer); },
        [=] {
          if (count == 0) return absl::OkStatus();
          const ncclDataType_t t = *NcclType(dtype);
          return Enqueue(name, "ncclRecv", false, [&] { return ncclRecv(out, count, t, peer, comm_, stream_); });
        },
        std::move(done));
  }

 private:
  // A call in flight: its event, or (event == nullptr) a status decided at issue time, which is
  // reported when the call's turn comes so that callbacks keep the issue order.
  struct InFlight {
    std::string name;
    CollectiveDone done;
    cudaEvent_t event = nullptr;
    absl::Status status;
    Clock::time_point issued_at;
  };

  // --- callers' side ---

  void Submit(std::string name, std::function<absl::Status()> check, std::function<absl::Status()> launch,
              CollectiveDone done) {
    {
      std::lock_guard<std::mutex> lock(mailbox_->mu);
      uint64_t turn = 0;
      if (turns_ != nullptr) {  // under the mailbox's lock: this queue's calls take turns in queue order
        std::lock_guard<std::mutex> turns_lock(turns_->mu);
        turn = turns_->queued++;
      }
      mailbox_->pending.push_back(Call{std::move(name), std::move(check), std::move(launch), std::move(done), turn});
      ++mailbox_->issued;
    }
    mailbox_->wake.notify_all();
  }

  // --- checks (worker thread) ---

  absl::Status CheckCount(int64_t count, const char* what) const {
    if (count < 0) return absl::InvalidArgumentError(absl::StrCat(what, " is negative (", count, ")"));
    return absl::OkStatus();
  }

  absl::Status CheckMember(int32_t member, const char* what) const {
    if (member < 0 || member >= size_) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " ", member, " is not a member position of a group of ", size_));
    }
    return absl::OkStatus();
  }

  // `count` elements at `ptr` must be memory the device can address (not plain host memory,
  // not another device's).
  absl::Status CheckPointer(const void* ptr, int64_t count, const char* what) const {
    if (count == 0) return absl::OkStatus();
    if (ptr == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, " is null"));
    cudaPointerAttributes attr;
    const cudaError_t e = cudaPointerGetAttributes(&attr, ptr);
    if (e != cudaSuccess) {
      cudaGetLastError();  // not sticky: clear it
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is not a CUDA pointer (cudaPointerGetAttributes: ", CudaErrorText(e), ")"));
    }
    if (attr.type == cudaMemoryTypeUnregistered || attr.devicePointer == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " points to host memory; nccl needs device memory (cudaMalloc)"));
    }
    if (attr.type == cudaMemoryTypeDevice && attr.device != device_) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is memory of cuda:", attr.device, ", this communicator is on cuda:", device_));
    }
    return absl::OkStatus();
  }

  absl::Status CheckPointToPoint(const void* ptr, int64_t count, DataType dtype, int32_t peer) const {
    RETURN_IF_ERROR(CheckCount(count, "count"));
    RETURN_IF_ERROR(CheckMember(peer, "peer"));
    if (peer == rank_) {
      return absl::InvalidArgumentError(
          absl::StrCat("peer ", peer, " is this member, not another member"));
    }
    RETURN_IF_ERROR(NcclType(dtype).status());
    return CheckPointer(ptr, count, "buffer");
  }

  // --- errors ---

  absl::Status NcclStatus(ncclResult_t r, const std::string& call, const char* fn) const {
    std::string message = absl::StrCat(description_, ": ", call, ": ", fn, ": ", ncclGetErrorString(r));
    const char* last = comm_ != nullptr ? ncclGetLastError(comm_) : nullptr;
    if (last != nullptr && *last != '\0') absl::StrAppend(&message, " (", last, ")");
    switch (r) {
      case ncclInvalidArgument:
      case ncclInvalidUsage: return absl::InvalidArgumentError(message);
      case ncclSystemError:
      case ncclRemoteError: return absl::UnavailableError(message);
      default: return absl::InternalError(message);
    }
  }

  absl::Status CudaStatus(cudaError_t e, const std::string& call, const char* fn) const {
    return absl::InternalError(absl::StrCat(description_, ": ", call, ": ", fn, ": ", CudaErrorText(e)));
  }

  absl::Status TimeoutStatus(const std::string& call, const char* what) const {
    return absl::DeadlineExceededError(absl::StrCat(description_, ": ", call, ": ", what, " within ",
                                                    options_.timeout_ms,
                                                    " ms (a member is silent or gone, or called something else)"));
  }

  // --- the worker thread ---

  void Run() {
    cudaSetDevice(device_);
    std::unique_lock<std::mutex> lock(mailbox_->mu);
    while (true) {
      if (!mailbox_->pending.empty() && inflight_.size() < kMaxInFlight) {
        Call call = std::move(mailbox_->pending.front());
        mailbox_->pending.pop_front();
        lock.unlock();
        Issue(std::move(call));
        Poll();
        lock.lock();
        continue;
      }
      if (inflight_.empty()) {
        if (mailbox_->stop && mailbox_->pending.empty()) return;
        mailbox_->wake.wait(lock, [&] { return mailbox_->stop || !mailbox_->pending.empty(); });
        continue;
      }
      const uint64_t seen = mailbox_->signals;
      const size_t before = inflight_.size();
      lock.unlock();
      Poll();
      lock.lock();
      if (inflight_.size() != before) continue;
      mailbox_->wake.wait_for(lock, std::chrono::milliseconds(options_.poll_interval_ms), [&] {
        return mailbox_->signals != seen || (!mailbox_->pending.empty() && inflight_.size() < kMaxInFlight);
      });
    }
  }

  void Issue(Call call) {
    if (turns_ != nullptr) {  // wait for the call's turn on the device (LaunchTurns); passed on below
      std::unique_lock<std::mutex> lock(turns_->mu);
      turns_->passed.wait(lock, [&] { return turns_->launched == call.turn; });
    }
    struct PassTurn {
      LaunchTurns* turns;
      ~PassTurn() {
        if (turns == nullptr) return;
        {
          std::lock_guard<std::mutex> lock(turns->mu);
          ++turns->launched;
        }
        turns->passed.notify_all();
      }
    } pass{turns_.get()};
    InFlight f;
    f.name = std::move(call.name);
    f.done = std::move(call.done);
    f.issued_at = Clock::now();
    if (!failure_.ok()) {
      f.status = absl::Status(failure_.code(), absl::StrCat(f.name, " not run, an earlier call failed: ", failure_.message()));
      inflight_.push_back(std::move(f));
      return;
    }
    absl::Status checked = call.check();
    if (!checked.ok()) {
      f.status = absl::Status(checked.code(), absl::StrCat(description_, ": ", f.name, ": ", checked.message()));
      inflight_.push_back(std::move(f));
      return;
    }
    absl::Status launched = call.launch();
    cudaEvent_t event = nullptr;
    if (launched.ok()) {
      cudaError_t e = TakeEvent(&event);
      if (e == cudaSuccess) e = cudaEventRecord(event, stream_);
      if (e != cudaSuccess) launched = CudaStatus(e, f.name, "cudaEventRecord");
    }
    if (launched.ok()) {
      auto* wake = new std::shared_ptr<Mailbox>(mailbox_);
      const cudaError_t e = cudaLaunchHostFunc(stream_, WakeWorker, wake);
      if (e != cudaSuccess) {
        delete wake;
        launched = CudaStatus(e, f.name, "cudaLaunchHostFunc");
      }
    }
    if (!launched.ok()) {
      if (event != nullptr) free_events_.push_back(event);
      Break(launched, /*about_oldest=*/false);
      f.status = launched;
      inflight_.push_back(std::move(f));
      return;
    }
    f.event = event;
    inflight_.push_back(std::move(f));
  }

  cudaError_t TakeEvent(cudaEvent_t* event) {
    if (!free_events_.empty()) {
      *event = free_events_.back();
      free_events_.pop_back();
      return cudaSuccess;
    }
    return cudaEventCreateWithFlags(event, cudaEventDisableTiming);
  }

  // Enqueues NCCL call(s) (inside ncclGroupStart/End when `group`) and waits until the
  // non-blocking communicator has them on the stream (ncclInProgress while connections are
  // made), completing earlier calls meanwhile so that no peer waits for our callbacks.
  absl::Status Enqueue(const std::string& call, const char* fn, bool group, const std::function<ncclResult_t()>& body) {
    const Clock::time_point start = Clock::now();
    ncclResult_t r;
    if (group) {
      r = ncclGroupStart();
      if (r != ncclSuccess) return NcclStatus(r, call, "ncclGroupStart");
      const ncclResult_t inner = body();
      const ncclResult_t end = ncclGroupEnd();
      if (inner != ncclSuccess && inner != ncclInProgress) return NcclStatus(inner, call, fn);
      r = end;
      fn = "ncclGroupEnd";
    } else {
      r = body();
    }
    if (r != ncclSuccess && r != ncclInProgress) return NcclStatus(r, call, fn);
    for (int round = 0;; ++round) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t q = ncclCommGetAsyncError(comm_, &state);
      if (q != ncclSuccess) return NcclStatus(q, call, "ncclCommGetAsyncError");
      if (state == ncclSuccess) return absl::OkStatus();
      if (state != ncclInProgress) return NcclStatus(state, call, fn);
      if (Clock::now() - start > std::chrono::milliseconds(options_.timeout_ms)) {
        return TimeoutStatus(call, "not enqueued (connections to the members not made)");
      }
      RETURN_IF_ERROR(CompleteFinished());
      if (round < 100) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
  }

  // Completes the calls at the front whose work is done, in order.
  absl::Status CompleteFinished() {
    while (!inflight_.empty()) {
      InFlight& f = inflight_.front();
      if (f.event != nullptr) {
        const cudaError_t e = cudaEventQuery(f.event);
        if (e == cudaErrorNotReady) {
          // Not an error, but the runtime keeps it as this thread's last error; the done
          // callbacks run on this thread and may launch kernels whose launch check reads it.
          (void)cudaGetLastError();
          return absl::OkStatus();
        }
        if (e != cudaSuccess) return CudaStatus(e, f.name, "cudaEventQuery");
        free_events_.push_back(f.event);
        f.event = nullptr;
        last_completion_ = Clock::now();
      }
      InFlight done = std::move(f);
      inflight_.pop_front();
      Complete(done.done, done.status);
    }
    return absl::OkStatus();
  }

  // Completions, then the health of the oldest call in flight: NCCL's asynchronous error and
  // the deadline.
  void Poll() {
    absl::Status s = CompleteFinished();
    if (!s.ok()) {
      Break(s, /*about_oldest=*/true);
    } else if (!inflight_.empty() && comm_ != nullptr) {
      const InFlight& oldest = inflight_.front();
      ncclResult_t state = ncclSuccess;
      const ncclResult_t q = ncclCommGetAsyncError(comm_, &state);
      if (q != ncclSuccess) {
        Break(NcclStatus(q, oldest.name, "ncclCommGetAsyncError"), true);
      } else if (state != ncclSuccess && state != ncclInProgress) {
        Break(NcclStatus(state, oldest.name, "asynchronous error"), true);
      } else if (Clock::now() - std::max(oldest.issued_at, last_completion_) >
                 std::chrono::milliseconds(options_.timeout_ms)) {
        Break(TimeoutStatus(oldest.name, "not finished"), true);
      }
    }
    CompleteFinished().IgnoreError();  // after Break: the failed calls
  }

  // The communicator failed: abort NCCL (its kernels return), fail every call in flight and
  // every later one (Issue) with `status`. `about_oldest`: the status names the oldest call in
  // flight (it gets `status` as is; the others are "aborted").
  void Break(const absl::Status& status, bool about_oldest) {
    if (!failure_.ok()) return;
    failure_ = status;
    if (comm_ != nullptr) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
    }
    bool first = about_oldest;
    for (InFlight& f : inflight_) {
      if (f.event == nullptr) continue;  // already decided
      cudaEventDestroy(f.event);           // released once the stream passes it
      f.event = nullptr;
      f.status = first ? status : absl::Status(status.code(), absl::StrCat(f.name, " aborted: ", status.message()));
      first = false;
    }
  }

  void Complete(const CollectiveDone& done, const absl::Status& status) {
    if (done) done(status);
    {
      std::lock_guard<std::mutex> lock(mailbox_->mu);
      ++mailbox_->completed;
      if (!status.ok() && mailbox_->first_error.ok()) mailbox_->first_error = status;
    }
    mailbox_->flushed.notify_all();
  }

  // Healthy at destruction: ncclCommFinalize (flushes, may wait for the members), then destroy;
  // abort past the timeout.
  void Finalize() {
    const Clock::time_point start = Clock::now();
    ncclResult_t r = ncclCommFinalize(comm_);
    while (r == ncclSuccess || r == ncclInProgress) {
      ncclResult_t state = ncclSuccess;
      r = ncclCommGetAsyncError(comm_, &state);
      if (r != ncclSuccess) break;
      if (state == ncclSuccess) {
        ncclCommDestroy(comm_);
        comm_ = nullptr;
        return;
      }
      if (state != ncclInProgress || Clock::now() - start > std::chrono::milliseconds(options_.timeout_ms)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }

  const int32_t rank_;
  const int32_t size_;
  const std::string description_;
  const int32_t device_;
  const NcclOptions options_;
  ncclComm_t comm_;  // the worker's (the destructor's after join); null once aborted
  const cudaStream_t stream_;
  const std::shared_ptr<Mailbox> mailbox_;
  const std::shared_ptr<LaunchTurns> turns_;  // shared by the backend's channel communicators; null: none
  std::thread worker_;
  std::thread::id worker_id_;
  // Worker thread only.
  std::deque<InFlight> inflight_;
  std::vector<cudaEvent_t> free_events_;
  absl::Status failure_;
  Clock::time_point last_completion_{};
};

}  // namespace

std::unique_ptr<GroupCommunicator> NewNcclCommunicator(int32_t rank, int32_t size, std::string description, int32_t device,
                                                      NcclOptions options, ncclComm_t comm, cudaStream_t stream,
                                                      std::shared_ptr<LaunchTurns> turns) {
  return std::make_unique<NcclCommunicator>(rank, size, std::move(description), device, options, comm, stream,
                                            std::move(turns));
}

}  // namespace nccl_internal
}  // namespace comm
}  // namespace oneflow_like
