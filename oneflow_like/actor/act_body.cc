#include "oneflow_like/actor/act_body.h"

#include <cstring>

#include "oneflow_like/core/shard_simulator.h"

namespace oneflow_like {
namespace actor {
namespace {

template <typename T>
void AddTyped(const Tensor& source, Tensor* destination) {
  const T* s = source.data<T>();
  T* d = destination->data<T>();
  for (int64_t i = 0, n = source.elem_count(); i < n; ++i) d[i] += s[i];
}

}  // namespace

void CopyTensorData(const Tensor& source, Tensor* destination) {
  CHECK_EQ(source.byte_size(), destination->byte_size());
  // Same bytes: an in-place update already wrote the value (inplace_updates.h).
  if (source.byte_size() > 0 && source.raw_data() != destination->raw_data()) std::memcpy(destination->raw_data(), source.raw_data(), source.byte_size());
}

void AddTensorInto(const Tensor& source, Tensor* destination) {
  CHECK(source.desc() == destination->desc()) << source.desc().ToString() << " vs " << destination->desc().ToString();
  switch (source.dtype()) {
    case DataType::kFloat32:
      AddTyped<float>(source, destination);
      return;
    case DataType::kFloat64:
      AddTyped<double>(source, destination);
      return;
    case DataType::kInt32:
      AddTyped<int32_t>(source, destination);
      return;
    case DataType::kInt64:
      AddTyped<int64_t>(source, destination);
      return;
    default:
      for (int64_t i = 0, n = source.elem_count(); i < n; ++i) {
        destination->SetFromDouble(i, destination->GetAsDouble(i) + source.GetAsDouble(i));
      }
  }
}

absl::Status ComputeBody::Act(ActIo& io) {
  context_.inputs.clear();
  context_.outputs.clear();
  for (const Tensor& t : io.inputs) context_.inputs.push_back(&t);
  for (Tensor& t : io.outputs) context_.outputs.push_back(&t);
  absl::Status status = def_->cpu_kernel(context_);
  context_.inputs.clear();  // no pointers into this act's views are kept
  context_.outputs.clear();
  return status;
}

absl::Status CopyBody::Act(ActIo& io) {
  for (size_t i = 0; i < io.outputs.size(); ++i) CopyTensorData(io.inputs[i], &io.outputs[i]);
  return absl::OkStatus();
}

absl::Status SliceBody::Act(ActIo& io) {
  for (size_t k = 0; k < io.outputs.size(); ++k) CopyBlockOut(io.inputs[0], begins_[k], &io.outputs[k]);
  return absl::OkStatus();
}

absl::Status ConcatBody::Act(ActIo& io) {
  // The output starts as zeros: elements no input covers stay zero (S -> P embeds a shard this
  // way; a concat without inputs is a zero fill).
  if (io.outputs[0].byte_size() > 0) std::memset(io.outputs[0].raw_data(), 0, io.outputs[0].byte_size());
  for (size_t k = 0; k < io.inputs.size(); ++k) CopyBlockIn(io.inputs[k], begins_[k], &io.outputs[0]);
  return absl::OkStatus();
}

absl::Status AddBody::Act(ActIo& io) {
  CopyTensorData(io.inputs[0], &io.outputs[0]);
  for (size_t k = 1; k < io.inputs.size(); ++k) AddTensorInto(io.inputs[k], &io.outputs[0]);
  return absl::OkStatus();
}

void Accumulation::Start(Step step, std::vector<Tensor> views, std::function<void(const absl::Status&)> finished) {
  absl::Status status;
  for (size_t i = 0; status.ok() && i < views.size(); ++i) {
    status = step == Step::kFirst ? First(i, views[i]) : step == Step::kNext ? Next(i, views[i]) : Emit(i, &views[i]);
  }
  finished(status);
}

}  // namespace actor
}  // namespace oneflow_like
