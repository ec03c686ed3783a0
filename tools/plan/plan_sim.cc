#include "tools/plan/plan_sim.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <queue>
#include <set>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "oneflow_like/compiler/plan/plan_bytes.h"
#include "oneflow_like/actor/plan_rates.h"
#include "oneflow_like/core/data_type.h"
#include "oneflow_like/core/ids.h"
#include "tools/plan/link_price.h"

namespace oneflow_like {
namespace plan_tool {
namespace {

struct Reg {
  int capacity = 1;
  int producer = -1;
  std::vector<int> consumers;       // task indices
  std::vector<int64_t> taken, returned;
  int64_t produced = 0, reserved = 0;
  int64_t bytes = 0;
  const RegisterProto* proto = nullptr;
  // Registers whose planned bytes overlap this one's (the runtime's ByteConflict): (register,
  // whether that one is earlier in task order).
  std::vector<std::pair<int, bool>> conflicts;
  int64_t Live() const {  // buffers handed to consumers and not all returned
    if (consumers.empty()) return 0;
    return produced - *std::min_element(returned.begin(), returned.end());
  }
  int64_t InUse() const {
    if (consumers.empty()) return reserved;
    return produced + reserved - *std::min_element(returned.begin(), returned.end());
  }
  bool Free() const { return InUse() < capacity; }
};

enum class Kind { kOrdinary, kInputSource, kHolder, kRepeat, kAccumulate, kCollective, kInputless };

struct Task {
  const TaskProto* proto = nullptr;
  int rank = 0;
  int stream = 0;  // index into streams
  Kind kind = Kind::kOrdinary;
  std::vector<std::pair<int, int>> inputs;  // (register, consumer slot)
  std::vector<int> outputs;
  int64_t budget = -1;
  int64_t count = 1;    // REPEAT / ACCUMULATE
  int64_t started = 0, done = 0;
  double duration = 0;
  int group = -1;       // collective group
  int64_t per_step = 1; // firings per step (this simulator's firings)
  double ready_at = 0;  // a message from another thread wakes it no earlier than this
  double cores = 1;     // cores a firing uses (cores_per_node > 0)
  double speed = 1;     // its speed with those cores, relative to the cost model's
  bool gemm = false;    // a matmul (compute bound, BLAS threads)
  bool cached = false;  // memory bound, its bytes fit in a core's L2 (SimOptions::cache_bytes)
  std::vector<double> step_done;
};

struct Stream {
  int32_t rank = 0;
  int32_t id = 0;
  std::string kind;
  bool busy = false;
  // (step of the task's next firing, order_in_stream, task): earlier steps first (as messages
  // arrive in the runtime), the compiler's static order within a step.
  std::set<std::tuple<int64_t, int64_t, int>> candidates;
  double busy_in_window = 0;
};

// Processor sharing: the CPU work running on each node progresses at 1 / (running firings).
struct Node {
  std::vector<int> running;  // firing indices of CPU work
  double last = 0;
};

// Bytes one COLLECTIVE call moves: its outputs; for a bucket (CollectiveParams.parts, outputs
// slots of the register `bucket`) the parts' slots of an ALL_REDUCE, and only the staging slot
// of a REDUCE_SCATTER (the shards are copied out of it after the call).
int64_t CollectiveCallBytes(const TaskProto& task, const RegisterProto* bucket, int64_t out_bytes) {
  const int parts = task.collective().parts_size();
  if (parts == 0 || bucket == nullptr) return out_bytes;
  const bool scatter = task.collective().kind() == CollectiveParams::REDUCE_SCATTER;
  int64_t bytes = 0;
  for (int k = scatter ? parts : 0; k < (scatter ? parts + 1 : parts) && k < task.outputs_size(); ++k) {
    const int slot = task.outputs(k).slot();
    if (slot >= 0 && slot < bucket->slots_size()) bytes += compiler::SlotBytes(bucket->slots(slot));
  }
  return bytes;
}

class Simulator {
 public:
  Simulator(const PlanProto& plan, const SimOptions& o) : plan_(plan), o_(o) {}

