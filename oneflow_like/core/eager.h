// Eager execution of one registered op on whole (or shard) tensors, on the calling thread.
// Used by the op tests, demos and benchmarks; the actor runtime runs kernels from the Plan
// instead. RunOp/RunOpShard allocate fresh outputs from `allocator` (plain heap when null);
// RunKernel runs into outputs the caller allocated (e.g. the test harness's poisoned buffers,
// or buffers aliasing the inputs for an in-place update).
//
//   InferOutputs -> allocate -> RunKernel     is RunOp;
//   allocate(output_descs)   -> RunKernel     is RunOpShard.
//
// Thread-safety: as the registry's OpDefs (pure functions); outputs are written by the caller's
// thread only.
#ifndef ONEFLOW_LIKE_CORE_EAGER_H_
#define ONEFLOW_LIKE_CORE_EAGER_H_

#include <string>
#include <vector>

#include "oneflow_like/core/op_registry.h"

namespace oneflow_like {

// Validates attrs and infers the output descs of a run on whole tensors `inputs`.
absl::StatusOr<std::vector<TensorDesc>> InferOutputs(const OpRegistry& registry, const std::string& op_type,
                                                     const std::vector<Tensor>& inputs, const AttrMap& attrs = {});

// Validates attrs (defaults filled) and runs the CPU kernel with `inputs` into `*outputs`.
// `input_shards`/`output_shards` say where each tensor sits in its logical tensor; an empty
// vector means every tensor of that side is whole. Output contents on entry are irrelevant: the
// kernel must write every element.
// REQUIRES: *outputs holds defined tensors with the (physical) descs the op produces.
absl::Status RunKernel(const OpRegistry& registry, const std::string& op_type, const std::vector<Tensor>& inputs,
                       const AttrMap& attrs, const std::vector<ShardInfo>& input_shards,
                       std::vector<Tensor>* outputs, const std::vector<ShardInfo>& output_shards);

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
