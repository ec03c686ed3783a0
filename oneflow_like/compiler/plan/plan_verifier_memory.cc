// Checks 4 (memory layout) and 8 (byte sharing against lifetimes) of plan_verifier.h. Check 8
// across streams (registers of two streams, or one used on two, sharing bytes) is in
// plan_memory_order.h.
#include <algorithm>
#include <map>
#include <memory>
#include <queue>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/plan/plan_checks.h"
#include "oneflow_like/compiler/plan/plan_memory_order.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace compiler {
namespace {

int64_t SlotBytes(const TensorDescProto& desc) {
  int64_t bytes = DataTypeBytes(desc.dtype());
  for (int64_t dim : desc.dims()) bytes *= dim;
  return bytes;
}

// One register's bytes in a block (all its buffers), and for check 8 its lifetime.
struct Placement {
  const RegisterProto* reg = nullptr;
  int64_t begin = 0;
  int64_t end = 0;
  int64_t first_use = 0;
  int64_t last_use = 0;
};

std::string Describe(int32_t rank, const Placement& p) {
  return absl::StrCat(PlanIndex::RegisterLabel(rank, *p.reg), " [", p.begin, ", ", p.end, ")");
}

absl::Status CheckLocation(int32_t rank, const RegisterProto& reg, const MemoryBlockProto& block,
                           int64_t alignment) {
  auto label = [&] { return PlanIndex::RegisterLabel(rank, reg); };  // built only for errors
  const MemoryLocationProto& memory = reg.memory();
  if (memory.offset() < 0 || memory.buffer_bytes() < 0) {
    return PlanError(absl::StrCat(label(), " has a negative offset or buffer_bytes"));
  }
  if (alignment > 1 &&
      (memory.offset() % alignment != 0 || memory.buffer_bytes() % alignment != 0)) {
    return PlanError(absl::StrCat(label(), " is not ", alignment, "-byte aligned: offset ",
                                  memory.offset(), ", buffer_bytes ", memory.buffer_bytes()));
  }
  const __int128 end = static_cast<__int128>(memory.offset()) +
                       static_cast<__int128>(reg.count()) * memory.buffer_bytes();
  if (end > block.size_bytes()) {
    return PlanError(absl::StrCat(label(), " needs bytes [", memory.offset(), ", ",
                                  static_cast<int64_t>(end), ") of block ", block.id(),
                                  ", which has only ", block.size_bytes(), " bytes"));
  }
  if (memory.slot_offsets_size() != reg.slots_size()) {
    return PlanError(absl::StrCat(label(), " has ", reg.slots_size(), " slot(s) but ",
                                  memory.slot_offsets_size(), " slot offset(s)"));
  }
  for (int s = 0; s < reg.slots_size(); ++s) {
    const int64_t bytes = SlotBytes(reg.slots(s));
    if (memory.slot_offsets(s) < 0 || memory.slot_offsets(s) + bytes > memory.buffer_bytes()) {
      return PlanError(absl::StrCat(label(), " slot ", s, " (", SlotText(reg.slots(s)), ", ", bytes,
                                    " bytes) at offset ", memory.slot_offsets(s),
                                    " does not fit in a buffer of ", memory.buffer_bytes(),
                                    " bytes"));
    }
  }
  return absl::OkStatus();
}

// REQUIRES: sorted by begin. The first two placements sharing a byte, if any.
absl::Status CheckDisjoint(int32_t rank, const MemoryBlockProto& block,
                           const std::vector<Placement>& placements) {
  const Placement* widest = nullptr;  // the placement reaching furthest so far
  for (const Placement& p : placements) {
    if (p.end == p.begin) continue;
    if (widest != nullptr && p.begin < widest->end) {
      return PlanError(absl::StrCat(Describe(rank, *widest), " and ", Describe(rank, p),
                                    " share bytes of persistent block ", block.id(),
                                    "; persistent registers live forever and must not overlap"));
    }
    if (widest == nullptr || p.end > widest->end) widest = &p;
  }
  return absl::OkStatus();
}

// RankMemoryProto.devices: one entry per device of the rank's blocks, with its sums.
absl::Status CheckDeviceSummary(int i, const RankMemoryProto& summary, const RankPlanProto& rank_plan) {
  auto device_text = [](const DeviceProto& d) { return absl::StrCat(d.type(), ":", d.index()); };
  std::map<std::pair<std::string, int32_t>, std::pair<int64_t, int64_t>> sums;  // planned, naive
  std::map<int64_t, std::pair<std::string, int32_t>> device_of_block;
  for (const MemoryBlockProto& block : rank_plan.memory_blocks()) {
    const std::pair<std::string, int32_t> key{block.device().type(), block.device().index()};
    sums[key].first += block.size_bytes();
    device_of_block[block.id()] = key;
  }
  for (const RegisterProto& reg : rank_plan.registers()) {
    if (!reg.has_memory()) continue;
    auto it = device_of_block.find(reg.memory().block_id());
    if (it != device_of_block.end()) sums[it->second].second += reg.count() * reg.memory().buffer_bytes();
  }
  if (static_cast<size_t>(summary.devices_size()) != sums.size()) {
    return PlanError(absl::StrCat("memory[", i, "] lists ", summary.devices_size(), " device(s) for rank ",
                                  summary.rank(), ", whose blocks are on ", sums.size()));
  }
  for (const DeviceMemoryProto& device : summary.devices()) {
    auto it = sums.find({device.device().type(), device.device().index()});
    if (it == sums.end() || it->second.first != device.planned_bytes() || it->second.second != device.naive_bytes()) {
      return PlanError(absl::StrCat(
          "memory[", i, "] says rank ", summary.rank(), " device ", device_text(device.device()), " planned_bytes ",
          device.planned_bytes(), " naive_bytes ", device.naive_bytes(), ", but ",
          it == sums.end() ? "the rank has no block on that device"
                           : absl::StrCat("its blocks there sum to ", it->second.first,
                                          " and its registers' count x buffer_bytes to ", it->second.second)));
    }
  }
  return absl::OkStatus();
}

// `first_entry`: the position of the plan's first memory entry in the whole plan's (a part's).
absl::Status CheckSummary(const PlanIndex& index, int first_entry) {
  const PlanProto& plan = index.plan();
  if (plan.memory_size() == 0) return absl::OkStatus();
  if (plan.memory_size() != plan.ranks_size()) {
    return PlanError(absl::StrCat("memory has ", plan.memory_size(), " entries for ",
                                  plan.ranks_size(), " ranks"));
  }
  for (int i = 0; i < plan.memory_size(); ++i) {
    const RankMemoryProto& summary = plan.memory(i);
    const RankPlanProto& rank_plan = plan.rank_plans(i);
    int64_t planned = 0;
    int64_t naive = 0;
    for (const MemoryBlockProto& block : rank_plan.memory_blocks()) planned += block.size_bytes();
    for (const RegisterProto& reg : rank_plan.registers()) {
      if (reg.has_memory()) naive += reg.count() * reg.memory().buffer_bytes();
    }
    if (summary.rank() != rank_plan.rank() || summary.planned_bytes() != planned ||
        summary.naive_bytes() != naive) {
      return PlanError(absl::StrCat("memory[", first_entry + i, "] says rank ", summary.rank(), " planned_bytes ",
                                    summary.planned_bytes(), " naive_bytes ", summary.naive_bytes(),
                                    ", but rank ", rank_plan.rank(), "'s blocks sum to ", planned,
                                    " and its registers' count x buffer_bytes to ", naive));
    }
    if (summary.devices_size() > 0) RETURN_IF_ERROR(CheckDeviceSummary(first_entry + i, summary, rank_plan));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckMemoryLayout(const PlanIndex& index, const PlanVerifierOptions& options, int first_entry) {
  for (const RankPlanProto& rank_plan : index.plan().rank_plans()) {
    const int32_t rank = rank_plan.rank();
    absl::flat_hash_map<int64_t, const MemoryBlockProto*> blocks;
    for (const MemoryBlockProto& block : rank_plan.memory_blocks()) {
      if (!blocks.emplace(block.id(), &block).second || block.size_bytes() < 0) {
        return PlanError(absl::StrCat("rank ", rank, " memory block ", block.id(),
                                      " is listed twice or has a negative size"));
      }
    }
    std::map<int64_t, std::vector<Placement>> persistent;  // by block id
    for (const RegisterProto& reg : rank_plan.registers()) {
      if (!reg.has_memory()) continue;
      auto it = blocks.find(reg.memory().block_id());
      if (it == blocks.end()) {
        return PlanError(absl::StrCat(PlanIndex::RegisterLabel(rank, reg), " is in memory block ",
                                      reg.memory().block_id(), ", which rank ", rank, " lacks"));
      }
      RETURN_IF_ERROR(CheckLocation(rank, reg, *it->second, options.alignment));
      if (!it->second->persistent()) continue;
      const int64_t begin = reg.memory().offset();
      persistent[it->first].push_back(
          {&reg, begin, begin + reg.count() * reg.memory().buffer_bytes()});
    }
    for (auto& [block_id, placements] : persistent) {
      std::stable_sort(placements.begin(), placements.end(),
                       [](const Placement& a, const Placement& b) { return a.begin < b.begin; });
      RETURN_IF_ERROR(CheckDisjoint(rank, *blocks[block_id], placements));
    }
  }
  return CheckSummary(index, first_entry);
}

namespace {

using StreamKey = std::tuple<std::string, int32_t, int32_t>;  // device type, index, stream

// Why a register has no lifetime check 8 can order; kNone when it has one. Kept as data and
// spelled out (ReasonText) only for an error message, so the success path builds no strings.
struct Reason {
  // kStreams: a lifetime over several streams of one device, which only happens-before orders
  // (plan_memory_order.h).
  enum Kind { kNone, kCount, kEmitted, kOtherStream, kRepeat, kHolder, kReads, kStreams } kind = kNone;
  const TaskProto* task = nullptr;  // the consumer concerned (kOtherStream .. kReads)
  int64_t value = 0;                // kCount: the count; kEmitted: the emissions
  int64_t foreign_task = -1;        // kOtherStream: its id when it is not in a per-rank part's index
};

std::string ReasonText(const Reason& reason, int64_t steps, const ForeignTaskLabel& foreign) {
  auto label = [&] {
    if (reason.task != nullptr) return PlanIndex::TaskLabel(*reason.task);
    return foreign ? foreign(reason.foreign_task) : absl::StrCat("task ", reason.foreign_task);
  };
  switch (reason.kind) {
    case Reason::kNone:
      return "";
    case Reason::kCount:
      return absl::StrCat("it has count ", reason.value);
    case Reason::kEmitted:
      return absl::StrCat("its producer emits it ", reason.value, " times in ", steps,
                          " step(s), not once per piece");
    case Reason::kOtherStream:
    case Reason::kStreams:
      return absl::StrCat("its consumer ", label(), " runs on another stream than its producer");
    case Reason::kRepeat:
      return absl::StrCat(label(), " holds it");
    case Reason::kHolder:
      return absl::StrCat(label(), " reads it a step later");
    case Reason::kReads:
      return absl::StrCat("its consumer ", label(), " does not read once per piece");
  }
  return "";
}

// Fills p->first_use / last_use (orders in the producer's stream) and returns kNone when `reg`
// has a lifetime check 8 can order; otherwise why not.
Reason Lifetime(const PlanIndex& index, const PlanSimulation& simulation, int64_t steps,
                const RegisterProto& reg, Placement* p) {
  const int64_t firings = steps * index.plan().pieces_per_step();
  auto count_of = [&index](const std::vector<int64_t>& counts, int64_t id) {
    const int64_t t = index.TaskIndex(id);
    return t < 0 || t >= static_cast<int64_t>(counts.size()) ? int64_t{-1} : counts[t];
  };
  if (reg.count() != 1) return Reason{Reason::kCount, nullptr, reg.count()};
  const TaskProto* producer = index.FindTask(reg.producer().task_id());
  const int64_t emitted = count_of(simulation.emitted_by_index, producer->id());
  if (emitted != firings) return Reason{Reason::kEmitted, nullptr, emitted};
  p->first_use = p->last_use = producer->order_in_stream();
  const TaskProto* other_stream = nullptr;  // the first consumer on another stream of the device
  for (const TaskRefProto& ref : reg.consumers()) {
    const TaskProto* consumer = index.FindTask(ref.task_id());
    if (consumer == nullptr) return Reason{Reason::kOtherStream, nullptr, 0, ref.task_id()};  // another rank's
    if (consumer->rank() != producer->rank() ||
        consumer->device().index() != producer->device().index() ||
        consumer->device().type() != producer->device().type()) {
      return Reason{Reason::kOtherStream, consumer};
    }
    if (consumer->type() == TaskProto::REPEAT) return Reason{Reason::kRepeat, consumer};
    if (index.IsVariableHolder(*consumer)) return Reason{Reason::kHolder, consumer};
    if (count_of(simulation.read_by_index, consumer->id()) != firings) {
      return Reason{Reason::kReads, consumer};
    }
    if (consumer->stream_id() != producer->stream_id()) {
      if (other_stream == nullptr) other_stream = consumer;
      continue;
    }
    p->last_use = std::max(p->last_use, consumer->order_in_stream());
  }
  if (other_stream != nullptr) return Reason{Reason::kStreams, other_stream};
  return Reason{};
}

// One register in a reusable block: its bytes, and either a stream with a lifetime or a reason.
struct Entry {
  Placement placement;
  int64_t stream = -1;  // index into the rank's streams; -1: no lifetime (see `why`)
  int64_t cls = 0;      // `stream`, or a unique negative id when there is no lifetime
  Reason why;           // why there is no lifetime (kNone when it has one)
};

// The error for two entries of different classes sharing bytes that cannot be ordered.
absl::Status ClassError(int32_t rank, int64_t block, const Entry* other, const Entry* e,
                        const std::vector<StreamKey>& stream_keys, int64_t steps, const ForeignTaskLabel& foreign) {
  auto why = [&](const Entry* e) {
    if (e->stream < 0) return ReasonText(e->why, steps, foreign);
    const StreamKey& key = stream_keys[e->stream];
    return absl::StrCat("it has a lifetime on stream ", std::get<0>(key), ":", std::get<1>(key),
                        "/", std::get<2>(key));
  };
  return PlanError(absl::StrCat(
      Describe(rank, other->placement), " and ", Describe(rank, e->placement),
      " share bytes of block ", block,
      ", but their lifetimes cannot be ordered (first: ", why(other), "; second: ", why(e),
      "); only registers with count 1 whose producer "
      "and consumers run once per piece on one stream may share bytes"));
}

// Registers of different classes (a class is a stream, or the entry alone when it has no
// lifetime on one stream) sharing bytes: the first such pair (an error naming it), if any.
// Sweeps by offset keeping the two furthest-reaching entries of distinct classes.
absl::Status CheckClasses(int32_t rank, int64_t block, std::vector<const Entry*> entries,
                          const std::vector<StreamKey>& stream_keys, int64_t steps,
                          const ForeignTaskLabel& foreign) {
  std::stable_sort(entries.begin(), entries.end(), [](const Entry* a, const Entry* b) {
    return a->placement.begin < b->placement.begin;
  });
  auto class_of = [](const Entry* e) { return e->cls; };
  const Entry* first = nullptr;   // reaches furthest
  const Entry* second = nullptr;  // reaches furthest among other classes than `first`
  for (const Entry* e : entries) {
    const int64_t cls = class_of(e);
    const Entry* other = first != nullptr && class_of(first) != cls ? first : second;
    if (other != nullptr && other->placement.end > e->placement.begin) {
      return ClassError(rank, block, other, e, stream_keys, steps, foreign);
    }
    if (first == nullptr || class_of(first) == cls) {
      if (first == nullptr || e->placement.end > first->placement.end) first = e;
    } else if (e->placement.end > first->placement.end) {
      second = first;
      first = e;
    } else if (second == nullptr || e->placement.end > second->placement.end) {
      second = e;
    }
  }
  return absl::OkStatus();
}

// Registers of one stream share bytes only with disjoint lifetimes: a sweep over time keeps the
// byte ranges alive now, keyed by offset (pairwise disjoint, else we failed already).
absl::Status CheckLifetimes(int32_t rank, int64_t block, int32_t stream,
                            std::vector<const Placement*> placements) {
  std::stable_sort(
      placements.begin(), placements.end(),
      [](const Placement* a, const Placement* b) { return a->first_use < b->first_use; });
  std::map<int64_t, const Placement*> live;
  using Ending = std::pair<int64_t, const Placement*>;
  std::priority_queue<Ending, std::vector<Ending>, std::greater<Ending>> ends;
  for (const Placement* p : placements) {
    while (!ends.empty() && ends.top().first < p->first_use) {
      live.erase(ends.top().second->begin);
      ends.pop();
    }
    auto next = live.lower_bound(p->begin);
    const Placement* clash = nullptr;
    if (next != live.end() && next->second->begin < p->end) clash = next->second;
    if (clash == nullptr && next != live.begin() && std::prev(next)->second->end > p->begin) {
      clash = std::prev(next)->second;
    }
    if (clash != nullptr) {
      return PlanError(absl::StrCat(
          Describe(rank, *clash), " and ", Describe(rank, *p), " share bytes of block ", block,
          " but are alive together on stream ", stream, " (orders ", clash->first_use, "..",
          clash->last_use, " and ", p->first_use, "..", p->last_use, ")"));
    }
    live[p->begin] = p;
    ends.push({p->last_use, p});
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckMemoryReuse(const PlanIndex& index, const PlanSimulation& simulation,
                              int64_t steps, const ForeignTaskLabel& foreign) {
  for (const RankPlanProto& rank_plan : index.plan().rank_plans()) {
    const int32_t rank = rank_plan.rank();
    absl::flat_hash_map<int64_t, bool> persistent;
    for (const MemoryBlockProto& block : rank_plan.memory_blocks()) {
      persistent[block.id()] = block.persistent();
    }
    std::vector<Entry> entries;
    std::map<StreamKey, int64_t> streams;
    std::vector<StreamKey> stream_keys;
    for (const RegisterProto& reg : rank_plan.registers()) {
      if (!reg.has_memory() || persistent[reg.memory().block_id()]) continue;
      const int64_t begin = reg.memory().offset();
      Entry entry;
      entry.placement = {&reg, begin, begin + reg.count() * reg.memory().buffer_bytes()};
      if (entry.placement.end == begin) continue;
      entry.why = Lifetime(index, simulation, steps, reg, &entry.placement);
      if (entry.why.kind == Reason::kNone) {  // a lifetime: ordered within its stream
        const TaskProto* producer = index.FindTask(reg.producer().task_id());
        const StreamKey key{producer->device().type(), producer->device().index(),
                            producer->stream_id()};
        auto it = streams.find(key);  // find first: emplace would build a node every time
        if (it == streams.end()) {
          it = streams.emplace(key, static_cast<int64_t>(stream_keys.size())).first;
          stream_keys.push_back(key);
        }
        entry.stream = it->second;
      }
      entry.cls = entry.stream >= 0 ? entry.stream : -2 - static_cast<int64_t>(entries.size());
      entries.push_back(std::move(entry));
    }
    std::map<int64_t, std::vector<const Entry*>> by_block;
    std::map<std::pair<int64_t, int64_t>, std::vector<const Placement*>> by_stream;
    for (const Entry& entry : entries) {
      const int64_t block = entry.placement.reg->memory().block_id();
      by_block[block].push_back(&entry);
      if (entry.stream >= 0) by_stream[{block, entry.stream}].push_back(&entry.placement);
    }
    std::unique_ptr<PieceOrder> order;  // built for the first block sharing across classes
    for (auto& [block, list] : by_block) {
      if (CheckClasses(rank, block, list, stream_keys, steps, foreign).ok()) continue;
      // Registers of different streams (or used on several) share bytes: every such pair must
      // be ordered by what happens before what.
      if (order == nullptr) order = std::make_unique<PieceOrder>(index, simulation, steps, rank_plan);
      std::vector<SharedBytes> shared;
      shared.reserve(list.size());
      for (size_t i = 0; i < list.size(); ++i) {
        const Entry* e = list[i];
        const bool orderable = e->why.kind == Reason::kNone || e->why.kind == Reason::kStreams;
        shared.push_back({e->placement.reg, e->placement.begin, e->placement.end, e->cls, orderable,
                          static_cast<int64_t>(i)});
      }
      RETURN_IF_ERROR(CheckOrderedSharing(*order, index, rank, block, std::move(shared),
                                          [&](const SharedBytes& a, const SharedBytes& b) {
                                            return ClassError(rank, block, list[a.tag], list[b.tag], stream_keys,
                                                              steps, foreign);
                                          }));
    }
    for (auto& [key, list] : by_stream) {
      RETURN_IF_ERROR(CheckLifetimes(rank, key.first, std::get<2>(stream_keys[key.second]), list));
    }
  }
  return absl::OkStatus();
}

}  // namespace compiler
}  // namespace oneflow_like
