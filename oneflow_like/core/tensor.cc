#include "oneflow_like/core/tensor.h"

#include <cstring>

namespace oneflow_like {

Tensor::Tensor(TensorDesc desc, Allocator* allocator) : desc_(std::move(desc)) {
  size_t bytes = static_cast<size_t>(desc_.byte_size());
  void* p = allocator ? allocator->Allocate(bytes) : AlignedHostAlloc(bytes);
  CHECK(p != nullptr) << "out of memory allocating " << bytes << " bytes for " << desc_.ToString();
  std::memset(p, 0, bytes);
  if (allocator) {
    owner_ = std::shared_ptr<void>(p, [allocator, bytes](void* q) { allocator->Deallocate(q, bytes); });
  } else {
    owner_ = std::shared_ptr<void>(p, [](void* q) { AlignedHostFree(q); });
  }
  data_ = p;
}

Tensor Tensor::Borrow(TensorDesc desc, void* data) {
  Tensor t;
  t.desc_ = std::move(desc);
  t.data_ = data;
  return t;
}

Tensor Tensor::Clone(Allocator* allocator) const {
  Tensor t(desc_, allocator);
  if (byte_size() > 0) std::memcpy(t.data_, data_, static_cast<size_t>(byte_size()));
  return t;
}

Tensor Tensor::Reshaped(Shape shape) const {
  CHECK_EQ(shape.elem_count(), elem_count()) << "reshape " << desc_.shape.ToString() << " -> "
                                             << shape.ToString();
  Tensor t = *this;
  t.desc_.shape = std::move(shape);
  return t;
}

double Tensor::GetAsDouble(int64_t i) const {
  switch (desc_.dtype) {
    case DataType::kFloat32: return static_cast<const float*>(data_)[i];
    case DataType::kFloat64: return static_cast<const double*>(data_)[i];
    case DataType::kInt32: return static_cast<const int32_t*>(data_)[i];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(data_)[i]);
    case DataType::kBool: return static_cast<const bool*>(data_)[i] ? 1.0 : 0.0;
    case DataType::kBFloat16: return BFloat16ToFloat(static_cast<const uint16_t*>(data_)[i]);
    case DataType::kFloat16: return HalfToFloat(static_cast<const uint16_t*>(data_)[i]);
    case DataType::kInvalid: break;
  }
  LOG(FATAL) << "GetAsDouble on an invalid tensor";
  return 0;
}

void Tensor::SetFromDouble(int64_t i, double v) {
  switch (desc_.dtype) {
    case DataType::kFloat32: static_cast<float*>(data_)[i] = static_cast<float>(v); return;
    case DataType::kFloat64: static_cast<double*>(data_)[i] = v; return;
    case DataType::kInt32: static_cast<int32_t*>(data_)[i] = static_cast<int32_t>(v); return;
    case DataType::kInt64: static_cast<int64_t*>(data_)[i] = static_cast<int64_t>(v); return;
    case DataType::kBool: static_cast<bool*>(data_)[i] = v != 0.0; return;
    case DataType::kBFloat16: static_cast<uint16_t*>(data_)[i] = FloatToBFloat16(static_cast<float>(v)); return;
    case DataType::kFloat16: static_cast<uint16_t*>(data_)[i] = FloatToHalf(static_cast<float>(v)); return;
    case DataType::kInvalid: break;
  }
  LOG(FATAL) << "SetFromDouble on an invalid tensor";
}

}  // namespace oneflow_like
