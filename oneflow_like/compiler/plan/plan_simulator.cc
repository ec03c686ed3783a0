#include "oneflow_like/compiler/plan/plan_simulator.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/plan/plan_index.h"
#include "oneflow_like/compiler/plan/plan_sim_graph.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace compiler {
namespace {

// The simulation state over a SimGraph: counters per task, register and edge, in dense arrays.
class Simulator {
 public:
  Simulator(const SimGraph& graph, const SimLabels& labels, int64_t steps)
      : g_(graph),
        labels_(labels),
        steps_(steps),
        pieces_(graph.pieces_per_step),
        tasks_(graph.num_tasks()),
        registers_(graph.num_registers()),
        edges_(graph.edge_task.size()),
        queued_(graph.num_tasks(), false) {}

  void Run();
  PlanSimulation Finish(int max_reported_tasks) const;

 private:
  struct Task {
    int64_t fired = 0;
    int64_t emitted = 0;
    int64_t read = 0;
    int64_t phase = 0;  // REPEAT: emissions of the current input; ACCUMULATE: inputs summed
  };
  struct Register {
    int64_t produced = 0;
    int64_t released = 0;  // buffers every consumer has returned
    int64_t lagging = 0;   // while produced > released: edges that have not returned buffer `released`
  };
  struct Edge {
    int64_t taken = 0;
    int64_t returned = 0;
  };

  const int32_t* InBegin(int64_t t) const { return g_.in_edges.data() + g_.in_start[t]; }
  const int32_t* InEnd(int64_t t) const { return g_.in_edges.data() + g_.in_start[t + 1]; }
  const int32_t* OutBegin(int64_t t) const { return g_.out_registers.data() + g_.out_start[t]; }
  const int32_t* OutEnd(int64_t t) const { return g_.out_registers.data() + g_.out_start[t + 1]; }
  bool NoInputs(int64_t t) const { return g_.in_start[t] == g_.in_start[t + 1]; }
  // Firing budget of sources and input-less tasks.
  int64_t Budget(int64_t t) const { return g_.kind[t] == SimGraph::kHolder ? steps_ : steps_ * pieces_; }
  bool Inputless(int64_t t) const { return g_.kind[t] == SimGraph::kOther && NoInputs(t); }

  bool Readable(int64_t e) const { return registers_[g_.edge_register[e]].produced > edges_[e].taken; }
  bool Free(int64_t r) const {
    return registers_[r].produced - registers_[r].released < g_.register_count[r];
  }
  bool AllReadable(int64_t t) const {
    return std::all_of(InBegin(t), InEnd(t), [this](int32_t e) { return Readable(e); });
  }
  bool AllFree(int64_t t) const {
    return std::all_of(OutBegin(t), OutEnd(t), [this](int32_t r) { return Free(r); });
  }
  bool Ready(int64_t t) const { return AllReadable(t) && AllFree(t); }
  void Wake(int64_t t) {
    if (t < 0 || queued_[t]) return;
    queued_[t] = true;
    worklist_.push_back(t);
  }
  void Produce(int64_t t);
  void Take(int64_t t);
  void Return(int64_t t);
  void FireOrdinary(int64_t t) {
    Take(t);
    Return(t);
    Produce(t);
  }
  bool TryFire(int64_t t);
  std::string Describe(int64_t t) const;