  absl::StatusOr<Simulation> Run() {
    const auto wall = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(Build());
    for (size_t s = 0; s < streams_.size(); ++s) TryStart(static_cast<int>(s), 0.0, -1);
    while (!events_.empty()) {
      auto [time, firing, version] = events_.top();
      events_.pop();
      now_ = time;
      if (firing == -1) {  // the driver feeds the next step
        for (int ti : input_sources_) Touch(ti);
      } else if (firing <= -2) {  // a stream's woken thread looks at its mailbox
        dirty_.insert(-2 - firing);
      } else {
        if (version != version_[firing]) continue;
        Complete(firing, time);
      }
      std::vector<int> dirty(dirty_.begin(), dirty_.end());
      dirty_.clear();
      for (int s : dirty) TryStart(s, time, firing);
    }
    RETURN_IF_ERROR(CheckFinished());
    Simulation sim;
    sim.firings = static_cast<int64_t>(firings_.size());
    const int64_t steps = o_.steps;
    sim.step_end.assign(steps, 0.0);
    for (const Task& t : tasks_) {
      for (int64_t k = 0; k < steps && k < static_cast<int64_t>(t.step_done.size()); ++k) {
        sim.step_end[k] = std::max(sim.step_end[k], t.step_done[k]);
      }
    }
    const double lo = steps >= 2 ? sim.step_end[steps - 2] : 0.0, hi = sim.step_end[steps - 1];
    sim.step_seconds = hi - lo;
    // busy time per stream inside the last step's window
    for (const Firing& f : firings_) {
      const double a = std::max(f.start, lo), b = std::min(f.end, hi);
      if (b > a) streams_[tasks_[f.task].stream].busy_in_window += b - a;
    }
    double idle = 0;
    int compute = 0;
    for (const Stream& s : streams_) {
      StreamStat st{s.rank, s.id, s.kind, s.busy_in_window, sim.step_seconds > 0 ? s.busy_in_window / sim.step_seconds : 0};
      if (s.kind == "compute" && has_compute_.count({s.rank, s.id})) {
        idle += 1.0 - st.utilization;
        ++compute;
      }
      sim.streams.push_back(st);
    }
    sim.idle_fraction = compute ? idle / compute : 0;
    // critical path: from the firing that ended last in the last step, back through causes
    int last = -1;
    for (size_t i = 0; i < firings_.size(); ++i) {
      if (firings_[i].end <= hi + 1e-15 && (last < 0 || firings_[i].end > firings_[last].end)) last = static_cast<int>(i);
    }
    std::vector<std::string> path;
    for (int f = last; f >= 0 && path.size() < 100000; f = firings_[f].cause) {
      if (firings_[f].end < lo) break;
      const Task& t = tasks_[firings_[f].task];
      path.push_back(absl::StrFormat("%s [%.1f..%.1f us]", t.proto->name(), (firings_[f].start - lo) * 1e6,
                                     (firings_[f].end - lo) * 1e6));
    }
    std::reverse(path.begin(), path.end());
    sim.critical_path = std::move(path);
    for (const Task& t : tasks_) {
      sim.task_names.push_back({t.rank, t.proto->name()});
      sim.task_streams.push_back(streams_[t.stream].id);
    }
    if (o_.record_trace) sim.trace = firings_;
    sim.simulator_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
    return sim;
  }

