// The direct schedule (see EmitDirect in boxing_emit.h).
//
// For every destination device D (parallel-id order) with box dbox:
//   1. enumerate the source *tiles* -- the distinct boxes given by the source's split mesh
//      axes -- that intersect dbox; each intersection is a *block* of D's shard;
//   2. if the destination has partial-sum mesh axes, exactly one device of each sum group owns
//      the block (preferably one that already holds it); the others leave it zero;
//   3. the block's value is the sum over the source's partial-sum coordinates of one holder
//      each: the source's broadcast coordinates are chosen once per (D, tile), preferring a
//      holder on D's own device, then the cheapest link (rotating ties by D's index to spread
//      load);
//   4. a remote holder slices the block on its side (slices are shared between destinations),
//      sends it, and D adds the contributions and concatenates its blocks.
// Mesh axes that are P on both sides of one placement ("matched") are kept partial: D sums only
// the contributions with its own coordinate on those axes.
//
// Why broadcast coordinates are chosen per (D, tile) and not per contributor: under the shard
// simulator's semantics (sbp.h, shard_simulator.h) the copies of a B axis may hold different
// decompositions of a partial sum, so all contributors of one sum must come from the same B
// copy. With matched P axes the devices of one sum group must also agree, so the choice is
// then made for the group's first device.
#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "glog/logging.h"
#include "oneflow_like/compiler/boxing/boxing_emit.h"

namespace oneflow_like {
namespace compiler {
namespace internal {
namespace {

// Calls fn() for every assignment of c[axes] over the mesh (last axis fastest); restores
// nothing (callers overwrite the same axes each time).
template <typename Fn>
void ForEachCombo(const std::vector<int>& axes, const Layout& layout, Coords* c, Fn fn) {
  for (int a : axes) (*c)[a] = 0;
  while (true) {
    fn();
    int k = static_cast<int>(axes.size()) - 1;
    for (; k >= 0; --k) {
      if (++(*c)[axes[k]] < layout.mesh_dim(axes[k])) break;
      (*c)[axes[k]] = 0;
    }
    if (k < 0) return;
  }
}

class DirectPlanner {
 public:
  DirectPlanner(const Layout& src, const std::vector<int32_t>& src_values, const Layout& dst,
                const CostConfig& config, StepSink* sink)
      : src_(src), src_values_(src_values), dst_(dst), config_(config), sink_(sink) {
    const bool same_placement = src.placement() == dst.placement();
    for (int a = 0; a < src.num_mesh_axes(); ++a) {
      const Sbp& s = src.sbp()[a];
      if (s.is_split()) split_axes_.push_back(a);
      if (s.is_broadcast()) broadcast_axes_.push_back(a);
      if (s.is_partial_sum()) {
        (same_placement && dst.sbp()[a].is_partial_sum() ? matched_axes_ : free_partial_axes_).push_back(a);
      }
    }
    for (int a = 0; a < dst.num_mesh_axes(); ++a) {
      const Sbp& s = dst.sbp()[a];
      if (!s.is_split() && dst.mesh_dim(a) > 1) share_slices_ = true;
      if (s.is_partial_sum() && !(same_placement && src.sbp()[a].is_partial_sum())) owner_axes_.push_back(a);
      if (s.is_broadcast()) dst_broadcast_axes_.push_back(a);
    }
  }

  std::vector<int32_t> Run() {
    std::vector<int32_t> out(dst_.num_devices(), -1);
    for (int64_t d = 0; d < dst_.num_devices(); ++d) {
      if (sink_->gave_up()) break;  // a hopeless candidate schedule (boxing.cc, ChooseSchedule)
      d_device_ = dst_.device(d);
      d_coords_ = dst_.coords(d);
      d_box_ = dst_.box(d);
      if (d_box_.empty()) {
        out[d] = sink_->Zeros(d_device_, d_box_);
        continue;
      }
      blocks_.clear();
      block_values_.clear();
      tile_.assign(src_.num_mesh_axes(), 0);
      Region whole = Region::Whole(src_.shape());
      cur_begin_ = whole.begin;
      cur_end_ = whole.end;
      Enumerate(0);
      if (blocks_.empty()) {
        out[d] = sink_->Zeros(d_device_, d_box_);
      } else if (blocks_.size() == 1 && blocks_[0] == d_box_) {
        out[d] = block_values_[0];
      } else {
        out[d] = sink_->Concat(d_device_, ValueIds(block_values_.begin(), block_values_.end()), d_box_);
      }
    }
    return out;
  }

 private:
  // Descends the source mesh axes, visiting only tiles that intersect d_box_.
  void Enumerate(int axis) {
    if (axis == src_.num_mesh_axes()) {
      Region tile_box;
      tile_box.begin = cur_begin_;
      tile_box.end = cur_end_;
      Region block = Intersect(tile_box, d_box_);
      if (!block.empty()) OnBlock(block);
      return;
    }
    const Sbp& s = src_.sbp()[axis];
    if (!s.is_split()) {
      tile_[axis] = 0;
      Enumerate(axis + 1);
      return;
    }
    const int a = s.axis();
    const int64_t h = src_.mesh_dim(axis);
    const int64_t b0 = cur_begin_[a], e0 = cur_end_[a];
    const int64_t extent = e0 - b0, base = extent / h, extra = extent % h;
    auto start = [&](int64_t k) { return b0 + k * base + std::min(k, extra); };
    auto end = [&](int64_t k) { return start(k) + base + (k < extra ? 1 : 0); };
    // First part ending after d_box_ begins (end() is non-decreasing in k).
    int64_t lo = 0, hi = h;
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (end(mid) > d_box_.begin[a]) hi = mid; else lo = mid + 1;
    }
    for (int64_t k = lo; k < h && start(k) < d_box_.end[a]; ++k) {
      if (end(k) == start(k)) continue;
      tile_[axis] = k;
      cur_begin_[a] = start(k);
      cur_end_[a] = end(k);
      Enumerate(axis + 1);
    }
    cur_begin_[a] = b0;
    cur_end_[a] = e0;
  }

