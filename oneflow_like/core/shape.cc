#include "oneflow_like/core/shape.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace oneflow_like {

int64_t Shape::elem_count() const { return Count(0, num_axes()); }

int64_t Shape::Count(int begin, int end) const {
  int64_t n = 1;
  for (int i = begin; i < end; ++i) n *= dims_[i];
  return n;
}

std::vector<int64_t> Shape::Strides() const {
  std::vector<int64_t> strides(dims_.size());
  int64_t s = 1;
  for (int i = num_axes() - 1; i >= 0; --i) {
    strides[i] = s;
    s *= dims_[i];
  }
  return strides;
}

std::string Shape::ToString() const { return absl::StrCat("[", absl::StrJoin(dims_, ","), "]"); }

absl::StatusOr<Shape> Shape::Parse(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  if (!s.empty() && s.front() == '[') {
    if (s.back() != ']') return absl::InvalidArgumentError(absl::StrCat("shape '", text, "': missing ']'"));
    s = absl::StripAsciiWhitespace(s.substr(1, s.size() - 2));
  }
  std::vector<int64_t> dims;
  if (s.empty()) return Shape(dims);
  for (absl::string_view part : absl::StrSplit(s, ',')) {
    int64_t d;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &d) || d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape '", text, "': '", part, "' is not a non-negative integer"));
    }
    dims.push_back(d);
  }
  return Shape(dims);
}

absl::Status Shape::Validate() const {
  for (int i = 0; i < num_axes(); ++i) {
    if (dims_[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", ToString(), " has negative dim at axis ", i));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int> NormalizeAxis(int64_t axis, int num_axes) {
  int64_t a = axis < 0 ? axis + num_axes : axis;
  if (a < 0 || a >= num_axes) {
    return absl::InvalidArgumentError(absl::StrCat("axis ", axis, " is out of range for a tensor with ",
                                                   num_axes, " axes"));
  }
  return static_cast<int>(a);
}

std::string TensorDesc::ToString() const { return absl::StrCat(DataTypeName(dtype), shape.ToString()); }

}  // namespace oneflow_like