 private:
  absl::Status Build() {
    ASSIGN_OR_RETURN(auto rates, actor::FiringsPerStep(plan_));
    const int64_t pieces = std::max<int64_t>(1, plan_.pieces_per_step());
    std::map<std::string, double> op_seconds;
    for (const OpSbpDecisionProto& d : plan_.sbp_decisions()) {
      if (d.chosen() >= 0 && d.chosen() < d.candidates_size()) op_seconds[d.op_name()] = d.candidates(d.chosen()).compute_seconds();
    }
    for (const auto& [op, seconds] : o_.op_compute_seconds) op_seconds[op] = seconds;
    // producing registers
    absl::flat_hash_map<int64_t, int> reg_of;  // register id -> index
    absl::flat_hash_map<int64_t, int> task_of;
    std::map<std::pair<int32_t, int32_t>, int> stream_of;
    for (const RankPlanProto& rp : plan_.rank_plans()) {
      for (const MemoryBlockProto& block : rp.memory_blocks()) node_block_bytes_[NodeOf(rp.rank())] += block.size_bytes();
      std::map<std::string, TensorBindingProto::Kind> bindings;
      for (const TensorBindingProto& b : rp.bindings()) bindings[b.tensor_name()] = b.kind();
      for (const RegisterProto& r : rp.registers()) {
        if (r.has_remote()) continue;
        Reg reg;
        reg.capacity = std::max(1, r.count());
        for (const TensorDescProto& s : r.slots()) reg.bytes += compiler::SlotBytes(s);
        reg.proto = &r;
        reg_of[r.id()] = static_cast<int>(regs_.size());
        if (r.has_memory()) memory_.push_back({&r, rp.rank(), static_cast<int>(regs_.size())});
        regs_.push_back(std::move(reg));
      }
      for (const TaskProto& t : rp.tasks()) {
        Task task;
        task.proto = &t;
        task.rank = rp.rank();
        auto key = std::make_pair(rp.rank(), t.stream_id());
        auto it = stream_of.find(key);
        if (it == stream_of.end()) {
          Stream s;
          s.rank = rp.rank();
          s.id = t.stream_id();
          s.kind = t.stream_kind() == STREAM_COMPUTE ? "compute" : (t.stream_kind() == STREAM_COPY ? "copy" : "comm");
          it = stream_of.emplace(key, static_cast<int>(streams_.size())).first;
          streams_.push_back(std::move(s));
        }
        task.stream = it->second;
        if (t.type() == TaskProto::COMPUTE) has_compute_.insert(key);
        auto rate = rates.find(t.id());
        task.per_step = rate == rates.end() ? pieces : std::max<int64_t>(1, rate->second);
        switch (t.type()) {
          case TaskProto::SOURCE: {
            auto b = bindings.find(t.io().tensor_name());
            task.kind = b != bindings.end() && b->second == TensorBindingProto::VARIABLE ? Kind::kHolder : Kind::kInputSource;
            break;
          }
          case TaskProto::REPEAT: task.kind = Kind::kRepeat; task.count = std::max<int64_t>(1, t.count().count()); break;
          case TaskProto::ACCUMULATE:
            task.kind = Kind::kAccumulate;
            task.count = std::max<int64_t>(1, t.count().count());
            task.per_step *= task.count;  // this simulator fires once per input
            break;
          case TaskProto::COLLECTIVE: task.kind = Kind::kCollective; break;
          default: task.kind = t.consumed_register_ids_size() == 0 ? Kind::kInputless : Kind::kOrdinary;
        }
        task.budget = task.per_step * o_.steps;
        task_of[t.id()] = static_cast<int>(tasks_.size());
        tasks_.push_back(std::move(task));
      }
    }
    for (size_t i = 0; i < tasks_.size(); ++i) {
      Task& t = tasks_[i];
      for (int64_t id : t.proto->produced_register_ids()) {
        auto r = reg_of.find(id);
        if (r == reg_of.end()) return absl::InvalidArgumentError(absl::StrCat(t.proto->name(), ": produced register ", id, " unknown"));
        t.outputs.push_back(r->second);
        regs_[r->second].producer = static_cast<int>(i);
      }
    }
    for (size_t i = 0; i < tasks_.size(); ++i) {
      Task& t = tasks_[i];
      for (int64_t id : t.proto->consumed_register_ids()) {
        auto r = reg_of.find(id);
        if (r == reg_of.end()) return absl::InvalidArgumentError(absl::StrCat(t.proto->name(), ": consumed register ", id, " unknown"));
        Reg& reg = regs_[r->second];
        t.inputs.push_back({r->second, static_cast<int>(reg.consumers.size())});
        reg.consumers.push_back(static_cast<int>(i));
        reg.taken.push_back(0);
        reg.returned.push_back(0);
      }
    }
    if (o_.byte_sharing) FindByteConflicts();
    // collectives: one group per (global order, ranks)
    std::map<std::pair<int64_t, std::vector<int32_t>>, int> groups;
    for (size_t i = 0; i < tasks_.size(); ++i) {
      Task& t = tasks_[i];
      if (t.kind != Kind::kCollective) continue;
      const CollectiveParams& c = t.proto->collective();
      auto key = std::make_pair(c.global_order(), std::vector<int32_t>(c.ranks().begin(), c.ranks().end()));
      auto it = groups.find(key);
      if (it == groups.end()) {
        it = groups.emplace(key, static_cast<int>(groups_.size())).first;
        groups_.emplace_back();
      }
      t.group = it->second;
      groups_[t.group].push_back(static_cast<int>(i));
    }
    for (size_t i = 0; i < tasks_.size(); ++i) {
      if (tasks_[i].kind == Kind::kInputSource) input_sources_.push_back(static_cast<int>(i));
      if (tasks_[i].kind != Kind::kInputless) ++counted_tasks_;
      tasks_[i].duration = Duration(tasks_[i], op_seconds);
      const TaskProto& proto = *tasks_[i].proto;
      if (o_.cores_per_node > 0 && proto.type() == TaskProto::COMPUTE &&
          proto.compute().op_type().rfind("matmul", 0) == 0) {
        const int32_t threads = std::max(1, std::min(o_.gemm_threads, o_.cores_per_node));
        tasks_[i].gemm = true;
        tasks_[i].cores = threads;
        tasks_[i].speed = static_cast<double>(threads) / std::max(1, o_.profile_gemm_threads);
      }
      MarkCached(&tasks_[i]);
      streams_[tasks_[i].stream].candidates.insert(Key(static_cast<int>(i)));
      tasks_[i].step_done.reserve(o_.steps);
    }
    return absl::OkStatus();
  }

