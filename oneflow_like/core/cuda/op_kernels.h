// The CUDA kernel of every op in the registry (core/ops), behind one call shape, so the runtime
// can run a COMPUTE task on a `cuda` placement the way it runs a CPU kernel (KernelContext):
//
//   CudaKernelTable table;
//   RETURN_IF_ERROR(AddCudaKernels(&table));              // every builtin op
//   const CudaKernelFn* kernel = table.Find("matmul");    // null: the op has no CUDA kernel
//   CudaKernelContext ctx{op_name, attrs};                 // attrs validated, defaults filled
//   ctx.inputs = {&a, &b};  ctx.outputs = {&y};            // views of DEVICE memory
//   ctx.input_shards = ...; ctx.output_shards = ...;       // as KernelContext (random ops use them)
//   ctx.stream = stream;  ctx.cublas = cublas;             // the caller's stream and cuBLAS handle
//   RETURN_IF_ERROR((*kernel)(ctx));                       // enqueues on ctx.stream, returns at once
//
// Semantics are the CPU kernel's (core/ops/*_ops.cc) on the same shard, to the tolerances of
// cuda_test_util.h (docs/cuda.md), with the same dtypes (float32 / float64; int32 / int64 ids,
// labels and steps; reduce_sum also int32 / int64; the shape ops, cast and fill any dtype;
// random_uniform / random_normal also bfloat16 / float16). Shards: the kernels read
// ctx.input_shards / ctx.output_shards where the CPU kernel does (random ops, dropout, causal
// softmax, vocab-sharded embedding, the logical N of cross-entropy and reduce_mean, slices);
// empty vectors mean whole tensors. A kernel only enqueues work: the outputs are valid once the
// stream reaches that point (the caller records an event or adds a host callback after it).
//
// Index checks: embedding / embedding_grad ids and the cross-entropy ops' labels ARE range-checked
// when ctx.check_indices (the default), failing with the CPU kernel's InvalidArgument (the bad
// value, its position and the range). The check is a device scan whose result the host reads
// (index_kernels.h: FindIndexOutOfRange), so these four kernels SYNCHRONIZE ctx.stream before
// they enqueue their own work: a host wait for everything queued before them, once per launch.
// With check_indices = false nothing is read back; then an id outside the table looks up zeros
// and adds nothing, and a label outside [0, C) gives NaN.
//
// Where the GPU kernel differs from the CPU one otherwise:
//   - adam_update reads `step` on the device; a step < 1 leaves the outputs unwritten (the CPU
//     fails).
//   - sparse_softmax_cross_entropy takes its workspace from the stream-ordered allocator
//     (cudaMallocAsync / cudaFreeAsync on ctx.stream).
//   - matmul / matmul_batch_sum use ctx.cublas (required there): the kernel binds it to
//     ctx.stream and sets full float precision (no TF32).
//
// Errors: an attribute, shape, dtype or arity the kernel does not support is InvalidArgument
// "<op type> '<op instance>' (cuda): <what is wrong>", found before anything is enqueued; a
// launch or cuBLAS failure keeps its code (Internal for a launch) with the same prefix.
// Table: no global state; whoever runs CUDA kernels builds one (cheap) and keeps it. Building
// the table needs no GPU.
#ifndef ONEFLOW_LIKE_CORE_CUDA_OP_KERNELS_H_
#define ONEFLOW_LIKE_CORE_CUDA_OP_KERNELS_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "oneflow_like/core/attr.h"
#include "oneflow_like/core/op_def.h"
#include "oneflow_like/core/op_registry.h"
#include "oneflow_like/core/tensor.h"

namespace oneflow_like {
namespace cuda {

struct CudaKernelContext {
  const std::string& op_name;  // the op instance, for messages
  const AttrMap& attrs;        // validated, defaults filled (OpDef::ValidateAttrs)
  std::vector<const Tensor*> inputs;     // device memory, the op's input order
  std::vector<Tensor*> outputs;          // device memory, preallocated with the inferred descs
  std::vector<ShardInfo> input_shards;   // same length as inputs, or empty (whole tensors)
  std::vector<ShardInfo> output_shards;  // same length as outputs, or empty (whole tensors)
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;       // not owned; matmul ops bind it to `stream`
  bool allow_tf32 = false;               // float32 matmuls may use TF32 tensor cores (MatmulOptions)
  // Range-check embedding ids and cross-entropy labels as the CPU does (synchronizes ctx.stream
  // in those four kernels; false: unchecked, bad indices give zeros / NaN instead of an error).
  bool check_indices = true;
};

using CudaKernelFn = std::function<absl::Status(const CudaKernelContext&)>;

class CudaKernelTable {
 public:
  // AlreadyExists if `op_type` has a kernel; InvalidArgument for an empty `kernel`.
  absl::Status Add(const std::string& op_type, CudaKernelFn kernel);
  // Null when `op_type` has no CUDA kernel.
  const CudaKernelFn* Find(const std::string& op_type) const;
  // The ops of `registry` without a CUDA kernel, sorted (empty: every op can run on cuda).
  std::vector<std::string> Missing(const OpRegistry& registry) const;

 private:
  std::map<std::string, CudaKernelFn> kernels_;
};

// Adds the kernel of every op RegisterBuiltinOps registers.
absl::Status AddCudaKernels(CudaKernelTable* table);

}  // namespace cuda
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_CUDA_OP_KERNELS_H_
