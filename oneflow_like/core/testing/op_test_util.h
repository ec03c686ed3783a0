// Test harness for ops (GoogleTest). Three checks every op gets:
//
//   1. Run: run the CPU kernel on whole tensors; compare with a plain reference written in
//      the test (ExpectTensorNear).
//   2. ExpectGradientsMatch: apply the op's gradient rule through an eager GradContext (the
//      emitted ops run on the CPU kernels) and compare every input gradient with central
//      finite differences of L = sum_k <output_k, R_k> (R_k fixed random weights), in float64.
//   3. ExpectAllSbpSignaturesMatch: for every 1-D SBP signature on a 3-device placement
//      (uneven splits) and every derived 2-D signature on a [2,2] mesh: slice inputs with the
//      shard simulator, run the kernel per shard (with ShardInfo telling it where it sits),
//      assemble the outputs and compare with the logical run. Partial-sum inputs are random
//      parts that sum to the input. It also runs ExpectWritesEveryOutput on the logical inputs.
//
// Poisoned outputs: the runtime hands kernels reused, uncleared buffers, so every kernel run by
// this harness (Run, RunShard, and through them the gradient and SBP checks and the ops a
// gradient rule emits) writes into buffers pre-filled with garbage, never zeros: floating
// outputs start as NaN (bytes 0xFF), integer and bool outputs as bytes 0x5A (PoisonedTensor).
// An element a kernel forgets to write shows up as NaN / garbage in the result;
// ExpectWritesEveryOutput catches it without a reference by running twice over two different
// poison patterns. The harness calls eager.h's RunKernel, so it runs exactly what RunOp runs.
//
// Errors: ExpectRunFails(op, inputs, attrs, fragments) asserts the run fails with
// InvalidArgument naming the op ("<op> '...'") and containing every fragment;
// ExpectInvalidArgument does the same for any Status (e.g. OpDef::Infer with an op name).
//
// Usage:
//   OpTest t;                                    // owns a registry with all builtin ops
//   auto out = t.Run("relu", {x});              // StatusOr<std::vector<Tensor>>
//   Tensor y = t.RunOne("relu", {x});           // output 0; a test failure if the run fails
//   t.ExpectGradientsMatch("gelu", {x64});
//   t.ExpectAllSbpSignaturesMatch("matmul", {a, b}, {{"transpose_b", true}});
//   t.ExpectRunFails("matmul", {a, c}, {}, {"inner dimensions differ", "float32[3,5]"});
//
// Not thread-safe: an OpTest is used by one test at a time.
#ifndef ONEFLOW_LIKE_CORE_TESTING_OP_TEST_UTIL_H_
#define ONEFLOW_LIKE_CORE_TESTING_OP_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_like/core/op_registry.h"
#include "oneflow_like/core/status.h"
#include "oneflow_like/core/tensor.h"

namespace oneflow_like {
namespace testing {

// Pseudo-random tensor (deterministic in seed), uniform in [low, high). Integer dtypes get
// integers in [low, high).
Tensor RandomTensor(DataType dtype, const Shape& shape, uint64_t seed, double low = -1.0, double high = 1.0);
// A tensor of `dtype` and `shape` holding `values` (converted as by Tensor::SetFromDouble).
// REQUIRES: values.size() == shape.elem_count() (checked).
Tensor TensorFromDoubles(DataType dtype, const Shape& shape, const std::vector<double>& values);
// Converts any floating tensor to float64 / float32 (for references and grad checks).
Tensor ToDouble(const Tensor& t);
Tensor ToFloat(const Tensor& t);

// gtest assertion: same shape and |a - e| <= atol + rtol * |e| everywhere; reports the first
// few mismatches with their multi-index.
void ExpectTensorNear(const Tensor& actual, const Tensor& expected, double rtol = 1e-5, double atol = 1e-6,
                      const std::string& what = "");

// A new tensor of `desc` filled with the harness's poison: NaN for floating dtypes, bytes 0x5A
// for integers and bool.
Tensor PoisonedTensor(const TensorDesc& desc);

// gtest assertion: `status` is InvalidArgument and its message contains every fragment.
void ExpectInvalidArgument(const absl::Status& status, const std::vector<std::string>& fragments);

// Row-major multi-index of flat offset `flat` in `shape`, and back.
std::vector<int64_t> UnravelIndex(const Shape& shape, int64_t flat);
int64_t RavelIndex(const Shape& shape, const std::vector<int64_t>& index);

// True when `signatures` contains `signature`.
bool HasSignature(const std::vector<SbpSignature>& signatures, const SbpSignature& signature);

struct GradCheckOptions {
  double eps = 1e-6;      // central-difference step
  double rtol = 1e-5;
  double atol = 1e-7;
  std::vector<int> inputs;   // which inputs to check; empty = every floating-point input
  std::vector<int> outputs;  // which outputs enter L; empty = every floating-point output
                             // (exclude auxiliary outputs such as layer_norm's mean/inv_std)
  uint64_t seed = 7;
};

struct SbpCheckOptions {
  std::vector<std::vector<int64_t>> hierarchies = {{3}, {2, 2}};
  double rtol = 1e-5;
  double atol = 1e-6;
  uint64_t seed = 11;
  int min_signatures = 1;  // fail if fewer signatures could be checked
};

class OpTest {
 public:
  OpTest();  // registers all builtin ops (CHECK-fails if registration fails)
  const OpRegistry& registry() const { return registry_; }

