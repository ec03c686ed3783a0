// The runtime's device paths (device_backend.h): device memory blocks, host <-> slot copies
// wherever a slot lives, device bodies and an ACCUMULATE's sums in device memory.
#include <cstring>
#include <functional>
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "oneflow_like/actor/runtime.h"

namespace oneflow_like {
namespace actor {
namespace {

// An ACCUMULATE on the device: one device buffer per payload; First copies the piece in, Next
// adds it, Emit copies the sum out, each a backend body run to completion (Act).
class DeviceAccumulateBody final : public ActBody, public Accumulation {
 public:
  DeviceAccumulateBody(DeviceBackend* backend, int32_t device, std::vector<Tensor> sums,
                       std::unique_ptr<ActBody> copy, std::unique_ptr<ActBody> add)
      : backend_(backend), device_(device), sums_(std::move(sums)), copy_(std::move(copy)), add_(std::move(add)) {}
  ~DeviceAccumulateBody() override {
    for (Tensor& sum : sums_) {
      if (sum.raw_data() != nullptr) backend_->Free(device_, static_cast<char*>(sum.raw_data()));
    }
  }
  Accumulation* accumulation() override { return this; }
  absl::Status Act(ActIo&) override {
    return absl::InternalError("an ACCUMULATE's device body is driven through accumulation()");
  }
  // Every payload's copy or add started on the device's stream; `finished` once all are done.
  void Start(Step step, std::vector<Tensor> views, std::function<void(const absl::Status&)> finished) override {
    struct Pending {
      std::mutex mu;
      size_t left = 0;
      absl::Status first;
      std::function<void(const absl::Status&)> finished;
    };
    auto pending = std::make_shared<Pending>();
    pending->left = views.size();
    pending->finished = std::move(finished);
    if (views.empty()) return pending->finished(absl::OkStatus());
    for (size_t i = 0; i < views.size(); ++i) {
      ActIo io;
      io.inputs.push_back(step == Step::kEmit ? sums_[i] : views[i]);
      io.outputs.push_back(step == Step::kEmit ? views[i] : sums_[i]);
      ActBody* body = step == Step::kNext ? add_.get() : copy_.get();
      body->Start(std::move(io), [pending](const absl::Status& s) {
        std::unique_lock<std::mutex> lock(pending->mu);
        if (pending->first.ok()) pending->first = s;
        if (--pending->left > 0) return;
        const absl::Status result = pending->first;
        lock.unlock();
        pending->finished(result);
      });
    }
  }
  absl::Status First(size_t i, const Tensor& piece) override { return Run(copy_.get(), piece, sums_[i]); }
  absl::Status Next(size_t i, const Tensor& piece) override { return Run(add_.get(), piece, sums_[i]); }
  absl::Status Emit(size_t i, Tensor* out) override { return Run(copy_.get(), sums_[i], *out); }

 private:
  static absl::Status Run(ActBody* body, const Tensor& in, const Tensor& out) {
    ActIo io;
    io.inputs.push_back(in);
    io.outputs.push_back(out);
    return body->Act(io);
  }
  DeviceBackend* backend_;
  int32_t device_;
  std::vector<Tensor> sums_;  // borrowed views of backend allocations (freed above)
  std::unique_ptr<ActBody> copy_, add_;
};

// BOXING_SLICE / BOXING_CONCAT / BOXING_ADD within a rank on device memory: boxes cut and pasted
// and sums made by the backend, run to completion (synchronous; these are small and few).
class DeviceBoxingBody final : public ActBody {
 public:
  DeviceBoxingBody(DeviceBackend* backend, int32_t device, TaskProto::Type type,
                   std::vector<std::vector<int64_t>> begins, std::unique_ptr<ActBody> add)
      : backend_(backend), device_(device), type_(type), begins_(std::move(begins)), add_(std::move(add)) {}
  absl::Status Act(ActIo& io) override {
    switch (type_) {
      case TaskProto::BOXING_SLICE:  // outputs[k] = region k of inputs[0]
        for (size_t k = 0; k < io.outputs.size(); ++k) {
          Tensor& out = io.outputs[k];
          RETURN_IF_ERROR(backend_->CopyBox(device_, io.inputs[0], begins_[k], &out,
                                            std::vector<int64_t>(begins_[k].size(), 0), out.shape().dims()));
        }
        return absl::OkStatus();
      case TaskProto::BOXING_CONCAT: {  // outputs[0] = zeros, then region k = inputs[k]
        Tensor& out = io.outputs[0];
        RETURN_IF_ERROR(backend_->ZeroDevice(device_, static_cast<char*>(out.raw_data()), out.byte_size()));
        for (size_t k = 0; k < io.inputs.size(); ++k) {
          RETURN_IF_ERROR(backend_->CopyBox(device_, io.inputs[k], std::vector<int64_t>(begins_[k].size(), 0), &out,
                                            begins_[k], io.inputs[k].shape().dims()));
        }
        return absl::OkStatus();
      }
      default: {  // BOXING_ADD: outputs[0] = inputs[0] + inputs[1] + ...
        Tensor& out = io.outputs[0];
        if (io.inputs[0].raw_data() != out.raw_data()) {
          RETURN_IF_ERROR(backend_->CopyWithinDevice(device_, static_cast<const char*>(io.inputs[0].raw_data()),
                                                     static_cast<char*>(out.raw_data()), out.byte_size()));
        }
        for (size_t k = 1; k < io.inputs.size(); ++k) {
          ActIo add;
          add.inputs.push_back(io.inputs[k]);
          add.outputs.push_back(out);
          RETURN_IF_ERROR(add_->Act(add));
        }
        return absl::OkStatus();
      }
    }
  }

