#include "oneflow_like/actor/fake_device_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "oneflow_like/core/shard_simulator.h"

namespace oneflow_like {
namespace actor {
namespace {

size_t PageRound(int64_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t b = static_cast<size_t>(std::max<int64_t>(1, bytes));
  return (b + page - 1) / page * page;
}

// An event: the point (device, stream, item count) of its latest record.
class FakeEvent final : public Event {
 public:
  explicit FakeEvent(FakeDeviceBackend* backend) : backend_(backend) {}
  bool Query() const override {
    const Point p = point();
    return !p.recorded || backend_->completed_items(p.device, p.stream) >= p.items;
  }
  absl::Status Synchronize() override {
    while (!Query()) std::this_thread::sleep_for(std::chrono::microseconds(50));
    return absl::OkStatus();
  }
  struct Point {
    bool recorded = false;
    int32_t device = 0, stream = 0;
    int64_t items = 0;  // complete once the stream completed this many items
  };
  Point point() const {
    std::lock_guard<std::mutex> lock(mu_);
    return point_;
  }
  void set_point(Point p) {
    std::lock_guard<std::mutex> lock(mu_);
    point_ = p;
  }

 private:
  FakeDeviceBackend* backend_;
  mutable std::mutex mu_;
  Point point_;
};

class FakeBody final : public ActBody {
 public:
  FakeBody(FakeDeviceBackend* backend, DeviceTask task) : backend_(backend), task_(std::move(task)) {}

  bool IsAsync() const override { return true; }
  bool OnDeviceStream(int32_t* device, int32_t* stream) const override {
    *device = task_.device;
    *stream = task_.stream;
    return true;
  }
  bool HasStreamEvents() const override { return backend_->HasStreamEvents(); }
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent() override { return backend_->CreateEvent(task_.device); }
  absl::Status RecordEvent(Event* event) override { return backend_->RecordEvent(task_.device, task_.stream, event); }
  absl::Status WaitEvent(const Event& event) override {
    return backend_->WaitEvent(task_.device, task_.stream, event);
  }

  absl::Status Act(ActIo& io) override {  // the synchronous firing rules: enqueue and wait
    std::promise<absl::Status> done;
    std::future<absl::Status> result = done.get_future();
    Start(io, [&done](const absl::Status& s) { done.set_value(s); });
    return result.get();
  }

  void Start(ActIo io, std::function<void(const absl::Status&)> finished) override {
    backend_->CountStart();
    const bool inputs_on_device = task_.kind != DeviceTask::Kind::kHostToDevice;
    const bool outputs_on_device = task_.kind != DeviceTask::Kind::kDeviceToHost;
    std::vector<Tensor> in, out;
    for (size_t i = 0; i < io.inputs.size(); ++i) {
      absl::StatusOr<Tensor> t = Side(io.inputs[i], inputs_on_device, "input", i);
      if (!t.ok()) return finished(t.status());
      in.push_back(*std::move(t));
    }
    for (size_t i = 0; i < io.outputs.size(); ++i) {
      absl::StatusOr<Tensor> t = Side(io.outputs[i], outputs_on_device, "output", i);
      if (!t.ok()) return finished(t.status());
      out.push_back(*std::move(t));
    }
    backend_->Enqueue(task_.device, task_.stream,
                      [this, in = std::move(in), out = std::move(out), finished = std::move(finished)]() mutable {
                        finished(Run(in, &out));
                      });
  }

 private:
  // A view the stream's work can use: a device tensor's shadow bytes, or the host tensor itself.
  absl::StatusOr<Tensor> Side(const Tensor& t, bool on_device, const char* what, size_t i) const {
    if (!on_device) {
      if (backend_->Shadow(t.raw_data(), t.byte_size()) != nullptr) {
        return absl::InternalError(absl::StrCat("fake device: task '", task_.name, "' ", what, " ", i,
                                                " is device memory where host memory was expected"));
      }
      return Tensor::Borrow(t.desc(), const_cast<void*>(t.raw_data()));
    }
    char* shadow = backend_->Shadow(t.raw_data(), t.byte_size());
    if (shadow == nullptr && t.byte_size() > 0) {
      return absl::InternalError(absl::StrCat("fake device: task '", task_.name, "' ", what, " ", i,
                                              " is not device memory of this backend"));
    }
    return Tensor::Borrow(t.desc(), shadow);
  }

