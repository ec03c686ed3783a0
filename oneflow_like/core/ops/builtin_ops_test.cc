// The registry as a whole: every op of docs/ops_contract.md is registered with complete
// metadata, registration is explicit and idempotence-safe, and lookup/attr errors are clear.
#include "oneflow_like/core/ops/builtin_ops.h"

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oneflow_like {
namespace {

using ::testing::HasSubstr;

// Op names listed in the contract table: "| family | `op` `op2` ... |".
std::set<std::string> ContractOpNames() {
  std::ifstream in("docs/ops_contract.md");
  EXPECT_TRUE(in.good()) << "docs/ops_contract.md not found (data dependency)";
  std::set<std::string> names;
  std::string line;
  const std::regex row(R"(^\| [a-z]+ \| ([^|]+)\|)");
  const std::regex op("`([a-z_0-9]+)`");
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    std::string cell = m[1];
    for (std::sregex_iterator it(cell.begin(), cell.end(), op), end; it != end; ++it) names.insert((*it)[1]);
  }
  return names;
}

TEST(BuiltinOpsTest, RegistersExactlyTheContract) {
  OpRegistry registry;
  ASSERT_TRUE(RegisterBuiltinOps(&registry).ok());
  std::set<std::string> registered;
  for (const std::string& n : registry.Names()) registered.insert(n);
  std::set<std::string> contract = ContractOpNames();
  EXPECT_GE(contract.size(), 35u);
  EXPECT_EQ(registered, contract) << "docs/ops_contract.md and RegisterBuiltinOps disagree";
}

TEST(BuiltinOpsTest, EveryOpIsComplete) {
  OpRegistry registry;
  ASSERT_TRUE(RegisterBuiltinOps(&registry).ok());
  for (const std::string& n : registry.Names()) {
    const OpDef* def = registry.Find(n);
    ASSERT_NE(def, nullptr);
    EXPECT_TRUE(def->infer && def->sbp && def->cpu_kernel) << n;
    EXPECT_FALSE(def->outputs.empty()) << n;
    for (const AttrDef& a : def->attrs) EXPECT_FALSE(a.name.empty()) << n;
    if (def->is_optimizer) {
      EXPECT_FALSE(def->grad) << n << ": optimizer ops are not differentiable";
    }
  }
  // Forward ops that training needs must be differentiable.
  for (const char* n : {"matmul", "add", "sub", "mul", "div", "scalar_add", "scalar_mul", "bias_add", "relu", "gelu",
                        "softmax", "log_softmax", "layer_norm", "embedding", "sparse_softmax_cross_entropy",
                        "reshape", "transpose", "slice", "concat", "split", "reduce_sum", "reduce_mean",
                        "broadcast_to", "cast", "dropout", "identity"}) {
    const OpDef* def = registry.Find(n);
    ASSERT_NE(def, nullptr) << n;
    EXPECT_TRUE(static_cast<bool>(def->grad)) << n << " has no gradient rule";
  }
}

TEST(BuiltinOpsTest, RegisteringTwiceFailsClearly) {
  OpRegistry registry;
  ASSERT_TRUE(RegisterBuiltinOps(&registry).ok());
  absl::Status again = RegisterBuiltinOps(&registry);
  EXPECT_EQ(again.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(again.message()), HasSubstr("registered twice"));
}

TEST(BuiltinOpsTest, UnknownOpSuggestsNames) {
  OpRegistry registry;
  ASSERT_TRUE(RegisterBuiltinOps(&registry).ok());
  auto def = registry.Get("matmull");
  ASSERT_FALSE(def.ok());
  EXPECT_EQ(def.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(def.status().message()), HasSubstr("unknown op 'matmull'"));
  EXPECT_THAT(std::string(def.status().message()), HasSubstr("matmul"));
}

TEST(BuiltinOpsTest, AttrValidationNamesTheProblem) {
  OpRegistry registry;
  ASSERT_TRUE(RegisterBuiltinOps(&registry).ok());
  const OpDef* mm = registry.Find("matmul");
  ASSERT_NE(mm, nullptr);
  auto unknown = mm->ValidateAttrs("fc1", {{"transpose_c", true}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("matmul 'fc1': unknown attribute 'transpose_c'"));
  auto wrong_type = mm->ValidateAttrs("fc1", {{"transpose_a", std::string("yes")}});
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_THAT(std::string(wrong_type.status().message()), HasSubstr("'transpose_a' must be bool"));
  auto filled = mm->ValidateAttrs("fc1", {});
  ASSERT_TRUE(filled.ok());
  EXPECT_FALSE(filled->Bool("transpose_a"));
  const OpDef* sgd = registry.Find("sgd_update");
  ASSERT_NE(sgd, nullptr);
  auto missing = sgd->ValidateAttrs("opt", {});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("missing required attribute 'lr'"));
  auto int_as_float = sgd->ValidateAttrs("opt", {{"lr", int64_t{1}}});
  ASSERT_TRUE(int_as_float.ok());
  EXPECT_DOUBLE_EQ(int_as_float->Float("lr"), 1.0);
}

TEST(BuiltinOpsTest, NdSignaturesAreAllCombinations) {
  OpRegistry registry;
  ASSERT_TRUE(RegisterBuiltinOps(&registry).ok());
  const OpDef* mm = registry.Find("matmul");
  AttrMap attrs = *mm->ValidateAttrs("mm", {});
  std::vector<TensorDesc> in{{DataType::kFloat32, Shape({8, 4})}, {DataType::kFloat32, Shape({4, 6})}};
  std::vector<SbpSignature> one_d = mm->sbp(attrs, in);
  ASSERT_GE(one_d.size(), 6u);
  std::vector<NdSbpSignature> two_d = DeriveNdSignatures(one_d, 2);
  EXPECT_EQ(two_d.size(), one_d.size() * one_d.size());
  // (S(0), S(1)) on a 2-D mesh: data parallel on rows of the mesh, column split on columns.
  bool found = false;
  for (const NdSbpSignature& s : two_d) {
    if (s.outputs[0] == NdSbp{Sbp::Split(0), Sbp::Split(1)} && s.inputs[0] == NdSbp{Sbp::Split(0), Sbp::Broadcast()} &&
        s.inputs[1] == NdSbp{Sbp::Broadcast(), Sbp::Split(1)}) {
      found = true;
    }
  }
  EXPECT_TRUE(found);
  // Costs are positive and scale with the problem.
  std::vector<TensorDesc> out = *mm->Infer("mm", attrs, in);
  OpCost small = mm->Cost(attrs, in, out);
  EXPECT_DOUBLE_EQ(small.flops, 2.0 * 8 * 4 * 6);
  EXPECT_GT(small.bytes_moved, 0);
}

}  // namespace
}  // namespace oneflow_like