  // SimOptions::cache_bytes: a memory-bound CPU firing whose bytes fit in a core's L2, on a node
  // whose working set fits in its last-level cache (llc_bytes), shares no memory bandwidth
  // (Rate); its duration is unchanged.
  void MarkCached(Task* t) const {
    if (o_.cache_bytes <= 0 || t->gemm) return;
    const TaskProto::Type type = t->proto->type();
    if (type == TaskProto::COMPUTE && t->proto->compute().op_type().rfind("matmul", 0) == 0) return;
    const bool copy_transfer = type == TaskProto::TRANSFER && o_.in_process;
    if (type != TaskProto::COMPUTE && type != TaskProto::BOXING_SLICE && type != TaskProto::BOXING_CONCAT &&
        type != TaskProto::BOXING_ADD && type != TaskProto::ACCUMULATE && !copy_transfer) {
      return;
    }
    const std::string& device = t->proto->device().type();
    if (!device.empty() && device != "cpu") return;
    if (o_.llc_bytes > 0) {
      auto node = node_block_bytes_.find(NodeOf(t->rank));
      if (node != node_block_bytes_.end() && node->second > o_.llc_bytes) return;
    }
    int64_t bytes = 0;
    for (int r : t->outputs) bytes += regs_[r].bytes;
    for (const auto& [r, slot] : t->inputs) bytes += regs_[r].bytes;
    t->cached = bytes <= o_.cache_bytes;
  }

  // As the runtime (Runtime::FindByteConflicts): registers of one rank whose planned byte
  // ranges overlap alternate in task order of their producers. Update registers consumed by a
  // variable holder are written in place into the variables (inplace_updates.h) and share
  // nothing.
  void FindByteConflicts() {
    struct Interval {
      int32_t rank;
      int64_t block, begin, end;
      int reg;
    };
    std::vector<Interval> intervals;
    for (const auto& [proto, rank, reg] : memory_) {
      const Reg& r = regs_[reg];
      if (r.producer < 0) continue;
      bool update = false;
      for (int c : r.consumers) update |= tasks_[c].kind == Kind::kHolder;
      if (update) continue;
      const MemoryLocationProto& mem = proto->memory();
      int64_t span = 0;
      for (int s = 0; s < proto->slots_size() && s < mem.slot_offsets_size(); ++s) {
        span = std::max(span, mem.slot_offsets(s) + compiler::SlotBytes(proto->slots(s)));
      }
      if (span == 0) continue;
      intervals.push_back({rank, mem.block_id(), mem.offset(), mem.offset() + (r.capacity - 1) * mem.buffer_bytes() + span, reg});
    }
    std::sort(intervals.begin(), intervals.end(), [](const Interval& a, const Interval& b) {
      return std::tie(a.rank, a.block, a.begin, a.reg) < std::tie(b.rank, b.block, b.begin, b.reg);
    });
    for (size_t i = 0; i < intervals.size(); ++i) {
      for (size_t j = i + 1; j < intervals.size() && intervals[j].rank == intervals[i].rank &&
                             intervals[j].block == intervals[i].block && intervals[j].begin < intervals[i].end;
           ++j) {
        const int a = intervals[i].reg, b = intervals[j].reg;
        const int pa = regs_[a].producer, pb = regs_[b].producer;
        if (pa == pb) continue;
        regs_[a].conflicts.push_back({b, pb < pa});
        regs_[b].conflicts.push_back({a, pa < pb});
      }
    }
  }
  // Runtime Actor::BytesAvailable: the earlier register is written only when the later one has
  // caught up and is idle; the later one only after the earlier one was written and is idle.
  bool BytesAvailable(const Reg& r) const {
    for (const auto& [o, other_is_earlier] : r.conflicts) {
      const Reg& other = regs_[o];
      if (other.reserved > 0 || other.Live() != 0) return false;
      if (other_is_earlier ? other.produced <= r.produced : other.produced != r.produced) return false;
    }
    return true;
  }
  void WakeConflicts(const Reg& r, int from, double now) {
    for (const auto& [o, earlier] : r.conflicts) Message(regs_[o].producer, from, now);
  }

