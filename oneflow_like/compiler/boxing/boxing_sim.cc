#include "oneflow_like/compiler/boxing/boxing_sim.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "oneflow_like/core/shard_simulator.h"

namespace oneflow_like {
namespace compiler {
namespace {

// Offset of `inner` inside `outer` (both logical boxes).
std::vector<int64_t> OffsetIn(const Region& inner, const Region& outer) { return RelativeTo(inner, outer).offset(); }

class Interpreter {
 public:
  explicit Interpreter(const BoxingPlan& plan) : plan_(plan), values_(plan.values.size()) {}

  absl::StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& src) {
    const size_t n = static_cast<size_t>(plan_.num_source_values());
    if (src.size() != n) {
      return absl::InvalidArgumentError(absl::StrCat("SimulateBoxing: got ", src.size(), " source shards for ", n,
                                                     " source devices of ", plan_.src_placement.ToString()));
    }
    for (size_t i = 0; i < n; ++i) {
      const Shape expected = plan_.values[i].region.shape();
      if (src[i].dtype() != plan_.desc.dtype || src[i].shape() != expected) {
        return absl::InvalidArgumentError(absl::StrCat(
            "SimulateBoxing: source shard ", i, " is ", src[i].desc().ToString(), " but the plan for ",
            plan_.desc.ToString(), " ", plan_.src_sbp.ToString(), " expects ", DataTypeName(plan_.desc.dtype),
            expected.ToString(), " (mismatched dtype or shape)"));
      }
      values_[i] = src[i];
    }
    for (size_t s = 0; s < plan_.steps.size(); ++s) RETURN_IF_ERROR(Execute(s));
    std::vector<Tensor> out;
    for (int32_t v : plan_.dst_values) {
      ASSIGN_OR_RETURN(const Tensor* t, Get(v));
      out.push_back(*t);
    }
    return out;
  }

 private:
  absl::StatusOr<const Tensor*> Get(int32_t v) const {
    if (v < 0 || static_cast<size_t>(v) >= values_.size() || !values_[v].defined()) {
      return absl::InternalError(absl::StrCat("SimulateBoxing: value v", v, " is used before it is defined"));
    }
    return &values_[v];
  }

  Tensor NewTensor(int32_t v) const { return Tensor(plan_.desc.dtype, plan_.values[v].region.shape()); }
  const Region& RegionOf(int32_t v) const { return plan_.values[v].region; }

  absl::Status Fits(const Region& inner, const Region& outer, size_t step) const {
    if (!outer.Contains(inner)) {
      return absl::InternalError(absl::StrCat("SimulateBoxing: step ", step, ": region ", inner.ToString(),
                                              " is not inside ", outer.ToString()));
    }
    return absl::OkStatus();
  }

  // Sum of `inputs` restricted to out's region (each input covers it), in double.
  absl::StatusOr<Tensor> SumOver(const ValueIds& inputs, int32_t out, size_t step) {
    Tensor piece = NewTensor(out);
    std::vector<double> sum(piece.elem_count(), 0.0);
    for (int32_t v : inputs) {
      ASSIGN_OR_RETURN(const Tensor* in, Get(v));
      RETURN_IF_ERROR(Fits(RegionOf(out), RegionOf(v), step));
      CopyBlockOut(*in, OffsetIn(RegionOf(out), RegionOf(v)), &piece);
      for (int64_t e = 0; e < piece.elem_count(); ++e) sum[e] += piece.GetAsDouble(e);
    }
    Tensor result = NewTensor(out);
    for (int64_t e = 0; e < result.elem_count(); ++e) result.SetFromDouble(e, sum[e]);
    return result;
  }

  // Zeros, then every input's intersection with out's region written in place.
  absl::StatusOr<Tensor> Assemble(const ValueIds& inputs, int32_t out) {
    Tensor result = NewTensor(out);
    for (int32_t v : inputs) {
      ASSIGN_OR_RETURN(const Tensor* in, Get(v));
      const Region overlap = Intersect(RegionOf(v), RegionOf(out));
      if (overlap.empty()) continue;
      Tensor piece(plan_.desc.dtype, overlap.shape());
      CopyBlockOut(*in, OffsetIn(overlap, RegionOf(v)), &piece);
      CopyBlockIn(piece, OffsetIn(overlap, RegionOf(out)), &result);
    }
    return result;
  }

  absl::Status Execute(size_t s) {
    const BoxingStep& step = plan_.steps[s];
    const int32_t out = step.output;
    switch (step.kind) {
      case StepKind::kSlice:
      case StepKind::kTransfer:
      case StepKind::kCopy: {
        ASSIGN_OR_RETURN(const Tensor* in, Get(step.inputs.at(0)));
        RETURN_IF_ERROR(Fits(RegionOf(out), RegionOf(step.inputs[0]), s));
        Tensor t = NewTensor(out);
        CopyBlockOut(*in, OffsetIn(RegionOf(out), RegionOf(step.inputs[0])), &t);
        values_[out] = std::move(t);
        return absl::OkStatus();
      }
      case StepKind::kAdd: {
        ASSIGN_OR_RETURN(values_[out], SumOver(step.inputs, out, s));
        return absl::OkStatus();
      }
      case StepKind::kConcat: {
        for (int32_t v : step.inputs) RETURN_IF_ERROR(Fits(RegionOf(v), RegionOf(out), s));
        ASSIGN_OR_RETURN(values_[out], Assemble(step.inputs, out));
        return absl::OkStatus();
      }
      case StepKind::kZeros:
        values_[out] = NewTensor(out);
        return absl::OkStatus();
      case StepKind::kCollective: {
        for (size_t k = 0; k < step.group.size(); ++k) {
          const int32_t o = out + static_cast<int32_t>(k);
          const bool reduce = step.collective == CollectiveKind::kAllReduce ||
                              step.collective == CollectiveKind::kReduceScatter;
          if (reduce) {
            ASSIGN_OR_RETURN(values_[o], SumOver(step.inputs, o, s));
          } else {
            ASSIGN_OR_RETURN(values_[o], Assemble(step.inputs, o));
          }
        }
        return absl::OkStatus();
      }
    }
    return absl::InternalError(absl::StrCat("SimulateBoxing: step ", s, " has an unknown kind"));
  }

  const BoxingPlan& plan_;
  std::vector<Tensor> values_;
};

}  // namespace

absl::StatusOr<std::vector<Tensor>> SimulateBoxing(const BoxingPlan& plan, const std::vector<Tensor>& src_shards) {
  return Interpreter(plan).Run(src_shards);
}

}  // namespace compiler
}  // namespace oneflow_like
