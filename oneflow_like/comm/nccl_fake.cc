// A fake of the slice of the CUDA runtime and of NCCL that nccl_collective.cc and its test use,
// so that the backend's own logic (the worker thread, completion order, timeouts, aborts, the
// mapping of uneven collectives onto NCCL calls) runs on a machine without a GPU. Not a model
// of NCCL's performance or protocols:
//   - 4 "devices"; device memory is host memory from cudaMalloc (cudaPointerGetAttributes knows
//     it and its device; any other pointer is unregistered host memory);
//   - a stream is a thread running its tasks in order (kernels, copies, event records, event
//     waits, host functions); events complete when the stream reaches them;
//   - each host thread has a last error like the runtime's: a failing call (cudaEventQuery's
//     cudaErrorNotReady too) leaves it, cudaGetLastError returns and clears it;
//   - communicators with the same unique id form a world; each collective step waits on the
//     stream for every member's matching step (members' steps are numbered in issue order),
//     computes its result from the members' buffers, and writes it once all have read (so in
//     place works); a step whose members disagree on kind, count, dtype or root is counted and
//     fails the communicators (ncclInvalidUsage). ncclSend waits until the peer's ncclRecv
//     copied it (as in NCCL, a lone send blocks its stream); inside a group sends are posted
//     first, so pairs in a group never deadlock;
//   - creation is non-blocking (ncclInProgress until every member joined); the first operation
//     of a communicator reports ncclInProgress for a few polls (NCCL's lazy connection);
//     ncclCommAbort releases every step the communicator waits in.
#include "oneflow_like/comm/nccl_fake.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "oneflow_like/core/data_type.h"

namespace {

constexpr int kDevices = 4;
thread_local int t_device = 0;
// The thread's last error, as the CUDA runtime keeps it: a call that fails (cudaEventQuery's
// cudaErrorNotReady included) leaves its error here; cudaGetLastError returns and clears it,
// cudaPeekAtLastError only returns it.
thread_local cudaError_t t_last_error = cudaSuccess;

cudaError_t SetLast(cudaError_t e) {
  if (e != cudaSuccess) t_last_error = e;
  return e;
}

// --- memory ---

struct Allocation {
  size_t bytes;
  int device;
};
std::mutex g_alloc_mu;
std::map<uintptr_t, Allocation> g_allocations;

// --- streams and events ---

struct StreamState {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> tasks;
  bool stop = false;

  void Push(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu);
      tasks.push_back(std::move(task));
    }
    cv.notify_all();
  }
  void Run() {
    while (true) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stop || !tasks.empty(); });
        if (tasks.empty()) return;  // stop, drained
        task = std::move(tasks.front());
        tasks.pop_front();
      }
      task();
    }
  }
};

struct EventState {
  std::atomic<uint64_t> recorded{0};
  std::atomic<uint64_t> completed{0};
};

// --- NCCL ---

struct Op {
  enum Kind { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce, kSend, kRecv } kind;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  int root = 0;  // collectives; the peer for send / recv
  uint64_t seq = 0;  // collectives: the step number in the world
};

struct Step {
  std::vector<Op> ops;  // per member
  std::vector<bool> arrived;
  int n_arrived = 0;
  int n_computed = 0;
  int n_done = 0;
  bool mismatch = false;
};

struct Message {
  const void* data;
  size_t bytes;
  bool consumed = false;
};

struct World {
  explicit World(int size) : n(size) {}
  const int n;
  std::mutex mu;
  std::condition_variable cv;
  int joined = 0;
  std::map<uint64_t, Step> steps;
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<Message>>> links;  // (from, to)
};

std::mutex g_worlds_mu;
std::map<std::string, std::shared_ptr<World>> g_worlds;
std::atomic<int> g_injected{ncclSuccess};
std::atomic<int> g_mismatches{0};
std::atomic<uint64_t> g_unique{0};
std::atomic<int> g_event_sync_error{cudaSuccess};
std::atomic<int64_t> g_events_created{0};
std::atomic<int64_t> g_comm_inits{0};

}  // namespace

struct CUstream_st {
  std::shared_ptr<StreamState> state;
};
struct CUevent_st {
  std::shared_ptr<EventState> state;
};
struct ncclComm {
  std::shared_ptr<World> world;
  int rank = 0;
  int device = 0;
  uint64_t next_seq = 0;  // the issuing thread's
  std::atomic<bool> aborted{false};
  std::atomic<int> lazy_polls{-1};  // -1: not connected yet
  std::atomic<int> error{ncclSuccess};
};

