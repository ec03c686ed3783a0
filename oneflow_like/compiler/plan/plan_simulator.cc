#include "oneflow_like/compiler/plan/plan_simulator.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/plan/plan_index.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace compiler {
namespace {

// FIFO of per-buffer "returns still missing" counts of one register, oldest buffer first.
// Popped entries are compacted away once they are the majority (amortized O(1)).
class Ring {
 public:
  bool empty() const { return head_ == data_.size(); }
  int32_t& at(size_t i) { return data_[head_ + i]; }
  void PushBack(int32_t value) { data_.push_back(value); }
  void PopFront() {
    if (++head_ * 2 < data_.size() || head_ < 16) return;
    data_.erase(data_.begin(), data_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }

 private:
  std::vector<int32_t> data_;
  size_t head_ = 0;
};

// A list of indices stored in a shared array (CSR): no allocation per task or register.
class IndexSpan {
 public:
  IndexSpan() = default;
  IndexSpan(const int64_t* begin, const int64_t* end) : begin_(begin), end_(end) {}
  const int64_t* begin() const { return begin_; }
  const int64_t* end() const { return end_; }
  bool empty() const { return begin_ == end_; }
  size_t size() const { return static_cast<size_t>(end_ - begin_); }

 private:
  const int64_t* begin_ = nullptr;
  const int64_t* end_ = nullptr;
};

// The consecutive indices [first, last), iterable like a list of them.
class IndexRange {
 public:
  class Iterator {
   public:
    explicit Iterator(int64_t i) : i_(i) {}
    int64_t operator*() const { return i_; }
    Iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator!=(const Iterator& other) const { return i_ != other.i_; }

   private:
    int64_t i_;
  };
  IndexRange() = default;
  IndexRange(int64_t first, int64_t last) : first_(first), last_(last) {}
  Iterator begin() const { return Iterator(first_); }
  Iterator end() const { return Iterator(last_); }
  bool empty() const { return first_ == last_; }
  size_t size() const { return static_cast<size_t>(last_ - first_); }

 private:
  int64_t first_ = 0;
  int64_t last_ = 0;
};

// kCollective fires only together with its partners (same group and global_order).
enum class Kind { kInputSource, kHolder, kRepeat, kAccumulate, kOrdinary, kInputless, kCollective };

class Simulator {
 public:
  Simulator(const PlanIndex& index, int64_t steps)
      : index_(index), steps_(steps), pieces_(index.plan().pieces_per_step()) {}

  void Build();
  void Run();
  PlanSimulation Finish(int max_reported_tasks) const;

 private:
  struct Register {
    int32_t rank = 0;
    const RegisterProto* proto = nullptr;
    int64_t producer = -1;  // task index
    IndexRange edges;  // its consumers' edges, consecutive in edges_
    Ring outstanding;  // buffers [released, produced)
  };
  // The counters the firing conditions read, apart from the rest of Register so that the hot
  // loops touch a small dense array.
  struct Credits {
    int64_t produced = 0;
    int64_t released = 0;  // buffers every consumer has returned
    int64_t count = 1;
  };
  struct Edge {
    int64_t reg = 0;
    int64_t task = 0;
    int64_t taken = 0;
    int64_t returned = 0;
  };
  struct Task {
    Kind kind = Kind::kOrdinary;
    int64_t count = 1;  // REPEAT / ACCUMULATE c; firing budget of sources and input-less tasks
    int64_t fired = 0;
    int64_t phase = 0;  // REPEAT: emissions of the current input; ACCUMULATE: inputs summed
    int64_t emitted = 0;
    int64_t read = 0;
    IndexSpan in_edges;       // into task_edges_
    IndexSpan out_registers;  // into task_registers_
    int64_t rendezvous = -1;  // kCollective: index into rendezvous_
  };

  bool Readable(int64_t edge) const {
    return credits_[edges_[edge].reg].produced > edges_[edge].taken;
  }
  bool Free(int64_t reg) const {
    const Credits& c = credits_[reg];
    return c.produced - c.released < c.count;
  }
  bool AllReadable(const Task& task) const {
    return std::all_of(task.in_edges.begin(), task.in_edges.end(),
                       [this](int64_t edge) { return Readable(edge); });
  }
  bool AllFree(const Task& task) const {
    return std::all_of(task.out_registers.begin(), task.out_registers.end(),
                       [this](int64_t reg) { return Free(reg); });
  }
  void Wake(int64_t task) {
    if (task < 0 || queued_[task]) return;
    queued_[task] = true;
    worklist_.push_back(task);
  }
  void Produce(Task& task);
  void Take(Task& task);
  void Return(Task& task);
  bool Ready(const Task& task) const { return AllReadable(task) && AllFree(task); }
  void FireOrdinary(Task& task) {
    Take(task);
    Return(task);
    Produce(task);
  }
  bool TryFire(int64_t t);
  std::string Describe(int64_t t) const;

