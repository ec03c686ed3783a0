#include "python/ext/job_layout.h"

#include <set>

namespace oneflow_like {
namespace python {

JobLayout JobLayout::FromGraph(const compiler::Graph& graph) {
  JobLayout layout;
  std::set<int32_t> ranks;
  auto add = [&](const Placement& p) {
    for (Rank r : p.ranks()) ranks.insert(r.value());
  };
  for (const compiler::TensorNode& t : graph.tensors()) {
    if (!t.is_source() && !t.is_output) continue;
    if (t.is_source()) add(*t.placement);
    const TensorBindingProto::Kind kind = t.is_output     ? TensorBindingProto::OUTPUT
                                          : t.is_variable ? TensorBindingProto::VARIABLE
                                                          : TensorBindingProto::INPUT;
    layout.entries_.emplace(t.name, Entry{kind, t.desc->shape, *t.nd_sbp, *t.placement});
  }
  for (const compiler::OpNode& op : graph.ops()) add(*op.placement);
  layout.ranks_.assign(ranks.begin(), ranks.end());
  return layout;
}

std::optional<TensorBindingProto> JobLayout::Binding(const std::string& name, int32_t rank) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  const Entry& e = it->second;
  const int64_t d = e.placement.IndexOf(Rank(rank));
  if (d < 0) return std::nullopt;
  TensorBindingProto binding;
  binding.set_tensor_name(name);
  binding.set_kind(e.kind);
  // As the lowering's MakeShardInfo (compiler/lower/plan_builder.h, internal to the lowering).
  ShardInfoProto* shard = binding.mutable_shard();
  for (int64_t dim : e.logical.dims()) shard->add_logical_dims(dim);
  const ShardSlice slice = GetShardSlice(e.logical, e.nd_sbp, e.placement.hierarchy(), d);
  for (int64_t o : slice.offset) shard->add_offset(o);
  *shard->mutable_nd_sbp() = e.nd_sbp.ToProto();
  for (int64_t h : e.placement.hierarchy()) shard->add_hierarchy(h);
  for (int64_t c : e.placement.Coordinates(d)) shard->add_mesh_coords(c);
  return binding;
}

}  // namespace python
}  // namespace oneflow_like
