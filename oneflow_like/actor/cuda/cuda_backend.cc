#include "oneflow_like/actor/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "oneflow_like/core/cuda/copy_kernels.h"
#include "oneflow_like/core/cuda/cuda_status.h"
#include "oneflow_like/core/cuda/elementwise_kernels.h"

namespace oneflow_like {
namespace actor {
namespace {

template <typename T>
absl::Status AddInto(const Tensor& in, Tensor* out, cudaStream_t stream) {
  const std::vector<int64_t> dims = out->shape().dims();
  return cuda::BroadcastBinary<T>(cuda::BinaryOp::kAdd, static_cast<const T*>(out->raw_data()), dims,
                                  static_cast<const T*>(in.raw_data()), dims, static_cast<T*>(out->raw_data()), stream);
}

class CudaBody final : public ActBody {
 public:
  CudaBody(CudaBackend* backend, DeviceTask task, const cuda::CudaKernelFn* kernel)
      : backend_(backend), task_(std::move(task)), kernel_(kernel) {
    ctx_.input_shards = task_.input_shards;
    ctx_.output_shards = task_.output_shards;
  }
  CudaBody(const CudaBody&) = delete;  // ctx_ refers to task_
  CudaBody& operator=(const CudaBody&) = delete;

  bool IsAsync() const override { return true; }
  bool OnDeviceStream(int32_t* device, int32_t* stream) const override {
    *device = task_.device;
    *stream = task_.stream;
    return true;
  }
  bool HasStreamEvents() const override { return backend_->HasStreamEvents(); }
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent() override { return backend_->CreateEvent(task_.device); }
  absl::Status RecordEvent(Event* event) override {
    absl::Status s = backend_->RecordEvent(task_.device, task_.stream, event);
    return s.ok() ? s : Named(s);
  }
  absl::Status WaitEvent(const Event& event) override {
    absl::Status s = backend_->WaitEvent(task_.device, task_.stream, event);
    return s.ok() ? s : Named(s);
  }

  // Enqueues and synchronizes the stream (bodies run to completion: the device add of
  // BOXING_ADD within a rank).
  absl::Status Act(ActIo& io) override {
    absl::StatusOr<CudaBackend::Stream*> stream = backend_->StreamFor(task_.device, task_.stream);
    if (!stream.ok()) return Named(stream.status());
    if (absl::Status s = Enqueue(io, **stream); !s.ok()) return Named(s);
    if (absl::Status s = (*stream)->stream.Synchronize(); !s.ok()) return Named(s);
    return absl::OkStatus();
  }

  void Start(ActIo io, std::function<void(const absl::Status&)> finished) override {
    const auto begin = std::chrono::steady_clock::now();
    absl::StatusOr<CudaBackend::Stream*> stream = backend_->StreamFor(task_.device, task_.stream);
    if (!stream.ok()) return finished(Named(stream.status()));
    if (absl::Status s = Enqueue(io, **stream); !s.ok()) return finished(Named(s));
    const auto enqueued = std::chrono::steady_clock::now();
    // The event's completion (or the fault before it) reaches `finished` from the stream's
    // completion thread; the stream itself never waits for the host.
    auto named = [this, finished = std::move(finished)](const absl::Status& s) { finished(s.ok() ? s : Named(s)); };
    if ((*stream)->completions == nullptr) return named(absl::InternalError("no completions on stream -1"));
    if (absl::Status s = (*stream)->completions->Add((*stream)->stream.get(), named); !s.ok()) named(s);
    backend_->CountStart(enqueued - begin, std::chrono::steady_clock::now() - enqueued);
  }

 private:
  absl::Status Named(const absl::Status& s) const {
    return absl::Status(s.code(), absl::StrCat("cuda:", task_.device, " stream ", task_.stream, ", task '", task_.name,
                                               "': ", s.message()));
  }

