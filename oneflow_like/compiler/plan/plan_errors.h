// Internal to the plan verifiers: the messages of the checks that VerifyPlan (on a whole plan)
// and StreamedVerifier (across per-rank parts, from its skeleton) both make, written once so the
// two give the same text for the same defect. Each returns PlanError(...) ("VerifyPlan: ...");
// the arguments are labels (PlanIndex::TaskLabel / RegisterLabel text) and values.
#ifndef ONEFLOW_LIKE_COMPILER_PLAN_PLAN_ERRORS_H_
#define ONEFLOW_LIKE_COMPILER_PLAN_PLAN_ERRORS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace compiler {

// Check 1 (PlanIndex::Build).
absl::Status RanksNotAscendingError(int32_t before, int32_t after);
absl::Status RankOutsideWorldError(int32_t rank, int32_t world_size);
absl::Status TaskIdTwiceError(int64_t id, const std::string& first_task, const std::string& second_task);
absl::Status RegisterProducedTwiceError(int64_t id, const std::string& first_name, int32_t first_rank,
                                        const std::string& second_name, int32_t second_rank);

// Check 2: a producing register's consumer on another rank (`actual_rank` -1: no such task).
absl::Status ConsumerMissingError(const std::string& reg, int64_t task_id, int32_t rank, int32_t actual_rank);
absl::Status ConsumerNotConsumingError(const std::string& reg, const std::string& task);
absl::Status NoMirrorError(const std::string& reg, const std::string& task, int32_t consumer_rank, int32_t rank);
// Check 2: a mirror against the producing rank's register.
absl::Status MirrorWithoutSourceError(const std::string& mirror, int32_t source_rank, int64_t id);
absl::Status MirrorProducerError(const std::string& mirror, int64_t task_id, int32_t task_rank, int64_t source_task_id,
                                 int32_t source_task_rank, int32_t source_rank);
// Slot `slot` differs (nullptr: missing on that side).
absl::Status MirrorSlotError(const std::string& mirror, int32_t source_rank, int slot, const TensorDescProto* here,
                             const TensorDescProto* there);
// The first slot of `here` (the mirror's) and `there` (the producer's) that differs, if any.
absl::Status CheckMirrorSlots(const std::string& mirror, int32_t source_rank,
                              const google::protobuf::RepeatedPtrField<TensorDescProto>& here,
                              const google::protobuf::RepeatedPtrField<TensorDescProto>& there);
absl::Status UnlistedMirrorConsumerError(const std::string& task, const std::string& mirror,
                                         const std::string& source);

// Check 6: "global_order 3 (ALL_REDUCE, rank 0 task 7 'c@r0' (COLLECTIVE))".
std::string CollectiveCallText(int64_t global_order, CollectiveParams::Kind kind, const std::string& task);
// `want` / `have`: CollectiveCallText, or "nothing".
absl::Status CollectiveSequenceError(const std::vector<int32_t>& group, size_t position, const std::string& want,
                                     int32_t rank, const std::string& have);
absl::Status CallDifferenceError(const std::string& task, const std::string& first_task, int64_t global_order,
                                 const std::string& difference);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_PLAN_PLAN_ERRORS_H_
