// Test helpers for compiler tests: a registry with the built-in ops, sample jobs in the text
// format, and a status matcher. Test-only.
#ifndef ONEFLOW_LIKE_COMPILER_TEST_UTIL_H_
#define ONEFLOW_LIKE_COMPILER_TEST_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "oneflow_like/compiler/graph.h"

namespace oneflow_like {
namespace compiler {
namespace testing {

// A registry with every built-in op (CHECK-fails if registration fails).
std::unique_ptr<OpRegistry> BuiltinRegistry();

// A 2-layer MLP on cpu:[0,1,2,3], data parallel, trained with AdamW:
// x[64,128] -> matmul w1[128,256] -> bias_add b1 -> relu -> matmul w2[256,10] -> logits[64,10]
// -> sparse_softmax_cross_entropy with label[64] (int64) -> loss[].
extern const char kMlpText[];
// A tiny GPT block on a 2x2 mesh: layer_norm, fused qkv projection split into q/k/v, causal
// single-head attention, output projection, residuals, gelu MLP, a vocabulary head and a
// cross-entropy loss; x[8,16,32], vocabulary 50.
extern const char kGptBlockText[];

// Parses `text` (CHECK-fails on error).
Graph ParseOrDie(const std::string& text, const OpRegistry& registry);
// Parses and runs the infer pass (CHECK-fails on error).
Graph ParseAndInfer(const std::string& text, const OpRegistry& registry);

// Expects `status` to have `code` and a message containing every one of `parts`.
void ExpectError(const absl::Status& status, absl::StatusCode code, const std::vector<std::string>& parts);

}  // namespace testing
}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_TEST_UTIL_H_