  double Duration(const Task& t, const std::map<std::string, double>& op_seconds) const {
    const compiler::CostConfig& c = o_.cost;
    int64_t out_bytes = 0, in_bytes = 0;
    for (int r : t.outputs) out_bytes += regs_[r].bytes;
    for (const auto& [r, slot] : t.inputs) in_bytes += regs_[r].bytes;
    switch (t.proto->type()) {
      case TaskProto::COMPUTE: {
        // the SBP decision prices an op per step (seconds x firings per step): one firing's share
        const double per_step = static_cast<double>(std::max<int64_t>(1, t.per_step));
        auto it = op_seconds.find(t.proto->op_name());
        if (it != op_seconds.end()) return it->second / per_step;
        // recompute clones and other ops without a decision: the op they copy, else memory-bound
        std::string base = t.proto->op_name();
        const size_t slash = base.rfind("/recompute");
        if (slash != std::string::npos) {
          auto b = op_seconds.find(base.substr(0, slash));
          if (b != op_seconds.end()) return b->second / per_step;
        }
        return c.task_overhead_seconds + compiler::LocalCopySeconds(static_cast<double>(in_bytes + out_bytes), c);
      }
      case TaskProto::TRANSFER: {
        if (o_.free_links) return c.task_overhead_seconds;
        // A register on a device travels through the host (the runtime stages it: a device-to-host
        // copy on the sender, a host-to-device copy into this TRANSFER's device register).
        const std::string& device = t.proto->device().type();
        const double staging =
            device.empty() || device == "cpu" ? 0.0 : 2.0 * compiler::CopySeconds(out_bytes, c);
        // Every transfer is two messages between the ranks: the register's bytes (kReady) and,
        // once the consumer is done with them, the buffer's return to the producer (kReturned, no
        // payload), each sent by one rank's thread and received by the other's.
        // In one process a transfer is a copy between the ranks' buffers (the loopback hub): the
        // firing's overhead, the bytes at the machine's memory bandwidth and, with
        // return_messages, the two messages at a firing's overhead each (the runtime's cost of
        // one message between threads, as olplan calibrate's chain measures it).
        if (o_.in_process) {
          const double messages = o_.return_messages ? 2.0 * c.task_overhead_seconds : 0.0;
          return staging + c.task_overhead_seconds + messages +
                 compiler::LocalCopySeconds(static_cast<double>(out_bytes), c);
        }
        // Between processes: the link's price of the bytes and, with return_messages, the return
        // message (SimOptions::return_message_seconds).
        const int32_t peer = t.proto->transfer().peer_rank();
        const compiler::LinkClass link = compiler::Classify(Rank(peer), Rank(t.rank), c);
        double returned = 0;
        if (o_.return_messages) {
          returned = link == compiler::LinkClass::kSameNode && o_.return_message_seconds > 0 ? o_.return_message_seconds
                                                                                             : c.link(link).alpha_seconds;
        }
        if (link == compiler::LinkClass::kSameNode && o_.same_node_small_bytes_per_second > 0) {
          return staging + SameNodeMessages().Seconds(out_bytes) + returned;
        }
        return staging + compiler::TransferSeconds(out_bytes, link, c) + returned;
      }
      case TaskProto::COLLECTIVE: {
        if (o_.free_links) return c.task_overhead_seconds;
        const int n = std::max(1, t.proto->collective().ranks_size());
        const auto& link = c.link(compiler::LinkClass::kSameNode);
        const RegisterProto* bucket = nullptr;
        for (int r : t.outputs) {
          if (t.proto->outputs_size() > 0 && regs_[r].proto->id() == t.proto->outputs(0).register_id()) bucket = regs_[r].proto;
        }
        const int64_t bytes = CollectiveCallBytes(*t.proto, bucket, out_bytes);
        return 2.0 * (n - 1) * (link.alpha_seconds + static_cast<double>(bytes) / n * link.beta_seconds_per_byte);
      }
      case TaskProto::BOXING_SLICE:
      case TaskProto::BOXING_CONCAT:
      case TaskProto::BOXING_ADD:
      case TaskProto::ACCUMULATE:
        return c.task_overhead_seconds + compiler::LocalCopySeconds(static_cast<double>(in_bytes + out_bytes), c);
      case TaskProto::COPY:  // host <-> device on its copy stream (PCIe; a memcpy on CPU profiles)
        return c.task_overhead_seconds + compiler::CopySeconds(out_bytes, c);
      case TaskProto::SOURCE:
        return t.kind == Kind::kInputSource
                   ? c.task_overhead_seconds + compiler::LocalCopySeconds(static_cast<double>(out_bytes), c)
                   : c.task_overhead_seconds;
      default:
        return c.task_overhead_seconds;
    }
  }

  // The same-node link priced by message size (SimOptions::same_node_small_bytes_per_second).
  MessagePrice SameNodeMessages() const {
    const compiler::LinkParams& link = o_.cost.link(compiler::LinkClass::kSameNode);
    MessagePrice price;
    price.alpha_seconds = link.alpha_seconds;
    price.large_bytes_per_second = link.beta_seconds_per_byte > 0 ? 1.0 / link.beta_seconds_per_byte : 0.0;
    price.large_message_bytes = o_.same_node_large_message_bytes;
    price.small_bytes_per_second = o_.same_node_small_bytes_per_second;
    price.small_message_bytes = o_.same_node_small_message_bytes;
    return price;
  }

  // Whether the task's next firing may start (its stream aside).
  bool Enabled(const Task& t) const {
    if (t.budget >= 0 && t.started >= t.budget) return false;
    if (t.kind == Kind::kInputSource) {  // the driver feeds step s once step s-1 returned
      const int64_t step = t.started / std::max<int64_t>(1, t.per_step);
      if (step > 0 && (step >= static_cast<int64_t>(feed_time_.size()) || feed_time_[step] > now_ + 1e-15)) return false;
    }
    const int64_t j = t.started;
    bool need_inputs = true, need_outputs = true;
    switch (t.kind) {
      case Kind::kInputSource: need_inputs = false; break;
      case Kind::kHolder: need_inputs = j > 0; break;
      case Kind::kRepeat: need_inputs = j % t.count == 0; break;
      case Kind::kAccumulate: need_outputs = j % t.count == t.count - 1; break;
      default: break;
    }
    if (need_inputs) {
      for (const auto& [r, slot] : t.inputs) {
        if (regs_[r].produced - regs_[r].taken[slot] <= 0) return false;
      }
    }
    if (need_outputs) {
      for (int r : t.outputs) {
        if (!regs_[r].Free() || !BytesAvailable(regs_[r])) return false;
      }
    }
    return true;
  }