  absl::Status Enqueue(ActIo& io, CudaBackend::Stream& stream) {
    cudaStream_t s = stream.stream.get();
    switch (task_.kind) {
      case DeviceTask::Kind::kCompute: {
        // The body's context, refilled (no allocation: one act at a time, the kernel only enqueues).
        cuda::CudaKernelContext& ctx = ctx_;
        ctx.inputs.clear();
        ctx.outputs.clear();
        for (const Tensor& t : io.inputs) ctx.inputs.push_back(&t);
        for (Tensor& t : io.outputs) ctx.outputs.push_back(&t);
        ctx.stream = s;
        ctx.cublas = stream.cublas.get();
        ctx.allow_tf32 = backend_->allow_tf32();
        ctx.check_indices = backend_->check_indices();
        absl::Status status = (*kernel_)(ctx);
        ctx.inputs.clear();  // no pointers into this act's views are kept
        ctx.outputs.clear();
        return status;
      }
      case DeviceTask::Kind::kAdd: {
        Tensor& out = io.outputs[0];
        if (out.dtype() == DataType::kFloat32) return AddInto<float>(io.inputs[0], &out, s);
        if (out.dtype() == DataType::kFloat64) return AddInto<double>(io.inputs[0], &out, s);
        if (out.dtype() == DataType::kInt32) return AddInto<int32_t>(io.inputs[0], &out, s);
        if (out.dtype() == DataType::kInt64) return AddInto<int64_t>(io.inputs[0], &out, s);
        return absl::InvalidArgumentError(absl::StrCat("sums of ", DataTypeName(out.dtype()),
                                                       " are not supported on cuda (float32, float64, int32, int64)"));
      }
      case DeviceTask::Kind::kCopy:
      case DeviceTask::Kind::kHostToDevice:
      case DeviceTask::Kind::kDeviceToHost: {
        const cudaMemcpyKind kind = task_.kind == DeviceTask::Kind::kCopy           ? cudaMemcpyDeviceToDevice
                                    : task_.kind == DeviceTask::Kind::kHostToDevice ? cudaMemcpyHostToDevice
                                                                                    : cudaMemcpyDeviceToHost;
        for (size_t i = 0; i < io.inputs.size(); ++i) {
          if (io.inputs[i].raw_data() == io.outputs[i].raw_data() || io.inputs[i].byte_size() == 0) continue;
          RETURN_IF_ERROR(cuda::CudaStatus(cudaMemcpyAsync(io.outputs[i].raw_data(), io.inputs[i].raw_data(),
                                                           static_cast<size_t>(io.inputs[i].byte_size()), kind, s),
                                           "cudaMemcpyAsync"));
        }
        return absl::OkStatus();
      }
    }
    return absl::InternalError("unknown device body kind");
  }

  CudaBackend* backend_;
  DeviceTask task_;
  const cuda::CudaKernelFn* kernel_;  // kCompute only; owned by the backend's table
  cuda::CudaKernelContext ctx_{task_.op_name, task_.attrs};  // kCompute: the shards set once
};

}  // namespace

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(int32_t device_offset, bool allow_tf32) {
  ASSIGN_OR_RETURN(int count, cuda::DeviceCount());
  if (count <= device_offset) {
    return absl::UnavailableError(
        absl::StrCat("cuda: ", count, " device(s) visible; device offset ", device_offset, " needs more"));
  }
  std::unique_ptr<CudaBackend> backend(new CudaBackend(device_offset, allow_tf32));
  backend->device_count_ = count;
  RETURN_IF_ERROR(cuda::AddCudaKernels(&backend->kernels_));
  return backend;
}

CudaBackend::~CudaBackend() {
  for (auto& [key, stream] : streams_) {
    if (Use(key.first).ok()) (void)stream->stream.Synchronize();
  }
  streams_.clear();  // handles and streams before the process tears CUDA down
}

absl::Status CudaBackend::Drain() {
  std::vector<std::pair<int32_t, Stream*>> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, stream] : streams_) streams.emplace_back(key.first, stream.get());
  }
  absl::Status first;
  for (auto& [device, stream] : streams) {
    if (stream->completions != nullptr) stream->completions->WaitIdle();  // every act's `finished` ran
    absl::Status s = Use(device);
    if (s.ok()) s = stream->stream.Synchronize();
    if (first.ok()) first = s;
  }
  return first;
}

absl::Status CudaBackend::Use(int32_t device) const {
  if (device < 0 || device + device_offset_ >= device_count_) {
    return absl::InvalidArgumentError(absl::StrCat("cuda:", device, " (+ offset ", device_offset_, ") but ",
                                                   device_count_, " device(s) are visible"));
  }
  return cuda::UseDevice(device + device_offset_);
}

