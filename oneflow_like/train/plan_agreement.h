// What the ranks of a multi-process job compare before any data moves, so that a rank given
// another job (another layer count, another micro-batch count, other flags) is refused naming
// what differs (DistributedContext::CheckPlan publishes and compares these; preflight.h runs it).
//
// A per-rank plan (each process compiled only its own rank, compiler/driver/compile.h
// only_rank) carries PlanProto.per_rank.agreement: a digest of the global decisions and summary
// fields (compiler/driver/agreement.h). A whole plan is compared by its content hash.
//
//   const std::string mine = PlanFingerprint(plan);             // published as plan_hash/<rank>
//   RETURN_IF_ERROR(CompareWithRank0(mine, rank0s, rank));
// e.g. "rank 3 compiled another job than rank 0: ops 1803 vs 1657, variables 292 vs 244,
// variable elements ... (every rank must run the same code with the same config and flags)".
#ifndef ONEFLOW_LIKE_TRAIN_PLAN_AGREEMENT_H_
#define ONEFLOW_LIKE_TRAIN_PLAN_AGREEMENT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace train {

// "agreement:" + the serialized JobAgreementProto of a per-rank plan, else "hash:" + content_hash.
std::string PlanFingerprint(const PlanProto& plan);

// OK when `mine` agrees with rank 0's `first`; else FailedPrecondition naming what differs.
absl::Status CompareWithRank0(const std::string& mine, const std::string& first, int32_t rank);

}  // namespace train
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_TRAIN_PLAN_AGREEMENT_H_