namespace {

size_t TypeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

double Load(ncclDataType_t t, const char* p) {
  switch (t) {
    case ncclFloat32: { float x; std::memcpy(&x, p, 4); return x; }
    case ncclFloat64: { double x; std::memcpy(&x, p, 8); return x; }
    case ncclInt32: { int32_t x; std::memcpy(&x, p, 4); return x; }
    case ncclInt64: { int64_t x; std::memcpy(&x, p, 8); return static_cast<double>(x); }
    case ncclFloat16: { uint16_t x; std::memcpy(&x, p, 2); return oneflow_like::HalfToFloat(x); }
    case ncclBfloat16: { uint16_t x; std::memcpy(&x, p, 2); return oneflow_like::BFloat16ToFloat(x); }
    default: std::abort();
  }
}

void Store(ncclDataType_t t, double v, char* p) {
  switch (t) {
    case ncclFloat32: { float x = static_cast<float>(v); std::memcpy(p, &x, 4); break; }
    case ncclFloat64: { std::memcpy(p, &v, 8); break; }
    case ncclInt32: { int32_t x = static_cast<int32_t>(v); std::memcpy(p, &x, 4); break; }
    case ncclInt64: { int64_t x = static_cast<int64_t>(v); std::memcpy(p, &x, 8); break; }
    case ncclFloat16: { uint16_t x = oneflow_like::FloatToHalf(static_cast<float>(v)); std::memcpy(p, &x, 2); break; }
    case ncclBfloat16: { uint16_t x = oneflow_like::FloatToBFloat16(static_cast<float>(v)); std::memcpy(p, &x, 2); break; }
    default: std::abort();
  }
}

// Sum over members of `count` elements at byte offset `offset` of each member's send buffer.
std::string SumOf(const Step& step, size_t offset, size_t count, ncclDataType_t t) {
  const size_t size = TypeSize(t);
  std::string out(count * size, '\0');
  for (size_t i = 0; i < count; ++i) {
    double sum = 0;
    for (const Op& op : step.ops) sum += Load(t, static_cast<const char*>(op.send) + offset + i * size);
    Store(t, sum, &out[i * size]);
  }
  return out;
}

// Waits on `world->cv` until `ready` or the communicator is aborted; false when aborted.
bool WaitFor(ncclComm* comm, std::unique_lock<std::mutex>& lock, const std::function<bool()>& ready) {
  while (!ready()) {
    if (comm->aborted.load()) return false;
    comm->world->cv.wait_for(lock, std::chrono::milliseconds(5));
  }
  return true;
}

void Fail(ncclComm* comm, const char* why) {
  std::fprintf(stderr, "nccl_fake: rank %d: %s\n", comm->rank, why);
  comm->error.store(ncclInvalidUsage);
}

// One collective step of one member, on its stream.
void RunCollective(ncclComm* comm, const Op& op) {
  World* world = comm->world.get();
  const int n = world->n, me = comm->rank;
  std::unique_lock<std::mutex> lock(world->mu);
  Step& step = world->steps[op.seq];
  if (step.ops.empty()) {
    step.ops.resize(n);
    step.arrived.assign(n, false);
  }
  step.ops[me] = op;
  step.arrived[me] = true;
  ++step.n_arrived;
  world->cv.notify_all();
  if (!WaitFor(comm, lock, [&] { return step.n_arrived == n; })) return;
  for (const Op& other : step.ops) {
    if (other.kind != op.kind || other.count != op.count || other.type != op.type || other.root != op.root) {
      step.mismatch = true;
    }
  }
  std::string result;
  bool write = true;
  const size_t size = TypeSize(op.type);
  if (!step.mismatch) {
    switch (op.kind) {
      case Op::kAllReduce: result = SumOf(step, 0, op.count, op.type); break;
      case Op::kReduceScatter: result = SumOf(step, me * op.count * size, op.count, op.type); break;
      case Op::kReduce:
        write = me == op.root;
        if (write) result = SumOf(step, 0, op.count, op.type);
        break;
      case Op::kAllGather:
        for (const Op& other : step.ops) result.append(static_cast<const char*>(other.send), op.count * size);
        break;
      case Op::kBroadcast:
        result.assign(static_cast<const char*>(step.ops[op.root].send), op.count * size);
        break;
      default: std::abort();
    }
  }
  ++step.n_computed;
  world->cv.notify_all();
  if (!WaitFor(comm, lock, [&] { return step.n_computed == n; })) return;  // all have read
  if (step.mismatch) {
    if (me == 0) g_mismatches.fetch_add(1);
    Fail(comm, "members disagree on a collective step");
  } else if (write) {
    std::memcpy(op.recv, result.data(), result.size());
  }
  if (++step.n_done == n) world->steps.erase(op.seq);
  world->cv.notify_all();
}

// Point-to-point operations of one task (a group or a lone call): sends are posted first, then
// receives copy, then the sends wait until their peers copied them.
void RunPointToPoint(ncclComm* comm, const std::vector<Op>& ops) {
  World* world = comm->world.get();
  std::unique_lock<std::mutex> lock(world->mu);
  std::vector<std::shared_ptr<Message>> posted;
  for (const Op& op : ops) {
    if (op.kind != Op::kSend) continue;
    auto message = std::make_shared<Message>(Message{op.send, op.count * TypeSize(op.type)});
    world->links[{comm->rank, op.root}].push_back(message);
    posted.push_back(message);
  }
  world->cv.notify_all();
  for (const Op& op : ops) {
    if (op.kind != Op::kRecv) continue;
    auto& link = world->links[{op.root, comm->rank}];
    if (!WaitFor(comm, lock, [&] { return !link.empty(); })) return;
    std::shared_ptr<Message> message = link.front();
    link.pop_front();
    if (message->bytes != op.count * TypeSize(op.type)) {
      g_mismatches.fetch_add(1);
      Fail(comm, "a receive does not match the size of the peer's send");
    } else {
      std::memcpy(op.recv, message->data, message->bytes);
    }
    message->consumed = true;
    world->cv.notify_all();
  }
  for (const auto& message : posted) {
    if (!WaitFor(comm, lock, [&] { return message->consumed; })) return;
  }
}

void RunTask(ncclComm* comm, const std::vector<Op>& ops) {
  if (comm->aborted.load()) return;
  bool p2p = false;
  for (const Op& op : ops) {
    if (op.kind == Op::kSend || op.kind == Op::kRecv) {
      p2p = true;
    } else {
      RunCollective(comm, op);
      if (comm->aborted.load()) return;
    }
  }
  if (p2p) RunPointToPoint(comm, ops);
}

// ncclGroupStart / End of this thread.
thread_local int t_group_depth = 0;
thread_local std::vector<std::pair<ncclComm*, std::pair<cudaStream_t, Op>>> t_grouped;

void Launch(ncclComm* comm, cudaStream_t stream, std::vector<Op> ops) {
  std::shared_ptr<StreamState> state = stream->state;
  state->Push([comm, ops] { RunTask(comm, ops); });
}

ncclResult_t Issue(ncclComm* comm, cudaStream_t stream, Op op) {
  if (comm == nullptr || stream == nullptr) return ncclInvalidArgument;
  if (comm->aborted.load()) return ncclInvalidUsage;
  if (op.kind != Op::kSend && op.kind != Op::kRecv) op.seq = comm->next_seq++;
  int expected = -1;
  const bool first = comm->lazy_polls.compare_exchange_strong(expected, 3);  // "connecting"
  if (t_group_depth > 0) {
    t_grouped.push_back({comm, {stream, op}});
    return ncclSuccess;
  }
  Launch(comm, stream, {op});
  return first ? ncclInProgress : ncclSuccess;
}

}  // namespace