  void Start(int ti, double now, int cause) {
    Task& t = tasks_[ti];
    const int64_t j = t.started++;
    bool take = true, reserve = true;
    switch (t.kind) {
      case Kind::kInputSource: take = false; break;
      case Kind::kHolder: take = j > 0; break;
      case Kind::kRepeat: take = j % t.count == 0; break;
      case Kind::kAccumulate: reserve = j % t.count == t.count - 1; break;
      default: break;
    }
    if (take) for (const auto& [r, slot] : t.inputs) ++regs_[r].taken[slot];
    if (reserve) for (int r : t.outputs) ++regs_[r].reserved;
    streams_[t.stream].busy = true;
    Firing f{ti, now, now + t.duration, cause};
    const int fi = static_cast<int>(firings_.size());
    firings_.push_back(f);
    firing_flags_.push_back({take, reserve});
    remaining_.push_back(t.duration);
    version_.push_back(0);
    const bool cpu = o_.processor_sharing && IsCpuWork(t);
    node_of_.push_back(cpu ? NodeOf(t.rank) : -1);
    if (!cpu) {
      events_.push({f.end, fi, 0});
      return;
    }
    Node& node = nodes_[node_of_[fi]];
    Advance(&node, now);
    node.running.push_back(fi);
    Reschedule(node, now);
  }

  static bool IsCpuWork(const Task& t) {
    return t.proto->type() != TaskProto::COLLECTIVE;
  }
  int32_t NodeOf(int32_t rank) const { return rank / std::max(1, o_.cost.ranks_per_node); }

  // The speed of running firing `fi` on `node` now, relative to the cost model's seconds. With
  // cores (cores_per_node > 0): the node's cores are shared by demand (a matmul asks for its
  // BLAS threads, any other firing for one thread), and the firings that are not matmuls (memory
  // bound: copies, element-wise, reductions) also share the node's memory bandwidth (two
  // threads copying 128 MiB buffers here get 1.1x one thread's rate), unless their bytes fit in
  // a core's L2 (MarkCached).
  double Rate(const Node& node, int fi) const {
    if (node.running.empty()) return 0.0;
    if (o_.cores_per_node <= 0) return 1.0 / static_cast<double>(node.running.size());
    double demand = 0, memory_bound = 0;
    for (int r : node.running) {
      const Task& t = tasks_[firings_[r].task];
      demand += t.cores;
      memory_bound += t.gemm || t.cached ? 0 : 1;
    }
    const double core_share = std::min(1.0, o_.cores_per_node / demand);
    const Task& t = tasks_[firings_[fi].task];
    if (t.gemm) return t.speed * core_share;
    if (t.cached) return core_share;
    return std::min(core_share, 1.0 / memory_bound);
  }
  // Work done on `node` since its last change, at the sharing rate of that interval.
  void Advance(Node* node, double now) {
    for (int fi : node->running) remaining_[fi] = std::max(0.0, remaining_[fi] - (now - node->last) * Rate(*node, fi));
    node->last = now;
  }
  void Reschedule(const Node& node, double now) {
    for (int fi : node.running) {
      ++version_[fi];
      firings_[fi].end = now + remaining_[fi] / Rate(node, fi);
      events_.push({firings_[fi].end, fi, version_[fi]});
    }
  }

  std::tuple<int64_t, int64_t, int> Key(int ti) const {
    const Task& t = tasks_[ti];
    return {t.started / std::max<int64_t>(1, t.per_step), t.proto->order_in_stream(), ti};
  }

  void Touch(int ti) {
    const Task& t = tasks_[ti];
    streams_[t.stream].candidates.insert(Key(ti));
    dirty_.insert(t.stream);
  }
  // A register message to task `ti` from a firing on stream `from`: another thread must be woken.
  void Message(int ti, int from, double now) {
    Task& t = tasks_[ti];
    if (t.stream != from && o_.wakeup_seconds > 0) t.ready_at = std::max(t.ready_at, now + o_.wakeup_seconds);
    Touch(ti);
  }