  absl::Status Run(const std::vector<Tensor>& in, std::vector<Tensor>* out) const {
    switch (task_.kind) {
      case DeviceTask::Kind::kCompute: {
        KernelContext ctx{task_.op_name, task_.attrs};
        for (const Tensor& t : in) ctx.inputs.push_back(&t);
        for (Tensor& t : *out) ctx.outputs.push_back(&t);
        ctx.input_shards = task_.input_shards;
        ctx.output_shards = task_.output_shards;
        return task_.def->cpu_kernel(ctx);
      }
      case DeviceTask::Kind::kAdd:
        AddTensorInto(in[0], &(*out)[0]);
        return absl::OkStatus();
      case DeviceTask::Kind::kCopy:
      case DeviceTask::Kind::kHostToDevice:
      case DeviceTask::Kind::kDeviceToHost:
        for (size_t i = 0; i < in.size(); ++i) CopyTensorData(in[i], &(*out)[i]);
        return absl::OkStatus();
    }
    return absl::InternalError("fake device: unknown body kind");
  }

  FakeDeviceBackend* backend_;
  DeviceTask task_;
};

}  // namespace

FakeDeviceBackend::~FakeDeviceBackend() {
  for (auto& [key, stream] : streams_) {
    {
      std::lock_guard<std::mutex> lock(stream->mu);
      stream->stop = true;
    }
    stream->cv.notify_all();
    stream->thread.join();
  }
  for (auto& [base, a] : allocations_) {
    munmap(const_cast<char*>(base), a.bytes);
    munmap(a.shadow, a.bytes);
  }
}

absl::StatusOr<char*> FakeDeviceBackend::Allocate(int32_t device, int64_t bytes) {
  if (device < 0) return absl::InvalidArgumentError(absl::StrCat("fake device: no device ", device));
  const size_t size = PageRound(bytes);
  void* base = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  void* shadow = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED || shadow == MAP_FAILED) {
    if (base != MAP_FAILED) munmap(base, size);
    if (shadow != MAP_FAILED) munmap(shadow, size);
    return absl::ResourceExhaustedError(absl::StrCat("fake device ", device, ": cannot map ", bytes, " bytes"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  allocations_[static_cast<char*>(base)] = Allocation{static_cast<char*>(shadow), size, device};
  return static_cast<char*>(base);
}

void FakeDeviceBackend::Free(int32_t, char* data) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocations_.find(data);
  if (it == allocations_.end()) return;
  munmap(data, it->second.bytes);
  munmap(it->second.shadow, it->second.bytes);
  allocations_.erase(it);
}

absl::StatusOr<int64_t> FakeDeviceBackend::FreeBytes(int32_t device) {
  int64_t used = 0;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [base, a] : allocations_) used += a.device == device ? static_cast<int64_t>(a.bytes) : 0;
  return std::max<int64_t>(0, memory_bytes_.load() - used);
}

char* FakeDeviceBackend::Shadow(const void* p, int64_t bytes) const {
  const char* c = static_cast<const char*>(p);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocations_.upper_bound(c);
  if (it == allocations_.begin()) return nullptr;
  --it;
  const size_t offset = static_cast<size_t>(c - it->first);
  if (c < it->first || offset + static_cast<size_t>(std::max<int64_t>(0, bytes)) > it->second.bytes) return nullptr;
  return it->second.shadow + offset;
}

absl::Status FakeDeviceBackend::CopyToDevice(int32_t device, const void* host, char* device_data, int64_t bytes) {
  char* shadow = Shadow(device_data, bytes);
  if (shadow == nullptr) {
    return absl::InternalError(absl::StrCat("fake device ", device, ": CopyToDevice of ", bytes,
                                            " bytes to an address outside every allocation"));
  }
  if (bytes > 0) std::memcpy(shadow, host, static_cast<size_t>(bytes));
  bytes_to_device_.fetch_add(bytes);
  return absl::OkStatus();
}

absl::Status FakeDeviceBackend::CopyToHost(int32_t device, const char* device_data, void* host, int64_t bytes) {
  const char* shadow = Shadow(device_data, bytes);
  if (shadow == nullptr) {
    return absl::InternalError(absl::StrCat("fake device ", device, ": CopyToHost of ", bytes,
                                            " bytes from an address outside every allocation"));
  }
  if (bytes > 0) std::memcpy(host, shadow, static_cast<size_t>(bytes));
  bytes_to_host_.fetch_add(bytes);
  return absl::OkStatus();
}

absl::Status FakeDeviceBackend::CopyWithinDevice(int32_t device, const char* from, char* to, int64_t bytes) {
  const char* src = Shadow(from, bytes);
  char* dst = Shadow(to, bytes);
  if (bytes > 0 && (src == nullptr || dst == nullptr)) {
    return absl::InternalError(absl::StrCat("fake device ", device, ": CopyWithinDevice of ", bytes,
                                            " bytes outside the allocations"));
  }
  if (bytes > 0) std::memmove(dst, src, static_cast<size_t>(bytes));
  return absl::OkStatus();
}

absl::Status FakeDeviceBackend::ZeroDevice(int32_t device, char* data, int64_t bytes) {
  char* dst = Shadow(data, bytes);
  if (bytes > 0 && dst == nullptr) {
    return absl::InternalError(absl::StrCat("fake device ", device, ": ZeroDevice of ", bytes,
                                            " bytes outside the allocations"));
  }
  if (bytes > 0) std::memset(dst, 0, static_cast<size_t>(bytes));
  return absl::OkStatus();
}

absl::Status FakeDeviceBackend::CopyBox(int32_t device, const Tensor& from, const std::vector<int64_t>& from_offset,
                                        Tensor* to, const std::vector<int64_t>& to_offset,
                                        const std::vector<int64_t>& shape) {
  char* src = Shadow(from.raw_data(), from.byte_size());
  char* dst = Shadow(to->raw_data(), to->byte_size());
  if ((from.byte_size() > 0 && src == nullptr) || (to->byte_size() > 0 && dst == nullptr)) {
    return absl::InternalError(absl::StrCat("fake device ", device, ": CopyBox outside the allocations"));
  }
  // Through a contiguous block of `shape`: out of `from`, then into `to` (core/shard_simulator.h).
  Tensor block(TensorDesc{from.dtype(), Shape(shape)});
  CopyBlockOut(Tensor::Borrow(from.desc(), src), from_offset, &block);
  Tensor target = Tensor::Borrow(to->desc(), dst);
  CopyBlockIn(block, to_offset, &target);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ActBody>> FakeDeviceBackend::MakeBody(DeviceTask task) {
  if (task.kind == DeviceTask::Kind::kCompute && (task.def == nullptr || !task.def->cpu_kernel)) {
    return absl::InvalidArgumentError(absl::StrCat("fake device: no kernel for task '", task.name, "'"));
  }
  return std::unique_ptr<ActBody>(std::make_unique<FakeBody>(this, std::move(task)));
}

FakeDeviceBackend::Stream* FakeDeviceBackend::GetStream(int32_t device, int32_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<Stream>& slot = streams_[{device, stream}];
  if (slot == nullptr) {
    slot = std::make_unique<Stream>();
    Stream* raw = slot.get();
    raw->thread = std::thread([this, raw, stream] { Loop(raw, stream); });
  }
  return slot.get();
}

void FakeDeviceBackend::Loop(Stream* s, int32_t stream) {
  std::minstd_rand random(static_cast<uint32_t>(1000 + stream));  // per stream, reproducible
  std::unique_lock<std::mutex> lock(s->mu);
  while (true) {
    s->cv.wait(lock, [s] { return s->stop || !s->queue.empty(); });
    if (s->queue.empty()) return;  // stopped and drained
    Item next = std::move(s->queue.front());
    s->queue.pop_front();
    s->running = true;
    lock.unlock();
    while (paused_stream_.load() == stream) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (const int64_t delay = stream_delay_us_.load(); delay > 0 && !next.event_wait) {
      const int64_t us = random_delays_.load() ? static_cast<int64_t>(random() % static_cast<uint64_t>(2 * delay + 1))
                                               : delay;
      std::this_thread::sleep_for(std::chrono::microseconds(us));
    }
    next.work();
    lock.lock();
    s->running = false;
    ++s->completed;
    s->cv.notify_all();  // Drain, and event waits of other streams
  }
}

void FakeDeviceBackend::Push(Stream* s, Item item) {
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->queue.push_back(std::move(item));
    ++s->enqueued;
    const int64_t depth = static_cast<int64_t>(s->queue.size()) + (s->running ? 1 : 0);
    s->max_depth = std::max(s->max_depth, depth);
    int64_t seen = max_stream_depth_.load();
    while (depth > seen && !max_stream_depth_.compare_exchange_weak(seen, depth)) {
    }
  }
  s->cv.notify_all();  // the worker, and not only a Drain waiting on the same condition
}

void FakeDeviceBackend::Enqueue(int32_t device, int32_t stream, std::function<void()> work) {
  Push(GetStream(device, stream), Item{std::move(work), false});
}

int64_t FakeDeviceBackend::completed_items(int32_t device, int32_t stream) {
  Stream* s = GetStream(device, stream);
  std::lock_guard<std::mutex> lock(s->mu);
  return s->completed;
}

int64_t FakeDeviceBackend::queued_items(int32_t device, int32_t stream) {
  Stream* s = GetStream(device, stream);
  std::lock_guard<std::mutex> lock(s->mu);
  return static_cast<int64_t>(s->queue.size()) + (s->running ? 1 : 0);
}

int64_t FakeDeviceBackend::max_stream_depth(int32_t stream) const {
  std::vector<Stream*> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, s] : streams_) {
      if (key.second == stream) streams.push_back(s.get());
    }
  }
  int64_t depth = 0;
  for (Stream* s : streams) {
    std::lock_guard<std::mutex> lock(s->mu);
    depth = std::max(depth, s->max_depth);
  }
  return depth;
}

