#include "oneflow_like/models/layout.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace oneflow_like {
namespace models {

StageMesh::StageMesh(const ParallelLayout& layout, int64_t stage) : layout_(layout) {
  std::vector<Rank> ranks;
  const int64_t size = layout.dp * layout.tp;
  for (int64_t i = 0; i < size; ++i) ranks.push_back(Rank(static_cast<int32_t>(stage * size + i)));
  if (layout.dp > 1 && layout.tp > 1) {
    placement_ = *Placement::Create(layout.device, std::move(ranks), {layout.dp, layout.tp});
  } else {
    placement_ = Placement(layout.device, std::move(ranks));
  }
}

NdSbp StageMesh::Data() const {
  if (two_d()) return NdSbp({Sbp::Split(0), Sbp::Broadcast()});
  return NdSbp({layout_.dp > 1 ? Sbp::Split(0) : Sbp::Broadcast()});
}

std::optional<NdSbp> StageMesh::Model(int axis) const {
  if (layout_.tp == 1) return std::nullopt;
  if (two_d()) return NdSbp({Sbp::Broadcast(), Sbp::Split(axis)});
  return NdSbp({Sbp::Split(axis)});
}

absl::Status CheckPositive(absl::string_view model, absl::string_view field, int64_t value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(model, ": ", field, " must be positive, got ", value));
}

absl::Status CheckLayout(absl::string_view model, const ParallelLayout& layout, int64_t layers,
                         absl::string_view layers_field) {
  RETURN_IF_ERROR(CheckPositive(model, "layout.dp", layout.dp));
  RETURN_IF_ERROR(CheckPositive(model, "layout.tp", layout.tp));
  RETURN_IF_ERROR(CheckPositive(model, "layout.pp", layout.pp));
  if (layers < layout.pp) {
    return absl::InvalidArgumentError(absl::StrCat(model, ": ", layers_field, " (", layers,
                                                   ") must be at least the number of pipeline stages (layout.pp = ",
                                                   layout.pp, ")"));
  }
  return absl::OkStatus();
}

}  // namespace models
}  // namespace oneflow_like