  void Complete(int fi, double now) {
    if (node_of_[fi] >= 0) {
      Node& node = nodes_[node_of_[fi]];
      Advance(&node, now);
      node.running.erase(std::find(node.running.begin(), node.running.end(), fi));
      firings_[fi].end = now;
      Reschedule(node, now);
    }
    const Firing& f = firings_[fi];
    Task& t = tasks_[f.task];
    const auto [took, reserved] = firing_flags_[fi];
    const int64_t j = t.done++;
    if (reserved) {
      for (int r : t.outputs) {
        --regs_[r].reserved;
        ++regs_[r].produced;
        for (int c : regs_[r].consumers) Message(c, t.stream, now);
        WakeConflicts(regs_[r], t.stream, now);
      }
    }
    // inputs go back: ordinary tasks at once; REPEAT after its last emission of a group
    bool give_back = took;
    if (t.kind == Kind::kRepeat) give_back = j % t.count == t.count - 1;
    if (give_back) {
      for (const auto& [r, slot] : t.inputs) {
        ++regs_[r].returned[slot];
        if (regs_[r].producer >= 0) Message(regs_[r].producer, t.stream, now);
        if (regs_[r].Live() == 0) WakeConflicts(regs_[r], t.stream, now);
      }
    }
    if ((j + 1) % t.per_step == 0) {
      t.step_done.push_back(now);
      const size_t k = t.step_done.size() - 1;
      if (t.kind != Kind::kInputless) {
        if (tasks_done_.size() <= k) tasks_done_.resize(k + 1, 0);
        if (++tasks_done_[k] == counted_tasks_) {  // every task finished step k: the driver returns
          if (feed_time_.size() <= k + 1) feed_time_.resize(k + 2, 0.0);
          feed_time_[k + 1] = now + o_.step_overhead_seconds;
          events_.push({feed_time_[k + 1], -1, 0});
        }
      }
    }
    streams_[t.stream].busy = false;
    Touch(f.task);
  }

  void TryStart(int si, double now, int cause) {
    Stream& s = streams_[si];
    if (s.busy) return;
    for (auto it = s.candidates.begin(); it != s.candidates.end();) {
      const int ti = std::get<2>(*it);
      const Task& t = tasks_[ti];
      if (*it != Key(ti)) {  // stale: the task fired since; its current key sorts later
        auto key = Key(ti);
        it = s.candidates.erase(it);
        s.candidates.insert(key);
        continue;
      }
      if (!Enabled(t)) {
        it = s.candidates.erase(it);
        continue;
      }
      if (t.ready_at > now + 1e-15) {  // enabled, but its thread is still waking up
        events_.push({t.ready_at, -2 - si, 0});
        ++it;
        continue;
      }
      if (t.group >= 0) {
        bool all = true;
        for (int m : groups_[t.group]) {
          all &= Enabled(tasks_[m]) && (m == ti || !streams_[tasks_[m].stream].busy);
        }
        if (!all) {
          ++it;
          continue;
        }
        for (int m : groups_[t.group]) Start(m, now, cause);
        return;
      }
      Start(ti, now, cause);
      return;
    }
  }

  absl::Status CheckFinished() const {
    std::vector<std::string> blocked;
    for (const Task& t : tasks_) {
      if (t.budget >= 0 && t.done < t.budget && t.kind != Kind::kInputless) {
        if (blocked.size() < 4) blocked.push_back(absl::StrCat(t.proto->name(), " (rank ", t.rank, ", ", t.done, " of ", t.budget, " firings)"));
      }
    }
    if (!blocked.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("the simulation stalled before ", o_.steps,
                                                     " steps (a deadlock?); blocked: ", absl::StrJoin(blocked, "; ")));
    }
    return absl::OkStatus();
  }

