#include "oneflow_like/compiler/lower/registers.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/lower/stream_lifetimes.h"
#include "oneflow_like/compiler/plan/memory_planner.h"

namespace oneflow_like {
namespace compiler {
namespace lower_internal {
namespace {

int64_t RoundUp(int64_t bytes, int64_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

bool OnComm(TaskProto::Type type) { return type == TaskProto::TRANSFER || type == TaskProto::COLLECTIVE; }
// Tasks that are not on the (first) compute stream: a register they touch is live the whole
// step, unless `side` and they are on the second one (stream_lifetimes.h).
bool OffCompute(const TaskProto& task, bool side = false) {
  return task.stream_id() != kComputeStream && !(side && task.stream_id() == kSideComputeStream);
}

constexpr char kCpuName[] = "cpu";

// A rank's device, ordered cpu first (DeviceType order), then by index.
using DeviceKey = std::pair<bool, int32_t>;  // (not the host, index)
DeviceKey KeyOf(const DeviceProto& device) { return {device.type() != kCpuName, device.index()}; }

// Blocks of a rank's k-th device: 2k persistent, 2k + 1 reusable.
int64_t PersistentBlock(int32_t device_number) { return 2 * int64_t{device_number}; }
int64_t ReusableBlock(int32_t device_number) { return 2 * int64_t{device_number} + 1; }

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
  // Keyed by (rank, device, stream): a rank's cpu and cuda tasks are on different streams.
  absl::flat_hash_map<std::tuple<int32_t, bool, int32_t, int32_t>, int64_t> next_order;
  for (size_t i = 0; i < builder->tasks().size(); ++i) {
    TaskProto& task = builder->task_at(i).proto;
    if (task.type() == TaskProto::COPY) {
      const bool to_device = task.copy().to().type() != kCpuName;
      task.set_stream_id(to_device ? kHostToDeviceStream : kDeviceToHostStream);
      task.set_stream_kind(STREAM_COPY);
    } else {
      const bool comm = OnComm(task.type());
      const bool side = builder->task_at(i).side_stream && task.type() == TaskProto::COMPUTE;
      task.set_stream_id(comm ? kCommStream : side ? kSideComputeStream : kComputeStream);
      task.set_stream_kind(comm ? STREAM_COMM : STREAM_COMPUTE);
    }
    const bool host = task.device().type() == kCpuName;
    task.set_order_in_stream(next_order[{task.rank(), host, task.device().index(), task.stream_id()}]++);
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
                          const PhaseSplit& phases, PlanBuilder* builder) {
  if (pieces_per_step <= 1 || stages.num_stages <= 1) return;  // every count stays 1
  for (size_t i = 0; i < builder->registers().size(); ++i) {
    RegisterInfo& reg = builder->register_at(i);
    if (reg.step_rate || reg.persistent || reg.held_across_steps || reg.consumer_tasks.empty()) continue;
    const TaskInfo& producer = builder->task(reg.proto.producer().task_id());
    ConsumerSummary readers;
    for (int64_t c : reg.consumer_tasks) {
      const TaskInfo& consumer = builder->task(c);
      int64_t position = consumer.position;
      if (phases.Backward(c)) position = std::max(position, phases.loss_position + 1);
      readers.Add(consumer.stage, position);
    }
    reg.proto.set_count(RegisterCount(stages, pieces_per_step, max_count, producer.stage, producer.position,
                                      /*fixed=*/false, readers));
  }
}

const DeviceProto& RegisterDevice(const TaskProto& producer) {
  return producer.type() == TaskProto::COPY ? producer.copy().to() : producer.device();
}

bool PhaseSplit::Splits(int32_t rank) const {
  if (first_backward_task < 0 || pieces_per_step <= 1 || num_stages <= 1) return false;
  auto it = stage_of_rank.find(rank);
  if (it == stage_of_rank.end()) return false;
  int64_t in_flight = std::min<int64_t>(pieces_per_step, num_stages - it->second);
  if (max_count > 0) in_flight = std::min<int64_t>(in_flight, max_count);
  return in_flight > 1;
}

absl::StatusOr<std::vector<RankMemory>> AssignMemory(int64_t alignment, bool reuse, const PhaseSplit& phases,
                                                     PlanBuilder* builder) {
  // The rank's linearized schedule: its tasks in id order (tasks() is in id order), over all
  // its devices.
  std::map<int32_t, int64_t> num_tasks;
  std::map<std::pair<int32_t, DeviceKey>, DeviceProto> devices;  // (rank, device) with memory
  std::vector<int64_t> position(builder->tasks().size());
  int32_t last_rank = -1;
  int64_t* last_count = nullptr;
  for (size_t i = 0; i < builder->tasks().size(); ++i) {
    const TaskInfo& t = builder->tasks()[i];
    if (last_count == nullptr || t.proto.rank() != last_rank) {  // tasks come in runs per rank
      last_rank = t.proto.rank();
      auto [it, fresh] = num_tasks.try_emplace(last_rank, 0);
      if (fresh) devices.emplace(std::make_pair(last_rank, KeyOf(t.proto.device())), t.proto.device());
      last_count = &it->second;
    }
    position[i] = (*last_count)++;
  }
  for (size_t i = 0; i < builder->registers().size(); ++i) {
    const RegisterInfo& reg = builder->registers()[i];
    const DeviceProto& device = RegisterDevice(builder->task(reg.proto.producer().task_id()).proto);
    devices.emplace(std::make_pair(reg.proto.producer().rank(), KeyOf(device)), device);
  }
  // Registers live the whole step cannot share bytes with anything: they are laid out back to
  // back after the planned region of the reusable block instead of going through the planner
  // (which would pay for their mutual overlaps).
  struct Pending {
    // Lifetime-planned (index in registers()) and their requests: [0] forward (and every
    // register of a stage not split by `phases`), [1] backward of a split stage.
    std::vector<int64_t> registers[2];
    std::vector<BufferRequest> requests[2];
    std::vector<int64_t> whole_step;  // index in registers()
    int64_t whole_step_bytes = 0;
    int64_t persistent_bytes = 0;
  };
  std::map<std::pair<int32_t, DeviceKey>, Pending> pending;
  // Two compute streams: lifetimes of the registers stream 4 touches on stream 0's axis.
  const bool side = reuse && std::any_of(builder->tasks().begin(), builder->tasks().end(), [](const TaskInfo& t) {
    return t.proto.stream_id() == kSideComputeStream;
  });
  const StreamLifetimes lifetimes = side ? ComputeStreamLifetimes(*builder, position) : StreamLifetimes{};
  std::map<std::pair<int32_t, DeviceKey>, RankMemory> memory;
  int32_t rank_of_previous = -1, number = 0;
  for (const auto& [key, device] : devices) {  // ascending: rank, then cpu first
    number = key.first == rank_of_previous ? number + 1 : 0;
    rank_of_previous = key.first;
    RankMemory& m = memory[key];
    m.rank = key.first;
    m.device = device;
    m.device_number = number;
  }
  for (size_t i = 0; i < builder->registers().size(); ++i) {
    RegisterInfo& reg = builder->register_at(i);
    const int32_t rank = reg.proto.producer().rank();
    const int64_t producer = builder->TaskIndex(reg.proto.producer().task_id());
    const TaskProto& producer_task = builder->tasks()[producer].proto;
    const std::pair<int32_t, DeviceKey> key{rank, KeyOf(RegisterDevice(producer_task))};
    RankMemory& m = memory[key];
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
    m.naive_bytes += total;
    Pending& p = pending[key];
    if (reg.persistent) {
      location->set_block_id(PersistentBlock(m.device_number));
      location->set_offset(p.persistent_bytes);
      p.persistent_bytes += total;
      continue;
    }
    location->set_block_id(ReusableBlock(m.device_number));
    bool precise = reuse && reg.proto.count() == 1 && !reg.step_rate && !reg.held_across_steps &&
                   !OffCompute(producer_task, side);
    bool on_side = producer_task.stream_id() == kSideComputeStream;
    int64_t first = position[producer], last = first;
    for (int64_t c : reg.consumer_tasks) {
      const TaskInfo& consumer = builder->task(c);
      // On another device (a control input pacing a device op by a host register) it is
      // another stream: no order to plan a lifetime by.
      precise = precise && consumer.proto.rank() == rank && !OffCompute(consumer.proto, side) &&
                KeyOf(consumer.proto.device()) == KeyOf(producer_task.device());
      if (precise) last = std::max(last, position[builder->TaskIndex(c)]);
      on_side = on_side || consumer.proto.stream_id() == kSideComputeStream;
    }
    if (precise && on_side) {  // on stream 0's axis (stream_lifetimes.h)
      first = lifetimes.acquire[producer];
      last = lifetimes.release[producer];
      precise = first != StreamLifetimes::kNone && last != StreamLifetimes::kNone;
      for (int64_t c : reg.consumer_tasks) {
        const int64_t release = lifetimes.release[builder->TaskIndex(c)];
        precise = precise && release != StreamLifetimes::kNone;
        last = std::max(last, release);
      }
    }
    int pool = 0;
    if (precise && phases.Splits(rank)) {
      const bool backward = phases.Backward(reg.proto.producer().task_id());
      for (int64_t c : reg.consumer_tasks) precise = precise && phases.Backward(c) == backward;  // else both phases
      pool = backward ? 1 : 0;
    }
    if (precise) {
      p.registers[pool].push_back(static_cast<int64_t>(i));
      p.requests[pool].push_back(BufferRequest{total, first, last});
    } else {
      p.whole_step.push_back(static_cast<int64_t>(i));
      location->set_offset(p.whole_step_bytes);  // relative; shifted below
      p.whole_step_bytes += total;
    }
  }
  std::vector<RankMemory> result;
  for (auto& [key, p] : pending) {
    int64_t base = 0;  // the backward pool after the forward one, the whole-step registers last
    for (int pool = 0; pool < 2; ++pool) {
      if (p.requests[pool].empty()) continue;
      ASSIGN_OR_RETURN(MemoryAssignment assignment, AssignOffsets(p.requests[pool], alignment));
      for (size_t i = 0; i < p.registers[pool].size(); ++i) {
        builder->register_at(p.registers[pool][i]).proto.mutable_memory()->set_offset(base + assignment.offsets[i]);
      }
      base += RoundUp(assignment.block_bytes, alignment);
    }
    for (int64_t index : p.whole_step) {
      MemoryLocationProto* location = builder->register_at(index).proto.mutable_memory();
      location->set_offset(base + location->offset());
    }
    memory[key].persistent_bytes = p.persistent_bytes;
    memory[key].reusable_bytes = base + p.whole_step_bytes;
  }
  for (auto& [key, m] : memory) result.push_back(m);
  return result;
}

void AddMemoryBlocks(const std::vector<RankMemory>& memory, PlanProto* plan) {
  std::map<int32_t, RankPlanProto*> by_rank;
  for (RankPlanProto& r : *plan->mutable_rank_plans()) by_rank[r.rank()] = &r;
  RankMemoryProto* stats = nullptr;
  for (const RankMemory& m : memory) {  // by rank, then device
    auto it = by_rank.find(m.rank);
    if (it == by_rank.end()) continue;
    RankPlanProto* rank_plan = it->second;
    MemoryBlockProto* persistent = rank_plan->add_memory_blocks();
    persistent->set_id(PersistentBlock(m.device_number));
    *persistent->mutable_device() = m.device;
    persistent->set_size_bytes(m.persistent_bytes);
    persistent->set_persistent(true);
    MemoryBlockProto* reusable = rank_plan->add_memory_blocks();
    reusable->set_id(ReusableBlock(m.device_number));
    *reusable->mutable_device() = m.device;
    reusable->set_size_bytes(m.reusable_bytes);
    reusable->set_persistent(false);
    if (stats == nullptr || stats->rank() != m.rank) {
      stats = plan->add_memory();
      stats->set_rank(m.rank);
    }
    stats->set_planned_bytes(stats->planned_bytes() + m.persistent_bytes + m.reusable_bytes);
    stats->set_naive_bytes(stats->naive_bytes() + m.naive_bytes);
    DeviceMemoryProto* device = stats->add_devices();
    *device->mutable_device() = m.device;
    device->set_planned_bytes(m.persistent_bytes + m.reusable_bytes);
    device->set_naive_bytes(m.naive_bytes);
  }
  // Per device only where a rank has more than one.
  for (RankMemoryProto& stats : *plan->mutable_memory()) {
    if (stats.devices_size() == 1) stats.clear_devices();
  }
}

}  // namespace lower_internal
}  // namespace compiler
}  // namespace oneflow_like