  const SimGraph& g_;
  const SimLabels& labels_;
  const int64_t steps_;
  const int64_t pieces_;
  std::vector<Task> tasks_;
  std::vector<Register> registers_;
  std::vector<Edge> edges_;
  std::vector<bool> queued_;
  std::vector<int64_t> worklist_;
};

void Simulator::Produce(int64_t t) {
  for (const int32_t* r = OutBegin(t); r != OutEnd(t); ++r) {
    Register& reg = registers_[*r];
    const int64_t consumers = g_.edge_start[*r + 1] - g_.edge_start[*r];
    if (consumers == 0) {
      ++reg.produced;
      ++reg.released;
      continue;
    }
    if (reg.produced++ == reg.released) reg.lagging = consumers;  // the oldest outstanding buffer
    for (int64_t e = g_.edge_start[*r]; e < g_.edge_start[*r + 1]; ++e) Wake(g_.edge_task[e]);
  }
  ++tasks_[t].emitted;
}

void Simulator::Take(int64_t t) {
  for (const int32_t* e = InBegin(t); e != InEnd(t); ++e) ++edges_[*e].taken;
  ++tasks_[t].read;
}

// Buffers are returned in order on each edge, so a register's oldest buffer is released once
// no edge still lags at it; the next oldest's laggards are counted then.
void Simulator::Return(int64_t t) {
  for (const int32_t* e = InBegin(t); e != InEnd(t); ++e) {
    const int32_t r = g_.edge_register[*e];
    Register& reg = registers_[r];
    if (edges_[*e].returned++ != reg.released || --reg.lagging > 0) continue;
    while (reg.lagging == 0 && reg.produced > reg.released) {
      ++reg.released;
      reg.lagging = 0;
      if (reg.produced == reg.released) break;
      for (int64_t other = g_.edge_start[r]; other < g_.edge_start[r + 1]; ++other) {
        if (edges_[other].returned == reg.released) ++reg.lagging;
      }
    }
    Wake(g_.producer[r]);
  }
}

bool Simulator::TryFire(int64_t t) {
  Task& task = tasks_[t];
  switch (g_.kind[t]) {
    case SimGraph::kInputSource:
      if (task.fired >= Budget(t) || !AllFree(t)) return false;
      Produce(t);
      break;
    case SimGraph::kHolder:
      if (task.fired >= Budget(t) || !AllFree(t)) return false;
      if (task.fired > 0) {  // the first firing does not wait for an update
        if (!AllReadable(t)) return false;
        Take(t);
        Return(t);
      }
      Produce(t);
      break;
    case SimGraph::kRepeat:
      if (task.phase == 0) {
        if (!AllReadable(t) || !AllFree(t)) return false;
        Take(t);
      } else if (!AllFree(t)) {
        return false;
      }
      Produce(t);
      if (++task.phase == g_.count[t]) {
        Return(t);
        task.phase = 0;
      }
      break;
    case SimGraph::kAccumulate:
      if (!AllReadable(t)) return false;
      if (task.phase == g_.count[t] - 1 && !AllFree(t)) return false;
      Take(t);
      Return(t);
      if (++task.phase == g_.count[t]) {
        Produce(t);
        task.phase = 0;
      }
      break;
    case SimGraph::kOther:
      if (NoInputs(t) && task.fired >= Budget(t)) return false;
      if (!Ready(t)) return false;
      FireOrdinary(t);
      break;
    case SimGraph::kCollective: {
      const std::vector<int32_t>& members = g_.rendezvous_members[g_.rendezvous[t]];
      for (int32_t member : members) {
        if (!Ready(member)) return false;
        if (NoInputs(member) && tasks_[member].fired >= steps_ * pieces_) return false;  // as input-less
      }
      for (int32_t member : members) {
        FireOrdinary(member);
        if (member != t) ++tasks_[member].fired;
      }
      break;
    }
  }
  ++task.fired;
  return true;
}

void Simulator::Run() {
  for (int64_t t = g_.num_tasks() - 1; t >= 0; --t) Wake(t);
  while (!worklist_.empty()) {
    const int64_t t = worklist_.back();
    worklist_.pop_back();
    queued_[t] = false;
    while (TryFire(t)) {
    }
  }
}

// One task's unmet firing conditions: "waits for register 5 'y' (not readable: ...)".
std::string Simulator::Describe(int64_t t) const {
  const Task& task = tasks_[t];
  const uint8_t kind = g_.kind[t];
  std::string text = absl::StrCat(labels_.TaskLabel(t), " fired ", task.fired, " time(s)");
  if (kind == SimGraph::kRepeat || kind == SimGraph::kAccumulate) {
    absl::StrAppend(&text, ", ", task.phase, " of ", g_.count[t], " into the current round");
  }
  const bool wants_inputs =
      !(kind == SimGraph::kRepeat && task.phase > 0) && !(kind == SimGraph::kHolder && task.fired == 0);
  for (const int32_t* e = InBegin(t); e != InEnd(t); ++e) {
    if (!wants_inputs || Readable(*e)) continue;
    const int32_t r = g_.edge_register[*e];
    absl::StrAppend(&text, "; waits for ", labels_.RegisterLabel(r), " (not readable: its producer ",
                    g_.producer[r] < 0 ? "?" : labels_.TaskLabel(g_.producer[r]), " has produced ",
                    registers_[r].produced, " buffer(s), all read)");
  }
  for (const int32_t* r = OutBegin(t); r != OutEnd(t); ++r) {
    if (Free(*r)) continue;
    const Register& reg = registers_[*r];
    absl::StrAppend(&text, "; waits for a free buffer of ", labels_.RegisterLabel(*r), " (not free: all ",
                    g_.register_count[*r], " buffer(s) in use; buffer ", reg.released, " not yet returned by");
    for (int64_t e = g_.edge_start[*r]; e < g_.edge_start[*r + 1]; ++e) {
      if (edges_[e].returned > reg.released) continue;
      absl::StrAppend(&text, " ", labels_.TaskLabel(g_.edge_task[e]), " (read ", edges_[e].taken, ", returned ",
                      edges_[e].returned, ")");
    }
    absl::StrAppend(&text, ")");
  }
  if (kind == SimGraph::kCollective) {
    for (int32_t member : g_.rendezvous_members[g_.rendezvous[t]]) {
      if (member == t || Ready(member)) continue;
      absl::StrAppend(&text, "; its collective partner ", labels_.TaskLabel(member), " is not ready");
    }
  }
  return text;
}

PlanSimulation Simulator::Finish(int max_reported_tasks) const {
  PlanSimulation result;
  const int64_t num_tasks = g_.num_tasks();
  result.emitted_by_index.resize(num_tasks);
  result.read_by_index.resize(num_tasks);
  bool sources_unfinished = false;
  bool half_way = false;
  std::vector<int64_t> blocked;  // tasks that want to fire but cannot, in plan order
  for (int64_t t = 0; t < num_tasks; ++t) {
    const Task& task = tasks_[t];
    result.emitted_by_index[t] = task.emitted;
    result.read_by_index[t] = task.read;
    bool wants = task.phase > 0;
    half_way = half_way || task.phase > 0;
    if (g_.kind[t] == SimGraph::kInputSource || g_.kind[t] == SimGraph::kHolder) {
      wants = task.fired < Budget(t);
      sources_unfinished = sources_unfinished || wants;
    } else if (!Inputless(t)) {
      for (const int32_t* e = InBegin(t); e != InEnd(t); ++e) wants = wants || Readable(*e);
    }
    if (wants) blocked.push_back(t);
  }
  std::string first_unread;
  int64_t unread = 0;
  for (int64_t e = 0; e < static_cast<int64_t>(edges_.size()); ++e) {
    const int32_t r = g_.edge_register[e];
    if (g_.producer[r] >= 0 && Inputless(g_.producer[r])) continue;
    const int64_t allowed = g_.kind[g_.edge_task[e]] == SimGraph::kHolder ? 1 : 0;
    const int64_t produced = registers_[r].produced;
    if (produced - edges_[e].taken <= allowed) continue;
    if (unread++ == 0) {
      first_unread = absl::StrCat(labels_.RegisterLabel(r), " read ", edges_[e].taken, " of ", produced,
                                  " buffer(s) by ", labels_.TaskLabel(g_.edge_task[e]));
    }
  }
  if (!sources_unfinished && !half_way && unread == 0) {
    result.completed = true;
    return result;
  }
  result.report = absl::StrCat(
      sources_unfinished ? "deadlock" : "not drained", ": simulating ", steps_, " step(s) of ", pieces_, " piece(s) ",
      sources_unfinished ? "got stuck before every SOURCE finished its firings"
                         : "fired every SOURCE, but tasks were left half way or buffers unread (a rate "
                           "mismatch, e.g. an ACCUMULATE / REPEAT count that does not match the pieces)");
  if (!blocked.empty()) {
    absl::StrAppend(&result.report, "; ", blocked.size(), " blocked task(s), e.g.:");
    for (size_t i = 0; i < blocked.size() && static_cast<int>(i) < max_reported_tasks; ++i) {
      absl::StrAppend(&result.report, "\n  ", Describe(blocked[i]));
    }
  }
  if (unread > 0) {
    absl::StrAppend(&result.report, "\n  unread: ", first_unread);
    if (unread > 1) absl::StrAppend(&result.report, " (and ", unread - 1, " more)");
  }
  return result;
}

// Labels from the whole plan's index.
class IndexLabels : public SimLabels {
 public:
  explicit IndexLabels(const PlanIndex& index) : index_(index) {}
  std::string TaskLabel(int64_t t) const override { return PlanIndex::TaskLabel(index_.task(t)); }
  std::string RegisterLabel(int64_t r) const override {
    const auto& [rank, reg] = index_.producing_registers()[r];
    return PlanIndex::RegisterLabel(rank, *reg);
  }

