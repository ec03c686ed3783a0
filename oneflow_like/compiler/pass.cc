#include "oneflow_like/compiler/pass.h"

#include "absl/strings/str_cat.h"

namespace oneflow_like {
namespace compiler {

absl::StatusOr<bool> PassPipeline::Run(Graph* graph) {
  bool changed = false;
  for (const std::unique_ptr<Pass>& pass : passes_) {
    ASSIGN_OR_RETURN(bool pass_changed, pass->Run(graph));
    changed = changed || pass_changed;
    if (!options_.verify_after_each_pass) continue;
    absl::Status verified = VerifyGraph(*graph, options_.verifier);
    if (!verified.ok()) {
      return absl::InternalError(
          absl::StrCat("pass '", pass->name(), "' broke a graph invariant: ", verified.message()));
    }
  }
  return changed;
}

}  // namespace compiler
}  // namespace oneflow_like
