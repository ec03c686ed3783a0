// Layout, StepSink, and the group-wise schedules (ring, collectives). The direct schedule is
// in boxing_direct.cc.
#include "oneflow_like/compiler/boxing/boxing_emit.h"

#include <utility>

#include "glog/logging.h"

namespace oneflow_like {
namespace compiler {
namespace internal {

// ---- Layout ----

Layout::Layout(const Placement& placement, const NdSbp& sbp, const Shape& shape)
    : placement_(placement), sbp_(sbp), shape_(shape) {
  const int64_t n = placement_.num_devices();
  const int axes = num_mesh_axes();
  boxes_.reserve(n);
  coords_.resize(n * axes);
  for (int64_t i = 0; i < n; ++i) {
    boxes_.push_back(Region::OfShard(GetShardSlice(shape_, sbp_, placement_.hierarchy(), i)));
    int64_t rest = i;
    for (int a = axes - 1; a >= 0; --a) {
      coords_[i * axes + a] = rest % mesh_dim(a);
      rest /= mesh_dim(a);
    }
    index_of_rank_[placement_.ranks()[i].value()] = i;
  }
}

Coords Layout::coords(int64_t index) const {
  Coords c(num_mesh_axes());
  for (int a = 0; a < num_mesh_axes(); ++a) c[a] = coord(index, a);
  return c;
}

int64_t Layout::IndexOf(const Coords& c) const {
  int64_t index = 0;
  for (int a = 0; a < num_mesh_axes(); ++a) index = index * mesh_dim(a) + c[a];
  return index;
}

int64_t Layout::IndexOfDevice(DeviceRef device) const {
  if (device.type != placement_.device_type()) return -1;
  auto it = index_of_rank_.find(device.rank.value());
  return it == index_of_rank_.end() ? -1 : it->second;
}

// ---- StepSink ----

StepSink::StepSink(BoxingPlan* plan, BoxingCostAccumulator* cost, int64_t elem_size, int32_t next_value)
    : plan_(plan), cost_(cost), elem_size_(elem_size), next_value_(next_value) {
  if (plan_ != nullptr) CHECK_EQ(static_cast<size_t>(next_value_), plan_->values.size());
}

int32_t StepSink::NewValue(DeviceRef device, const Region& region) {
  if (plan_ != nullptr && Keeps(next_value_)) plan_->values.push_back(BoxingValue{device, region});
  return next_value_++;
}

void StepSink::AddStep(BoxingStep step, Rank peer) {
  if (filter_ != nullptr && plan_ == nullptr) {
    if (step.rank == filter_->me || peer == filter_->me) filter_->local.emplace_back(step.output, step.inputs);
    return;
  }
  if (plan_ == nullptr || !Keeps(step.output)) return;
  if (filter_ != nullptr) {
    for (int32_t& in : step.inputs) {
      in = in >= 0 && in < static_cast<int32_t>(filter_->new_id.size()) ? filter_->new_id[in] : -1;
    }
    step.output = filter_->new_id[step.output];
  }
  plan_->steps.push_back(std::move(step));
}

int32_t StepSink::Local(StepKind kind, DeviceRef device, ValueIds inputs, const Region& region) {
  const int64_t bytes = region.elem_count() * elem_size_;
  if (cost_ != nullptr) cost_->Local(kind, device.rank, bytes, static_cast<int>(inputs.size()));
  const int32_t out = NewValue(device, region);
  if (plan_ != nullptr || filter_ != nullptr) {
    BoxingStep step;
    step.kind = kind;
    step.rank = device.rank;
    step.inputs = std::move(inputs);
    step.output = out;
    step.bytes = bytes;
    AddStep(std::move(step), device.rank);
  }
  return out;
}

int32_t StepSink::Slice(DeviceRef device, int32_t input, const Region& region) {
  return Local(StepKind::kSlice, device, {input}, region);
}

int32_t StepSink::Add(DeviceRef device, ValueIds inputs, const Region& region) {
  return Local(StepKind::kAdd, device, std::move(inputs), region);
}

int32_t StepSink::Concat(DeviceRef device, ValueIds inputs, const Region& region) {
  return Local(StepKind::kConcat, device, std::move(inputs), region);
}

int32_t StepSink::Zeros(DeviceRef device, const Region& region) {
  return Local(StepKind::kZeros, device, {}, region);
}

int32_t StepSink::Transfer(DeviceRef from, DeviceRef to, int32_t input, const Region& region) {
  CHECK(from.rank != to.rank && from.type == to.type) << "a transfer moves between ranks, devices of one type";
  const int64_t bytes = region.elem_count() * elem_size_;
  if (cost_ != nullptr) cost_->Transfer(from.rank, to.rank, bytes);
  const int32_t out = NewValue(to, region);
  if (plan_ != nullptr || filter_ != nullptr) {
    BoxingStep step;
    step.kind = StepKind::kTransfer;
    step.rank = to.rank;
    step.peer = from.rank;
    step.inputs = {input};
    step.output = out;
    step.bytes = bytes;
    AddStep(std::move(step), from.rank);
  }
  return out;
}

int32_t StepSink::Copy(DeviceRef from, DeviceRef to, int32_t input, const Region& region) {
  CHECK(from.rank == to.rank && from.type != to.type) << "a copy moves between two devices of one rank";
  auto [cached, fresh] = copies_.try_emplace({input, to.type}, next_value_);
  if (!fresh) return cached->second;
  const int64_t bytes = region.elem_count() * elem_size_;
  if (cost_ != nullptr) cost_->Copy(to.rank, bytes);
  const int32_t out = NewValue(to, region);
  if (plan_ != nullptr || filter_ != nullptr) {
    BoxingStep step;
    step.kind = StepKind::kCopy;
    step.rank = to.rank;
    step.inputs = {input};
    step.output = out;
    step.bytes = bytes;
    AddStep(std::move(step), to.rank);
  }
  return out;
}

int32_t StepSink::Move(DeviceRef from, DeviceRef to, int32_t input, const Region& region) {
  if (from.rank == to.rank) return Copy(from, to, input, region);
  if (from.type == to.type) return Transfer(from, to, input, region);
  // Across ranks and device types: the transports move host memory.
  int32_t value = input;
  DeviceRef at = from;
  if (at.type != DeviceType::kCpu) {
    const DeviceRef host{at.rank, DeviceType::kCpu};
    value = Copy(at, host, value, region);
    at = host;
  }
  const DeviceRef landing{to.rank, DeviceType::kCpu};
  value = Transfer(at, landing, value, region);
  return to.type == DeviceType::kCpu ? value : Copy(landing, to, value, region);
}

int32_t StepSink::Collective(CollectiveKind kind, const std::vector<DeviceRef>& group, ValueIds inputs,
                             const std::vector<Region>& out_regions, int64_t group_elems) {
  const int64_t group_bytes = group_elems * elem_size_;
  CHECK_EQ(group.size(), out_regions.size());
  std::vector<Rank> ranks;
  for (const DeviceRef& d : group) ranks.push_back(d.rank);
  if (cost_ != nullptr) cost_->Collective(kind, ranks, group_bytes);
  CHECK(filter_ == nullptr) << "a filtered (one rank's) plan has no collectives";
  const int32_t first = next_value_;
  for (size_t k = 0; k < group.size(); ++k) NewValue(group[k], out_regions[k]);
  if (plan_ != nullptr) {
    BoxingStep step;
    step.kind = StepKind::kCollective;
    step.collective = kind;
    step.group = std::move(ranks);
    step.inputs = std::move(inputs);
    step.output = first;
    step.bytes = out_regions.empty() ? 0 : out_regions[0].elem_count() * elem_size_;
    plan_->steps.push_back(std::move(step));
  }
  return first;
}

// ---- Groups ----

namespace {

// The k-th of m balanced parts of `whole` along tensor axis `axis`.
Region PartOf(const Region& whole, int axis, int64_t m, int64_t k) {
  Range r = BalancedSplit(whole.dim(axis), m, k);
  Region part = whole;
  part.begin[axis] = whole.begin[axis] + r.begin;
  part.end[axis] = whole.begin[axis] + r.end;
  return part;
}

// Member k's box under `sbp` (the SBP of the changing mesh axis) must be whole or part k.
bool Tiles(const Layout& layout, const Sbp& sbp, const GroupSpec::Group& g) {
  const int64_t m = static_cast<int64_t>(g.members.size());
  for (int64_t k = 0; k < m; ++k) {
    const Region expected = sbp.is_split() ? PartOf(g.whole, sbp.axis(), m, k) : g.whole;
    if (layout.box(g.members[k]) != expected) return false;
  }
  return true;
}

int64_t Mod(int64_t a, int64_t m) { return ((a % m) + m) % m; }

}  // namespace

std::optional<GroupSpec> PlanGroups(const Layout& src, const Layout& dst) {
  if (src.placement() != dst.placement()) return std::nullopt;
  int changed = -1;
  for (int a = 0; a < src.num_mesh_axes(); ++a) {
    if (src.sbp()[a] == dst.sbp()[a]) continue;
    if (changed >= 0) return std::nullopt;
    changed = a;
  }
  if (changed < 0) return std::nullopt;
  GroupSpec spec;
  spec.mesh_axis = changed;
  spec.from = src.sbp()[changed];
  spec.to = dst.sbp()[changed];
  const int64_t m = src.mesh_dim(changed);
  int64_t stride = 1;
  for (int a = changed + 1; a < src.num_mesh_axes(); ++a) stride *= src.mesh_dim(a);
  for (int64_t first = 0; first < src.num_devices(); ++first) {
    if (src.coord(first, changed) != 0) continue;
    GroupSpec::Group g;
    for (int64_t k = 0; k < m; ++k) g.members.push_back(first + k * stride);
    g.whole = src.box(first);
    for (int64_t p : g.members) {
      for (const Region* r : {&src.box(p), &dst.box(p)}) {
        for (int i = 0; i < r->num_axes(); ++i) {
          g.whole.begin[i] = std::min(g.whole.begin[i], r->begin[i]);
          g.whole.end[i] = std::max(g.whole.end[i], r->end[i]);
        }
      }
    }
    if (!Tiles(src, spec.from, g) || !Tiles(dst, spec.to, g)) return std::nullopt;
    spec.groups.push_back(std::move(g));
  }
  return spec;
}

namespace {

// The tensor axis the ring cuts a P -> B group box along: the first with >= m elements.
int RingChunkAxis(const Region& whole, int64_t m) {
  for (int a = 0; a < whole.num_axes(); ++a) {
    if (whole.dim(a) >= m) return a;
  }
  return -1;
}

}  // namespace

bool RingApplies(const GroupSpec& spec) {
  if (spec.groups.empty() || spec.groups[0].members.size() < 2) return false;
  const int64_t m = static_cast<int64_t>(spec.groups[0].members.size());
  if (spec.from.is_partial_sum() && spec.to.is_broadcast()) {
    for (const GroupSpec::Group& g : spec.groups) {
      if (RingChunkAxis(g.whole, m) < 0) return false;
    }
    return true;
  }
  return (spec.from.is_partial_sum() && spec.to.is_split()) || (spec.from.is_split() && spec.to.is_broadcast());
}

std::vector<int32_t> EmitRing(const GroupSpec& spec, const Layout& src, const std::vector<int32_t>& src_values,
                              const Layout& dst, StepSink* sink) {
  CHECK(RingApplies(spec));
  std::vector<int32_t> out(dst.num_devices(), -1);
  for (const GroupSpec::Group& g : spec.groups) {
    const int64_t m = static_cast<int64_t>(g.members.size());
    auto dev = [&](int64_t i) { return src.device(g.members[i]); };
    // Chunk c ends up reduced on member c (reduce-scatter) and is what member c contributes
    // first (all-gather).
    std::vector<Region> chunks;
    for (int64_t c = 0; c < m; ++c) {
      if (spec.from.is_partial_sum() && spec.to.is_broadcast()) {
        chunks.push_back(PartOf(g.whole, RingChunkAxis(g.whole, m), m, c));
      } else if (spec.to.is_split()) {
        chunks.push_back(dst.box(g.members[c]));
      } else {
        chunks.push_back(src.box(g.members[c]));
      }
    }
    std::vector<int32_t> reduced(m, -1);  // member i: the fully reduced chunk i
    if (spec.from.is_partial_sum()) {
      // Round t: member i sends its running sum of chunk (i - 1 - t) to member i + 1, which
      // adds its own part. After m - 1 rounds member i holds the whole sum of chunk i.
      std::vector<int32_t> own(m * m, -1);
      auto own_part = [&](int64_t i, int64_t c) {
        int32_t& v = own[i * m + c];
        if (v < 0) {
          const int32_t whole = src_values[g.members[i]];
          v = chunks[c] == src.box(g.members[i]) ? whole : sink->Slice(dev(i), whole, chunks[c]);
        }
        return v;
      };
      std::vector<int32_t> acc(m, -1);
      for (int64_t t = 0; t + 1 < m; ++t) {
        std::vector<int32_t> next(m, -1);
        for (int64_t i = 0; i < m; ++i) {
          const int64_t c = Mod(i - 1 - t, m);
          const int64_t j = (i + 1) % m;
          const int32_t send = t == 0 ? own_part(i, c) : acc[i];
          const int32_t recv = sink->Transfer(dev(i), dev(j), send, chunks[c]);
          next[j] = sink->Add(dev(j), {recv, own_part(j, c)}, chunks[c]);
        }
        acc = std::move(next);
      }
      reduced = acc;
    } else {
      for (int64_t i = 0; i < m; ++i) reduced[i] = src_values[g.members[i]];
    }
    if (spec.to.is_split()) {
      for (int64_t i = 0; i < m; ++i) out[g.members[i]] = reduced[i];
      continue;
    }
    // All-gather. Round t: member i forwards chunk (i - t) to member i + 1.
    std::vector<int32_t> have(m * m, -1);
    for (int64_t i = 0; i < m; ++i) have[i * m + i] = reduced[i];
    for (int64_t t = 0; t + 1 < m; ++t) {
      for (int64_t i = 0; i < m; ++i) {
        const int64_t c = Mod(i - t, m);
        const int64_t j = (i + 1) % m;
        have[j * m + c] = sink->Transfer(dev(i), dev(j), have[i * m + c], chunks[c]);
      }
    }
    for (int64_t i = 0; i < m; ++i) {
      ValueIds parts(have.begin() + i * m, have.begin() + (i + 1) * m);
      out[g.members[i]] = sink->Concat(dev(i), std::move(parts), g.whole);
    }
  }
  return out;
}

std::optional<CollectiveKind> CollectiveFor(const Sbp& from, const Sbp& to) {
  if (from.is_partial_sum() && to.is_broadcast()) return CollectiveKind::kAllReduce;
  if (from.is_split() && to.is_broadcast()) return CollectiveKind::kAllGather;
  if (from.is_partial_sum() && to.is_split()) return CollectiveKind::kReduceScatter;
  if (from.is_split() && to.is_split() && from != to) return CollectiveKind::kAllToAll;
  return std::nullopt;
}

std::vector<int32_t> EmitCollectives(const GroupSpec& spec, CollectiveKind kind, const Layout& src,
                                     const std::vector<int32_t>& src_values, const Layout& dst, StepSink* sink) {
  std::vector<int32_t> out(dst.num_devices(), -1);
  for (const GroupSpec::Group& g : spec.groups) {
    std::vector<DeviceRef> group;
    ValueIds inputs;
    std::vector<Region> regions;
    for (int64_t p : g.members) {
      group.push_back(dst.device(p));
      inputs.push_back(src_values[p]);
      regions.push_back(dst.box(p));
    }
    const int32_t first = sink->Collective(kind, group, std::move(inputs), regions, g.whole.elem_count());
    for (size_t k = 0; k < g.members.size(); ++k) out[g.members[k]] = first + static_cast<int32_t>(k);
  }
  return out;
}

}  // namespace internal
}  // namespace compiler
}  // namespace oneflow_like