  // True if `device` is a source device holding the current tile (its split coordinates match).
  bool HoldsTile(DeviceRef device, int64_t* src_index) const {
    const int64_t i = src_.IndexOfDevice(device);
    if (i < 0) return false;
    for (int a : split_axes_) {
      if (src_.coord(i, a) != tile_[a]) return false;
    }
    *src_index = i;
    return true;
  }

  // Step 2: is D the owner of `block` among its sum group's owner-axis coordinates?
  bool IsOwner() const {
    if (owner_axes_.empty()) return true;
    Coords probe = d_coords_;
    for (int a : dst_broadcast_axes_) probe[a] = 0;  // the owner must not depend on B copies
    Coords owner;
    bool found = false;
    ForEachCombo(owner_axes_, dst_, &probe, [&] {
      int64_t unused;
      if (found || !HoldsTile(dst_.device(dst_.IndexOf(probe)), &unused)) return;
      found = true;
      owner = probe;
    });
    for (int a : owner_axes_) {
      if (d_coords_[a] != (found ? owner[a] : 0)) return false;
    }
    return true;
  }

  // Step 3: fills the source's broadcast coordinates of `c` (split and matched ones are set).
  void ChooseBroadcastCoords(Coords* c) const {
    if (broadcast_axes_.empty()) return;
    Coords anchor = d_coords_;
    for (int a : matched_axes_) anchor[a] = 0;
    const int64_t anchor_index = dst_.IndexOf(anchor);
    const DeviceRef anchor_device = dst_.device(anchor_index);
    int64_t local;
    if (HoldsTile(anchor_device, &local)) {
      for (int a : broadcast_axes_) (*c)[a] = src_.coord(local, a);
      return;
    }
    // Score = sum over contributors of the link class to the anchor; lowest wins, candidates
    // visited starting at anchor_index (mod their count) so ties spread over the copies.
    std::vector<Coords> candidates;
    Coords probe = *c;
    ForEachCombo(broadcast_axes_, src_, &probe, [&] { candidates.push_back(probe); });
    const size_t n = candidates.size();
    int best_score = -1;
    size_t best = 0;
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (static_cast<size_t>(anchor_index) + k) % n;
      Coords q = candidates[i];
      int score = 0;
      ForEachCombo(free_partial_axes_, src_, &q, [&] {
        score += static_cast<int>(Classify(src_.device(src_.IndexOf(q)).rank, anchor_device.rank, config_));
      });
      if (best_score < 0 || score < best_score) {
        best_score = score;
        best = i;
      }
      if (best_score == 0) break;
    }
    for (int a : broadcast_axes_) (*c)[a] = candidates[best][a];
  }

  void OnBlock(const Region& block) {
    if (!IsOwner()) return;
    Coords c = tile_;
    for (int a : matched_axes_) c[a] = d_coords_[a];
    ChooseBroadcastCoords(&c);
    ValueIds pieces;
    ForEachCombo(free_partial_axes_, src_, &c, [&] { pieces.push_back(Fetch(src_.IndexOf(c), block)); });
    blocks_.push_back(block);
    block_values_.push_back(pieces.size() == 1 ? pieces[0] : sink_->Add(d_device_, std::move(pieces), block));
  }

  // `block` of source device `s`, brought to D.
  int32_t Fetch(int64_t s, const Region& block) {
    const DeviceRef holder = src_.device(s);
    int32_t value = src_values_[s];
    if (block != src_.box(s) && !share_slices_) {
      value = sink_->Slice(holder, value, block);
    } else if (block != src_.box(s)) {
      auto key = std::make_pair(s, block);
      auto it = slices_.find(key);
      if (it == slices_.end()) it = slices_.emplace(std::move(key), sink_->Slice(holder, value, block)).first;
      value = it->second;
    }
    return holder == d_device_ ? value : sink_->Move(holder, d_device_, value, block);
  }

  const Layout& src_;
  const std::vector<int32_t>& src_values_;
  const Layout& dst_;
  const CostConfig& config_;
  StepSink* sink_;

  std::vector<int> split_axes_, broadcast_axes_, free_partial_axes_, matched_axes_;  // source mesh axes
  std::vector<int> owner_axes_, dst_broadcast_axes_;                                 // destination mesh axes
  // Slices already made, for the destinations that share blocks. Only destinations whose boxes
  // overlap can (some mesh axis of more than one device not split: B copies, P sum groups); with
  // every axis split the boxes partition the tensor, each block is asked for once, and a 10^6-entry
  // map would only cost memory.
  bool share_slices_ = false;
  absl::flat_hash_map<std::pair<int64_t, Region>, int32_t> slices_;

  // The destination device being planned.
  DeviceRef d_device_;
  Coords d_coords_;
  Region d_box_;
  // Tile enumeration state.
  Coords tile_;  // source mesh coordinates; split axes filled in
  Coords cur_begin_, cur_end_;
  std::vector<Region> blocks_;
  std::vector<int32_t> block_values_;
};

}  // namespace

std::vector<int32_t> EmitDirect(const Layout& src, const std::vector<int32_t>& src_values, const Layout& dst,
                                const CostConfig& config, StepSink* sink) {
  return DirectPlanner(src, src_values, dst, config, sink).Run();
}

}  // namespace internal
}  // namespace compiler
}  // namespace oneflow_like
