// Parallel layouts shared by the model job builders (gpt.h, mlp.h).
//
// ParallelLayout {dp, tp, pp}: world = dp * tp * pp ranks; pipeline stage s runs on ranks
// [s*dp*tp, (s+1)*dp*tp). StageMesh arranges one stage's ranks as a [dp, tp] mesh (1-D when dp
// or tp is 1) and spells the layouts the builders pin:
//   Data()     the batch split over the dp axis, B on the tp axis;
//   Model(a)   axis a split over the tp axis, B on the dp axis (nullopt without tp).
// Example: StageMesh({.dp = 2, .tp = 2, .pp = 2}, 1).placement() is cpu:[[4,5],[6,7]] and
// Data() is (S(0), B).
//
// CheckLayout validates the degrees and that there are at least as many layers as stages,
// with errors naming the model and the field ("gpt: layout.pp must be positive, got 0").
#ifndef ONEFLOW_LIKE_MODELS_LAYOUT_H_
#define ONEFLOW_LIKE_MODELS_LAYOUT_H_

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"
#include "oneflow_like/core/sbp.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace models {

struct ParallelLayout {
  int64_t dp = 1;  // data-parallel degree
  int64_t tp = 1;  // tensor-parallel degree
  int64_t pp = 1;  // pipeline stages
  // Every placement's device type (one device per rank), except the data inputs, which are fed
  // on the same ranks' host (COPY tasks move them to the devices). kCuda jobs compile and plan
  // (olplan prices them with a GPU profile); running them needs the CUDA backend (issue 14).
  DeviceType device = DeviceType::kCpu;
  int64_t world() const { return dp * tp * pp; }
};

class StageMesh {
 public:
  // REQUIRES: CheckLayout passed; 0 <= stage < layout.pp.
  StageMesh(const ParallelLayout& layout, int64_t stage);
  const Placement& placement() const { return placement_; }
  bool two_d() const { return placement_.num_hierarchy_axes() == 2; }
  NdSbp Data() const;
  std::optional<NdSbp> Model(int axis) const;

 private:
  ParallelLayout layout_;
  Placement placement_;
};

// InvalidArgument "<model>: <field> must be positive, got <value>" unless value > 0.
absl::Status CheckPositive(absl::string_view model, absl::string_view field, int64_t value);

// The degrees are positive and `layers` (named `layers_field`) >= layout.pp.
absl::Status CheckLayout(absl::string_view model, const ParallelLayout& layout, int64_t layers,
                         absl::string_view layers_field);

}  // namespace models
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_MODELS_LAYOUT_H_