  const PlanIndex& index_;
  const int64_t steps_;
  const int64_t pieces_;
  std::vector<Register> regs_;
  std::vector<Credits> credits_;  // by register, as regs_
  std::vector<Edge> edges_;
  std::vector<Task> tasks_;
  std::vector<bool> queued_;
  std::vector<int64_t> worklist_;
  std::vector<int64_t> task_edges_;      // every task's in_edges, task by task
  std::vector<int64_t> task_registers_;  // every task's out_registers, task by task
  std::vector<std::vector<int64_t>> rendezvous_;  // member tasks of one collective call
};

void Simulator::Build() {
  regs_.reserve(index_.producing_registers().size());
  credits_.reserve(index_.producing_registers().size());
  for (const auto& [rank, proto] : index_.producing_registers()) {
    Register reg;
    reg.rank = rank;
    reg.proto = proto;
    Credits credits;
    credits.count = std::max(1, proto->count());
    credits_.push_back(credits);
    reg.producer = index_.TaskIndex(proto->producer().task_id());
    regs_.push_back(std::move(reg));
  }
  tasks_.resize(index_.num_tasks());
  std::map<std::pair<std::vector<int32_t>, int64_t>, int64_t> rendezvous_of;
  // Edges register by register; then each task's in-edges and produced registers as CSR lists
  // (a task's edges in edge order, as if appended while walking the registers).
  std::vector<int64_t> edge_start(tasks_.size() + 1, 0);
  for (int64_t r = 0; r < static_cast<int64_t>(regs_.size()); ++r) {
    const int64_t first = static_cast<int64_t>(edges_.size());
    for (const TaskRefProto& consumer : regs_[r].proto->consumers()) {
      const int64_t t = index_.TaskIndex(consumer.task_id());
      if (t < 0) continue;
      ++edge_start[t + 1];
      edges_.push_back(Edge{r, t});
    }
    regs_[r].edges = IndexRange(first, static_cast<int64_t>(edges_.size()));
  }
  for (size_t t = 0; t < tasks_.size(); ++t) edge_start[t + 1] += edge_start[t];
  task_edges_.resize(edges_.size());
  {
    std::vector<int64_t> fill(edge_start.begin(), edge_start.end() - 1);
    for (int64_t e = 0; e < static_cast<int64_t>(edges_.size()); ++e) {
      task_edges_[fill[edges_[e].task]++] = e;
    }
  }
  std::vector<int64_t> register_start(tasks_.size() + 1, 0);
  for (int64_t t = 0; t < index_.num_tasks(); ++t) {
    for (int64_t id : index_.task(t).produced_register_ids()) {
      const int64_t r = index_.ProducingIndex(id);  // regs_ follows producing_registers()
      if (r >= 0) task_registers_.push_back(r);
    }
    register_start[t + 1] = static_cast<int64_t>(task_registers_.size());
  }
  for (int64_t t = 0; t < index_.num_tasks(); ++t) {
    const int64_t* edges = task_edges_.data();
    const int64_t* registers = task_registers_.data();
    tasks_[t].in_edges = IndexSpan(edges + edge_start[t], edges + edge_start[t + 1]);
    tasks_[t].out_registers =
        IndexSpan(registers + register_start[t], registers + register_start[t + 1]);
  }
  for (int64_t t = 0; t < index_.num_tasks(); ++t) {
    const TaskProto& proto = index_.task(t);
    Task& task = tasks_[t];
    if (proto.type() == TaskProto::SOURCE) {
      const bool holder = index_.IsVariableHolder(proto);
      task.kind = holder ? Kind::kHolder : Kind::kInputSource;
      task.count = holder ? steps_ : steps_ * pieces_;
    } else if (proto.type() == TaskProto::REPEAT || proto.type() == TaskProto::ACCUMULATE) {
      task.kind = proto.type() == TaskProto::REPEAT ? Kind::kRepeat : Kind::kAccumulate;
      task.count = std::max<int64_t>(1, proto.count().count());
    } else if (proto.type() == TaskProto::COLLECTIVE) {
      task.kind = Kind::kCollective;
      const auto& ranks = proto.collective().ranks();
      auto [it, fresh] =
          rendezvous_of.emplace(std::make_pair(std::vector<int32_t>(ranks.begin(), ranks.end()),
                                               proto.collective().global_order()),
                                static_cast<int64_t>(rendezvous_.size()));
      if (fresh) rendezvous_.emplace_back();
      task.rendezvous = it->second;
      rendezvous_[it->second].push_back(t);
    } else if (task.in_edges.empty()) {
      task.kind = Kind::kInputless;
      task.count = steps_ * pieces_;
    }
  }
  queued_.assign(tasks_.size(), false);
}

void Simulator::Produce(Task& task) {
  for (int64_t r : task.out_registers) {
    Register& reg = regs_[r];
    Credits& credits = credits_[r];
    ++credits.produced;
    if (reg.edges.empty()) {
      ++credits.released;
      continue;
    }
    reg.outstanding.PushBack(static_cast<int32_t>(reg.edges.size()));
    for (int64_t edge : reg.edges) Wake(edges_[edge].task);
  }
  ++task.emitted;
}

void Simulator::Take(Task& task) {
  for (int64_t edge : task.in_edges) ++edges_[edge].taken;
  ++task.read;
}

void Simulator::Return(Task& task) {
  for (int64_t edge : task.in_edges) {
    Register& reg = regs_[edges_[edge].reg];
    Credits& credits = credits_[edges_[edge].reg];
    const int64_t buffer = edges_[edge].returned++;
    --reg.outstanding.at(static_cast<size_t>(buffer - credits.released));
    bool advanced = false;
    while (!reg.outstanding.empty() && reg.outstanding.at(0) == 0) {
      reg.outstanding.PopFront();
      ++credits.released;
      advanced = true;
    }
    if (advanced) Wake(reg.producer);
  }
}

bool Simulator::TryFire(int64_t t) {
  Task& task = tasks_[t];
  switch (task.kind) {
    case Kind::kInputSource:
      if (task.fired >= task.count || !AllFree(task)) return false;
      Produce(task);
      break;
    case Kind::kHolder:
      if (task.fired >= task.count || !AllFree(task)) return false;
      if (task.fired > 0) {  // the first firing does not wait for an update
        if (!AllReadable(task)) return false;
        Take(task);
        Return(task);
      }
      Produce(task);
      break;
    case Kind::kRepeat:
      if (task.phase == 0) {
        if (!AllReadable(task) || !AllFree(task)) return false;
        Take(task);
      } else if (!AllFree(task)) {
        return false;
      }
      Produce(task);
      if (++task.phase == task.count) {
        Return(task);
        task.phase = 0;
      }
      break;
    case Kind::kAccumulate:
      if (!AllReadable(task)) return false;
      if (task.phase == task.count - 1 && !AllFree(task)) return false;
      Take(task);
      Return(task);
      if (++task.phase == task.count) {
        Produce(task);
        task.phase = 0;
      }
      break;
    case Kind::kInputless:
    case Kind::kOrdinary:
      if (task.kind == Kind::kInputless && task.fired >= task.count) return false;
      if (!Ready(task)) return false;
      FireOrdinary(task);
      break;
    case Kind::kCollective: {
      const std::vector<int64_t>& members = rendezvous_[task.rendezvous];
      for (int64_t member : members) {
        const Task& other = tasks_[member];
        if (!Ready(other)) return false;
        if (other.in_edges.empty() && other.fired >= steps_ * pieces_)
          return false;  // as kInputless
      }
      for (int64_t member : members) {
        FireOrdinary(tasks_[member]);
        if (member != t) ++tasks_[member].fired;
      }
      break;
    }
  }
  ++task.fired;
  return true;
}

void Simulator::Run() {
  for (int64_t t = static_cast<int64_t>(tasks_.size()) - 1; t >= 0; --t) Wake(t);
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
  std::string text =
      absl::StrCat(PlanIndex::TaskLabel(index_.task(t)), " fired ", task.fired, " time(s)");
  if (task.kind == Kind::kRepeat || task.kind == Kind::kAccumulate) {
    absl::StrAppend(&text, ", ", task.phase, " of ", task.count, " into the current round");
  }
  const bool wants_inputs = !(task.kind == Kind::kRepeat && task.phase > 0) &&
                            !(task.kind == Kind::kHolder && task.fired == 0);
  for (int64_t edge : task.in_edges) {
    if (!wants_inputs || Readable(edge)) continue;
    const Register& reg = regs_[edges_[edge].reg];
    absl::StrAppend(&text, "; waits for ", PlanIndex::RegisterLabel(reg.rank, *reg.proto),
                    " (not readable: its producer ",
                    reg.producer < 0 ? "?" : PlanIndex::TaskLabel(index_.task(reg.producer)),
                    " has produced ", credits_[edges_[edge].reg].produced, " buffer(s), all read)");
  }
  for (int64_t r : task.out_registers) {
    if (Free(r)) continue;
    const Register& reg = regs_[r];
    const Credits& credits = credits_[r];
    absl::StrAppend(&text, "; waits for a free buffer of ",
                    PlanIndex::RegisterLabel(reg.rank, *reg.proto), " (not free: all ",
                    credits.count, " buffer(s) in use; buffer ", credits.released,
                    " not yet returned by");
    for (int64_t edge : reg.edges) {
      if (edges_[edge].returned > credits.released) continue;
      absl::StrAppend(&text, " ", PlanIndex::TaskLabel(index_.task(edges_[edge].task)), " (read ",
                      edges_[edge].taken, ", returned ", edges_[edge].returned, ")");
    }
    absl::StrAppend(&text, ")");
  }
  if (task.kind == Kind::kCollective) {
    for (int64_t member : rendezvous_[task.rendezvous]) {
      if (member == t || Ready(tasks_[member])) continue;
      absl::StrAppend(&text, "; its collective partner ", PlanIndex::TaskLabel(index_.task(member)),
                      " is not ready");
    }
  }
  return text;
}

PlanSimulation Simulator::Finish(int max_reported_tasks) const {
  PlanSimulation result;
  result.emitted_by_index.resize(tasks_.size());
  result.read_by_index.resize(tasks_.size());
  bool sources_unfinished = false;
  bool half_way = false;
  std::vector<int64_t> blocked;  // tasks that want to fire but cannot, in plan order
  for (int64_t t = 0; t < static_cast<int64_t>(tasks_.size()); ++t) {
    const Task& task = tasks_[t];
    result.emitted_by_index[t] = task.emitted;
    result.read_by_index[t] = task.read;
    bool wants = task.phase > 0;
    half_way = half_way || task.phase > 0;
    if (task.kind == Kind::kInputSource || task.kind == Kind::kHolder) {
      wants = task.fired < task.count;
      sources_unfinished = sources_unfinished || wants;
    } else if (task.kind != Kind::kInputless) {
      for (int64_t edge : task.in_edges) wants = wants || Readable(edge);
    }
    if (wants) blocked.push_back(t);
  }
  std::vector<std::string> unread;
  for (const Edge& edge : edges_) {
    const Register& reg = regs_[edge.reg];
    if (reg.producer >= 0 && tasks_[reg.producer].kind == Kind::kInputless) continue;
    const int64_t allowed = tasks_[edge.task].kind == Kind::kHolder ? 1 : 0;
    const int64_t produced = credits_[edge.reg].produced;
    if (produced - edge.taken > allowed) {
      unread.push_back(absl::StrCat(PlanIndex::RegisterLabel(reg.rank, *reg.proto), " read ",
                                    edge.taken, " of ", produced, " buffer(s) by ",
                                    PlanIndex::TaskLabel(index_.task(edge.task))));
    }
  }
  if (!sources_unfinished && !half_way && unread.empty()) {
    result.completed = true;
    return result;
  }
  result.report = absl::StrCat(
      sources_unfinished ? "deadlock" : "not drained", ": simulating ", steps_, " step(s) of ",
      pieces_, " piece(s) ",
      sources_unfinished
          ? "got stuck before every SOURCE finished its firings"
          : "fired every SOURCE, but tasks were left half way or buffers unread (a rate "
            "mismatch, e.g. an ACCUMULATE / REPEAT count that does not match the pieces)");
  if (!blocked.empty()) {
    absl::StrAppend(&result.report, "; ", blocked.size(), " blocked task(s), e.g.:");
    for (size_t i = 0; i < blocked.size() && static_cast<int>(i) < max_reported_tasks; ++i) {
      absl::StrAppend(&result.report, "\n  ", Describe(blocked[i]));
    }
  }
  if (!unread.empty()) {
    absl::StrAppend(&result.report, "\n  unread: ", unread.front());
    if (unread.size() > 1) absl::StrAppend(&result.report, " (and ", unread.size() - 1, " more)");
  }
  return result;
}

}  // namespace

absl::StatusOr<PlanSimulation> SimulatePlan(const PlanIndex& index, int64_t steps,
                                            int max_reported_tasks) {
  if (steps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("SimulatePlan: steps must be >= 1, got ", steps));
  }
  if (index.plan().pieces_per_step() < 1) {
    return absl::InvalidArgumentError("SimulatePlan: pieces_per_step must be >= 1");
  }
  Simulator simulator(index, steps);
  simulator.Build();
  simulator.Run();
  return simulator.Finish(max_reported_tasks);
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