 private:
  const PlanIndex& index_;
};

}  // namespace

PlanSimulation RunSimulation(const SimGraph& graph, const SimLabels& labels, int64_t steps,
                             int max_reported_tasks) {
  Simulator simulator(graph, labels, steps);
  simulator.Run();
  return simulator.Finish(max_reported_tasks);
}

absl::StatusOr<PlanSimulation> SimulatePlan(const PlanIndex& index, int64_t steps,
                                            int max_reported_tasks) {
  if (steps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("SimulatePlan: steps must be >= 1, got ", steps));
  }
  if (index.plan().pieces_per_step() < 1) {
    return absl::InvalidArgumentError("SimulatePlan: pieces_per_step must be >= 1");
  }
  SimGraphBuilder builder(index.plan().pieces_per_step());
  for (const RankPlanProto& rank_plan : index.plan().rank_plans()) builder.AddRank(index, rank_plan);
  const SimGraph graph = builder.Finish();
  return RunSimulation(graph, IndexLabels(index), steps, max_reported_tasks);
}

absl::StatusOr<PlanSimulation> SimulatePlan(const PlanProto& plan, int64_t steps,
                                            int max_reported_tasks) {
  ASSIGN_OR_RETURN(PlanIndex index, PlanIndex::Build(plan));
  ASSIGN_OR_RETURN(PlanSimulation result, SimulatePlan(index, steps, max_reported_tasks));
  for (int64_t t = 0; t < index.num_tasks(); ++t) {
    result.emitted[index.task(t).id()] = result.emitted_by_index[t];
    result.read[index.task(t).id()] = result.read_by_index[t];
  }
  return result;
}

}  // namespace compiler
}  // namespace oneflow_like
