// Checks 5 (stream order) and 6 (collective order) of plan_verifier.h.
#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/compiler/plan/plan_checks.h"
#include "oneflow_like/compiler/plan/plan_errors.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace compiler {
namespace {

using StreamKey = PlanStreamKey;

StreamKey KeyOf(const TaskProto& task) {
  return {task.rank(), task.device().type(), task.device().index(), task.stream_id()};
}

bool SameStream(const TaskProto& a, const TaskProto& b) {
  return a.rank() == b.rank() && a.stream_id() == b.stream_id() &&
         a.device().index() == b.device().index() && a.device().type() == b.device().type();
}

std::string StreamText(const StreamKey& key) {
  return absl::StrCat("rank ", std::get<0>(key), " stream ", std::get<1>(key), ":",
                      std::get<2>(key), "/", std::get<3>(key));
}

std::string CollectiveText(const TaskProto& task) {
  return CollectiveCallText(task.collective().global_order(), task.collective().kind(), PlanIndex::TaskLabel(task));
}

}  // namespace

PlanStreams GroupStreams(const PlanIndex& index) {
  // Grouped through a hash map on the key's fields (no string copies per task), then moved into
  // the ordered map.
  using FieldKey = std::tuple<int32_t, absl::string_view, int32_t, int32_t>;
  absl::flat_hash_map<FieldKey, std::vector<const TaskProto*>> grouped;
  for (int64_t t = 0; t < index.num_tasks(); ++t) {
    const TaskProto& task = index.task(t);
    grouped[FieldKey{task.rank(), task.device().type(), task.device().index(), task.stream_id()}]
        .push_back(&task);
  }
  PlanStreams streams;
  for (auto& [key, tasks] : grouped) {
    streams.emplace(StreamKey{std::get<0>(key), std::string(std::get<1>(key)), std::get<2>(key),
                              std::get<3>(key)},
                    std::move(tasks));
  }
  auto by_order = [](const TaskProto* a, const TaskProto* b) {
    return a->order_in_stream() < b->order_in_stream();
  };
  for (auto& [key, tasks] : streams) {
    // The lowering lists tasks in stream order already; sort only when they are not.
    if (!std::is_sorted(tasks.begin(), tasks.end(), by_order)) {
      std::stable_sort(tasks.begin(), tasks.end(), by_order);
    }
  }
  return streams;
}

absl::Status CheckStreamOrder(const PlanIndex& index, const PlanStreams& streams) {
  for (const auto& [key, tasks] : streams) {
    for (size_t i = 0; i < tasks.size(); ++i) {
      if (tasks[i]->order_in_stream() != static_cast<int64_t>(i)) {
        const bool repeated =
            i > 0 && tasks[i - 1]->order_in_stream() == tasks[i]->order_in_stream();
        return PlanError(absl::StrCat(
            StreamText(key), ": order_in_stream must be a permutation of 0..", tasks.size() - 1,
            ", but ", PlanIndex::TaskLabel(*tasks[i]), " has ", tasks[i]->order_in_stream(),
            repeated ? absl::StrCat(", like ", PlanIndex::TaskLabel(*tasks[i - 1]))
                     : absl::StrCat(" where ", i, " was expected")));
      }
    }
  }
  for (const auto& [rank, reg] : index.producing_registers()) {
    const TaskProto* producer = index.FindTask(reg->producer().task_id());
    for (const TaskRefProto& ref : reg->consumers()) {
      const TaskProto* consumer = index.FindTask(ref.task_id());
      if (consumer == nullptr || !SameStream(*consumer, *producer) ||
          index.IsVariableHolder(*consumer) ||
          consumer->order_in_stream() > producer->order_in_stream()) {
        continue;
      }
      return PlanError(absl::StrCat(
          PlanIndex::TaskLabel(*consumer), " consumes ", PlanIndex::RegisterLabel(rank, *reg),
          " but is ordered at ", consumer->order_in_stream(), ", not after its producer ",
          PlanIndex::TaskLabel(*producer), " at ", producer->order_in_stream(), " on ",
          StreamText(KeyOf(*producer))));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckCollectiveOrder(const PlanStreams& streams, bool across_ranks) {
  // group (ranks in group order) -> member rank -> its collectives of that group.
  std::map<std::vector<int32_t>, std::map<int32_t, std::vector<const TaskProto*>>> groups;
  for (const auto& [key, tasks] : streams) {
    const TaskProto* previous = nullptr;
    for (const TaskProto* task : tasks) {
      if (task->type() != TaskProto::COLLECTIVE) continue;
      if (previous != nullptr &&
          task->collective().global_order() <= previous->collective().global_order()) {
        return PlanError(absl::StrCat(StreamText(key), " issues ", CollectiveText(*previous),
                                      " before ", CollectiveText(*task),
                                      "; global_order must increase along each stream"));
      }
      previous = task;
      const auto& ranks = task->collective().ranks();
      groups[std::vector<int32_t>(ranks.begin(), ranks.end())][task->rank()].push_back(task);
    }
  }
  for (auto& [ranks, members] : groups) {
    const std::string group = absl::StrCat("collective group [", absl::StrJoin(ranks, ","), "]");
    for (auto& [rank, tasks] : members) {
      std::stable_sort(tasks.begin(), tasks.end(), [](const TaskProto* a, const TaskProto* b) {
        return a->collective().global_order() < b->collective().global_order();
      });
      for (size_t i = 1; i < tasks.size(); ++i) {
        if (tasks[i]->collective().global_order() == tasks[i - 1]->collective().global_order()) {
          return PlanError(absl::StrCat(group, ": rank ", rank, " issues ",
                                        CollectiveText(*tasks[i - 1]), " and ",
                                        CollectiveText(*tasks[i]), " with the same global_order"));
        }
      }
    }
    if (!across_ranks) continue;
    const int32_t first = ranks.front();
    const std::vector<const TaskProto*>& reference = members[first];
    for (int32_t rank : ranks) {
      const std::vector<const TaskProto*>& sequence = members[rank];
      for (size_t i = 0; i < std::max(reference.size(), sequence.size()); ++i) {
        const TaskProto* want = i < reference.size() ? reference[i] : nullptr;
        const TaskProto* have = i < sequence.size() ? sequence[i] : nullptr;
        if (want != nullptr && have != nullptr &&
            want->collective().global_order() == have->collective().global_order() &&
            want->collective().kind() == have->collective().kind()) {
          continue;
        }
        return CollectiveSequenceError(ranks, i, want == nullptr ? "nothing" : CollectiveText(*want), rank,
                                       have == nullptr ? "nothing" : CollectiveText(*have));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace compiler
}  // namespace oneflow_like
