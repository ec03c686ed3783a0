// Runtime::Build: validates one rank's plan and turns it into memory, registers and actors.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/actor/inplace_updates.h"
#include "oneflow_like/actor/plan_rates.h"
#include "oneflow_like/actor/runtime.h"
#include "oneflow_like/actor/stream_ordered.h"
#include "oneflow_like/core/attr_proto.h"

namespace oneflow_like {
namespace actor {
namespace {

std::string TaskLabel(const TaskProto& task) { return absl::StrCat("task '", task.name(), "' (id ", task.id(), ")"); }
std::string RegisterLabel(const RegisterProto& reg) {
  return absl::StrCat("register '", reg.name(), "' (id ", reg.id(), ")");
}

int64_t RoundUp(int64_t bytes) {
  const int64_t a = static_cast<int64_t>(Allocator::kAlignment);
  return (bytes + a - 1) / a * a;
}

}  // namespace

absl::Status Runtime::Build(const PlanProto& plan, const RankPlanProto& rank_plan) {
  pieces_per_step_ = std::max<int64_t>(1, plan.pieces_per_step());
  if (env_.transport != nullptr && env_.transport->world_size() != plan.world_size()) {
    return absl::InvalidArgumentError(absl::StrCat("the transport connects ", env_.transport->world_size(),
                                                   " ranks but the plan's world_size is ", plan.world_size()));
  }
  ASSIGN_OR_RETURN(auto rates, FiringsPerStep(plan));
  std::map<int64_t, std::string> task_names;  // every task of the plan, for reports
  for (const RankPlanProto& rp : plan.rank_plans()) {
    for (const TaskProto& t : rp.tasks())
      task_names[t.id()] = absl::StrCat("'", t.name(), "' (task ", t.id(), ") on rank ", rp.rank());
  }
  auto task_name = [&](int64_t id) {
    auto it = task_names.find(id);
    return it == task_names.end() ? absl::StrCat("unknown task ", id) : it->second;
  };

  // Memory blocks. A device's planned blocks must fit what it has free, checked before any is
  // allocated (the plan knows its peak: olplan memory --device-memory finds levers).
  RETURN_IF_ERROR(CheckDeviceMemory(rank_plan));
  for (const MemoryBlockProto& block : rank_plan.memory_blocks()) {
    if (block.size_bytes() < 0 || block_by_id_.contains(block.id())) {
      return absl::InvalidArgumentError(
          absl::StrCat("memory block ", block.id(), " is duplicated or has a negative size"));
    }
    if (block.device().type() != "cpu") {  // device memory: the transport never reads it
      ASSIGN_OR_RETURN(block_by_id_[block.id()], AllocateDeviceBlock(block));
      device_of_block_[block.id()] = block.device().index();
      continue;
    }
    char* data = AllocateBytes(block.size_bytes());
    if (data == nullptr) return absl::ResourceExhaustedError(absl::StrCat("cannot allocate memory block ", block.id()));
    std::memset(data, 0, block.size_bytes());
    block_by_id_[block.id()] = data;
    if (env_.transport != nullptr) {  // RDMA transports let peers read registers from here
      absl::Status registered = env_.transport->RegisterMemory(data, static_cast<size_t>(block.size_bytes()));
      if (!registered.ok()) {
        return absl::Status(registered.code(), absl::StrCat("registering memory block ", block.id(), " (",
                                                            block.size_bytes(), " bytes) with the transport: ",
                                                            registered.message()));
      }
      registered_.push_back(Block{data, static_cast<size_t>(block.size_bytes())});
    }
  }
  std::map<int64_t, int64_t> block_size;
  for (const MemoryBlockProto& block : rank_plan.memory_blocks()) block_size[block.id()] = block.size_bytes();

  // Registers: local ones get a layout over planned memory, remote ones a mirror with staging.
  std::map<int64_t, const RegisterProto*> register_protos;
  for (const RegisterProto& reg : rank_plan.registers()) {
    if (!register_protos.emplace(reg.id(), &reg).second) {
      return absl::InvalidArgumentError(absl::StrCat(RegisterLabel(reg), " appears twice in the rank plan"));
    }
    if (reg.count() < 1)
      return absl::InvalidArgumentError(
          absl::StrCat(RegisterLabel(reg), " has count ", reg.count(), " (>= 1 required)"));
    auto layout = std::make_unique<RegisterLayout>();
    layout->id = RegisterId(reg.id());
    layout->name = reg.name();
    layout->count = reg.count();
    for (int s = 0; s < reg.slots_size(); ++s) {
      absl::StatusOr<TensorDesc> desc = TensorDescFromProto(reg.slots(s));
      if (!desc.ok())
        return absl::InvalidArgumentError(
            absl::StrCat(RegisterLabel(reg), ", slot ", s, ": ", desc.status().message()));
      layout->slots.push_back(*desc);
    }
    if (reg.has_remote()) {
      if (reg.remote().rank() == rank_.value() || reg.remote().rank() < 0 || reg.remote().rank() >= plan.world_size()) {
        return absl::InvalidArgumentError(
            absl::StrCat(RegisterLabel(reg), " mirrors a register of rank ", reg.remote().rank(),
                         ", which is not another rank of a world of ", plan.world_size()));
      }
      if (env_.transport == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(RegisterLabel(reg), " comes from rank ", reg.remote().rank(),
                                                       " but RuntimeEnv.transport is null"));
      }
      int64_t stride = 0;
      for (const TensorDesc& d : layout->slots) {
        layout->slot_offsets.push_back(stride);
        stride += RoundUp(d.byte_size());
      }
      char* staging = AllocateBytes(std::max<int64_t>(1, stride * reg.count()));
      for (int b = 0; b < reg.count(); ++b) layout->buffers.push_back(staging + b * stride);
      auto mirror = std::make_unique<MirrorRegister>();
      mirror->layout = std::move(*layout);
      mirror->producer_rank = Rank(reg.remote().rank());
      mirror->producer_task = TaskId(reg.producer().task_id());
      mirror->holders.reset(new std::atomic<int32_t>[reg.count()]);
      for (int b = 0; b < reg.count(); ++b) mirror->holders[b].store(0);
      mirror_by_id_[reg.id()] = mirror.get();
      mirrors_.push_back(std::move(mirror));
      continue;
    }
    if (reg.producer().rank() != rank_.value()) {
      return absl::InvalidArgumentError(absl::StrCat(RegisterLabel(reg), " is listed on rank ", rank_.value(),
                                                     " without `remote`, but its producer is on rank ",
                                                     reg.producer().rank()));
    }
    if (reg.has_memory()) {
      const MemoryLocationProto& mem = reg.memory();
      auto block = block_by_id_.find(mem.block_id());
      if (block == block_by_id_.end()) {
        return absl::InvalidArgumentError(absl::StrCat(RegisterLabel(reg), " lives in memory block ", mem.block_id(),
                                                       ", which rank ", rank_.value(), "'s plan does not allocate"));
      }
      if (mem.slot_offsets_size() != reg.slots_size()) {
        return absl::InvalidArgumentError(absl::StrCat(RegisterLabel(reg), " has ", reg.slots_size(), " slots but ",
                                                       mem.slot_offsets_size(), " slot offsets"));
      }
      for (int s = 0; s < reg.slots_size(); ++s) {
        const int64_t end =
            mem.offset() + (reg.count() - 1) * mem.buffer_bytes() + mem.slot_offsets(s) + layout->slots[s].byte_size();
        if (mem.offset() < 0 || mem.buffer_bytes() < 0 || mem.slot_offsets(s) < 0 || end > block_size[mem.block_id()]) {
          return absl::InvalidArgumentError(absl::StrCat(RegisterLabel(reg), ", slot ", s, " ends at byte ", end,
                                                         " of memory block ", mem.block_id(), " (",
                                                         block_size[mem.block_id()], " bytes)"));
        }
        layout->slot_offsets.push_back(mem.slot_offsets(s));
      }
      for (int b = 0; b < reg.count(); ++b)
        layout->buffers.push_back(block->second + mem.offset() + b * mem.buffer_bytes());
      if (auto device = device_of_block_.find(mem.block_id()); device != device_of_block_.end()) {
        device_of_register_[reg.id()] = device->second;
      }
    } else if (reg.slots_size() > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(RegisterLabel(reg), " has ", reg.slots_size(), " slots but no memory location"));
    }
    layout_by_id_[reg.id()] = layout.get();
    layouts_.push_back(std::move(layout));
  }

