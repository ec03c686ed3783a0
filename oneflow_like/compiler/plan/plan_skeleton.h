// Internal to StreamedVerifier (streamed_verifier.h): the compact record of a whole plan it keeps
// while the per-rank parts come and go. Per task and register a few dense fields (id, rank,
// type, name), names and slot lists interned, and the cross-rank references check 2 and 6 need
// (the consumers on other ranks of each register, the mirrors, the collective calls); the
// firing-rule graph is built beside it (plan_sim_graph.h).
//
// Names: the lowering names a rank's tasks and registers "<stem>@r<rank>" (RankName), so a name
// is kept as its interned stem plus the number of its "@r<n>" suffix: one stem serves every rank
// of a data- or tensor-parallel group. Slot lists (dtype and dims of each slot) are interned
// whole: equal ids are equal lists, and few distinct lists exist.
//
// Thread-compatible.
#ifndef ONEFLOW_LIKE_COMPILER_PLAN_PLAN_SKELETON_H_
#define ONEFLOW_LIKE_COMPILER_PLAN_PLAN_SKELETON_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include <memory>
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "oneflow_like/compiler/plan/plan_sim_graph.h"
#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace compiler {

// A name as an interned stem and the rank of its "@r<n>" suffix (-1: none).
struct NameRef {
  uint32_t stem = 0;
  int32_t suffix = -1;
};

// Interned strings: names (stem + "@r<n>") and slot lists (encoded bytes).
class InternTable {
 public:
  uint32_t Intern(absl::string_view text);
  absl::string_view Get(uint32_t id) const { return texts_[id]; }
  NameRef AddName(absl::string_view name);
  std::string Name(NameRef ref) const;
  // The slot list of `reg` as one interned id.
  uint32_t AddSlots(const RegisterProto& reg);
  // Its slots again, for messages.
  google::protobuf::RepeatedPtrField<TensorDescProto> Slots(uint32_t id) const;

 private:
  // The texts back to back in chunks that never move, so the keys can view them.
  absl::string_view Store(absl::string_view text);

  absl::flat_hash_map<absl::string_view, uint32_t> ids_;
  std::vector<absl::string_view> texts_;
  std::vector<std::unique_ptr<char[]>> chunks_;
  char* next_ = nullptr;
  size_t chunk_left_ = 0;
  std::string scratch_;
};

// A (task id, rank) reference: TaskRefProto's fields.
struct TaskRef {
  int64_t task_id = 0;
  int32_t rank = 0;
};

struct PlanSkeleton {
  // Tasks by global index (plan order), as the SimGraphBuilder numbers them.
  std::vector<int64_t> task_id;
  std::vector<int32_t> task_rank;
  std::vector<uint8_t> task_type;  // TaskProto::Type
  std::vector<NameRef> task_name;
  // Producing registers by global index.
  std::vector<int64_t> register_id;
  std::vector<int32_t> register_rank;
  std::vector<NameRef> register_name;
  std::vector<uint32_t> register_slots;
  // Consumers on other ranks of the producing registers: (register index, ref), register order.
  std::vector<std::pair<int32_t, TaskRef>> remote_consumers;
  // Mirrors, rank by rank as listed; consumers in mirror_consumers[consumers_begin ..
  // next mirror's consumers_begin).
  struct Mirror {
    int64_t id = 0;
    int32_t rank = 0;
    int32_t remote_rank = 0;
    TaskRef producer;
    uint32_t slots = 0;
    NameRef name;
    int32_t next_register = 0;  // producing registers listed before it (plan order)
    int64_t consumers_begin = 0;
  };
  std::vector<Mirror> mirrors;
  std::vector<TaskRef> mirror_consumers;
  // (register id, task id) for every mirror a task consumes (sorted by Finish).
  std::vector<std::pair<int64_t, int64_t>> mirror_reads;
  // Collective tasks: the group (index into groups), its rank, global_order, kind, task index.
  struct Collective {
    int32_t group = 0;
    int32_t rank = 0;
    int64_t global_order = 0;
    int32_t kind = 0;
    int32_t task = 0;
  };
  std::vector<Collective> collectives;
  std::map<std::vector<int32_t>, int32_t> groups;
  // global_order -> its first member task (index) and params (serialized).
  absl::flat_hash_map<int64_t, std::pair<int32_t, std::string>> first_of_call;
  // The first member task found disagreeing with its call's first member on another rank
  // (check 6b), reported after check 6's sequences as VerifyPlan does.
  absl::Status call_difference;

  InternTable strings;
  // Ranks with work in order, and the index of each one's first task.
  std::vector<int32_t> ranks;
  std::vector<int64_t> first_task;  // ranks.size() + 1 entries once Finish ran

  // PlanIndex::TaskLabel / RegisterLabel of the task / producing register with this index.
  std::string TaskLabel(int64_t t) const;
  std::string RegisterLabel(int64_t r) const;
  std::string MirrorLabel(const Mirror& m) const;
};

// Check 2 across ranks (both ends of every mirror, producer and consumer lists in both
// directions) and check 6 across ranks (every member's sequence of calls, the members' params),
// on a finished skeleton, in the order VerifyPlan runs them, then skeleton.call_difference.
// `builder` resolves ids, `graph` (its result) gives producers. Sorts mirror_reads and
// collectives.
absl::Status CheckAcrossRanks(PlanSkeleton& skeleton, const SimGraphBuilder& builder, const SimGraph& graph);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_PLAN_PLAN_SKELETON_H_
