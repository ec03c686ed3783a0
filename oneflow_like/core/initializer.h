// Materializes a variable's InitializerProto into one shard of the variable: the single place
// where every initializer kind is turned into numbers, for the runtime (each rank fills its
// shard) and for test evaluators (whole tensors: logical shape = shard shape, offset 0).
//
// Shard semantics: `shard` has the physical shape and sits at `offset` (per axis) inside the
// logical tensor of `logical_shape`; element with logical row-major index L gets the value of
// L, so the assembled logical tensor does not depend on the layout. Example: a [4, 6]
// PORTABLE_UNIFORM variable split S(1) over 2 ranks: rank 1 fills a [4, 3] shard at offset
// {0, 3}, whose element (r, c) is the value of logical index 6r + 3 + c.
//
//   InitializerProto init;  init.set_kind(InitializerProto::PORTABLE_UNIFORM);
//   init.set_stddev(0.02);  init.set_stream(2);  init.set_portable_seed(0);
//   Tensor w(DataType::kFloat32, Shape{4, 6});
//   RETURN_IF_ERROR(InitializeShard(init, w.shape(), {0, 0}, &w));
//
// Errors: InvalidArgument for a random kind on a non-floating tensor, an unknown kind, or an
// offset/shape that does not fit the logical shape. Stateless and thread-safe.
#ifndef ONEFLOW_LIKE_CORE_INITIALIZER_H_
#define ONEFLOW_LIKE_CORE_INITIALIZER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "oneflow_like/core/proto/types.pb.h"
#include "oneflow_like/core/shape.h"
#include "oneflow_like/core/tensor.h"

namespace oneflow_like {

// REQUIRES: shard != nullptr.
absl::Status InitializeShard(const InitializerProto& init, const Shape& logical_shape,
                             const std::vector<int64_t>& offset, Tensor* shard);

// True for the kinds whose values do not depend on a compiler-derived Philox seed (zeros,
// ones, constant, portable uniform): a Job's InitializerProto alone fixes the values.
bool IsDeterministicInGraph(const InitializerProto& init);

}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_INITIALIZER_H_