  // Tasks: ids, threads and who produces what.
  std::map<int64_t, ActorId> actor_of_task;
  std::map<std::tuple<std::string, int32_t, int32_t>, StreamThread*> thread_of_stream;
  std::vector<const TaskProto*> tasks;
  for (const TaskProto& task : rank_plan.tasks()) {
    if (actor_of_task.count(task.id()) > 0)
      return absl::InvalidArgumentError(absl::StrCat(TaskLabel(task), " appears twice"));
    if (task.device().type() != "cpu" &&
        (env_.device_backend == nullptr || env_.device_backend->type() != task.device().type())) {
      return absl::UnimplementedError(absl::StrCat(
          TaskLabel(task), " runs on device '", task.device().type(), "', but this runtime has ",
          env_.device_backend == nullptr ? std::string("no device backend (RuntimeEnv.device_backend)")
                                         : absl::StrCat("a '", env_.device_backend->type(), "' backend"),
          "; a CPU-only build runs cpu placements only"));
    }
    const ActorId id(static_cast<int64_t>(tasks.size()));
    actor_of_task[task.id()] = id;
    tasks.push_back(&task);
    StreamThread*& thread =
        thread_of_stream[{task.device().type(), task.device().index(), task.stream_id()}];
    if (thread == nullptr) {
      threads_.push_back(std::make_unique<StreamThread>(this, static_cast<int32_t>(threads_.size())));
      thread = threads_.back().get();
      thread->name = absl::StrCat(task.device().type(), ":", task.device().index(), "/stream ", task.stream_id());
    }
    thread_of_actor_.push_back(thread);
    for (int p = 0; p < task.produced_register_ids_size(); ++p) {
      const int64_t reg_id = task.produced_register_ids(p);
      auto reg = register_protos.find(reg_id);
      if (reg == register_protos.end() || reg->second->has_remote()) {
        return absl::InvalidArgumentError(absl::StrCat(TaskLabel(task), " produces register ", reg_id, ", which rank ",
                                                       rank_.value(), "'s plan does not contain as a local register"));
      }
      if (reg->second->producer().task_id() != task.id()) {
        return absl::InvalidArgumentError(absl::StrCat(TaskLabel(task), " produces ", RegisterLabel(*reg->second),
                                                       ", whose producer is task ", reg->second->producer().task_id()));
      }
      producer_by_register_[reg_id] = LocalEndpoint{id, p};
    }
  }
  for (const auto& [reg_id, reg] : register_protos) {
    if (!reg->has_remote() && producer_by_register_.count(reg_id) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(RegisterLabel(*reg), " has no producing task on rank ", rank_.value()));
    }
  }

  // In-place variable updates: the update register's slots point at the variables' bytes (its
  // own planned bytes go unused, so it takes no part in byte sharing).
  std::vector<InPlaceUpdate> inplace;
  if (env_.inplace_variable_updates && env_.registry != nullptr) {
    inplace = FindInPlaceUpdates(rank_plan, register_protos, *env_.registry);
  }
  std::set<int64_t> aliased;
  for (const InPlaceUpdate& u : inplace) {
    RegisterLayout* update = layout_by_id_.at(u.update_register);
    const RegisterLayout* first = layout_by_id_.at(u.targets[0].variable_register);
    char* base = first->buffers[0];  // every variable of `u` lives in this block
    update->buffers = {base};
    for (const InPlaceTarget& t : u.targets) {
      const RegisterLayout* variable = layout_by_id_.at(t.variable_register);
      update->slot_offsets[t.update_slot] =
          (variable->buffers[0] + variable->slot_offsets[t.variable_slot]) - base;
    }
    aliased.insert(u.update_register);
  }
  num_inplace_updates_ = static_cast<int64_t>(inplace.size());
  std::map<int64_t, ByteSharing> conflicts = FindByteConflicts(register_protos, aliased);

  // Consumers, derived from the tasks and checked against the registers' consumer lists.
  std::map<int64_t, std::vector<LocalEndpoint>> local_consumers;
  for (const TaskProto* task : tasks) {
    for (int p = 0; p < task->consumed_register_ids_size(); ++p) {
      const int64_t reg_id = task->consumed_register_ids(p);
      auto reg = register_protos.find(reg_id);
      if (reg == register_protos.end()) {
        return absl::InvalidArgumentError(absl::StrCat(TaskLabel(*task), " consumes register ", reg_id, ", which rank ",
                                                       rank_.value(), "'s plan does not contain"));
      }
      if (reg->second->has_remote() && task->type() != TaskProto::TRANSFER) {
        return absl::InvalidArgumentError(absl::StrCat(TaskLabel(*task), " consumes ", RegisterLabel(*reg->second),
                                                       " of rank ", reg->second->remote().rank(),
                                                       " directly; only TRANSFER tasks may consume a remote register"));
      }
      local_consumers[reg_id].push_back(LocalEndpoint{actor_of_task[task->id()], p});
      bool listed = false;
      for (const TaskRefProto& c : reg->second->consumers())
        listed = listed || (c.task_id() == task->id() && c.rank() == rank_.value());
      if (!listed) {
        return absl::InvalidArgumentError(absl::StrCat(TaskLabel(*task), " consumes ", RegisterLabel(*reg->second),
                                                       ", which does not list it among its consumers"));
      }
    }
  }
  for (auto& [reg_id, mirror] : mirror_by_id_) {
    mirror->consumers = local_consumers[reg_id];
    for (const LocalEndpoint& c : mirror->consumers)
      mirror->consumer_tasks.push_back(TaskId(tasks[c.actor.value()]->id()));
  }

  // Bindings.
  for (const TensorBindingProto& binding : rank_plan.bindings()) {
    RETURN_IF_ERROR(AddBinding(binding));
  }

  // The collectives' issue order, when the backend needs one (collective_order.h).
  if (env_.collectives != nullptr && (env_.order_collectives || env_.collectives->NeedsIssueOrder())) {
    std::vector<CollectiveOrder::Call> calls;
    for (const TaskProto* task : tasks) {
      if (task->type() != TaskProto::COLLECTIVE) continue;
      collective_call_[task->id()] = static_cast<int32_t>(calls.size());
      const CollectiveParams& params = task->collective();
      calls.push_back(CollectiveOrder::Call{task->name(), params.issue_phase(), params.global_order(),
                                            rates.contains(task->id()) ? rates.at(task->id()) : pieces_per_step_,
                                            params.issue_pieces_in_flight(), params.issue_backward()});
    }
    if (!calls.empty()) {
      absl::StatusOr<std::unique_ptr<CollectiveOrder>> order = CollectiveOrder::Create(std::move(calls), pieces_per_step_);
      if (!order.ok()) {
        return absl::Status(order.status().code(),
                            absl::StrCat("rank ", rank_.value(), ": the collective backend '", env_.collectives->name(),
                                         "' needs one agreed issue order: ", order.status().message()));
      }
      collective_order_ = *std::move(order);
    }
  }

  // Actors.
  for (const TaskProto* task : tasks) {
    ActorSpec spec;
    spec.id = actor_of_task[task->id()];
    spec.task = TaskId(task->id());
    spec.name = task->name();
    spec.type_name = TaskProto::Type_Name(task->type());
    for (int64_t reg_id : task->consumed_register_ids()) {
      InputPort in;
      auto mirror = mirror_by_id_.find(reg_id);
      if (mirror != mirror_by_id_.end()) {
        in.layout = &mirror->second->layout;
        in.mirror = mirror->second;
      } else {
        in.layout = layout_by_id_.at(reg_id);
        in.producer = producer_by_register_.at(reg_id);
      }
      in.producer_description = task_name(register_protos.at(reg_id)->producer().task_id());
      spec.inputs.push_back(std::move(in));
    }
    for (int64_t reg_id : task->produced_register_ids()) {
      OutputPort out;
      out.layout = layout_by_id_.at(reg_id);
      if (auto sharing = conflicts.find(reg_id); sharing != conflicts.end()) {
        out.use = use_by_register_.at(reg_id);
        num_byte_sharers_ += static_cast<int64_t>(sharing->second.all.size());
        num_byte_checks_ += static_cast<int64_t>(sharing->second.checks.size());
        out.conflicts = std::move(sharing->second.all);
        out.checks = std::move(sharing->second.checks);
        out.dependents = std::move(sharing->second.dependents);
      }
      out.local_consumers = local_consumers[reg_id];
      std::set<int32_t> remote_ranks;
      std::vector<std::string> names;
      for (const TaskRefProto& c : register_protos.at(reg_id)->consumers()) {
        names.push_back(task_name(c.task_id()));
        if (c.rank() != rank_.value() && remote_ranks.insert(c.rank()).second) {
          if (env_.transport == nullptr) {
            return absl::InvalidArgumentError(
                absl::StrCat(TaskLabel(*task), " sends to rank ", c.rank(), " but RuntimeEnv.transport is null"));
          }
          out.remote_consumers.push_back(RemoteEndpoint{Rank(c.rank()), TaskId(c.task_id())});
        }
      }
      out.consumers_description = names.empty() ? "nobody" : absl::StrJoin(names, ", ");
      spec.outputs.push_back(std::move(out));
    }
    const int64_t rate = rates.contains(task->id()) ? rates.at(task->id()) : pieces_per_step_;
    ASSIGN_OR_RETURN(TaskSetup setup, SetUpTask(*task, rate, &spec));
    events_per_step_ += setup.step_events;
    step_events_per_actor_.push_back(setup.step_events);
    if (task->type() == TaskProto::SOURCE) sources_.push_back(spec.id);
    StreamThread* host = thread_of_actor_[spec.id.value()];  // actors run on their thread only
    actors_.push_back(std::make_unique<Actor>(std::move(spec), std::move(setup.body), host));
  }
  actor_step_events_ = std::make_unique<std::atomic<int64_t>[]>(actors_.size());
  for (size_t i = 0; i < actors_.size(); ++i) actor_step_events_[i].store(0);
  for (const InPlaceUpdate& u : inplace) {
    Actor* writer = actors_[actor_of_task.at(u.optimizer_task).value()].get();
    for (const InPlaceTarget& t : u.targets) {
      const LocalEndpoint holder = producer_by_register_.at(t.variable_register);
      actors_[holder.actor.value()]->SetInPlaceWriter(holder.port, writer->spec().id);
      writer->AddInPlaceTarget(&actors_[holder.actor.value()]->output(holder.port));
    }
  }
  if (env_.stream_ordered_handoffs) num_stream_ordered_edges_ = MarkStreamOrderedEdges(tasks, actors_);
  // Each thread offers firings in the static per-stream order.
  std::vector<int64_t> order(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) order[i] = tasks[i]->order_in_stream();
  for (size_t i = 0; i < tasks.size(); ++i) thread_of_actor_[i]->actors.push_back(ActorId(static_cast<int64_t>(i)));
  for (auto& thread : threads_) {
    std::stable_sort(thread->actors.begin(), thread->actors.end(),
                     [&](ActorId a, ActorId b) { return order[a.value()] < order[b.value()]; });
  }
  position_in_thread_.assign(tasks.size(), 0);
  for (auto& thread : threads_) {
    for (size_t p = 0; p < thread->actors.size(); ++p)
      position_in_thread_[thread->actors[p].value()] = static_cast<int32_t>(p);
  }
  return absl::OkStatus();
}

