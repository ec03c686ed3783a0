// OpDef: everything the system knows about one kind of op, in one place.
//
//   - signature: named inputs and outputs (the last input and/or output may be variadic),
//     typed attributes with defaults;
//   - Infer:   output TensorDescs from input descs + attrs, with errors that name the op
//              instance and the offending shapes;
//   - Sbp:     the valid 1-D SBP signatures for given input descs (n-D ones are derived by
//              DeriveNdSignatures: every combination of 1-D signatures, one per mesh axis);
//   - Grad:    the backward pass expressed as other registered ops, emitted through a
//              GradContext (the compiler's autograd and the tests' eager executor both
//              implement it);
//   - Cost:    FLOPs and bytes moved for the compiler's cost model (logical, whole-tensor);
//   - kernel:  the CPU kernel. It runs on one shard; KernelContext tells it the logical shape
//              of every input/output and where its shard sits (needed by e.g. random ops,
//              causal masks, vocab-split embedding and mean reductions), and hands it the
//              rank's intra-op threads for its large loops.
//
// Worked example, matmul(a[m,k], b[k,n]) -> y[m,n]:
//   Y:S(0) <- A:S(0), B:B     Y:S(1) <- A:B, B:S(1)     Y:P <- A:S(1), B:S(0)
//   Y:P <- A:P, B:B           Y:P <- A:B, B:P           Y:B <- A:B, B:B
//
// OpDefs are immutable after registration; all functions must be thread-safe and pure.
#ifndef ONEFLOW_LIKE_CORE_OP_DEF_H_
#define ONEFLOW_LIKE_CORE_OP_DEF_H_

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "oneflow_like/core/attr.h"
#include "oneflow_like/core/intra_op_pool.h"
#include "oneflow_like/core/sbp.h"
#include "oneflow_like/core/shape.h"
#include "oneflow_like/core/status.h"
#include "oneflow_like/core/tensor.h"

namespace oneflow_like {

class Stream;

struct AttrDef {
  std::string name;
  AttrType type;
  std::optional<AttrValue> default_value;  // nullopt = required
  std::string doc;
};

// Context for shape/dtype inference.
struct InferContext {
  std::string op_name;  // the op instance (e.g. "fc1.matmul"), for error messages
  const AttrMap& attrs;
  const std::vector<TensorDesc>& inputs;
};

// A 1-D SBP signature: one Sbp per input and per output.
struct SbpSignature {
  std::vector<Sbp> inputs;
  std::vector<Sbp> outputs;
  std::string ToString() const;  // "S(0), B -> S(0)"
  friend bool operator==(const SbpSignature& a, const SbpSignature& b) {
    return a.inputs == b.inputs && a.outputs == b.outputs;
  }
};
struct NdSbpSignature {
  std::vector<NdSbp> inputs;
  std::vector<NdSbp> outputs;
  std::string ToString() const;
  friend bool operator==(const NdSbpSignature& a, const NdSbpSignature& b) {
    return a.inputs == b.inputs && a.outputs == b.outputs;
  }
};
// All combinations of `one_d` over `num_mesh_axes` axes (|one_d|^num_mesh_axes signatures),
// in a deterministic order.
std::vector<NdSbpSignature> DeriveNdSignatures(const std::vector<SbpSignature>& one_d, int num_mesh_axes);

struct OpCost {
  double flops = 0;         // floating point operations
  double bytes_moved = 0;   // bytes read + written in memory
};

// Where a kernel's tensor sits in its logical tensor. For an unsharded run, logical_shape is
// the physical shape and offset is all zeros. For a partial-sum tensor the offset is zero and
// the logical shape equals the physical one.
struct ShardInfo {
  Shape logical_shape;
  std::vector<int64_t> offset;
  static ShardInfo Whole(const Shape& shape) {
    return ShardInfo{shape, std::vector<int64_t>(shape.num_axes(), 0)};
  }
};

struct KernelContext {
  std::string op_name;
  const AttrMap& attrs;
  std::vector<const Tensor*> inputs;
  std::vector<Tensor*> outputs;  // preallocated with the inferred (physical) descs
  std::vector<ShardInfo> input_shards;   // same length as inputs
  std::vector<ShardInfo> output_shards;  // same length as outputs
  Stream* stream = nullptr;  // the stream to run on (CPU: may be null = run inline)
  // The rank's intra-op threads (intra_op_pool.h): large loops split over them with
  // ParallelFor(ctx.intra_op_pool, ...) (bit-identically but for matmul, whose split products
  // differ in the last bits). Null = serial. Not owned.
  IntraOpPool* intra_op_pool = nullptr;
};

// The autograd interface an op's gradient rule talks to. Values are referred to by name.
// Output gradients are always available: the engine materializes zeros for outputs that
// receive no gradient.
class GradContext {
 public:
  virtual ~GradContext() = default;
  virtual const AttrMap& attrs() const = 0;
  virtual int num_inputs() const = 0;
  virtual int num_outputs() const = 0;
  virtual const std::string& input(int i) const = 0;        // forward input value
  virtual const std::string& output(int i) const = 0;       // forward output value
  virtual const TensorDesc& input_desc(int i) const = 0;
  virtual const TensorDesc& output_desc(int i) const = 0;
  virtual const std::string& output_grad(int i) const = 0;  // d(loss)/d(output i)
  virtual bool needs_input_grad(int i) const = 0;
  // Emits `op_type(inputs...) {attrs}` and returns the names of its outputs.
  virtual absl::StatusOr<std::vector<std::string>> Emit(const std::string& op_type,
                                                        const std::vector<std::string>& inputs,
                                                        const AttrMap& attrs) = 0;
  virtual void SetInputGrad(int i, const std::string& value) = 0;