 private:
  DeviceBackend* backend_;
  int32_t device_;
  TaskProto::Type type_;
  std::vector<std::vector<int64_t>> begins_;
  std::unique_ptr<ActBody> add_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ActBody>> Runtime::MakeDeviceBoxingBody(const TaskProto& task, DeviceTask device_task,
                                                                      std::vector<std::vector<int64_t>> begins) const {
  device_task.kind = DeviceTask::Kind::kAdd;
  ASSIGN_OR_RETURN(std::unique_ptr<ActBody> add, MakeDeviceBody(task, std::move(device_task)));
  return std::unique_ptr<ActBody>(std::make_unique<DeviceBoxingBody>(env_.device_backend, task.device().index(),
                                                                     task.type(), std::move(begins), std::move(add)));
}

absl::StatusOr<char*> Runtime::AllocateDeviceBlock(const MemoryBlockProto& block) {
  if (env_.device_backend == nullptr || env_.device_backend->type() != block.device().type()) {
    return absl::UnimplementedError(absl::StrCat(
        "memory block ", block.id(), " is on device '", block.device().type(), ":", block.device().index(),
        "', but this runtime has ",
        env_.device_backend == nullptr ? std::string("no device backend (RuntimeEnv.device_backend)")
                                       : absl::StrCat("a '", env_.device_backend->type(), "' backend"),
        "; a CPU-only build runs cpu placements only"));
  }
  absl::StatusOr<char*> data = env_.device_backend->Allocate(block.device().index(), block.size_bytes());
  if (!data.ok()) {
    return absl::Status(data.status().code(), absl::StrCat("memory block ", block.id(), " (", block.size_bytes(),
                                                           " bytes on ", block.device().type(), ":",
                                                           block.device().index(), "): ", data.status().message()));
  }
  blocks_.push_back(Block{*data, static_cast<size_t>(block.size_bytes()), block.device().index()});
  return *data;
}

absl::Status Runtime::CheckDeviceMemory(const RankPlanProto& rank_plan) {
  std::map<int32_t, int64_t> planned;  // by device index
  for (const MemoryBlockProto& block : rank_plan.memory_blocks()) {
    if (block.device().type() != "cpu" && block.size_bytes() > 0) planned[block.device().index()] += block.size_bytes();
  }
  if (planned.empty() || env_.device_backend == nullptr) return absl::OkStatus();  // Build names a missing backend
  for (const auto& [device, bytes] : planned) {
    absl::StatusOr<int64_t> free_bytes = env_.device_backend->FreeBytes(device);
    if (!free_bytes.ok()) {
      return absl::Status(free_bytes.status().code(), absl::StrCat("rank ", rank_.value(), ", ",
                                                                   env_.device_backend->type(), ":", device,
                                                                   ": free memory: ", free_bytes.status().message()));
    }
    device_free_at_build_[device] = *free_bytes;
    if (bytes > *free_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "rank ", rank_.value(), " plans ", bytes, " bytes (", absl::StrFormat("%.2f", bytes / 1073741824.0),
          " GiB) on ", env_.device_backend->type(), ":", device, ", which has ", *free_bytes, " bytes (",
          absl::StrFormat("%.2f", *free_bytes / 1073741824.0),
          " GiB) free; `olplan memory --device-memory SIZE` proposes levers (ZeRO, recompute, more micro-batches "
          "or stages)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<int32_t, int64_t>> Runtime::DeviceBytesInUse() const {
  std::map<int32_t, int64_t> used;
  for (const auto& [device, free_before] : device_free_at_build_) {
    absl::StatusOr<int64_t> free_now = env_.device_backend->FreeBytes(device);
    if (!free_now.ok()) return free_now.status();
    used[device] = std::max<int64_t>(0, free_before - *free_now);
  }
  return used;
}

// Payloads must be in the memory the body reads and writes (a malformed plan would otherwise
// have the host touch device memory): the task's device, a COPY's two ends, a TRANSFER's mirror
// staging (host memory wherever the producer's register is). SOURCE and SINK bodies copy either
// way.
absl::Status Runtime::CheckPayloadMemory(const TaskProto& task, const ActorSpec& spec,
                                         const std::vector<const RegisterLayout*>& in_layouts,
                                         const std::vector<const RegisterLayout*>& out_layouts) const {
  if (task.type() == TaskProto::SOURCE || task.type() == TaskProto::SINK) return absl::OkStatus();
  auto device_of = [](const DeviceProto& d) { return d.type().empty() || d.type() == "cpu" ? -1 : d.index(); };
  const bool copy = task.type() == TaskProto::COPY;
  const int32_t here = device_of(task.device());
  const int32_t in_device = copy ? device_of(task.copy().from()) : task.type() == TaskProto::TRANSFER ? -1 : here;
  const int32_t out_device = copy ? device_of(task.copy().to()) : here;
  auto where = [](int32_t device) { return device < 0 ? std::string("host") : absl::StrCat("device ", device); };
  auto check = [&](const std::vector<PayloadRef>& refs, const std::vector<const RegisterLayout*>& layouts,
                   int32_t expected, const char* side, const char* verb) -> absl::Status {
    for (size_t i = 0; i < refs.size(); ++i) {
      const RegisterLayout* l = layouts[refs[i].port];
      const int32_t actual = DeviceOf(l->id.value());
      if (actual != expected) {
        return absl::InvalidArgumentError(absl::StrCat("task '", task.name(), "' (id ", task.id(), "): payload ", side,
                                                       " ", i, " (register '", l->name, "') is in ", where(actual),
                                                       " memory, but the task ", verb, " ", where(expected), " memory"));
      }
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(check(spec.payload_inputs, in_layouts, in_device, "input", "reads"));
  return check(spec.payload_outputs, out_layouts, out_device, "output", "writes");
}

int32_t Runtime::DeviceOf(int64_t register_id) const {
  auto it = device_of_register_.find(register_id);
  return it == device_of_register_.end() ? -1 : it->second;
}

absl::Status Runtime::WriteSlot(const RegisterLayout& layout, int32_t buffer, int32_t slot, const Tensor& host) const {
  Tensor target = layout.View(buffer, slot);
  if (target.byte_size() != host.byte_size()) {
    return absl::InternalError(absl::StrCat("writing ", host.byte_size(), " bytes into slot ", slot, " of register '",
                                            layout.name, "' (", target.byte_size(), " bytes)"));
  }
  if (const int32_t device = DeviceOf(layout.id.value()); device >= 0) {
    return env_.device_backend->CopyToDevice(device, host.raw_data(), static_cast<char*>(target.raw_data()),
                                             host.byte_size());
  }
  if (host.byte_size() > 0) std::memcpy(target.raw_data(), host.raw_data(), host.byte_size());
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Runtime::ReadSlot(const RegisterLayout& layout, int32_t buffer, int32_t slot) const {
  const Tensor view = layout.View(buffer, slot);
  const int32_t device = DeviceOf(layout.id.value());
  if (device < 0) return view.Clone();
  Tensor host(view.desc());
  RETURN_IF_ERROR(env_.device_backend->CopyToHost(device, static_cast<const char*>(view.raw_data()), host.raw_data(),
                                                  view.byte_size()));
  return host;
}

absl::StatusOr<std::unique_ptr<ActBody>> Runtime::MakeDeviceBody(const TaskProto& task, DeviceTask device_task) const {
  absl::StatusOr<std::unique_ptr<ActBody>> body = env_.device_backend->MakeBody(std::move(device_task));
  if (!body.ok()) {
    return absl::Status(body.status().code(), absl::StrCat("task '", task.name(), "' (id ", task.id(), ") on ",
                                                           task.device().type(), ":", task.device().index(), ": ",
                                                           body.status().message()));
  }
  return body;
}

absl::StatusOr<std::unique_ptr<ActBody>> Runtime::MakeDeviceAccumulateBody(const DeviceTask& task,
                                                                          const std::vector<TensorDesc>& sums) const {
  DeviceBackend* backend = env_.device_backend;
  DeviceTask copy = task, add = task;
  copy.kind = DeviceTask::Kind::kCopy;
  add.kind = DeviceTask::Kind::kAdd;
  ASSIGN_OR_RETURN(std::unique_ptr<ActBody> copy_body, backend->MakeBody(std::move(copy)));
  ASSIGN_OR_RETURN(std::unique_ptr<ActBody> add_body, backend->MakeBody(std::move(add)));
  std::vector<Tensor> buffers;
  auto free_all = [&] {
    for (Tensor& b : buffers) backend->Free(task.device, static_cast<char*>(b.raw_data()));
  };
  for (const TensorDesc& desc : sums) {
    absl::StatusOr<char*> data = backend->Allocate(task.device, std::max<int64_t>(1, desc.byte_size()));
    if (!data.ok()) {
      free_all();
      return absl::Status(data.status().code(), absl::StrCat("the running sum of ACCUMULATE '", task.name, "' (",
                                                             desc.ToString(), "): ", data.status().message()));
    }
    buffers.push_back(Tensor::Borrow(desc, *data));
  }
  return std::unique_ptr<ActBody>(std::make_unique<DeviceAccumulateBody>(
      backend, task.device, std::move(buffers), std::move(copy_body), std::move(add_body)));
}

}  // namespace actor
}  // namespace oneflow_like
