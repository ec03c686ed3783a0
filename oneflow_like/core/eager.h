// Eager execution of one registered op on whole (or shard) tensors, on the calling thread.
// Used by the op tests, demos and benchmarks; the actor runtime runs kernels from the Plan
// instead. Outputs are freshly allocated from `allocator` (plain heap when null).
#ifndef ONEFLOW_LIKE_CORE_EAGER_H_
#define ONEFLOW_LIKE_CORE_EAGER_H_

#include <string>
#include <vector>

#include "oneflow_like/core/op_registry.h"

namespace oneflow_like {

// Validates attrs (defaults filled), infers the outputs, allocates them, runs the CPU kernel.
absl::StatusOr<std::vector<Tensor>> RunOp(const OpRegistry& registry, const std::string& op_type,
                                          const std::vector<Tensor>& inputs, const AttrMap& attrs = {},
                                          Allocator* allocator = nullptr);

// Runs one shard: `inputs` are physical shards, `input_shards`/`output_shards` say where they sit
// in their logical tensors, outputs are allocated with the physical `output_descs`.
absl::StatusOr<std::vector<Tensor>> RunOpShard(const OpRegistry& registry, const std::string& op_type,
                                               const std::vector<Tensor>& inputs, const AttrMap& attrs,
                                               const std::vector<ShardInfo>& input_shards,
                                               const std::vector<TensorDesc>& output_descs,
                                               const std::vector<ShardInfo>& output_shards,
                                               Allocator* allocator = nullptr);

}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_EAGER_H_
