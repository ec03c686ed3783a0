#include "oneflow_like/core/device.h"

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace oneflow_like {

std::string StreamKindName(StreamKind kind) {
  switch (kind) {
    case StreamKind::kCompute:
      return "compute";
    case StreamKind::kCopy:
      return "copy";
    case StreamKind::kComm:
      return "comm";
  }
  return absl::StrCat("stream_kind(", static_cast<int32_t>(kind), ")");
}

std::string Stream::name() const {
  return absl::StrCat(device()->name(), "/", StreamKindName(kind()), "#", id().value());
}

std::string Device::name() const { return absl::StrCat(DeviceTypeName(type()), ":", index().value()); }

// ---- CpuEvent ----

absl::Status CpuEvent::Synchronize() { return recorded_status(); }

absl::Status CpuEvent::recorded_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

int64_t CpuEvent::record_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return record_count_;
}

void CpuEvent::Record(absl::Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  status_ = std::move(status);
  ++record_count_;
}

// ---- CpuStream ----

void CpuStream::EnqueueFallible(std::function<absl::Status()> work) {
  CHECK(work) << name() << ": Enqueue of an empty function";
  if (!status_.ok()) return;  // sticky error: skip work that would read garbage
  absl::Status s = work();
  if (!s.ok()) {
    status_ = absl::Status(s.code(), absl::StrCat(name(), ": ", s.message()));
  }
}

absl::Status CpuStream::RecordEvent(Event* event) {
  auto* cpu_event = dynamic_cast<CpuEvent*>(event);
  if (cpu_event == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": RecordEvent got an event of another device type; ",
                     "create events with this stream's device()->CreateEvent()"));
  }
  cpu_event->Record(status_);
  return absl::OkStatus();
}

absl::Status CpuStream::WaitEvent(const Event& event) {
  auto* cpu_event = dynamic_cast<const CpuEvent*>(&event);
  if (cpu_event == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": WaitEvent got an event of another device type; ",
                     "cross-device waits need a copy stream of the consumer device"));
  }
  // The recording stream ran its work inline, so the event is already complete; only its
  // status matters.
  absl::Status s = cpu_event->recorded_status();
  if (status_.ok() && !s.ok()) status_ = std::move(s);
  return absl::OkStatus();
}

void CpuStream::AddCallback(Callback callback) {
  CHECK(callback) << name() << ": AddCallback of an empty function";
  callback(status_);
}

// ---- CpuDevice ----

std::unique_ptr<Stream> CpuDevice::CreateStream(StreamKind kind) {
  StreamId id(next_stream_id_.fetch_add(1, std::memory_order_relaxed));
  return std::make_unique<CpuStream>(this, kind, id);
}

std::unique_ptr<Event> CpuDevice::CreateEvent() { return std::make_unique<CpuEvent>(); }

}  // namespace oneflow_like
