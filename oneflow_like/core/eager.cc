#include "oneflow_like/core/eager.h"

namespace oneflow_like {

absl::StatusOr<std::vector<Tensor>> RunOp(const OpRegistry& registry, const std::string& op_type,
                                          const std::vector<Tensor>& inputs, const AttrMap& attrs,
                                          Allocator* allocator) {
  ASSIGN_OR_RETURN(const OpDef* def, registry.Get(op_type));
  ASSIGN_OR_RETURN(AttrMap full, def->ValidateAttrs(op_type, attrs));
  std::vector<TensorDesc> in_descs;
  std::vector<ShardInfo> in_shards;
  for (const Tensor& t : inputs) {
    in_descs.push_back(t.desc());
    in_shards.push_back(ShardInfo::Whole(t.shape()));
  }
  ASSIGN_OR_RETURN(std::vector<TensorDesc> out_descs, def->Infer(op_type, full, in_descs));
  std::vector<ShardInfo> out_shards;
  for (const TensorDesc& d : out_descs) out_shards.push_back(ShardInfo::Whole(d.shape));
  return RunOpShard(registry, op_type, inputs, full, in_shards, out_descs, out_shards, allocator);
}

absl::StatusOr<std::vector<Tensor>> RunOpShard(const OpRegistry& registry, const std::string& op_type,
                                               const std::vector<Tensor>& inputs, const AttrMap& attrs,
                                               const std::vector<ShardInfo>& input_shards,
                                               const std::vector<TensorDesc>& output_descs,
                                               const std::vector<ShardInfo>& output_shards,
                                               Allocator* allocator) {
  ASSIGN_OR_RETURN(const OpDef* def, registry.Get(op_type));
  ASSIGN_OR_RETURN(AttrMap full, def->ValidateAttrs(op_type, attrs));
  std::vector<Tensor> outputs;
  for (const TensorDesc& d : output_descs) outputs.emplace_back(d, allocator);
  KernelContext ctx{op_type, full, {}, {}, input_shards, output_shards, nullptr};
  for (const Tensor& t : inputs) ctx.inputs.push_back(&t);
  for (Tensor& t : outputs) ctx.outputs.push_back(&t);
  RETURN_IF_ERROR(def->cpu_kernel(ctx));
  return outputs;
}

}  // namespace oneflow_like
