// Helpers shared by the SBP pass tests (test-only): run the pass on a text graph and read
// back chosen layouts and decision records by name.
#ifndef ONEFLOW_LIKE_COMPILER_SBP_SBP_TEST_UTIL_H_
#define ONEFLOW_LIKE_COMPILER_SBP_SBP_TEST_UTIL_H_

#include <string>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/sbp/sbp_pass.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/compiler/verifier.h"

namespace oneflow_like {
namespace compiler {
namespace testing {

// The chosen layout of tensor `name`, as "[S(0)]" (or "unset").
inline std::string Layout(const Graph& g, const std::string& name) {
  const TensorNode& t = g.tensor(g.FindTensor(name));
  return t.nd_sbp ? NdSbpText(*t.nd_sbp) : "unset";
}

// The chosen signature of op `name`, as "[S(0)], [B] -> [S(0)]".
inline std::string Signature(const Graph& g, const std::string& name) {
  const OpNode& op = g.op(g.FindOp(name));
  if (!op.nd_sbp_signature) return "unset";
  std::string text;
  for (size_t i = 0; i < op.nd_sbp_signature->inputs.size(); ++i) {
    text += (i ? ", " : "") + NdSbpText(op.nd_sbp_signature->inputs[i]);
  }
  text += " ->";
  for (size_t k = 0; k < op.nd_sbp_signature->outputs.size(); ++k) {
    text += (k ? ", " : " ") + NdSbpText(op.nd_sbp_signature->outputs[k]);
  }
  return text;
}

inline std::string ProtoText(const NdSbpProto& proto) {
  absl::StatusOr<NdSbp> nd = NdSbp::FromProto(proto);
  return nd.ok() ? NdSbpText(*nd) : "bad";
}

// The candidate of `decision` whose inputs and outputs print as `signature` (see Signature),
// or nullptr.
inline const SbpCandidateProto* FindCandidate(const OpSbpDecisionProto& decision, const std::string& signature) {
  for (const SbpCandidateProto& c : decision.candidates()) {
    std::string text;
    for (int i = 0; i < c.inputs_size(); ++i) text += (i ? ", " : "") + ProtoText(c.inputs(i));
    text += " ->";
    for (int k = 0; k < c.outputs_size(); ++k) text += (k ? ", " : " ") + ProtoText(c.outputs(k));
    if (text == signature) return &c;
  }
  return nullptr;
}

// The decision record of op (or source) `name`; fails the test if there is none.
inline const OpSbpDecisionProto& DecisionOf(const SbpPass& pass, const std::string& name) {
  for (const auto* list : {&pass.decisions(), &pass.source_decisions()}) {
    for (const OpSbpDecisionProto& d : *list) {
      if (d.op_name() == name) return d;
    }
  }
  ADD_FAILURE() << "no decision for " << name;
  static const OpSbpDecisionProto* const kEmpty = new OpSbpDecisionProto();
  return *kEmpty;
}

// Checks the arithmetic of a record: comm = sum of input_comm, total = compute + comm.
inline void ExpectConsistent(const OpSbpDecisionProto& decision) {
  for (const SbpCandidateProto& c : decision.candidates()) {
    if (!c.rejected_reason().empty()) continue;
    double comm = 0;
    for (const auto& input : c.input_comm()) comm += input.seconds();
    EXPECT_NEAR(c.comm_seconds(), comm, 1e-12) << decision.op_name();
    EXPECT_NEAR(c.total_seconds(), c.compute_seconds() + c.comm_seconds(), 1e-12) << decision.op_name();
  }
}

// Parses and infers `text`, runs `pass`, and checks the verifier; CHECK-style failures.
inline Graph RunSbp(const std::string& text, const OpRegistry& registry, SbpPass* pass) {
  Graph g = ParseAndInfer(text, registry);
  absl::StatusOr<bool> changed = pass->Run(&g);
  EXPECT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(VerifyGraph(g).ok()) << VerifyGraph(g);
  for (const OpSbpDecisionProto& d : pass->decisions()) ExpectConsistent(d);
  return g;
}

}  // namespace testing
}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_SBP_SBP_TEST_UTIL_H_
