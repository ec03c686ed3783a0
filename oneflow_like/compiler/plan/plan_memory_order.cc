#include "oneflow_like/compiler/plan/plan_memory_order.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/plan/plan_checks.h"

namespace oneflow_like {
namespace compiler {
namespace {

using StreamKey = std::tuple<std::string, int32_t, int32_t>;  // device type, index, stream

StreamKey KeyOf(const TaskProto& task) { return {task.device().type(), task.device().index(), task.stream_id()}; }

std::string StreamText(const TaskProto& task) {
  return absl::StrCat(task.device().type(), ":", task.device().index(), "/", task.stream_id());
}

}  // namespace

PieceOrder::PieceOrder(const PlanIndex& index, const PlanSimulation& simulation, int64_t steps,
                       const RankPlanProto& rank_plan) {
  const int64_t firings = steps * index.plan().pieces_per_step();
  auto once_per_piece = [&](const TaskProto& task) {
    const int64_t t = index.TaskIndex(task.id());
    if (t < 0 || t >= static_cast<int64_t>(simulation.emitted_by_index.size())) return false;
    // An ACCUMULATE acts on every piece it reads and emits once per step; a REPEAT reads once
    // per step and acts on every piece it emits.
    return (task.produced_register_ids_size() == 0 || simulation.emitted_by_index[t] == firings ||
            task.type() == TaskProto::ACCUMULATE) &&
           (task.consumed_register_ids_size() == 0 || simulation.read_by_index[t] == firings ||
            task.type() == TaskProto::REPEAT);
  };
  // The candidates, grouped by stream in static order.
  std::map<StreamKey, std::vector<const TaskProto*>> streams;
  for (const TaskProto& task : rank_plan.tasks()) {
    if (once_per_piece(task)) streams[KeyOf(task)].push_back(&task);
  }
  std::vector<const TaskProto*> tasks;
  absl::flat_hash_map<int64_t, int64_t> candidate;  // task id -> index in `tasks`
  std::vector<int64_t> stream, place;
  for (auto& [key, list] : streams) {
    std::stable_sort(list.begin(), list.end(), [](const TaskProto* a, const TaskProto* b) {
      return a->order_in_stream() < b->order_in_stream();
    });
    for (size_t p = 0; p < list.size(); ++p) {
      candidate[list[p]->id()] = static_cast<int64_t>(tasks.size());
      tasks.push_back(list[p]);
      stream.push_back(num_streams_);
      place.push_back(static_cast<int64_t>(p));
    }
    ++num_streams_;
  }
  // Edges: each stream's order, and producer -> consumer within a piece.
  const int64_t n = static_cast<int64_t>(tasks.size());
  std::vector<std::vector<int64_t>> successors(n);
  std::vector<int64_t> waiting(n, 0);
  for (int64_t i = 0; i + 1 < n; ++i) {
    if (stream[i] == stream[i + 1]) {
      successors[i].push_back(i + 1);
      ++waiting[i + 1];
    }
  }
  for (const RegisterProto& reg : rank_plan.registers()) {
    if (reg.producer().rank() != rank_plan.rank()) continue;  // a mirror
    auto producer = candidate.find(reg.producer().task_id());
    // An ACCUMULATE's sum is written once per step: no edge within a piece.
    if (producer == candidate.end() || tasks[producer->second]->type() == TaskProto::ACCUMULATE) continue;
    for (const TaskRefProto& ref : reg.consumers()) {
      if (ref.rank() != rank_plan.rank()) continue;
      auto consumer = candidate.find(ref.task_id());
      if (consumer == candidate.end() || consumer->second == producer->second) continue;
      const TaskProto& reader = *tasks[consumer->second];
      // A holder reads it a step later; a REPEAT once per step.
      if (index.IsVariableHolder(reader) || reader.type() == TaskProto::REPEAT) continue;
      successors[producer->second].push_back(consumer->second);
      ++waiting[consumer->second];
    }
  }
  // Vector clocks in a topological order (Kahn); tasks on a cycle stay unknown.
  std::vector<int64_t> clocks(n * num_streams_, -1);
  std::vector<int64_t> ready;
  for (int64_t i = 0; i < n; ++i) {
    if (waiting[i] == 0) ready.push_back(i);
  }
  std::vector<bool> done(n, false);
  while (!ready.empty()) {
    const int64_t i = ready.back();
    ready.pop_back();
    done[i] = true;
    int64_t* mine = &clocks[i * num_streams_];
    mine[stream[i]] = place[i];
    for (int64_t s : successors[i]) {
      int64_t* theirs = &clocks[s * num_streams_];
      for (int64_t k = 0; k < num_streams_; ++k) theirs[k] = std::max(theirs[k], mine[k]);
      if (--waiting[s] == 0) ready.push_back(s);
    }
  }
  // Keep the known tasks, renumbered (VerifyPlan simulated the plan first: no cycle is left).
  std::vector<int64_t> renumbered(n, -1);
  last_.assign(num_streams_, -1);
  for (int64_t i = 0; i < n; ++i) {
    if (!done[i]) continue;
    renumbered[i] = static_cast<int64_t>(stream_.size());
    local_[tasks[i]->id()] = renumbered[i];
    stream_.push_back(stream[i]);
    place_.push_back(place[i]);
    clocks_.insert(clocks_.end(), clocks.begin() + i * num_streams_, clocks.begin() + (i + 1) * num_streams_);
    if (last_[stream[i]] < 0 || place[i] > place_[last_[stream[i]]]) last_[stream[i]] = renumbered[i];
  }
}

int64_t PieceOrder::Local(const TaskProto& task) const {
  auto it = local_.find(task.id());
  return it == local_.end() ? -1 : it->second;
}

bool PieceOrder::Before(const TaskProto& a, const TaskProto& b) const {
  const int64_t la = Local(a), lb = Local(b);
  if (la < 0 || lb < 0 || la == lb) return false;
  return Clock(lb, stream_[la]) >= place_[la];
}

bool PieceOrder::BeforeNext(const TaskProto& a, const TaskProto& b) const {
  const int64_t la = Local(a), lb = Local(b);
  if (la < 0 || lb < 0) return false;
  for (int64_t s = 0; s < num_streams_; ++s) {
    // Through the end of stream s's piece into the start of its next one.
    if (last_[s] >= 0 && Clock(last_[s], stream_[la]) >= place_[la] && Clock(lb, s) >= 0) return true;
  }
  return false;
}

namespace {

// The tasks that use `reg`: its producer, then its consumers on `rank`.
std::vector<const TaskProto*> Users(const PlanIndex& index, int32_t rank, const RegisterProto& reg) {
  std::vector<const TaskProto*> users = {index.FindTask(reg.producer().task_id())};
  for (const TaskRefProto& ref : reg.consumers()) {
    if (ref.rank() == rank) users.push_back(index.FindTask(ref.task_id()));
  }
  return users;
}

// Why "every use of A ends before B is written, and B's before A is written in the next piece"
// fails: the first use and producer not so ordered (nullptr, nullptr: it holds).
struct Gap {
  const TaskProto* use = nullptr;
  const TaskProto* writer = nullptr;
  const RegisterProto* written = nullptr;
  bool next_piece = false;
};

Gap FirstGap(const PieceOrder& order, const SharedBytes& a, const std::vector<const TaskProto*>& a_users,
             const SharedBytes& b, const std::vector<const TaskProto*>& b_users) {
  for (const TaskProto* use : a_users) {
    if (!order.Before(*use, *b_users[0])) return Gap{use, b_users[0], b.reg, false};
  }
  for (const TaskProto* use : b_users) {
    if (!order.BeforeNext(*use, *a_users[0])) return Gap{use, a_users[0], a.reg, true};
  }
  return Gap{};
}

std::string GapText(int32_t rank, const Gap& gap) {
  return absl::StrCat(PlanIndex::TaskLabel(*gap.use), " (stream ", StreamText(*gap.use), ") does not happen before ",
                      PlanIndex::TaskLabel(*gap.writer), " (stream ", StreamText(*gap.writer), ") writes ",
                      PlanIndex::RegisterLabel(rank, *gap.written),
                      gap.next_piece ? " in the next piece" : " in the same piece");
}

}  // namespace

absl::Status CheckOrderedSharing(const PieceOrder& order, const PlanIndex& index, int32_t rank, int64_t block,
                                 std::vector<SharedBytes> shared, const UnorderableError& unorderable) {
  std::stable_sort(shared.begin(), shared.end(),
                   [](const SharedBytes& a, const SharedBytes& b) { return a.begin < b.begin; });
  std::vector<const SharedBytes*> active;  // may reach past the next begin
  for (const SharedBytes& e : shared) {
    active.erase(std::remove_if(active.begin(), active.end(), [&](const SharedBytes* a) { return a->end <= e.begin; }),
                 active.end());
    for (const SharedBytes* a : active) {
      if (a->cls == e.cls) continue;
      if (!a->orderable || !e.orderable) return unorderable(*a, e);
      const std::vector<const TaskProto*> a_users = Users(index, rank, *a->reg), e_users = Users(index, rank, *e.reg);
      const Gap forward = FirstGap(order, *a, a_users, e, e_users);
      if (forward.use == nullptr) continue;
      const Gap backward = FirstGap(order, e, e_users, *a, a_users);
      if (backward.use == nullptr) continue;
      auto describe = [rank](const SharedBytes& s) {
        return absl::StrCat(PlanIndex::RegisterLabel(rank, *s.reg), " [", s.begin, ", ", s.end, ")");
      };
      return PlanError(absl::StrCat(
          describe(*a), " and ", describe(e), " share bytes of block ", block,
          " but no chain of register dependencies and stream orders puts every use of one before the other's "
          "write, in this piece and into the next, either way: ",
          GapText(rank, forward), "; ", GapText(rank, backward)));
    }
    active.push_back(&e);
  }
  return absl::OkStatus();
}

}  // namespace compiler
}  // namespace oneflow_like
