#include "oneflow_like/compiler/plan/plan_hash.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace oneflow_like {
namespace compiler {
namespace {

std::string DeterministicBytes(const PlanProto& plan) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    plan.SerializeToCodedStream(&coded);
  }  // the CodedOutputStream flushes and trims `bytes` when destroyed
  return bytes;
}

}  // namespace

uint64_t Fnv1a64(absl::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char byte : bytes) {
    hash ^= byte;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::string PlanContentHash(const PlanProto& plan) {
  uint64_t hash;
  if (plan.content_hash().empty()) {
    hash = Fnv1a64(DeterministicBytes(plan));
  } else {
    PlanProto copy = plan;  // only a sealed plan pays for the copy
    copy.clear_content_hash();
    hash = Fnv1a64(DeterministicBytes(copy));
  }
  return absl::StrFormat("fnv1a64:%016x", hash);
}

void SealPlan(PlanProto* plan) {
  plan->clear_content_hash();
  plan->set_content_hash(PlanContentHash(*plan));
}

absl::Status CheckPlanHash(const PlanProto& plan) {
  const std::string computed = PlanContentHash(plan);
  if (plan.content_hash() == computed) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("CheckPlanHash: plan '", plan.job_name(), "' stores content_hash \"",
                   plan.content_hash(), "\" but its content hashes to \"", computed,
                   "\"; the plan is corrupted, was edited after SealPlan, or was never sealed"));
}

}  // namespace compiler
}  // namespace oneflow_like
