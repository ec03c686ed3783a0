#include "oneflow_like/core/initializer.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/core/random.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace {

absl::Status CheckFits(const Shape& logical, const std::vector<int64_t>& offset, const Shape& physical) {
  bool fits = static_cast<int>(offset.size()) == logical.num_axes() && physical.num_axes() == logical.num_axes();
  for (int a = 0; fits && a < logical.num_axes(); ++a) {
    fits = offset[a] >= 0 && offset[a] + physical.dim(a) <= logical.dim(a);
  }
  if (fits) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("initializer: shard ", physical.ToString(), " at offset [",
                                                 absl::StrJoin(offset, ","), "] does not fit the logical shape ",
                                                 logical.ToString()));
}

}  // namespace

absl::Status InitializeShard(const InitializerProto& init, const Shape& logical_shape,
                             const std::vector<int64_t>& offset, Tensor* shard) {
  RETURN_IF_ERROR(CheckFits(logical_shape, offset, shard->shape()));
  double fill = 0;
  switch (init.kind()) {
    case InitializerProto::ZEROS: break;
    case InitializerProto::ONES: fill = 1; break;
    case InitializerProto::CONSTANT: fill = init.value(); break;
    case InitializerProto::UNIFORM:
    case InitializerProto::NORMAL:
    case InitializerProto::PORTABLE_UNIFORM:
      if (!IsFloatingPoint(shard->dtype())) {
        return absl::InvalidArgumentError(absl::StrCat("random initializer for a ", DataTypeName(shard->dtype()),
                                                       " variable; use zeros/ones/constant"));
      }
      if (init.kind() == InitializerProto::UNIFORM) {
        FillUniform(shard, logical_shape, offset, init.seed(), init.low(), init.high());
      } else if (init.kind() == InitializerProto::NORMAL) {
        FillNormal(shard, logical_shape, offset, init.seed(), init.mean(), init.stddev());
      } else {
        FillPortableUniform(shard, logical_shape, offset, init.portable_seed(), init.stream(), init.stddev());
      }
      return absl::OkStatus();
    default: return absl::InvalidArgumentError(absl::StrCat("unknown initializer kind ", init.kind()));
  }
  for (int64_t i = 0; i < shard->elem_count(); ++i) shard->SetFromDouble(i, fill);
  return absl::OkStatus();
}

bool IsDeterministicInGraph(const InitializerProto& init) {
  switch (init.kind()) {
    case InitializerProto::ZEROS:
    case InitializerProto::ONES:
    case InitializerProto::CONSTANT:
    case InitializerProto::PORTABLE_UNIFORM: return true;
    default: return false;
  }
}

}  // namespace oneflow_like