  // Validates attrs, infers, allocates poisoned outputs, runs the CPU kernel on whole tensors.
  absl::StatusOr<std::vector<Tensor>> Run(const std::string& op_type, const std::vector<Tensor>& inputs,
                                          const AttrMap& attrs = {}) const;
  // Runs one shard: inputs are physical shards; `input_shards`/`output_shards` say where they
  // sit (empty: whole tensors); outputs are poisoned tensors of `output_descs` (physical).
  absl::StatusOr<std::vector<Tensor>> RunShard(const std::string& op_type, const std::vector<Tensor>& inputs,
                                               const AttrMap& attrs, const std::vector<ShardInfo>& input_shards,
                                               const std::vector<TensorDesc>& output_descs,
                                               const std::vector<ShardInfo>& output_shards) const;
  // Run, for runs that must succeed: a failed run is a test failure and yields no outputs
  // (RunOk) or an undefined Tensor (RunOne, which returns output 0).
  std::vector<Tensor> RunOk(const std::string& op_type, const std::vector<Tensor>& inputs,
                            const AttrMap& attrs = {}) const;
  Tensor RunOne(const std::string& op_type, const std::vector<Tensor>& inputs, const AttrMap& attrs = {}) const;
  // Runs the kernel in place: for every OpDef::inplace_pairs (o, i) whose descs agree, output o
  // IS input i's buffer (so the caller's input tensors are updated); other outputs are poisoned.
  absl::StatusOr<std::vector<Tensor>> RunInPlace(const std::string& op_type, const std::vector<Tensor>& inputs,
                                                 const AttrMap& attrs = {}) const;
  // Asserts that running `op` fails with InvalidArgument whose message names the op ("<op> '")
  // and contains every fragment.
  void ExpectRunFails(const std::string& op, const std::vector<Tensor>& inputs, const AttrMap& attrs,
                      const std::vector<std::string>& fragments) const;
  // Asserts that the kernel writes every output element: two runs over buffers poisoned with
  // different byte patterns must give identical bytes.
  void ExpectWritesEveryOutput(const std::string& op_type, const std::vector<Tensor>& inputs,
                               const AttrMap& attrs = {}) const;
  // The op's 1-D SBP signatures for `inputs` (attrs validated, defaults filled); a test failure
  // and no signatures when the op or attrs are bad.
  std::vector<SbpSignature> SbpSignatures(const std::string& op_type, const std::vector<TensorDesc>& inputs,
                                          const AttrMap& attrs = {}) const;
  // Applies the gradient rule eagerly. Returns one tensor per input (undefined Tensor() for
  // inputs whose gradient was not requested or not produced).
  absl::StatusOr<std::vector<Tensor>> RunGrad(const std::string& op_type, const std::vector<Tensor>& inputs,
                                              const AttrMap& attrs, const std::vector<Tensor>& output_grads,
                                              const std::vector<bool>& needs_grad) const;

  void ExpectGradientsMatch(const std::string& op_type, const std::vector<Tensor>& inputs,
                            const AttrMap& attrs = {}, const GradCheckOptions& options = {}) const;
  // Returns the number of (1-D and n-D) signatures checked.
  int ExpectAllSbpSignaturesMatch(const std::string& op_type, const std::vector<Tensor>& inputs,
                                  const AttrMap& attrs = {}, const SbpCheckOptions& options = {}) const;

 private:
  OpRegistry registry_;
};

}  // namespace testing
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_TESTING_OP_TEST_UTIL_H_