void CudaBackend::CountStart(std::chrono::nanoseconds enqueue, std::chrono::nanoseconds completion) {
  starts_.fetch_add(1, std::memory_order_relaxed);
  enqueue_nanos_.fetch_add(enqueue.count(), std::memory_order_relaxed);
  completion_nanos_.fetch_add(completion.count(), std::memory_order_relaxed);
}

CudaBackend::HostCosts CudaBackend::host_costs() const {
  return HostCosts{starts_.load(std::memory_order_relaxed), enqueue_nanos_.load(std::memory_order_relaxed) / 1000,
                   completion_nanos_.load(std::memory_order_relaxed) / 1000};
}

absl::StatusOr<CudaBackend::Stream*> CudaBackend::StreamFor(int32_t device, int32_t stream_id) {
  RETURN_IF_ERROR(Use(device));
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<Stream>& slot = streams_[{device, stream_id}];
  if (slot == nullptr) {
    ASSIGN_OR_RETURN(cuda::CudaStream stream, cuda::CudaStream::Create());
    ASSIGN_OR_RETURN(cuda::CublasHandle cublas, cuda::CublasHandle::Create());
    const cublasStatus_t bound = cublasSetStream(cublas.get(), stream.get());
    if (bound != CUBLAS_STATUS_SUCCESS) {
      return absl::InternalError(absl::StrCat("cublasSetStream failed with status ", static_cast<int>(bound)));
    }
    // Stream -1 (the backend's own synchronous copies) reports no completions: no thread.
    slot = std::make_unique<Stream>(
        Stream{std::move(stream), std::move(cublas),
               stream_id >= 0 ? std::make_unique<StreamCompletions>(device + device_offset_, !spin_completions_.load())
                              : nullptr});
  }
  return slot.get();
}

absl::StatusOr<std::unique_ptr<Event>> CudaBackend::CreateEvent(int32_t device) {
  RETURN_IF_ERROR(Use(device));
  ASSIGN_OR_RETURN(std::unique_ptr<CudaEvent> event, CudaEvent::Create());
  return std::unique_ptr<Event>(std::move(event));
}

absl::Status CudaBackend::RecordEvent(int32_t device, int32_t stream, Event* event) {
  auto* cuda_event = dynamic_cast<CudaEvent*>(event);
  if (cuda_event == nullptr) return absl::InvalidArgumentError("cuda: RecordEvent of an event it did not create");
  ASSIGN_OR_RETURN(Stream * s, StreamFor(device, stream));  // selects the device
  return cuda_event->Record(s->stream.get());
}

absl::Status CudaBackend::WaitEvent(int32_t device, int32_t stream, const Event& event) {
  const auto* cuda_event = dynamic_cast<const CudaEvent*>(&event);
  if (cuda_event == nullptr) return absl::InvalidArgumentError("cuda: WaitEvent on an event it did not create");
  ASSIGN_OR_RETURN(Stream * s, StreamFor(device, stream));
  return cuda_event->StreamWait(s->stream.get());
}

absl::StatusOr<char*> CudaBackend::Allocate(int32_t device, int64_t bytes) {
  RETURN_IF_ERROR(Use(device));
  void* data = nullptr;
  const size_t size = static_cast<size_t>(std::max<int64_t>(1, bytes));
  RETURN_IF_ERROR(cuda::CudaStatus(cudaMalloc(&data, size), "cudaMalloc"));
  if (absl::Status zeroed = ZeroDevice(device, static_cast<char*>(data), static_cast<int64_t>(size)); !zeroed.ok()) {
    cudaFree(data);
    return zeroed;
  }
  return static_cast<char*>(data);
}

void CudaBackend::Free(int32_t device, char* data) {
  if (Use(device).ok()) cudaFree(data);
}