namespace oneflow_like {
namespace comm {
namespace nccl_fake {
void InjectAsyncError(ncclResult_t error) { g_injected.store(error); }
int MismatchCount() { return g_mismatches.load(); }
void InjectEventSyncError(cudaError_t error) { g_event_sync_error.store(error); }
int64_t EventsCreated() { return g_events_created.load(); }
int64_t CommInits() { return g_comm_inits.load(); }
}  // namespace nccl_fake
}  // namespace comm
}  // namespace oneflow_like

// ---------------------------------------------------------------------------------------------
// The CUDA runtime.

const char* CUDARTAPI cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    default: return "cudaErrorUnknown";
  }
}

const char* CUDARTAPI cudaGetErrorString(cudaError_t error) {
  return error == cudaSuccess ? "no error" : "error (nccl_fake)";
}

cudaError_t CUDARTAPI cudaGetLastError(void) {
  const cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}

cudaError_t CUDARTAPI cudaPeekAtLastError(void) { return t_last_error; }

cudaError_t CUDARTAPI cudaGetDeviceCount(int* count) {
  *count = kDevices;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaSetDevice(int device) {
  if (device < 0 || device >= kDevices) return SetLast(cudaErrorInvalidDevice);
  t_device = device;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGetDevice(int* device) {
  *device = t_device;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaMalloc(void** ptr, size_t bytes) {
  *ptr = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  std::lock_guard<std::mutex> lock(g_alloc_mu);
  g_allocations[reinterpret_cast<uintptr_t>(*ptr)] = Allocation{bytes, t_device};
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(g_alloc_mu);
    if (g_allocations.erase(reinterpret_cast<uintptr_t>(ptr)) == 0) return SetLast(cudaErrorInvalidValue);
  }
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaPointerGetAttributes(struct cudaPointerAttributes* attributes, const void* ptr) {
  std::memset(attributes, 0, sizeof(*attributes));
  attributes->type = cudaMemoryTypeUnregistered;
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(g_alloc_mu);
  auto it = g_allocations.upper_bound(p);
  if (it != g_allocations.begin()) {
    --it;
    if (p < it->first + std::max<size_t>(it->second.bytes, 1)) {
      attributes->type = cudaMemoryTypeDevice;
      attributes->device = it->second.device;
      attributes->devicePointer = const_cast<void*>(ptr);
    }
  }
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaMemcpy(void* dst, const void* src, size_t bytes, enum cudaMemcpyKind) {
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaMemcpyAsync(void* dst, const void* src, size_t bytes, enum cudaMemcpyKind,
                                      cudaStream_t stream) {
  stream->state->Push([=] { std::memmove(dst, src, bytes); });
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  auto* s = new CUstream_st{std::make_shared<StreamState>()};
  std::shared_ptr<StreamState> state = s->state;
  std::thread([state] { state->Run(); }).detach();
  *stream = s;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream) {  // the work queued still runs
  {
    std::lock_guard<std::mutex> lock(stream->state->mu);
    stream->state->stop = true;
  }
  stream->state->cv.notify_all();
  delete stream;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  g_events_created.fetch_add(1);
  *event = new CUevent_st{std::make_shared<EventState>()};
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  std::shared_ptr<EventState> state = event->state;
  const uint64_t mark = ++state->recorded;
  stream->state->Push([state, mark] { state->completed.store(mark); });
  return cudaSuccess;
}

// The stream's later work waits until the work recorded before the event's latest record (as of
// this call) ran; a never-recorded event: no wait.
cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  std::shared_ptr<EventState> state = event->state;
  const uint64_t mark = state->recorded.load();
  stream->state->Push([state, mark] {
    while (state->completed.load() < mark) std::this_thread::sleep_for(std::chrono::microseconds(20));
  });
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t event) {  // NotReady stays as the last error, as in CUDA
  return event->state->completed.load() >= event->state->recorded.load() ? cudaSuccess : SetLast(cudaErrorNotReady);
}

// Waits until the work recorded before the latest cudaEventRecord ran (polls: a fake).
cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t event) {
  const uint64_t mark = event->state->recorded.load();
  while (event->state->completed.load() < mark) std::this_thread::sleep_for(std::chrono::microseconds(20));
  return SetLast(static_cast<cudaError_t>(g_event_sync_error.load()));
}

cudaError_t CUDARTAPI cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* data) {
  stream->state->Push([fn, data] { fn(data); });
  return cudaSuccess;
}

// ---------------------------------------------------------------------------------------------
// NCCL.

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclSystemError: return "unhandled system error";
    default: return "internal error";
  }
}

