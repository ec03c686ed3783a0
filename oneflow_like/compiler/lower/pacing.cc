// The control input of an op without inputs (fill, e.g. the loss gradient seed; random_*): it
// must still fire once per piece, so each of its tasks consumes, without reading it, a
// piece-rate register of its rank: an input's own register, else a variable's REPEAT (inputs
// first, then variables, each in tensor order); on a rank that holds neither (e.g. the loss
// gradient's seed on a pipeline's last ranks that hold only activations), the latest piece-rate
// value produced there before this op (the loss itself, for the seed).
//
// The whole plan used to find each device's choice by scanning the tensors; here each tensor's
// placement is scanned once for the devices still without one, which gives the same choices at
// a cost independent of how many devices share a placement. GetValue (which builds a variable's
// REPEAT on first use) is called in device order, as the whole lowering does, so the ids match.
#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/lower/lowering.h"

namespace oneflow_like {
namespace compiler {
namespace lower_internal {

absl::StatusOr<std::vector<int64_t>> Lowerer::PacingRegisters(const OpNode& op, int64_t position,
                                                             bool* after_pieces) {
  *after_pieces = false;
  const Placement& placement = *op.placement;
  const int64_t n = placement.num_devices();
  absl::flat_hash_map<int32_t, int64_t> device_of;  // rank -> device of the op
  for (int64_t d = 0; d < n; ++d) device_of.emplace(placement.ranks()[d].value(), d);
  std::vector<int64_t> pacing(n, -1);
  std::vector<int64_t> source(n, -1);  // phase 1: the source tensor, and the device in its placement
  std::vector<int64_t> source_device(n, -1);
  int64_t open = n;
  for (bool want_input : {true, false}) {
    for (const TensorNode& t : graph_.tensors()) {
      if (open == 0) break;
      if (!t.is_source() || t.is_variable == want_input) continue;
      const std::vector<Rank>& ranks = native_[t.id.value()].placement.ranks();
      for (size_t i = 0; i < ranks.size() && open > 0; ++i) {
        auto it = device_of.find(ranks[i].value());
        if (it == device_of.end() || source[it->second] >= 0) continue;
        source[it->second] = t.id.value();
        source_device[it->second] = static_cast<int64_t>(i);
        --open;
      }
    }
  }
  for (int64_t d = 0; d < n; ++d) {  // device order: GetValue's side effects as in the whole plan
    if (source[d] < 0) continue;
    const Value& native = native_[source[d]];
    ASSIGN_OR_RETURN(const Value* paced,
                     GetValue(TensorId(source[d]), native.placement, native.nd_sbp, /*step_rate=*/false));
    pacing[d] = paced->At(source_device[d]).reg;
  }
  if (open > 0) {  // phase 2: the latest piece-rate value produced on the rank before the op
    std::vector<const Value*> produced;
    for (const TensorNode& t : graph_.tensors()) {
      const Value& v = native_[t.id.value()];
      if (t.is_source() || !v.defined || v.step_rate || v.position >= position) continue;
      produced.push_back(&v);
    }
    std::stable_sort(produced.begin(), produced.end(),
                     [](const Value* a, const Value* b) { return a->position > b->position; });
    for (const Value* v : produced) {
      const std::vector<Rank>& ranks = v->placement.ranks();
      for (size_t i = 0; i < ranks.size() && open > 0; ++i) {
        auto it = device_of.find(ranks[i].value());
        if (it == device_of.end() || pacing[it->second] >= 0) continue;
        pacing[it->second] = v->At(static_cast<int64_t>(i)).reg;
        *after_pieces = *after_pieces || v->after_pieces;
        --open;
      }
      if (open == 0) break;
    }
  }
  for (int64_t d = 0; d < n; ++d) {
    if (pacing[d] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("op '", op.name, "' (", op.type, ") has no inputs and rank ",
                                                     placement.ranks()[d].value(),
                                                     " holds no input or variable to pace its firings (hint: place "
                                                     "it on ranks that hold an input or a variable)"));
    }
    // One rank: another rank's register may be sent here, and its count depends on this reader.
    if (builder_.partial()) pacing_readers_[pacing[d]].emplace_back(op.stage, position);
  }
  return pacing;
}

}  // namespace lower_internal
}  // namespace compiler
}  // namespace oneflow_like