  // Convenience: Emit an op with exactly one output.
  absl::StatusOr<std::string> EmitOne(const std::string& op_type, const std::vector<std::string>& inputs,
                                      const AttrMap& attrs = {});
};

using InferFn = std::function<absl::StatusOr<std::vector<TensorDesc>>(const InferContext&)>;
using SbpFn = std::function<std::vector<SbpSignature>(const AttrMap&, const std::vector<TensorDesc>& inputs)>;
using GradFn = std::function<absl::Status(GradContext*)>;
using CostFn = std::function<OpCost(const AttrMap&, const std::vector<TensorDesc>& inputs,
                                    const std::vector<TensorDesc>& outputs)>;
using KernelFn = std::function<absl::Status(const KernelContext&)>;

struct OpDef {
  std::string name;
  std::string doc;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  bool variadic_inputs = false;   // the last input name may repeat (>= 1 times), e.g. concat
  bool variadic_outputs = false;  // the number of outputs is decided by Infer, e.g. split
  std::vector<AttrDef> attrs;
  // Output i may share its buffer with input j (element-wise ops, optimizer updates).
  std::vector<std::pair<int, int>> inplace_pairs;
  bool is_optimizer = false;   // updates state; excluded from autograd
  bool is_random = false;      // depends on a seed attribute (never fused away)

  InferFn infer;
  SbpFn sbp;
  GradFn grad;   // null: not differentiable (gradients of its inputs are not defined)
  CostFn cost;   // null: cost = bytes of inputs + outputs, 0 FLOPs
  KernelFn cpu_kernel;

  // Checks `attrs` against the declared attrs (unknown names, wrong types, missing required)
  // and returns a copy with defaults filled in. Errors name the op instance.
  absl::StatusOr<AttrMap> ValidateAttrs(const std::string& op_name, const AttrMap& attrs) const;
  // Checks the input count, then calls infer.
  absl::StatusOr<std::vector<TensorDesc>> Infer(const std::string& op_name, const AttrMap& attrs,
                                                const std::vector<TensorDesc>& inputs) const;
  OpCost Cost(const AttrMap& attrs, const std::vector<TensorDesc>& inputs,
              const std::vector<TensorDesc>& outputs) const;
};

}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_OP_DEF_H_
