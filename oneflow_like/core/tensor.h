// Tensor: a TensorDesc plus a contiguous row-major buffer, either owned (shared, reference
// counted, allocated from an Allocator) or borrowed (a raw pointer whose lifetime the caller
// guarantees, e.g. a slice of a planned memory block). Copying a Tensor shares the buffer;
// use Clone() for a deep copy. Not thread-safe for concurrent mutation of the same buffer.
#ifndef ONEFLOW_LIKE_CORE_TENSOR_H_
#define ONEFLOW_LIKE_CORE_TENSOR_H_

#include <memory>
#include <string>
#include <vector>

#include "glog/logging.h"
#include "oneflow_like/core/allocator.h"
#include "oneflow_like/core/shape.h"

namespace oneflow_like {

class Tensor {
 public:
  Tensor() = default;
  // Owning: allocates desc.byte_size() bytes from `allocator` (the process-wide heap allocator
  // when null). Contents are zero-initialized.
  explicit Tensor(TensorDesc desc, Allocator* allocator = nullptr);
  Tensor(DataType dtype, Shape shape, Allocator* allocator = nullptr)
      : Tensor(TensorDesc{dtype, std::move(shape)}, allocator) {}
  // Borrowing: wraps `data` (at least desc.byte_size() bytes), which must outlive the Tensor.
  static Tensor Borrow(TensorDesc desc, void* data);

  // Owning tensor filled from a vector (shape must match the element count).
  template <typename T>
  static Tensor FromVector(Shape shape, const std::vector<T>& values) {
    CHECK_EQ(static_cast<int64_t>(values.size()), shape.elem_count());
    Tensor t(DataTypeOf<T>::value, std::move(shape));
    std::copy(values.begin(), values.end(), t.data<T>());
    return t;
  }

  const TensorDesc& desc() const { return desc_; }
  DataType dtype() const { return desc_.dtype; }
  const Shape& shape() const { return desc_.shape; }
  int64_t elem_count() const { return desc_.shape.elem_count(); }
  int64_t byte_size() const { return desc_.byte_size(); }
  bool defined() const { return data_ != nullptr || (desc_.dtype != DataType::kInvalid && elem_count() == 0); }

  void* raw_data() { return data_; }
  const void* raw_data() const { return data_; }
  // REQUIRES: T matches dtype() (checked).
  template <typename T>
  T* data() {
    CHECK(DataTypeOf<T>::value == desc_.dtype) << "tensor is " << DataTypeName(desc_.dtype);
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* data() const {
    CHECK(DataTypeOf<T>::value == desc_.dtype) << "tensor is " << DataTypeName(desc_.dtype);
    return static_cast<const T*>(data_);
  }
  template <typename T>
  std::vector<T> ToVector() const {
    const T* p = data<T>();
    return std::vector<T>(p, p + elem_count());
  }

  // Deep copy into a new owning tensor.
  Tensor Clone(Allocator* allocator = nullptr) const;
  // Same buffer, new shape with the same element count (checked).
  Tensor Reshaped(Shape shape) const;
  // Element i converted to double (any dtype); for tests and debugging.
  double GetAsDouble(int64_t i) const;
  void SetFromDouble(int64_t i, double v);

 private:
  TensorDesc desc_{DataType::kInvalid, Shape()};
  std::shared_ptr<void> owner_;  // null when borrowed
  void* data_ = nullptr;
};

}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_TENSOR_H_
