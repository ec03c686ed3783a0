// Shape: the dimensions of a dense, row-major tensor. A value type; rank 0 is a scalar
// (one element). TensorDesc = dtype + shape.
#ifndef ONEFLOW_LIKE_CORE_SHAPE_H_
#define ONEFLOW_LIKE_CORE_SHAPE_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "oneflow_like/core/data_type.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int num_axes() const { return static_cast<int>(dims_.size()); }
  int64_t dim(int axis) const { return dims_[axis]; }
  int64_t operator[](int axis) const { return dims_[axis]; }
  void set_dim(int axis, int64_t v) { dims_[axis] = v; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t elem_count() const;
  // Row-major strides in elements.
  std::vector<int64_t> Strides() const;
  // Product of dims in [begin, end).
  int64_t Count(int begin, int end) const;
  int64_t Count(int begin) const { return Count(begin, num_axes()); }

  // "[64,128]"; the scalar shape prints as "[]".
  std::string ToString() const;
  // Parses "[64, 128]" or "64,128" (and "[]"). Dims must be >= 0.
  static absl::StatusOr<Shape> Parse(absl::string_view text);
  // Non-negative dims.
  absl::Status Validate() const;

  friend bool operator==(const Shape& a, const Shape& b) { return a.dims_ == b.dims_; }
  friend bool operator!=(const Shape& a, const Shape& b) { return a.dims_ != b.dims_; }
  template <typename H>
  friend H AbslHashValue(H h, const Shape& s) { return H::combine(std::move(h), s.dims_); }

 private:
  std::vector<int64_t> dims_;
};

// Normalizes a possibly negative axis against `num_axes`; InvalidArgument if out of range.
absl::StatusOr<int> NormalizeAxis(int64_t axis, int num_axes);

struct TensorDesc {
  DataType dtype = DataType::kFloat32;
  Shape shape;

  int64_t byte_size() const { return shape.elem_count() * SizeOf(dtype); }
  std::string ToString() const;  // "float32[64,128]"
  friend bool operator==(const TensorDesc& a, const TensorDesc& b) {
    return a.dtype == b.dtype && a.shape == b.shape;
  }
  friend bool operator!=(const TensorDesc& a, const TensorDesc& b) { return !(a == b); }
};

}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_SHAPE_H_
