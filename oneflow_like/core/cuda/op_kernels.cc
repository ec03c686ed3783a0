#include "oneflow_like/core/cuda/op_kernels.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "oneflow_like/core/cuda/op_kernels_util.h"

namespace oneflow_like {
namespace cuda {

absl::Status CudaKernelTable::Add(const std::string& op_type, CudaKernelFn kernel) {
  if (!kernel) return absl::InvalidArgumentError(absl::StrCat("CUDA kernel of ", op_type, " is empty"));
  if (!kernels_.emplace(op_type, std::move(kernel)).second) {
    return absl::AlreadyExistsError(absl::StrCat("op ", op_type, " already has a CUDA kernel"));
  }
  return absl::OkStatus();
}

const CudaKernelFn* CudaKernelTable::Find(const std::string& op_type) const {
  auto it = kernels_.find(op_type);
  return it == kernels_.end() ? nullptr : &it->second;
}

std::vector<std::string> CudaKernelTable::Missing(const OpRegistry& registry) const {
  std::vector<std::string> missing;
  for (const std::string& name : registry.Names()) {  // sorted
    if (kernels_.count(name) == 0) missing.push_back(name);
  }
  return missing;
}

absl::Status AddCudaKernels(CudaKernelTable* table) {
  for (auto* add : {op_kernels_internal::AddMathKernels, op_kernels_internal::AddNnKernels,
                    op_kernels_internal::AddDataKernels, op_kernels_internal::AddOptimizerKernels}) {
    if (absl::Status s = add(table); !s.ok()) return s;
  }
  return absl::OkStatus();
}

namespace op_kernels_internal {

absl::Status Annotate(const std::string& op, const CudaKernelContext& ctx, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(op, " '", ctx.op_name, "' (cuda): ", status.message()));
}

absl::Status CheckArity(const std::string& op, const CudaKernelContext& ctx, int num_inputs, int num_outputs,
                        bool variadic_inputs, bool variadic_outputs) {
  const int ni = static_cast<int>(ctx.inputs.size()), no = static_cast<int>(ctx.outputs.size());
  if (variadic_inputs ? ni < 1 : ni != num_inputs) {
    return OpError(op, ctx, "got ", ni, " inputs, expected ",
                   variadic_inputs ? "at least 1" : absl::StrCat(num_inputs));
  }
  if (variadic_outputs ? no < 1 : no != num_outputs) {
    return OpError(op, ctx, "got ", no, " outputs, expected ",
                   variadic_outputs ? "at least 1" : absl::StrCat(num_outputs));
  }
  for (int i = 0; i < ni; ++i) {
    if (ctx.inputs[i] == nullptr) return OpError(op, ctx, "input ", i, " is null");
  }
  for (int i = 0; i < no; ++i) {
    if (ctx.outputs[i] == nullptr) return OpError(op, ctx, "output ", i, " is null");
  }
  if (!ctx.input_shards.empty() && static_cast<int>(ctx.input_shards.size()) != ni) {
    return OpError(op, ctx, "got ", ctx.input_shards.size(), " input shards for ", ni, " inputs");
  }
  if (!ctx.output_shards.empty() && static_cast<int>(ctx.output_shards.size()) != no) {
    return OpError(op, ctx, "got ", ctx.output_shards.size(), " output shards for ", no, " outputs");
  }
  return absl::OkStatus();
}

absl::Status CheckDesc(const std::string& op, const CudaKernelContext& ctx, const std::string& what, const Tensor& t,
                       const TensorDesc& want) {
  if (t.desc() == want) return absl::OkStatus();
  return OpError(op, ctx, what, " is ", t.desc().ToString(), ", expected ", want.ToString());
}

ShardPosition PositionOf(const std::vector<ShardInfo>& shards, int i, const Shape& physical) {
  ShardPosition p;
  p.physical_dims = physical.dims();
  if (static_cast<int>(shards.size()) > i) {
    p.logical_dims = shards[i].logical_shape.dims();
    p.offset = shards[i].offset;
  }
  return p;
}

std::vector<int64_t> OffsetOf(const std::vector<ShardInfo>& shards, int i, const Shape& physical) {
  if (static_cast<int>(shards.size()) > i && static_cast<int>(shards[i].offset.size()) == physical.num_axes()) {
    return shards[i].offset;
  }
  return std::vector<int64_t>(physical.num_axes(), 0);
}

}  // namespace op_kernels_internal
}  // namespace cuda
}  // namespace oneflow_like
