// The plan's content hash: a fingerprint every rank compares before running, so all ranks
// execute the same compiled plan, and a check that catches a corrupted or hand-edited plan.
//
// PlanContentHash(plan) = "fnv1a64:" + 16 lowercase hex digits of FNV-1a-64 (offset basis
// 0xcbf29ce484222325, prime 0x100000001b3, one byte at a time) over the deterministic
// serialization of `plan` with content_hash cleared (map entries sorted by key, so the
// order in which a map was filled does not matter). Any change of any other field changes the
// serialization and, with overwhelming likelihood, the hash.
//
// Example:
//   PlanProto plan = Lower(...);
//   SealPlan(&plan);            // plan.content_hash() == "fnv1a64:..." (16 hex digits)
//   CHECK_OK(CheckPlanHash(plan));
//   plan.set_pieces_per_step(8);
//   CheckPlanHash(plan);        // InvalidArgument: stored hash does not match the content
//
// Thread-compatible; pure functions of their argument.
#ifndef ONEFLOW_LIKE_COMPILER_PLAN_PLAN_HASH_H_
#define ONEFLOW_LIKE_COMPILER_PLAN_PLAN_HASH_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace compiler {

// FNV-1a-64 of `bytes`. Fnv1a64("") == 0xcbf29ce484222325, Fnv1a64("a") == 0xaf63dc4c8601ec8c.
uint64_t Fnv1a64(absl::string_view bytes);

// The deterministic serialization of `message` (SetSerializationDeterministic: map entries
// sorted), the bytes the content hash is taken over; also how tests compare plans byte for byte.
std::string DeterministicBytes(const google::protobuf::MessageLite& message);

// "fnv1a64:" + 16 lowercase hex digits (see above). Ignores the stored content_hash.
std::string PlanContentHash(const PlanProto& plan);

// PlanContentHash of a plan given in pieces, never held whole (olplan verify of a large world):
//   StreamedPlanHash hash(head);              // job_name, world_size, ranks (fields 1-3)
//   for (each rank plan, in order) hash.AddRankPlan(DeterministicBytes(rank_plan));
//   std::string h = hash.Finish(tail);        // every field after rank_plans (5-7, 9-10)
// equals PlanContentHash of the plan with those fields and rank plans.
class StreamedPlanHash {
 public:
  explicit StreamedPlanHash(const PlanProto& head);
  void AddRankPlan(absl::string_view serialized);
  // The tail may also come in pieces, in field order: AddFields({pieces_per_step}), then
  // AddElement(6, decision) for each SBP decision (not copied), then Finish({memory, ...}).
  void AddFields(const PlanProto& fields);
  void AddElement(int field, const google::protobuf::MessageLite& element);
  // REQUIRES: `tail` sets no field before pieces_per_step and no content_hash.
  std::string Finish(const PlanProto& tail);

 private:
  uint64_t hash_;
};

// Sets plan->content_hash() to PlanContentHash(*plan).
void SealPlan(PlanProto* plan);

// OK iff plan.content_hash() == PlanContentHash(plan). InvalidArgument otherwise (an unsealed,
// corrupted or hand-edited plan), naming the stored and the computed hash.
absl::Status CheckPlanHash(const PlanProto& plan);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_PLAN_PLAN_HASH_H_