const char* ncclGetLastError(ncclComm_t) { return "(nccl_fake)"; }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id->internal, 0, sizeof(id->internal));
  const uint64_t unique = ++g_unique;
  std::snprintf(id->internal, sizeof(id->internal), "fake-%llu-%d", static_cast<unsigned long long>(unique),
                static_cast<int>(reinterpret_cast<uintptr_t>(&unique) & 0xffff));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
  g_comm_inits.fetch_add(1);
  if (nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  const std::string key(id.internal, sizeof(id.internal));
  std::shared_ptr<World> world;
  {
    std::lock_guard<std::mutex> lock(g_worlds_mu);
    std::shared_ptr<World>& slot = g_worlds[key];
    if (slot == nullptr) slot = std::make_shared<World>(nranks);
    world = slot;
  }
  if (world->n != nranks) return ncclInvalidUsage;
  auto* c = new ncclComm;
  c->world = world;
  c->rank = rank;
  c->device = t_device;
  {
    std::lock_guard<std::mutex> lock(world->mu);
    ++world->joined;
  }
  world->cv.notify_all();
  *comm = c;
  if (config != nullptr && config->blocking == 0) return ncclInProgress;
  std::unique_lock<std::mutex> lock(world->mu);
  world->cv.wait(lock, [&] { return world->joined == world->n; });
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* state) {
  if (comm == nullptr) return ncclInvalidArgument;
  if (comm->error.load() != ncclSuccess) {
    *state = static_cast<ncclResult_t>(comm->error.load());
    return ncclSuccess;
  }
  if (g_injected.load() != ncclSuccess) {
    *state = static_cast<ncclResult_t>(g_injected.load());
    return ncclSuccess;
  }
  {
    std::lock_guard<std::mutex> lock(comm->world->mu);
    if (comm->world->joined < comm->world->n) {
      *state = ncclInProgress;
      return ncclSuccess;
    }
  }
  int polls = comm->lazy_polls.load();
  while (polls > 0 && !comm->lazy_polls.compare_exchange_weak(polls, polls - 1)) {
  }
  *state = polls > 0 ? ncclInProgress : ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {  // the object stays (tasks may still hold it)
  if (comm == nullptr) return ncclSuccess;
  comm->aborted.store(true);
  comm->world->cv.notify_all();
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) { return comm == nullptr ? ncclInvalidArgument : ncclInProgress; }

ncclResult_t ncclCommDestroy(ncclComm_t comm) { return ncclCommAbort(comm); }

ncclResult_t ncclGroupStart() {
  ++t_group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (t_group_depth == 0) return ncclInvalidUsage;
  if (--t_group_depth > 0) return ncclSuccess;
  // one task per communicator, its operations in call order
  std::vector<std::pair<ncclComm*, std::pair<cudaStream_t, std::vector<Op>>>> tasks;
  for (auto& entry : t_grouped) {
    auto it = std::find_if(tasks.begin(), tasks.end(), [&](const auto& t) { return t.first == entry.first; });
    if (it == tasks.end()) {
      tasks.push_back({entry.first, {entry.second.first, {}}});
      it = tasks.end() - 1;
    }
    it->second.second.push_back(entry.second.second);
  }
  t_grouped.clear();
  for (auto& task : tasks) Launch(task.first, task.second.first, std::move(task.second.second));
  return tasks.empty() ? ncclSuccess : ncclInProgress;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  if (op != ncclSum) return ncclInvalidArgument;
  return Issue(comm, stream, Op{Op::kAllReduce, send, recv, count, type, 0});
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  return Issue(comm, stream, Op{Op::kAllGather, send, recv, count, type, 0});
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  if (op != ncclSum) return ncclInvalidArgument;
  return Issue(comm, stream, Op{Op::kReduceScatter, send, recv, count, type, 0});
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr || root < 0 || root >= comm->world->n) return ncclInvalidArgument;
  return Issue(comm, stream, Op{Op::kBroadcast, send, recv, count, type, root});
}

ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  if (op != ncclSum || comm == nullptr || root < 0 || root >= comm->world->n) return ncclInvalidArgument;
  if (comm->rank == root && recv == nullptr) return ncclInvalidArgument;
  return Issue(comm, stream, Op{Op::kReduce, send, recv, count, type, root});
}

ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  if (comm == nullptr || peer < 0 || peer >= comm->world->n) return ncclInvalidArgument;
  return Issue(comm, stream, Op{Op::kSend, send, nullptr, count, type, peer});
}

ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr || peer < 0 || peer >= comm->world->n) return ncclInvalidArgument;
  return Issue(comm, stream, Op{Op::kRecv, nullptr, recv, count, type, peer});
}
