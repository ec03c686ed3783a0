// Test harness for ops (GoogleTest). Three checks every op gets:
//
//   1. RunOp: run the CPU kernel on whole tensors; compare with a plain reference written in
//      the test (ExpectTensorNear).
//   2. ExpectGradientsMatch: apply the op's gradient rule through an eager GradContext (the
//      emitted ops run on the CPU kernels) and compare every input gradient with central
//      finite differences of L = sum_k <output_k, R_k> (R_k fixed random weights), in float64.
//   3. ExpectAllSbpSignaturesMatch: for every 1-D SBP signature on a 3-device placement
//      (uneven splits) and every derived 2-D signature on a [2,2] mesh: slice inputs with the
//      shard simulator, run the kernel per shard (with ShardInfo telling it where it sits),
//      assemble the outputs and compare with the logical run. Partial-sum inputs are random
//      parts that sum to the input.
//
// Usage:
//   OpTest t;                                    // owns a registry with all builtin ops
//   auto out = t.Run("relu", {x});              // StatusOr<std::vector<Tensor>>
//   t.ExpectGradientsMatch("gelu", {x64});
//   t.ExpectAllSbpSignaturesMatch("matmul", {a, b}, {{"transpose_b", true}});
#ifndef ONEFLOW_LIKE_CORE_TESTING_OP_TEST_UTIL_H_
#define ONEFLOW_LIKE_CORE_TESTING_OP_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_like/core/op_registry.h"
#include "oneflow_like/core/tensor.h"

namespace oneflow_like {
namespace testing {

// Pseudo-random tensor (deterministic in seed), uniform in [low, high). Integer dtypes get
// integers in [low, high).
Tensor RandomTensor(DataType dtype, const Shape& shape, uint64_t seed, double low = -1.0, double high = 1.0);
// Converts any floating tensor to float64 / float32 (for references and grad checks).
Tensor ToDouble(const Tensor& t);
Tensor ToFloat(const Tensor& t);

// gtest assertion: same shape and |a - e| <= atol + rtol * |e| everywhere; reports the first
// few mismatches with their multi-index.
void ExpectTensorNear(const Tensor& actual, const Tensor& expected, double rtol = 1e-5, double atol = 1e-6,
                      const std::string& what = "");

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

  // Validates attrs, infers, allocates outputs, runs the CPU kernel on whole tensors.
  absl::StatusOr<std::vector<Tensor>> Run(const std::string& op_type, const std::vector<Tensor>& inputs,
                                          const AttrMap& attrs = {}) const;
  // Runs one shard: inputs are physical shards; `input_shards`/`output_shards` say where they
  // sit; outputs are allocated with `output_descs` (physical).
  absl::StatusOr<std::vector<Tensor>> RunShard(const std::string& op_type, const std::vector<Tensor>& inputs,
                                               const AttrMap& attrs, const std::vector<ShardInfo>& input_shards,
                                               const std::vector<TensorDesc>& output_descs,
                                               const std::vector<ShardInfo>& output_shards) const;
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