absl::StatusOr<std::unique_ptr<Event>> FakeDeviceBackend::CreateEvent(int32_t device) {
  if (!HasStreamEvents()) return DeviceBackend::CreateEvent(device);
  return std::unique_ptr<Event>(std::make_unique<FakeEvent>(this));
}

absl::Status FakeDeviceBackend::RecordEvent(int32_t device, int32_t stream, Event* event) {
  auto* fake = dynamic_cast<FakeEvent*>(event);
  if (fake == nullptr) return absl::InvalidArgumentError("fake device: RecordEvent of an event it did not create");
  Stream* s = GetStream(device, stream);
  FakeEvent::Point p{true, device, stream, 0};
  {
    std::lock_guard<std::mutex> lock(s->mu);
    p.items = s->enqueued;
  }
  fake->set_point(p);
  return absl::OkStatus();
}

absl::Status FakeDeviceBackend::WaitEvent(int32_t device, int32_t stream, const Event& event) {
  const auto* fake = dynamic_cast<const FakeEvent*>(&event);
  if (fake == nullptr) return absl::InvalidArgumentError("fake device: WaitEvent on an event it did not create");
  const FakeEvent::Point p = fake->point();
  if (!p.recorded) return absl::OkStatus();  // nothing to wait for
  Stream* other = GetStream(p.device, p.stream);
  event_waits_.fetch_add(1);
  Push(GetStream(device, stream), Item{[other, items = p.items] {
                                         std::unique_lock<std::mutex> lock(other->mu);
                                         other->cv.wait(lock, [&] { return other->stop || other->completed >= items; });
                                       },
                                       true});
  return absl::OkStatus();
}

absl::Status FakeDeviceBackend::Drain() {
  std::vector<Stream*> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, stream] : streams_) streams.push_back(stream.get());
  }
  for (Stream* s : streams) {
    std::unique_lock<std::mutex> lock(s->mu);
    s->cv.wait(lock, [s] { return s->queue.empty() && !s->running; });
  }
  return absl::OkStatus();
}

int64_t FakeDeviceBackend::live_allocations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(allocations_.size());
}

}  // namespace actor
}  // namespace oneflow_like