  const PlanProto& plan_;
  SimOptions o_;
  std::vector<Reg> regs_;
  std::vector<std::tuple<const RegisterProto*, int32_t, int>> memory_;  // planned registers: (proto, rank, reg)
  std::vector<Task> tasks_;
  std::vector<Stream> streams_;
  std::vector<std::vector<int>> groups_;
  std::set<std::pair<int32_t, int32_t>> has_compute_;
  std::vector<Firing> firings_;
  std::vector<std::pair<bool, bool>> firing_flags_;
  std::set<int> dirty_;
  // (end time, firing, version): a firing whose end moved (processor sharing) leaves stale events
  std::priority_queue<std::tuple<double, int, int64_t>, std::vector<std::tuple<double, int, int64_t>>, std::greater<>> events_;
  std::map<int32_t, Node> nodes_;
  std::map<int32_t, int64_t> node_block_bytes_;  // per node: its ranks' memory blocks (the working set)
  std::vector<double> remaining_;   // per firing: CPU seconds left at full machine speed
  std::vector<int64_t> version_;    // per firing
  std::vector<int32_t> node_of_;    // per firing: -1 when not CPU work
  double now_ = 0;
  std::vector<int> input_sources_;
  int64_t counted_tasks_ = 0;        // tasks whose step ends count (all but input-less ones)
  std::vector<int64_t> tasks_done_;  // per step: tasks that finished it
  std::vector<double> feed_time_;    // per step: when the driver feeds it (step 0: at once)
};

}  // namespace

std::map<std::string, double> OpSecondsFor(const PlanProto& plan, const PlanProto& priced) {
  auto signature = [](const SbpCandidateProto& c) {
    std::string key;
    for (const NdSbpProto& p : c.inputs()) absl::StrAppend(&key, p.ShortDebugString(), ";");
    absl::StrAppend(&key, "->");
    for (const NdSbpProto& p : c.outputs()) absl::StrAppend(&key, p.ShortDebugString(), ";");
    return key;
  };
  std::map<std::string, std::map<std::string, double>> by_op;
  for (const OpSbpDecisionProto& d : priced.sbp_decisions()) {
    for (const SbpCandidateProto& c : d.candidates()) by_op[d.op_name()][signature(c)] = c.compute_seconds();
  }
  std::map<std::string, double> out;
  for (const OpSbpDecisionProto& d : plan.sbp_decisions()) {
    if (d.chosen() < 0 || d.chosen() >= d.candidates_size()) continue;
    auto op = by_op.find(d.op_name());
    if (op == by_op.end()) continue;
    auto it = op->second.find(signature(d.candidates(d.chosen())));
    if (it != op->second.end()) out[d.op_name()] = it->second;
  }
  return out;
}

absl::StatusOr<Simulation> SimulatePlanTime(const PlanProto& plan, const SimOptions& options) {
  if (options.steps < 1) return absl::InvalidArgumentError("simulate: --steps must be at least 1");
  Simulator sim(plan, options);
  return sim.Run();
}

std::string Simulation::TraceJson(int32_t rank) const {
  std::vector<std::string> events;
  for (const Firing& f : trace) {
    if (task_names[f.task].first != rank) continue;
    events.push_back(absl::StrFormat("{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f}",
                                     absl::StrReplaceAll(task_names[f.task].second, {{"\"", "'"}}), rank,
                                     task_streams[f.task], f.start * 1e6, (f.end - f.start) * 1e6));
  }
  return absl::StrCat("{\"traceEvents\":[", absl::StrJoin(events, ",\n"), "]}\n");
}

std::string SimulationText(const Simulation& sim, int max_streams) {
  std::string out = absl::StrFormat("simulated step time: %.3f ms (step %d of %d; steps end at", sim.step_seconds * 1e3,
                                    sim.step_end.size(), sim.step_end.size());
  for (double t : sim.step_end) absl::StrAppendFormat(&out, " %.3f", t * 1e3);
  absl::StrAppendFormat(&out, " ms)\n  compute streams idle %.1f%% of the step (pipeline bubble and waits)\n", sim.idle_fraction * 100);
  std::vector<StreamStat> streams = sim.streams;
  std::sort(streams.begin(), streams.end(), [](const StreamStat& a, const StreamStat& b) { return a.utilization > b.utilization; });
  absl::StrAppend(&out, "  busiest streams:");
  for (int i = 0; i < max_streams && i < static_cast<int>(streams.size()); ++i) {
    absl::StrAppendFormat(&out, " r%d/%s%d %.0f%%;", streams[i].rank, streams[i].kind, streams[i].stream, streams[i].utilization * 100);
  }
  absl::StrAppendFormat(&out, "\n  critical path of the last step (%d firings):\n", sim.critical_path.size());
  const size_t n = sim.critical_path.size();
  for (size_t i = 0; i < n; ++i) {
    if (n > 12 && i == 6) {
      absl::StrAppendFormat(&out, "    ... %d more ...\n", n - 12);
      i = n - 6;
    }
    absl::StrAppend(&out, "    ", sim.critical_path[i], "\n");
  }
  absl::StrAppendFormat(&out, "  %d firings simulated in %.2f s (%.0f firings/s)\n", sim.firings, sim.simulator_seconds,
                        sim.simulator_seconds > 0 ? sim.firings / sim.simulator_seconds : 0.0);
  return out;
}

std::string SimulationJson(const Simulation& sim) {
  std::vector<std::string> ends, streams, path;
  for (double t : sim.step_end) ends.push_back(absl::StrFormat("%.9g", t));
  for (const StreamStat& s : sim.streams) {
    streams.push_back(absl::StrFormat("{\"rank\":%d,\"stream\":%d,\"kind\":\"%s\",\"busy_seconds\":%.9g,\"utilization\":%.6f}",
                                      s.rank, s.stream, s.kind, s.busy_seconds, s.utilization));
  }
  for (const std::string& p : sim.critical_path) path.push_back(absl::StrCat("\"", absl::StrReplaceAll(p, {{"\"", "'"}}), "\""));
  return absl::StrFormat(
      "{\"step_seconds\":%.9g,\"step_end\":[%s],\"idle_fraction\":%.6f,\"firings\":%d,\"simulator_seconds\":%.6f,"
      "\"streams\":[%s],\"critical_path\":[%s]}\n",
      sim.step_seconds, absl::StrJoin(ends, ","), sim.idle_fraction, sim.firings, sim.simulator_seconds,
      absl::StrJoin(streams, ","), absl::StrJoin(path, ","));
}

}  // namespace plan_tool
}  // namespace oneflow_like
