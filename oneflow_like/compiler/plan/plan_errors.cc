#include "oneflow_like/compiler/plan/plan_errors.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/compiler/plan/plan_checks.h"
#include "oneflow_like/compiler/plan/plan_index.h"

namespace oneflow_like {
namespace compiler {

absl::Status RanksNotAscendingError(int32_t before, int32_t after) {
  return PlanError(absl::StrCat("ranks must be strictly ascending: ", before, " then ", after));
}

absl::Status RankOutsideWorldError(int32_t rank, int32_t world_size) {
  return PlanError(absl::StrCat("rank ", rank, " is outside the world of size ", world_size));
}

absl::Status TaskIdTwiceError(int64_t id, const std::string& first_task, const std::string& second_task) {
  return PlanError(absl::StrCat("task id ", id, " is used twice: by ", first_task, " and by ", second_task,
                                "; task ids must be unique in the plan"));
}

absl::Status RegisterProducedTwiceError(int64_t id, const std::string& first_name, int32_t first_rank,
                                        const std::string& second_name, int32_t second_rank) {
  return PlanError(absl::StrCat("register id ", id, " is produced on two ranks ('", first_name, "' on rank ",
                                first_rank, " and '", second_name, "' on rank ", second_rank,
                                "); register ids must be unique in the plan, only mirrors "
                                "(with `remote`) may repeat an id"));
}

absl::Status ConsumerMissingError(const std::string& reg, int64_t task_id, int32_t rank, int32_t actual_rank) {
  return PlanError(absl::StrCat(
      reg, " lists consumer task ", task_id, " on rank ", rank,
      actual_rank < 0 ? ", which does not exist" : absl::StrCat(", but that task is on rank ", actual_rank)));
}

absl::Status ConsumerNotConsumingError(const std::string& reg, const std::string& task) {
  return PlanError(absl::StrCat(reg, " lists consumer ", task, ", which does not consume it"));
}

absl::Status NoMirrorError(const std::string& reg, const std::string& task, int32_t consumer_rank, int32_t rank) {
  return PlanError(absl::StrCat(reg, " is consumed by ", task, " on another rank, but rank ", consumer_rank,
                                " has no mirror of it (remote rank ", rank, ") listing that task"));
}

absl::Status MirrorWithoutSourceError(const std::string& mirror, int32_t source_rank, int64_t id) {
  return PlanError(absl::StrCat(mirror, " mirrors a register of rank ", source_rank, ", but rank ", source_rank,
                                " produces no register ", id));
}

absl::Status MirrorProducerError(const std::string& mirror, int64_t task_id, int32_t task_rank, int64_t source_task_id,
                                 int32_t source_task_rank, int32_t source_rank) {
  return PlanError(absl::StrCat(mirror, " names producer task ", task_id, " on rank ", task_rank,
                                ", but the register on rank ", source_rank, " is produced by task ", source_task_id,
                                " on rank ", source_task_rank));
}

absl::Status MirrorSlotError(const std::string& mirror, int32_t source_rank, int slot, const TensorDescProto* here,
                             const TensorDescProto* there) {
  return PlanError(absl::StrCat(mirror, " does not match the producer's register on rank ", source_rank, ": slot ",
                                slot, " is ", here != nullptr ? SlotText(*here) : "missing", " here but ",
                                there != nullptr ? SlotText(*there) : "missing", " on rank ", source_rank,
                                "; both ends of a transfer must agree in dtype and shape"));
}

absl::Status CheckMirrorSlots(const std::string& mirror, int32_t source_rank,
                              const google::protobuf::RepeatedPtrField<TensorDescProto>& here,
                              const google::protobuf::RepeatedPtrField<TensorDescProto>& there) {
  for (int s = 0; s < std::max(here.size(), there.size()); ++s) {
    if (s < here.size() && s < there.size() && here.Get(s).dtype() == there.Get(s).dtype() &&
        std::equal(here.Get(s).dims().begin(), here.Get(s).dims().end(), there.Get(s).dims().begin(),
                   there.Get(s).dims().end())) {
      continue;
    }
    return MirrorSlotError(mirror, source_rank, s, s < here.size() ? &here.Get(s) : nullptr,
                           s < there.size() ? &there.Get(s) : nullptr);
  }
  return absl::OkStatus();
}

absl::Status UnlistedMirrorConsumerError(const std::string& task, const std::string& mirror,
                                         const std::string& source) {
  return PlanError(absl::StrCat(task, " consumes ", mirror, ", but the producing ", source,
                                " does not list it as a consumer"));
}

std::string CollectiveCallText(int64_t global_order, CollectiveParams::Kind kind, const std::string& task) {
  return absl::StrCat("global_order ", global_order, " (", CollectiveParams::Kind_Name(kind), ", ", task, ")");
}

absl::Status CollectiveSequenceError(const std::vector<int32_t>& group, size_t position, const std::string& want,
                                     int32_t rank, const std::string& have) {
  return PlanError(absl::StrCat("collective group [", absl::StrJoin(group, ","),
                                "]: member ranks issue different sequences; at position ", position, " rank ",
                                group.front(), " issues ", want, " but rank ", rank, " issues ", have));
}

absl::Status CallDifferenceError(const std::string& task, const std::string& first_task, int64_t global_order,
                                 const std::string& difference) {
  return PlanError(absl::StrCat(task, " and ", first_task, " are members of the collective with global_order ",
                                global_order, " but disagree on ", difference));
}

}  // namespace compiler
}  // namespace oneflow_like
