#include "oneflow_like/core/eager.h"

#include "absl/strings/str_cat.h"

namespace oneflow_like {
namespace {

// `shards` as given, or whole-tensor infos for `shapes` when empty.
absl::StatusOr<std::vector<ShardInfo>> ShardsOrWhole(const std::string& op_type, const char* side,
                                                     const std::vector<ShardInfo>& shards,
                                                     const std::vector<const Shape*>& shapes) {
  if (shards.empty()) {
    std::vector<ShardInfo> whole;
    for (const Shape* s : shapes) whole.push_back(ShardInfo::Whole(*s));
    return whole;
  }
  if (shards.size() != shapes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(op_type, ": ", shards.size(), " ", side, " shard infos for ",
                                                   shapes.size(), " ", side, "s"));
  }
  return shards;
}

std::vector<Tensor> Allocate(const std::vector<TensorDesc>& descs, Allocator* allocator) {
  std::vector<Tensor> outputs;
  for (const TensorDesc& d : descs) outputs.emplace_back(d, allocator);
  return outputs;
}

}  // namespace

absl::StatusOr<std::vector<TensorDesc>> InferOutputs(const OpRegistry& registry, const std::string& op_type,
                                                     const std::vector<Tensor>& inputs, const AttrMap& attrs) {
  ASSIGN_OR_RETURN(const OpDef* def, registry.Get(op_type));
  ASSIGN_OR_RETURN(AttrMap full, def->ValidateAttrs(op_type, attrs));
  std::vector<TensorDesc> in_descs;
  for (const Tensor& t : inputs) in_descs.push_back(t.desc());
  return def->Infer(op_type, full, in_descs);
}

absl::Status RunKernel(const OpRegistry& registry, const std::string& op_type, const std::vector<Tensor>& inputs,
                       const AttrMap& attrs, const std::vector<ShardInfo>& input_shards,
                       std::vector<Tensor>* outputs, const std::vector<ShardInfo>& output_shards) {
  ASSIGN_OR_RETURN(const OpDef* def, registry.Get(op_type));
  ASSIGN_OR_RETURN(AttrMap full, def->ValidateAttrs(op_type, attrs));
  std::vector<const Shape*> in_shapes, out_shapes;
  for (const Tensor& t : inputs) in_shapes.push_back(&t.shape());
  for (const Tensor& t : *outputs) out_shapes.push_back(&t.shape());
  ASSIGN_OR_RETURN(std::vector<ShardInfo> in_infos, ShardsOrWhole(op_type, "input", input_shards, in_shapes));
  ASSIGN_OR_RETURN(std::vector<ShardInfo> out_infos, ShardsOrWhole(op_type, "output", output_shards, out_shapes));
  KernelContext ctx{op_type, full, {}, {}, std::move(in_infos), std::move(out_infos), nullptr};
  for (const Tensor& t : inputs) ctx.inputs.push_back(&t);
  for (Tensor& t : *outputs) ctx.outputs.push_back(&t);
  return def->cpu_kernel(ctx);
}

absl::StatusOr<std::vector<Tensor>> RunOp(const OpRegistry& registry, const std::string& op_type,
                                          const std::vector<Tensor>& inputs, const AttrMap& attrs,
                                          Allocator* allocator) {
  ASSIGN_OR_RETURN(std::vector<TensorDesc> out_descs, InferOutputs(registry, op_type, inputs, attrs));
  std::vector<Tensor> outputs = Allocate(out_descs, allocator);
  RETURN_IF_ERROR(RunKernel(registry, op_type, inputs, attrs, {}, &outputs, {}));
  return outputs;
}

absl::StatusOr<std::vector<Tensor>> RunOpShard(const OpRegistry& registry, const std::string& op_type,
                                               const std::vector<Tensor>& inputs, const AttrMap& attrs,
                                               const std::vector<ShardInfo>& input_shards,
                                               const std::vector<TensorDesc>& output_descs,
                                               const std::vector<ShardInfo>& output_shards,
                                               Allocator* allocator) {
  std::vector<Tensor> outputs = Allocate(output_descs, allocator);
  RETURN_IF_ERROR(RunKernel(registry, op_type, inputs, attrs, input_shards, &outputs, output_shards));
  return outputs;
}

}  // namespace oneflow_like