std::map<int64_t, Runtime::ByteSharing> Runtime::FindByteConflicts(
    const std::map<int64_t, const RegisterProto*>& registers, const std::set<int64_t>& skip) {
  struct Interval {
    int64_t block, begin, end, id;
  };
  std::vector<Interval> intervals;
  for (const auto& [id, reg] : registers) {
    if (!reg->has_memory() || skip.count(id) > 0) continue;
    const RegisterLayout* layout = layout_by_id_.at(id);
    int64_t span = 0;
    for (size_t s = 0; s < layout->slots.size(); ++s) {
      span = std::max(span, layout->slot_offsets[s] + layout->slots[s].byte_size());
    }
    if (span == 0) continue;
    const MemoryLocationProto& mem = reg->memory();
    intervals.push_back(
        Interval{mem.block_id(), mem.offset(), mem.offset() + (reg->count() - 1) * mem.buffer_bytes() + span, id});
  }
  std::sort(intervals.begin(), intervals.end(), [](const Interval& a, const Interval& b) {
    return std::tie(a.block, a.begin, a.id) < std::tie(b.block, b.begin, b.id);
  });
  auto use_of = [this](int64_t id) {
    RegisterUse*& use = use_by_register_[id];
    if (use == nullptr) {
      register_uses_.push_back(std::make_unique<RegisterUse>());
      use = register_uses_.back().get();
    }
    return use;
  };
  std::map<int64_t, ByteSharing> conflicts;
  auto actor_of = [this](int64_t id) { return producer_by_register_.at(id).actor; };
  for (size_t i = 0; i < intervals.size(); ++i) {
    for (size_t j = i + 1;
         j < intervals.size() && intervals[j].block == intervals[i].block && intervals[j].begin < intervals[i].end;
         ++j) {
      const ActorId a = actor_of(intervals[i].id), b = actor_of(intervals[j].id);
      if (a == b) continue;        // one task writes both: nothing to order
      const bool a_first = a < b;  // task order = the planner's lifetime order
      conflicts[intervals[i].id].all.push_back(
          ByteConflict{use_of(intervals[j].id), !a_first, b, layout_by_id_.at(intervals[j].id)->name, nullptr, nullptr});
      conflicts[intervals[j].id].all.push_back(
          ByteConflict{use_of(intervals[i].id), a_first, a, layout_by_id_.at(intervals[i].id)->name, nullptr, nullptr});
    }
  }
  // What each write checks. The registers covering one byte, in task order u1 < ... < uk, take
  // it in turn, round after round. u(i) may write round w + 1 once u(i-1) wrote round w + 1 and
  // returned it (u1: once uk wrote round w and returned it). That is enough: u(i-1) had checked
  // u(i-2) the same way, and so on down to u1, which checked uk, which had checked u(k-1) in
  // round w, ... So every earlier register wrote round w + 1 and every later one round w; none
  // of them can write again before u(i) did (the next one in turn waits for it), so none holds
  // a buffer. Checking every overlapping register instead (a register can share bytes with
  // dozens) made the checks and wake-ups a sixth of a small model's host time.
  std::set<std::pair<int64_t, int64_t>> pairs;  // (checker, checked), register ids
  for (size_t first = 0; first < intervals.size();) {
    size_t last = first;  // [first, last): one block
    while (last < intervals.size() && intervals[last].block == intervals[first].block) ++last;
    std::vector<int64_t> points;
    for (size_t i = first; i < last; ++i) {
      points.push_back(intervals[i].begin);
      points.push_back(intervals[i].end);
    }
    std::sort(points.begin(), points.end());
    points.erase(std::unique(points.begin(), points.end()), points.end());
    std::vector<size_t> by_end;
    for (size_t i = first; i < last; ++i) by_end.push_back(i);
    std::sort(by_end.begin(), by_end.end(), [&](size_t a, size_t b) { return intervals[a].end < intervals[b].end; });
    std::set<std::pair<ActorId, int64_t>> covering;  // of the segment [points[p], points[p + 1])
    size_t next_begin = first, next_end = 0;
    for (size_t p = 0; p + 1 < points.size(); ++p) {
      for (; next_end < by_end.size() && intervals[by_end[next_end]].end <= points[p]; ++next_end) {
        covering.erase({actor_of(intervals[by_end[next_end]].id), intervals[by_end[next_end]].id});
      }
      for (; next_begin < last && intervals[next_begin].begin <= points[p]; ++next_begin) {
        covering.insert({actor_of(intervals[next_begin].id), intervals[next_begin].id});
      }
      if (covering.size() < 2) continue;
      std::vector<std::pair<ActorId, int64_t>> turn(covering.begin(), covering.end());
      bool one_task_twice = false;
      for (size_t k = 1; k < turn.size(); ++k) one_task_twice = one_task_twice || turn[k].first == turn[k - 1].first;
      if (one_task_twice) {  // not a turn order: every pair, as `all`
        for (const auto& x : turn) {
          for (const auto& y : turn) {
            if (x.first != y.first) pairs.insert({x.second, y.second});
          }
        }
        continue;
      }
      for (size_t k = 0; k < turn.size(); ++k) pairs.insert({turn[k].second, turn[(k + turn.size() - 1) % turn.size()].second});
    }
    first = last;
  }
  for (const auto& [checker, checked] : pairs) {
    const ActorId a = actor_of(checker), b = actor_of(checked);
    // `checker` waits for `checked` (flag set by checker, read and cleared by checked's producer).
    auto waits = std::make_shared<std::atomic<bool>>(false);
    conflicts[checker].checks.push_back(
        ByteConflict{use_of(checked), b < a, b, layout_by_id_.at(checked)->name, waits, nullptr});
    conflicts[checked].dependents.push_back(
        ByteConflict{use_of(checker), a < b, a, layout_by_id_.at(checker)->name, nullptr, waits});
  }
  return conflicts;
}

}  // namespace actor
}  // namespace oneflow_like
