#include "oneflow_like/compiler/plan/plan_sim_graph.h"

#include <algorithm>
#include <limits>

namespace oneflow_like {
namespace compiler {
namespace {

int32_t Clamp(int64_t value) {
  return static_cast<int32_t>(std::clamp<int64_t>(value, 1, std::numeric_limits<int32_t>::max()));
}

}  // namespace

int32_t IdTable::Find(int64_t id) const {
  if (id >= 0 && id < static_cast<int64_t>(dense_.size()) && dense_[id] >= 0) return dense_[id];
  if (sparse_.empty()) return -1;
  auto it = sparse_.find(id);
  return it == sparse_.end() ? -1 : it->second;
}

int32_t IdTable::Insert(int64_t id, int32_t index) {
  const int32_t existing = Find(id);
  if (existing >= 0) return existing;
  ++size_;
  // Dense up to 16 ids per entry so far (ids interleaved across ranks fill in as ranks come).
  const int64_t limit = std::max<int64_t>(int64_t{1} << 16, 16 * size_);
  if (id >= 0 && id < limit) {
    if (id >= static_cast<int64_t>(dense_.size())) {
      const int64_t grown = std::min(limit, std::max<int64_t>(id + 1, 2 * static_cast<int64_t>(dense_.size())));
      dense_.resize(grown, -1);
    }
    dense_[id] = index;
  } else {
    sparse_.emplace(id, index);
  }
  return -1;
}

void SimGraphBuilder::AddRank(const PlanIndex& index, const RankPlanProto& rank_plan) {
  SimGraph& g = graph_;
  if (g.edge_start.empty()) g.edge_start.push_back(0);
  if (g.out_start.empty()) g.out_start.push_back(0);
  for (const RegisterProto& reg : rank_plan.registers()) {
    if (reg.has_remote()) continue;
    const int32_t r = static_cast<int32_t>(g.register_count.size());
    registers_.Insert(reg.id(), r);
    g.register_count.push_back(Clamp(reg.count()));
    producer_ids_.push_back(reg.producer().task_id());
    for (const TaskRefProto& consumer : reg.consumers()) {
      consumer_ids_.push_back(consumer.task_id());
      g.edge_register.push_back(r);
    }
    g.edge_start.push_back(static_cast<int64_t>(consumer_ids_.size()));
  }
  for (const TaskProto& task : rank_plan.tasks()) {
    const int32_t t = static_cast<int32_t>(g.kind.size());
    tasks_.Insert(task.id(), t);
    for (int64_t id : task.produced_register_ids()) {
      const int32_t r = registers_.Find(id);
      if (r >= 0) g.out_registers.push_back(r);
    }
    g.out_start.push_back(static_cast<int64_t>(g.out_registers.size()));
    SimGraph::Kind kind = SimGraph::kOther;
    int32_t count = 1;
    int32_t rendezvous = -1;
    switch (task.type()) {
      case TaskProto::SOURCE:
        kind = index.IsVariableHolder(task) ? SimGraph::kHolder : SimGraph::kInputSource;
        break;
      case TaskProto::REPEAT:
      case TaskProto::ACCUMULATE:
        kind = task.type() == TaskProto::REPEAT ? SimGraph::kRepeat : SimGraph::kAccumulate;
        count = Clamp(task.count().count());
        break;
      case TaskProto::COLLECTIVE: {
        kind = SimGraph::kCollective;
        const auto& ranks = task.collective().ranks();
        auto [it, fresh] = rendezvous_of_.emplace(
            std::make_pair(std::vector<int32_t>(ranks.begin(), ranks.end()), task.collective().global_order()),
            static_cast<int32_t>(g.rendezvous_members.size()));
        if (fresh) g.rendezvous_members.emplace_back();
        rendezvous = it->second;
        g.rendezvous_members[rendezvous].push_back(t);
        break;
      }
      default:
        break;
    }
    g.kind.push_back(kind);
    g.count.push_back(count);
    g.rendezvous.push_back(rendezvous);
  }
}

SimGraph SimGraphBuilder::Finish() {
  SimGraph& g = graph_;
  if (g.edge_start.empty()) g.edge_start.push_back(0);
  if (g.out_start.empty()) g.out_start.push_back(0);
  const int64_t num_tasks = g.num_tasks();
  g.producer.resize(producer_ids_.size());
  for (size_t r = 0; r < producer_ids_.size(); ++r) g.producer[r] = tasks_.Find(producer_ids_[r]);
  std::vector<int64_t>().swap(producer_ids_);
  // Edges whose consumer is in the graph, register by register (compacted in place).
  g.edge_task.resize(consumer_ids_.size());
  int64_t kept = 0;
  int64_t first = 0;
  for (int64_t r = 0; r < g.num_registers(); ++r) {
    const int64_t last = g.edge_start[r + 1];
    for (int64_t e = first; e < last; ++e) {
      const int32_t t = tasks_.Find(consumer_ids_[e]);
      if (t < 0) continue;
      g.edge_task[kept] = t;
      g.edge_register[kept] = static_cast<int32_t>(r);
      ++kept;
    }
    first = last;
    g.edge_start[r + 1] = kept;
  }
  std::vector<int64_t>().swap(consumer_ids_);
  g.edge_task.resize(kept);
  g.edge_task.shrink_to_fit();
  g.edge_register.resize(kept);
  g.edge_register.shrink_to_fit();
  // Each task's in-edges in edge order.
  g.in_start.assign(num_tasks + 1, 0);
  for (int32_t t : g.edge_task) ++g.in_start[t + 1];
  for (int64_t t = 0; t < num_tasks; ++t) g.in_start[t + 1] += g.in_start[t];
  g.in_edges.resize(kept);
  std::vector<int64_t> fill(g.in_start.begin(), g.in_start.end() - 1);
  for (int64_t e = 0; e < kept; ++e) g.in_edges[fill[g.edge_task[e]]++] = static_cast<int32_t>(e);
  return std::move(graph_);
}

}  // namespace compiler
}  // namespace oneflow_like
