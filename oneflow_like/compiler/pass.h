// The pass contract and the pipeline that runs passes in order.
//
// A Pass rewrites a Graph in place and says whether it changed anything:
//
//   class DropIdentityPass : public Pass {
//    public:
//     std::string name() const override { return "drop_identity"; }
//     absl::StatusOr<bool> Run(Graph* graph) override { ...; return changed; }
//   };
//
// Errors: InvalidArgument for a bad user graph (naming the op, tensors, shapes/SBPs, with a
// hint), Internal for a compiler bug. A pass must leave the graph satisfying every invariant
// of verifier.h (it may rely on them on entry); passes are deterministic (same graph in, same
// graph out) and hold no global state.
//
// PassPipeline runs passes in the order added. With verify_after_each_pass (on in tests) it
// runs VerifyGraph after every pass and turns a violation into an InternalError naming the
// pass: "pass 'autograd' broke a graph invariant: graph verifier: ...". Not thread-safe.
#ifndef ONEFLOW_LIKE_COMPILER_PASS_H_
#define ONEFLOW_LIKE_COMPILER_PASS_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "oneflow_like/compiler/graph.h"
#include "oneflow_like/compiler/verifier.h"

namespace oneflow_like {
namespace compiler {

class Pass {
 public:
  virtual ~Pass() = default;
  // A short snake_case name for errors and logs ("infer_shapes").
  virtual std::string name() const = 0;
  // Rewrites `graph`; returns whether it changed.
  virtual absl::StatusOr<bool> Run(Graph* graph) = 0;
};

struct PassPipelineOptions {
  // Run the verifier after every pass (tests turn this on; it costs one Infer per op).
  bool verify_after_each_pass = false;
  VerifierOptions verifier;  // what the verifier checks after each pass
};

class PassPipeline {
 public:
  explicit PassPipeline(PassPipelineOptions options = {}) : options_(options) {}

  // Appends a pass; returns it for configuration.
  template <typename P, typename... Args>
  P* Add(Args&&... args) {
    auto pass = std::make_unique<P>(std::forward<Args>(args)...);
    P* raw = pass.get();
    passes_.push_back(std::move(pass));
    return raw;
  }
  void Add(std::unique_ptr<Pass> pass) { passes_.push_back(std::move(pass)); }
  const std::vector<std::unique_ptr<Pass>>& passes() const { return passes_; }

  // Runs every pass in order; stops at the first error (returned unchanged) or verifier
  // failure (InternalError naming the pass). Returns whether any pass changed the graph.
  absl::StatusOr<bool> Run(Graph* graph);

 private:
  PassPipelineOptions options_;
  std::vector<std::unique_ptr<Pass>> passes_;
};

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_PASS_H_
