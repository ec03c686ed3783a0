#include "oneflow_like/compiler/lower/registers.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/plan/memory_planner.h"

namespace oneflow_like {
namespace compiler {
namespace lower_internal {
namespace {

int64_t RoundUp(int64_t bytes, int64_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

bool OnComm(TaskProto::Type type) { return type == TaskProto::TRANSFER || type == TaskProto::COLLECTIVE; }

constexpr int64_t kPersistentBlock = 0;
constexpr int64_t kReusableBlock = 1;

}  // namespace

StageInfo ComputeStageInfo(const Graph& graph) {
  StageInfo info;
  for (OpId id : graph.op_order()) {
    const int stage = graph.op(id).stage;
    info.stage_at.push_back(stage);
    info.num_stages = std::max(info.num_stages, stage + 1);
  }
  const size_t n = info.stage_at.size();
  info.prefix.assign(info.num_stages, std::vector<int32_t>(n + 1, 0));
  for (int s = 0; s < info.num_stages; ++s) {
    for (size_t p = 0; p < n; ++p) info.prefix[s][p + 1] = info.prefix[s][p] + (info.stage_at[p] == s ? 1 : 0);
  }
  return info;
}

bool StageInfo::OtherStageBetween(int stage, int64_t lo, int64_t hi) const {
  lo = std::max<int64_t>(lo, -1);
  hi = std::min<int64_t>(hi, static_cast<int64_t>(stage_at.size()));
  if (hi - lo < 2) return false;
  const int64_t total = hi - lo - 1;  // positions lo+1 .. hi-1
  const int64_t same = prefix[stage][hi] - prefix[stage][lo + 1];
  return total > same;
}

void AssignStreams(PlanBuilder* builder) {
  absl::flat_hash_map<std::pair<int32_t, int32_t>, int64_t> next_order;
  for (size_t i = 0; i < builder->tasks().size(); ++i) {
    TaskProto& task = builder->task_at(i).proto;
    const bool comm = OnComm(task.type());
    task.set_stream_id(comm ? kCommStream : kComputeStream);
    task.set_stream_kind(comm ? STREAM_COMM : STREAM_COMPUTE);
    task.set_order_in_stream(next_order[{task.rank(), task.stream_id()}]++);
  }
}

int32_t RegisterCount(const StageInfo& stages, int64_t pieces_per_step, int32_t max_count, int stage,
                      int64_t position, bool fixed, const ConsumerSummary& readers) {
  if (pieces_per_step <= 1 || stages.num_stages <= 1 || fixed) return 1;
  if (readers.max_stage < readers.min_stage) return 1;  // no readers
  const bool crossing = readers.min_stage != stage || readers.max_stage != stage;
  const int min_stage = std::min(stage, readers.min_stage);
  const int64_t lo = position < 0 ? readers.first : position;
  const bool kept = lo >= 0 && stages.OtherStageBetween(stage, lo, readers.last);
  if (!crossing && !kept) return 1;
  int64_t count = std::min<int64_t>(pieces_per_step, stages.num_stages - min_stage);
  if (max_count > 0) count = std::min<int64_t>(count, max_count);
  return static_cast<int32_t>(std::max<int64_t>(count, 1));
}

void AssignRegisterCounts(const StageInfo& stages, int64_t pieces_per_step, int32_t max_count,
                          PlanBuilder* builder) {
  if (pieces_per_step <= 1 || stages.num_stages <= 1) return;  // every count stays 1
  for (size_t i = 0; i < builder->registers().size(); ++i) {
    RegisterInfo& reg = builder->register_at(i);
    if (reg.step_rate || reg.persistent || reg.held_across_steps || reg.consumer_tasks.empty()) continue;
    const TaskInfo& producer = builder->task(reg.proto.producer().task_id());
    ConsumerSummary readers;
    for (int64_t c : reg.consumer_tasks) {
      const TaskInfo& consumer = builder->task(c);
      readers.Add(consumer.stage, consumer.position);
    }
    reg.proto.set_count(RegisterCount(stages, pieces_per_step, max_count, producer.stage, producer.position,
                                      /*fixed=*/false, readers));
  }
}

absl::StatusOr<std::vector<RankMemory>> AssignMemory(int64_t alignment, bool reuse, PlanBuilder* builder) {
  // The rank's linearized schedule: its tasks in id order (tasks() is in id order).
  std::map<int32_t, int64_t> num_tasks;
  std::map<int32_t, DeviceProto> device;
  std::vector<int64_t> position(builder->tasks().size());
  int32_t last_rank = -1;
  int64_t* last_count = nullptr;
  for (size_t i = 0; i < builder->tasks().size(); ++i) {
    const TaskInfo& t = builder->tasks()[i];
    if (last_count == nullptr || t.proto.rank() != last_rank) {  // tasks come in runs per rank
      last_rank = t.proto.rank();
      auto [it, fresh] = num_tasks.try_emplace(last_rank, 0);
      if (fresh) device.emplace(last_rank, t.proto.device());
      last_count = &it->second;
    }
    position[i] = (*last_count)++;
  }
  // Registers live the whole step cannot share bytes with anything: they are laid out back to
  // back after the planned region of block 1 instead of going through the planner (which would
  // pay for their mutual overlaps).
  struct Pending {
    std::vector<int64_t> registers;  // lifetime-planned (index in registers())
    std::vector<BufferRequest> requests;
    std::vector<int64_t> whole_step;  // index in registers()
    int64_t whole_step_bytes = 0;
    int64_t persistent_bytes = 0;
  };
  std::map<int32_t, Pending> pending;
  std::map<int32_t, RankMemory> memory;
  for (const auto& [rank, count] : num_tasks) {
    memory[rank].rank = rank;
    memory[rank].device = device[rank];
  }
  for (size_t i = 0; i < builder->registers().size(); ++i) {
    RegisterInfo& reg = builder->register_at(i);
    const int32_t rank = reg.proto.producer().rank();
    MemoryLocationProto* location = reg.proto.mutable_memory();
    int64_t end = 0;  // slots back to back, each at an aligned offset
    for (int64_t bytes : reg.slot_bytes) {
      const int64_t offset = RoundUp(end, alignment);
      location->add_slot_offsets(offset);
      end = offset + bytes;
    }
    const int64_t buffer_bytes = RoundUp(end, alignment);
    location->set_buffer_bytes(buffer_bytes);
    const int64_t total = buffer_bytes * reg.proto.count();
    memory[rank].naive_bytes += total;
    Pending& p = pending[rank];
    if (reg.persistent) {
      location->set_block_id(kPersistentBlock);
      location->set_offset(p.persistent_bytes);
      p.persistent_bytes += total;
      continue;
    }
    location->set_block_id(kReusableBlock);
    const int64_t producer = builder->TaskIndex(reg.proto.producer().task_id());
    bool precise = reuse && reg.proto.count() == 1 && !reg.step_rate && !reg.held_across_steps &&
                   !OnComm(builder->tasks()[producer].proto.type());
    int64_t first = position[producer], last = first;
    for (int64_t c : reg.consumer_tasks) {
      const TaskInfo& consumer = builder->task(c);
      precise = precise && consumer.proto.rank() == rank && !OnComm(consumer.proto.type());
      if (precise) last = std::max(last, position[builder->TaskIndex(c)]);
    }
    if (precise) {
      p.registers.push_back(static_cast<int64_t>(i));
      p.requests.push_back(BufferRequest{total, first, last});
    } else {
      p.whole_step.push_back(static_cast<int64_t>(i));
      location->set_offset(p.whole_step_bytes);  // relative; shifted below
      p.whole_step_bytes += total;
    }
  }
  std::vector<RankMemory> result;
  for (auto& [rank, p] : pending) {
    ASSIGN_OR_RETURN(MemoryAssignment assignment, AssignOffsets(p.requests, alignment));
    for (size_t i = 0; i < p.registers.size(); ++i) {
      builder->register_at(p.registers[i]).proto.mutable_memory()->set_offset(assignment.offsets[i]);
    }
    const int64_t base = RoundUp(assignment.block_bytes, alignment);
    for (int64_t index : p.whole_step) {
      MemoryLocationProto* location = builder->register_at(index).proto.mutable_memory();
      location->set_offset(base + location->offset());
    }
    memory[rank].persistent_bytes = p.persistent_bytes;
    memory[rank].reusable_bytes = base + p.whole_step_bytes;
  }
  for (auto& [rank, m] : memory) result.push_back(m);
  return result;
}

void AddMemoryBlocks(const std::vector<RankMemory>& memory, PlanProto* plan) {
  std::map<int32_t, RankPlanProto*> by_rank;
  for (RankPlanProto& r : *plan->mutable_rank_plans()) by_rank[r.rank()] = &r;
  for (const RankMemory& m : memory) {
    auto it = by_rank.find(m.rank);
    if (it == by_rank.end()) continue;
    RankPlanProto* rank_plan = it->second;
    MemoryBlockProto* persistent = rank_plan->add_memory_blocks();
    persistent->set_id(kPersistentBlock);
    *persistent->mutable_device() = m.device;
    persistent->set_size_bytes(m.persistent_bytes);
    persistent->set_persistent(true);
    MemoryBlockProto* reusable = rank_plan->add_memory_blocks();
    reusable->set_id(kReusableBlock);
    *reusable->mutable_device() = m.device;
    reusable->set_size_bytes(m.reusable_bytes);
    reusable->set_persistent(false);
    RankMemoryProto* stats = plan->add_memory();
    stats->set_rank(m.rank);
    stats->set_planned_bytes(m.persistent_bytes + m.reusable_bytes);
    stats->set_naive_bytes(m.naive_bytes);
  }
}

}  // namespace lower_internal
}  // namespace compiler
}  // namespace oneflow_like