absl::StatusOr<int64_t> CudaBackend::FreeBytes(int32_t device) {
  RETURN_IF_ERROR(Use(device));
  size_t free_bytes = 0, total_bytes = 0;
  RETURN_IF_ERROR(cuda::CudaStatus(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"));
  return static_cast<int64_t>(free_bytes);
}

// Host <-> device on the backend's own stream (id -1), waited for: a pageable host-to-device
// cudaMemcpy may return before its DMA lands, and the actors' non-blocking streams would not
// wait for the legacy stream it runs on.
absl::Status CudaBackend::CopyToDevice(int32_t device, const void* host, char* device_data, int64_t bytes) {
  if (bytes <= 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(Stream * s, StreamFor(device, -1));
  RETURN_IF_ERROR(cuda::CudaStatus(
      cudaMemcpyAsync(device_data, host, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, s->stream.get()),
      "cudaMemcpyAsync (host to device)"));
  return s->stream.Synchronize();
}

absl::Status CudaBackend::CopyToHost(int32_t device, const char* device_data, void* host, int64_t bytes) {
  if (bytes <= 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(Stream * s, StreamFor(device, -1));
  RETURN_IF_ERROR(cuda::CudaStatus(
      cudaMemcpyAsync(host, device_data, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, s->stream.get()),
      "cudaMemcpyAsync (device to host)"));
  return s->stream.Synchronize();
}

// On a stream of its own (id -1), waited for: a device-to-device cudaMemcpy may return before it
// is done, and the collective library's stream would not wait for it.
absl::Status CudaBackend::CopyWithinDevice(int32_t device, const char* from, char* to, int64_t bytes) {
  if (bytes <= 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(Stream * s, StreamFor(device, -1));
  RETURN_IF_ERROR(cuda::CudaStatus(
      cudaMemcpyAsync(to, from, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, s->stream.get()),
      "cudaMemcpyAsync (device to device)"));
  return s->stream.Synchronize();
}

absl::Status CudaBackend::ZeroDevice(int32_t device, char* data, int64_t bytes) {
  if (bytes <= 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(Stream * s, StreamFor(device, -1));
  RETURN_IF_ERROR(cuda::CudaStatus(cudaMemsetAsync(data, 0, static_cast<size_t>(bytes), s->stream.get()),
                                   "cudaMemsetAsync"));
  return s->stream.Synchronize();
}

absl::Status CudaBackend::CopyBox(int32_t device, const Tensor& from, const std::vector<int64_t>& from_offset,
                                  Tensor* to, const std::vector<int64_t>& to_offset, const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  if (count == 0) return absl::OkStatus();
  // Row-major strides (elements) of both tensors; the box's first element in each.
  auto strides = [](const Shape& s) {
    std::vector<int64_t> st(static_cast<size_t>(s.num_axes()), 1);
    for (int a = s.num_axes() - 2; a >= 0; --a) st[a] = st[a + 1] * s.dim(a + 1);
    return st;
  };
  const std::vector<int64_t> from_strides = strides(from.shape()), to_strides = strides(to->shape());
  int64_t from_at = 0, to_at = 0;
  for (size_t a = 0; a < shape.size(); ++a) {
    from_at += from_offset[a] * from_strides[a];
    to_at += to_offset[a] * to_strides[a];
  }
  const int64_t elem = SizeOf(from.dtype());
  ASSIGN_OR_RETURN(Stream * s, StreamFor(device, -1));
  RETURN_IF_ERROR(cuda::StridedCopy(shape, elem, static_cast<char*>(to->raw_data()) + to_at * elem, to_strides,
                                    static_cast<const char*>(from.raw_data()) + from_at * elem, from_strides,
                                    s->stream.get()));
  return s->stream.Synchronize();
}

absl::StatusOr<std::unique_ptr<ActBody>> CudaBackend::MakeBody(DeviceTask task) {
  RETURN_IF_ERROR(Use(task.device));
  const cuda::CudaKernelFn* kernel = nullptr;
  if (task.kind == DeviceTask::Kind::kCompute) {
    const std::string op_type = task.def != nullptr ? task.def->name : "";
    kernel = kernels_.Find(op_type);
    if (kernel == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("op '", op_type, "' has no CUDA kernel (core/cuda/op_kernels.h)"));
    }
  }
  return std::unique_ptr<ActBody>(std::make_unique<CudaBody>(this, std::move(task), kernel));
}

}  // namespace actor
}  // namespace oneflow_like
