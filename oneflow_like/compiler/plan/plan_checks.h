// Internal to VerifyPlan: the groups of checks listed in plan_verifier.h, one function each.
// Each returns OK or the InternalError of the first violation ("VerifyPlan: ..."). They run in
// the order of plan_verifier.h (3 before 2); a later group may assume the earlier ones passed.
#ifndef ONEFLOW_LIKE_COMPILER_PLAN_PLAN_CHECKS_H_
#define ONEFLOW_LIKE_COMPILER_PLAN_PLAN_CHECKS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "oneflow_like/compiler/plan/plan_index.h"
#include "oneflow_like/compiler/plan/plan_simulator.h"
#include "oneflow_like/compiler/plan/plan_verifier.h"

namespace oneflow_like {
namespace compiler {

// InternalError("VerifyPlan: " + message).
absl::Status PlanError(const std::string& message);

// With a per-rank part of a whole plan (StreamedVerifier), called for each COLLECTIVE task once
// its own geometry passed: true when the call's first member is on an earlier part and the
// callee compared the task with it (the part's first member of the call is then not the call's
// first: CheckCollectiveGeometry neither compares with it nor checks the kind again).
using EarlierCallMember = std::function<bool(const TaskProto& task)>;
// Where a per-rank part sits in the whole plan, for messages and checks as the whole plan's.
struct PartPlace {
  int first_memory_entry = 0;  // the position of its memory entry in the whole plan's
  EarlierCallMember earlier_call;
};

// Checks 1 (what the index left), 3, 2, 4, 5, 6 on `plan` (its `index`), in that order: the
// checks a whole plan and a per-rank plan share. `across_ranks` false (a per-rank plan): the
// collective order only along each stream and within the rank (plan_verifier.cc).
absl::Status CheckStructure(const PlanProto& plan, const PlanIndex& index, const PlanVerifierOptions& options,
                            bool across_ranks, const PartPlace& place = {});
// What VerifyRankPlan requires before indexing: `plan` is per_rank and lists at most its own rank.
absl::Status CheckPerRankShape(const PlanProto& plan);

// 3. Tasks' register lists, slot refs, per-type params, bindings (plan_verifier.cc). Runs
// before CheckRegisters, so a dangling reference is reported from the task's side.
absl::Status CheckTasks(const PlanIndex& index);
// 3, COPY tasks: params, both devices of its own rank, stream kind, registers on `from` / `to`
// (plan_verifier_devices.cc).
absl::Status CheckCopyTask(const PlanIndex& index, const TaskProto& task);
// The error for a COPY reading register `register_id` of `other_rank`.
absl::Status CopyAcrossRanksError(const TaskProto& task, int32_t other_rank, int64_t register_id);
// 4, ranks with blocks on several devices: registers in blocks of the device their producer
// writes, payload inputs on their task's device (plan_verifier_devices.cc).
absl::Status CheckRankDevices(const PlanIndex& index);
// 2. Producer / consumer lists, mirrors (plan_verifier.cc).
absl::Status CheckRegisters(const PlanIndex& index);
// 4. Blocks, locations, persistent overlap, PlanProto.memory (plan_verifier_memory.cc). Messages
// name memory entry i as "memory[first_entry + i]" (a part of a whole plan: its position there).
absl::Status CheckMemoryLayout(const PlanIndex& index, const PlanVerifierOptions& options, int first_entry = 0);
// (rank, device type, device index, stream id): one runtime thread.
using PlanStreamKey = std::tuple<int32_t, std::string, int32_t, int32_t>;
// The tasks of every stream sorted by order_in_stream (ties keep plan order), streams in key
// order. Built once (GroupStreams, plan_verifier_streams.cc) for checks 5 and 6.
using PlanStreams = std::map<PlanStreamKey, std::vector<const TaskProto*>>;
PlanStreams GroupStreams(const PlanIndex& index);
// 5. order_in_stream permutations and producer-before-consumer (plan_verifier_streams.cc).
absl::Status CheckStreamOrder(const PlanIndex& index, const PlanStreams& streams);
// 6. Collective order per communicator group (plan_verifier_streams.cc). `across_ranks` false
// (a per-rank plan): only along each stream and within the rank.
absl::Status CheckCollectiveOrder(const PlanStreams& streams, bool across_ranks);
// 6b. Collective geometry: regions per member, slot shapes, kind rules, members agree
// (plan_verifier_collectives.cc).
absl::Status CheckCollectiveGeometry(const PlanIndex& index, const EarlierCallMember& earlier_call = nullptr);
// What two member tasks' params of one call disagree on ("its kind", "its ranks", ...; "" if
// nothing): CheckCollectiveGeometry's comparison with the call's first member.
std::string CollectiveCallDifference(const CollectiveParams& a, const CollectiveParams& b);
// The label of a task on another rank than a per-rank part's, by task id (StreamedVerifier).
using ForeignTaskLabel = std::function<std::string(int64_t task_id)>;
// 8. Byte sharing in reusable blocks against lifetimes (plan_verifier_memory.cc).
// On a per-rank part's index (StreamedVerifier::CheckRank), `simulation` holds the counts of the
// part's tasks and `foreign` names consumers on other ranks in messages.
absl::Status CheckMemoryReuse(const PlanIndex& index, const PlanSimulation& simulation,
                              int64_t steps, const ForeignTaskLabel& foreign = nullptr);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_PLAN_PLAN_CHECKS_H_
