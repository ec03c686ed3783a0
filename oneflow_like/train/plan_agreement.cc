#include "oneflow_like/train/plan_agreement.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/driver/agreement.h"

namespace oneflow_like {
namespace train {
namespace {

constexpr char kAgreement[] = "agreement:";
constexpr char kHash[] = "hash:";
constexpr char kHint[] = " (every rank must run the same code with the same config and flags)";

}  // namespace

std::string PlanFingerprint(const PlanProto& plan) {
  if (plan.has_per_rank()) return absl::StrCat(kAgreement, plan.per_rank().agreement().SerializeAsString());
  return absl::StrCat(kHash, plan.content_hash());
}

absl::Status CompareWithRank0(const std::string& mine, const std::string& first, int32_t rank) {
  if (mine == first) return absl::OkStatus();
  const bool mine_agreement = absl::StartsWith(mine, kAgreement);
  const bool first_agreement = absl::StartsWith(first, kAgreement);
  if (mine_agreement != first_agreement) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", rank, " compiled ", mine_agreement ? "its own rank's plan" : "the whole plan", " but rank 0 ",
        first_agreement ? "its own rank's plan" : "the whole plan", kHint));
  }
  if (!mine_agreement) {
    return absl::FailedPreconditionError(absl::StrCat("rank ", rank, " compiled a different plan than rank 0 (content hash ",
                                                      mine.substr(sizeof(kHash) - 1), " vs ",
                                                      first.substr(sizeof(kHash) - 1), ")", kHint));
  }
  JobAgreementProto a, b;
  if (!a.ParseFromString(mine.substr(sizeof(kAgreement) - 1)) ||
      !b.ParseFromString(first.substr(sizeof(kAgreement) - 1))) {
    return absl::DataLossError(absl::StrCat("rank ", rank, ": a published job agreement does not parse"));
  }
  const std::string difference = compiler::AgreementDifference(a, b);
  if (difference.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("rank ", rank, " compiled another job than rank 0: ", difference, kHint));
}

}  // namespace train
}  // namespace oneflow_like
