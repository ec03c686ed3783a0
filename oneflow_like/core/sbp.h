// SBP values: how a logical (global) tensor is laid out over the devices of a placement.
//
//   Sbp::Split(a)     S(a): each device holds a contiguous slice of axis a. Splits are
//                     *balanced*: with n parts of a dim d, the first d % n parts hold
//                     d / n + 1 elements and the rest d / n (sizes differ by at most 1).
//   Sbp::Broadcast()  B: every device holds the whole tensor.
//   Sbp::PartialSum() P: every device holds a tensor of the full shape; the logical
//                     tensor is their element-wise sum.
//
// A Placement is a device type plus ranks arranged in a hierarchy (an n-D mesh), e.g.
// "cpu:[[0,1],[2,3]]" has hierarchy [2,2]. An NdSbp has one Sbp per hierarchy axis; on
// "cpu:[[0,1],[2,3]]" the NdSbp "(S(0), S(1))" splits axis 0 across the rows of the mesh and
// then axis 1 across the columns. Nested splits of the same tensor axis compose: "(S(0), S(0))"
// on a [2,2] mesh splits axis 0 into 2 parts, then each part into 2 again.
//
// Worked example (matmul, see OneFlow's sbp docs): Y:S(0) <- A:S(0), B:B;
// Y:S(1) <- A:B, B:S(1); Y:P <- A:S(1), B:S(0).
//
// All types are immutable values with ==, hashing, ToString/Parse and proto conversion.
#ifndef ONEFLOW_LIKE_CORE_SBP_H_
#define ONEFLOW_LIKE_CORE_SBP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "oneflow_like/core/ids.h"
#include "oneflow_like/core/proto/sbp.pb.h"
#include "oneflow_like/core/shape.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {

class Sbp {
 public:
  enum class Kind : int32_t { kSplit = 0, kBroadcast = 1, kPartialSum = 2 };

  static Sbp Split(int axis) { return Sbp(Kind::kSplit, axis); }
  static Sbp Broadcast() { return Sbp(Kind::kBroadcast, 0); }
  static Sbp PartialSum() { return Sbp(Kind::kPartialSum, 0); }

  Kind kind() const { return kind_; }
  bool is_split() const { return kind_ == Kind::kSplit; }
  bool is_broadcast() const { return kind_ == Kind::kBroadcast; }
  bool is_partial_sum() const { return kind_ == Kind::kPartialSum; }
  // REQUIRES: is_split().
  int axis() const { return axis_; }

  std::string ToString() const;  // "S(0)", "B", "P"
  // Accepts "S(0)", "S(-1)" is rejected, "B", "P" (surrounding spaces allowed).
  static absl::StatusOr<Sbp> Parse(absl::string_view text);
  SbpProto ToProto() const;
  static absl::StatusOr<Sbp> FromProto(const SbpProto& proto);

  friend bool operator==(const Sbp& a, const Sbp& b) { return a.kind_ == b.kind_ && a.axis_ == b.axis_; }
  friend bool operator!=(const Sbp& a, const Sbp& b) { return !(a == b); }
  friend bool operator<(const Sbp& a, const Sbp& b) {
    return a.kind_ != b.kind_ ? a.kind_ < b.kind_ : a.axis_ < b.axis_;
  }
  template <typename H>
  friend H AbslHashValue(H h, const Sbp& s) { return H::combine(std::move(h), s.kind_, s.axis_); }

 private:
  Sbp(Kind kind, int axis) : kind_(kind), axis_(axis) {}
  Kind kind_;
  int axis_;  // 0 unless split
};

// One Sbp per placement hierarchy axis.
class NdSbp {
 public:
  NdSbp() = default;
  explicit NdSbp(std::vector<Sbp> sbps) : sbps_(std::move(sbps)) {}
  NdSbp(std::initializer_list<Sbp> sbps) : sbps_(sbps) {}

  int num_axes() const { return static_cast<int>(sbps_.size()); }
  const Sbp& operator[](int i) const { return sbps_[i]; }
  const std::vector<Sbp>& sbps() const { return sbps_; }
  bool all_broadcast() const;
  bool any_partial() const;

  // "(S(0), B)"; a 1-D NdSbp prints as "(S(0))".
  std::string ToString() const;
  // Accepts "(S(0), B)", "[S(0), B]", "S(0), B" and a bare "S(0)".
  static absl::StatusOr<NdSbp> Parse(absl::string_view text);
  NdSbpProto ToProto() const;
  static absl::StatusOr<NdSbp> FromProto(const NdSbpProto& proto);

