// The gradient buckets of a plan (COLLECTIVE tasks with CollectiveParams.parts, compiler
// option --bucket_mb): one entry per call, in global order, with the tensors it carries in
// bucket order (= the order backward produces them) and its bytes.
//
//   for (const BucketEntry& b : Buckets(plan)) ...   // `olplan boxing` prints BucketText(plan)
#ifndef ONEFLOW_LIKE_TOOLS_PLAN_PLAN_BUCKETS_H_
#define ONEFLOW_LIKE_TOOLS_PLAN_PLAN_BUCKETS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace plan_tool {

struct BucketEntry {
  int64_t global_order = 0;
  std::string kind;             // "ALL_REDUCE" / "REDUCE_SCATTER"
  std::vector<int32_t> ranks;   // the group
  std::vector<std::string> tensors;  // the parts' input registers on the first member, "@r<k>" cut
  int64_t bytes = 0;            // logical bytes of the parts (their group regions)
};

std::vector<BucketEntry> Buckets(const PlanProto& plan);
// "" when the plan has no buckets; else a header line and one line per bucket.
std::string BucketText(const PlanProto& plan);
// The order in which the first rank with collectives issues them in a step under NCCL (or
// --order_collectives; actor/collective_order.h): at most `max_lines` lines, then a count. ""
// when no rank has collectives; the error's message when the plan has no agreed order.
std::string IssueOrderText(const PlanProto& plan, int max_lines = 40);

}  // namespace plan_tool
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_TOOLS_PLAN_PLAN_BUCKETS_H_
