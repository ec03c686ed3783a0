#include "tools/plan/plan_buckets.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/actor/collective_order.h"
#include "oneflow_like/actor/plan_rates.h"
#include "oneflow_like/core/data_type.h"
#include "tools/plan/plan_report.h"

namespace oneflow_like {
namespace plan_tool {

std::vector<BucketEntry> Buckets(const PlanProto& plan) {
  std::map<int64_t, BucketEntry> by_order;
  for (const RankPlanProto& rank : plan.rank_plans()) {
    std::map<int64_t, const RegisterProto*> registers;
    for (const RegisterProto& r : rank.registers()) registers[r.id()] = &r;
    for (const TaskProto& task : rank.tasks()) {
      if (task.type() != TaskProto::COLLECTIVE || task.collective().parts_size() == 0) continue;
      const CollectiveParams& c = task.collective();
      if (by_order.count(c.global_order()) > 0) continue;  // one member is enough
      BucketEntry e;
      e.global_order = c.global_order();
      e.kind = CollectiveParams::Kind_Name(c.kind());
      e.ranks.assign(c.ranks().begin(), c.ranks().end());
      int64_t element_bytes = 4;
      if (task.outputs_size() > 0) {
        auto out = registers.find(task.outputs(0).register_id());
        if (out != registers.end() && out->second->slots_size() > 0) {
          element_bytes = SizeOf(static_cast<DataType>(out->second->slots(0).dtype()));
        }
      }
      for (const CollectiveParams& part : c.parts()) {
        int64_t volume = 1;
        for (int a = 0; a < part.group_region().begin_size(); ++a) {
          volume *= part.group_region().end(a) - part.group_region().begin(a);
        }
        e.bytes += volume * element_bytes;
      }
      for (const SlotRefProto& in : task.inputs()) {
        auto r = registers.find(in.register_id());
        std::string name = r == registers.end() ? absl::StrCat("register ", in.register_id()) : r->second->name();
        const size_t at = name.rfind("@r");
        e.tensors.push_back(at == std::string::npos ? name : name.substr(0, at));
      }
      by_order.emplace(e.global_order, std::move(e));
    }
  }
  std::vector<BucketEntry> out;
  for (auto& [order, e] : by_order) out.push_back(std::move(e));
  return out;
}

std::string BucketText(const PlanProto& plan) {
  const std::vector<BucketEntry> buckets = Buckets(plan);
  if (buckets.empty()) return "";
  std::string s = absl::StrFormat("gradient buckets (--bucket_mb), in the order they are issued: %d\n",
                                  static_cast<int>(buckets.size()));
  for (const BucketEntry& b : buckets) {
    std::string tensors = absl::StrJoin(b.tensors.begin(), b.tensors.begin() + std::min<size_t>(b.tensors.size(), 4), ", ");
    if (b.tensors.size() > 4) absl::StrAppend(&tensors, ", ... (", b.tensors.size(), " tensors)");
    absl::StrAppend(&s, absl::StrFormat("  #%d %s ranks [%s] %s: %s\n", static_cast<int>(b.global_order), b.kind,
                                        absl::StrJoin(b.ranks, ","), HumanBytes(static_cast<double>(b.bytes)), tensors));
  }
  return s;
}

std::string IssueOrderText(const PlanProto& plan, int max_lines) {
  absl::StatusOr<absl::flat_hash_map<int64_t, int64_t>> rates = actor::FiringsPerStep(plan);
  for (const RankPlanProto& rank : plan.rank_plans()) {
    std::vector<actor::CollectiveOrder::Call> calls;
    for (const TaskProto& task : rank.tasks()) {
      if (task.type() != TaskProto::COLLECTIVE) continue;
      const CollectiveParams& c = task.collective();
      const int64_t rate = rates.ok() && rates->contains(task.id()) ? rates->at(task.id()) : plan.pieces_per_step();
      calls.push_back(actor::CollectiveOrder::Call{task.name(), c.issue_phase(), c.global_order(), rate, c.issue_pieces_in_flight(),
                                                   c.issue_backward()});
    }
    if (calls.empty()) continue;
    const size_t tasks = calls.size();
    absl::StatusOr<std::unique_ptr<actor::CollectiveOrder>> order =
        actor::CollectiveOrder::Create(std::move(calls), plan.pieces_per_step());
    if (!order.ok()) {
      return absl::StrCat("collective issue order of rank ", rank.rank(), ": none agreed: ", order.status().message(),
                          "\n");
    }
    const std::vector<std::string> lines = (*order)->StepText();
    std::string s = absl::StrCat("collective issue order of rank ", rank.rank(), " (", lines.size(), " calls a step by ",
                                 tasks, " tasks; NCCL, or gloo with --order_collectives, issues them so):\n");
    for (size_t i = 0; i < lines.size() && static_cast<int>(i) < max_lines; ++i) {
      absl::StrAppend(&s, absl::StrFormat("  %3d. %s\n", static_cast<int>(i + 1), lines[i]));
    }
    if (static_cast<int>(lines.size()) > max_lines) {
      absl::StrAppend(&s, "  ... (", lines.size() - max_lines, " more)\n");
    }
    return s;
  }
  return "";
}

}  // namespace plan_tool
}  // namespace oneflow_like