  friend bool operator==(const NdSbp& a, const NdSbp& b) { return a.sbps_ == b.sbps_; }
  friend bool operator!=(const NdSbp& a, const NdSbp& b) { return !(a == b); }
  friend bool operator<(const NdSbp& a, const NdSbp& b) { return a.sbps_ < b.sbps_; }
  template <typename H>
  friend H AbslHashValue(H h, const NdSbp& s) { return H::combine(std::move(h), s.sbps_); }

 private:
  std::vector<Sbp> sbps_;
};

enum class DeviceType : int32_t { kCpu = 0, kCuda = 1 };
std::string DeviceTypeName(DeviceType t);  // "cpu", "cuda"

class Placement {
 public:
  Placement() = default;
  // 1-D placement over `ranks`.
  Placement(DeviceType device_type, std::vector<Rank> ranks);
  // n-D placement: ranks in row-major order of `hierarchy` (product must equal ranks.size()).
  static absl::StatusOr<Placement> Create(DeviceType device_type, std::vector<Rank> ranks,
                                          std::vector<int64_t> hierarchy);

  DeviceType device_type() const { return device_type_; }
  const std::vector<Rank>& ranks() const { return ranks_; }
  int64_t num_devices() const { return static_cast<int64_t>(ranks_.size()); }
  const std::vector<int64_t>& hierarchy() const { return hierarchy_; }
  int num_hierarchy_axes() const { return static_cast<int>(hierarchy_.size()); }
  // Index of `rank` within ranks() (the parallel id), or -1.
  int64_t IndexOf(Rank rank) const;
  bool Contains(Rank rank) const { return IndexOf(rank) >= 0; }
  // Mesh coordinates of the device with parallel id `index` (row-major in hierarchy()).
  std::vector<int64_t> Coordinates(int64_t index) const;

  // "cpu:[0,1,2,3]", "cpu:[[0,1],[2,3]]".
  std::string ToString() const;
  // Parses the forms above; also "cpu:0-3" for a 1-D range. Errors name the offending part.
  static absl::StatusOr<Placement> Parse(absl::string_view text);
  PlacementProto ToProto() const;
  static absl::StatusOr<Placement> FromProto(const PlacementProto& proto);

  friend bool operator==(const Placement& a, const Placement& b) {
    return a.device_type_ == b.device_type_ && a.ranks_ == b.ranks_ && a.hierarchy_ == b.hierarchy_;
  }
  friend bool operator!=(const Placement& a, const Placement& b) { return !(a == b); }
  template <typename H>
  friend H AbslHashValue(H h, const Placement& p) {
    return H::combine(std::move(h), p.device_type_, p.ranks_, p.hierarchy_);
  }

 private:
  DeviceType device_type_ = DeviceType::kCpu;
  std::vector<Rank> ranks_;
  std::vector<int64_t> hierarchy_;
};

// Balanced split of `dim` into `parts`: the [begin, end) range of part `index`.
struct Range {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};
Range BalancedSplit(int64_t dim, int64_t parts, int64_t index);

// Checks that `nd_sbp` can lay out a tensor of `shape` on `placement`: one Sbp per hierarchy
// axis, split axes in range, and each split dim has at least as many elements as parts unless
// `allow_empty_shards` (then some shards are empty). Errors name the SBP, shape and placement.
absl::Status ValidateNdSbp(const NdSbp& nd_sbp, const Shape& shape, const Placement& placement,
                           bool allow_empty_shards = false);

// The shard held by the device with parallel id `index`: its physical shape and its offset
// (per axis) in the logical tensor. REQUIRES: ValidateNdSbp passed.
struct ShardSlice {
  Shape shape;
  std::vector<int64_t> offset;
};
ShardSlice GetShardSlice(const Shape& logical_shape, const NdSbp& nd_sbp,
                         const std::vector<int64_t>& hierarchy, int64_t index);
inline Shape PhysicalShape(const Shape& logical_shape, const NdSbp& nd_sbp,
                           const std::vector<int64_t>& hierarchy, int64_t index) {
  return GetShardSlice(logical_shape, nd_sbp, hierarchy, index).shape;
}

}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_SBP_H_
