#include "oneflow_like/compiler/lower/lower_test_util.h"

#include <algorithm>
#include <map>
#include <set>


#include "glog/logging.h"
#include "gtest/gtest.h"
#include "oneflow_like/compiler/lower/test_annotate.h"
#include "oneflow_like/compiler/plan/rank_plans.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/compiler/plan/plan_hash.h"

namespace oneflow_like {
namespace compiler {
namespace testing {

namespace {


std::string Head(const std::string& text) { return text.substr(0, 3000); }

// The first entry where two rank plans differ, both sides printed.
std::string FirstDifference(const RankPlanProto& want, const RankPlanProto& got) {
  for (int i = 0; i < std::max(want.registers_size(), got.registers_size()); ++i) {
    if (i >= want.registers_size() || i >= got.registers_size()) {
      return "register count " + std::to_string(want.registers_size()) + " (whole) vs " +
             std::to_string(got.registers_size()) + " (per rank); first extra: " +
             Head((i < want.registers_size() ? want.registers(i) : got.registers(i)).DebugString());
    }
    if (DeterministicBytes(want.registers(i)) != DeterministicBytes(got.registers(i))) {
      return "register " + std::to_string(i) + ":\n--- whole:\n" + Head(want.registers(i).DebugString()) +
             "--- per rank:\n" + Head(got.registers(i).DebugString());
    }
  }
  for (int i = 0; i < std::max(want.tasks_size(), got.tasks_size()); ++i) {
    if (i >= want.tasks_size() || i >= got.tasks_size()) {
      return "task count " + std::to_string(want.tasks_size()) + " (whole) vs " + std::to_string(got.tasks_size()) +
             " (per rank); first extra: " + Head((i < want.tasks_size() ? want.tasks(i) : got.tasks(i)).DebugString());
    }
    if (DeterministicBytes(want.tasks(i)) != DeterministicBytes(got.tasks(i))) {
      return "task " + std::to_string(i) + ":\n--- whole:\n" + Head(want.tasks(i).DebugString()) +
             "--- per rank:\n" + Head(got.tasks(i).DebugString());
    }
  }
  return "memory blocks or bindings:\n--- whole:\n" + Head(want.DebugString()) + "--- per rank:\n" +
         Head(got.DebugString());
}

}  // namespace

absl::StatusOr<PlanProto> LowerText(const std::string& text, const LowerOptions& options,
                                    const std::function<void(Graph*)>& edit, bool annotate) {
  std::unique_ptr<OpRegistry> registry = BuiltinRegistry();
  Graph graph = ParseAndInfer(text, *registry);
  if (annotate) {
    absl::Status s = AnnotateSbpForTest(&graph);
    CHECK(s.ok()) << s;
  }
  if (edit) edit(&graph);
  return LowerToPlan(graph, options);
}

PlanProto LowerTextOrDie(const std::string& text, const LowerOptions& options,
                         const std::function<void(Graph*)>& edit) {
  absl::StatusOr<PlanProto> plan = LowerText(text, options, edit);
  CHECK(plan.ok()) << plan.status();
  return *std::move(plan);
}

Graph AnnotatedGraph(const std::string& text, const OpRegistry& registry,
                     const std::function<void(Graph*)>& edit) {
  Graph graph = ParseAndInfer(text, registry);
  absl::Status s = AnnotateSbpForTest(&graph);
  CHECK(s.ok()) << s;
  if (edit) edit(&graph);
  return graph;
}

PlanProto ExpectPerRankMatchesWhole(const Graph& graph, LowerOptions options) {
  options.only_rank = -1;
  absl::StatusOr<PlanProto> whole = LowerToPlan(graph, options);
  EXPECT_TRUE(whole.ok()) << whole.status();
  if (!whole.ok()) return PlanProto();
  std::map<int32_t, const RankPlanProto*> rank_plans;
  std::map<int32_t, const RankMemoryProto*> memory;
  for (int i = 0; i < whole->ranks_size(); ++i) {
    rank_plans[whole->ranks(i)] = &whole->rank_plans(i);
    memory[whole->ranks(i)] = &whole->memory(i);
  }
  std::vector<PlanProto> parts;
  for (int32_t r = 0; r < whole->world_size(); ++r) {
    options.only_rank = r;
    absl::StatusOr<PlanProto> part = LowerToPlan(graph, options);
    EXPECT_TRUE(part.ok()) << "rank " << r << ": " << part.status();
    if (!part.ok()) return PlanProto();
    EXPECT_EQ(part->job_name(), whole->job_name());
    EXPECT_EQ(part->world_size(), whole->world_size());
    EXPECT_EQ(part->pieces_per_step(), whole->pieces_per_step());
    EXPECT_EQ(part->boxing_choices_size(), whole->boxing_choices_size());
    EXPECT_EQ(part->per_rank().rank(), r);
    auto it = rank_plans.find(r);
    if (it == rank_plans.end()) {
      EXPECT_EQ(part->rank_plans_size(), 0) << "rank " << r << " has no work in the whole plan";
    } else {
      EXPECT_EQ(part->ranks_size(), 1);
      EXPECT_EQ(part->rank_plans_size(), 1);
      EXPECT_EQ(part->memory_size(), 1);
      if (part->rank_plans_size() == 1 && part->memory_size() == 1) {
        const bool same = DeterministicBytes(part->rank_plans(0)) == DeterministicBytes(*it->second);
        EXPECT_TRUE(same) << "rank " << r << ": " << (same ? "" : FirstDifference(*it->second, part->rank_plans(0)));
        EXPECT_EQ(DeterministicBytes(part->memory(0)), DeterministicBytes(*memory[r])) << "rank " << r;
        // Every mirror of the whole plan's rank r, with the producing register's rate.
        std::set<int64_t> step_rate(part->per_rank().step_rate_mirrors().begin(),
                                    part->per_rank().step_rate_mirrors().end());
        for (const RegisterProto& reg : part->rank_plans(0).registers()) {
          if (!reg.has_remote()) {
            EXPECT_EQ(step_rate.count(reg.id()), 0u) << reg.name();
          }
        }
      }
    }
    parts.push_back(*std::move(part));
  }
  // Ranges of ranks (LowerRankRange): each part equals its rank's own lowering, byte for byte,
  // per_rank included; ranges of 2 and 3 ranks (a last one shorter) and the whole world.
  const int32_t world = whole->world_size();
  for (int32_t size : {2, 3, world}) {
    if (size < 2 || (size == world && size <= 3)) continue;
    for (int32_t first = 0; first < world; first += size) {
      options.only_rank = first;
      options.num_ranks = std::min(size, world - first);
      absl::StatusOr<std::vector<PlanProto>> range = LowerRankRange(graph, options);
      EXPECT_TRUE(range.ok()) << "ranks " << first << " + " << options.num_ranks << ": " << range.status();
      if (!range.ok()) continue;
      EXPECT_EQ(range->size(), static_cast<size_t>(options.num_ranks));
      for (size_t i = 0; i < range->size() && first + i < parts.size(); ++i) {
        const PlanProto& got = (*range)[i];
        const PlanProto& want = parts[first + i];
        const bool same = DeterministicBytes(got) == DeterministicBytes(want);
        std::string where;
        if (!same && got.rank_plans_size() == 1 && want.rank_plans_size() == 1) {
          where = FirstDifference(want.rank_plans(0), got.rank_plans(0));
        }
        EXPECT_TRUE(same) << "rank " << first + i << " lowered with ranks " << first << " .. "
                          << first + options.num_ranks - 1 << " differs from its own lowering " << where;
      }
    }
  }
  options.num_ranks = 1;
  absl::StatusOr<PlanProto> merged = MergeRankPlans(std::move(parts));
  EXPECT_TRUE(merged.ok()) << merged.status();
  if (merged.ok()) {
    PlanProto want = *whole;
    want.clear_content_hash();
    EXPECT_TRUE(DeterministicBytes(*merged) == DeterministicBytes(want)) << "the merged per-rank plans differ from the whole plan";
  }
  return *std::move(whole);
}

void AddUpdate(Graph* graph, const std::string& variable, const std::string& new_value) {
  absl::Status s = graph->AddVariableUpdate(graph->FindTensor(variable), graph->FindTensor(new_value));
  CHECK(s.ok()) << s;
}

std::string MlpText(int micro_batches, int accumulation_steps) {
  return "config(name=\"mlp\", micro_batches=" + std::to_string(micro_batches) +
         ", gradient_accumulation_steps=" + std::to_string(accumulation_steps) +
         ", seed=5)\n"
         "x = input(shape=[8,4]) placement=cpu:[0,1] sbp=[S(0)]\n"
         "dy = input(shape=[8,3]) placement=cpu:[0,1] sbp=[S(0)]\n"
         "w1 = variable(shape=[4,6], init=normal(0.02))\n"
         "w2 = variable(shape=[6,3], init=normal(0.02))\n"
         "buf = variable(shape=[6,3], init=zeros)\n"
         "h = matmul(x, w1)\n"
         "a = relu(h)\n"
         "y = matmul(a, w2)\n"
         "dw2 = matmul(a, dy, transpose_a=true)\n"
         "w2_new, buf_new = sgd_update(w2, dw2, buf, lr=0.1, momentum=0.9)\n"
         "output(y)\n";
}

void AddMlpUpdates(Graph* graph) {
  AddUpdate(graph, "w2", "w2_new");
  AddUpdate(graph, "buf", "buf_new");
}

const RankPlanProto& RankPlan(const PlanProto& plan, int rank) {
  for (const RankPlanProto& r : plan.rank_plans()) {
    if (r.rank() == rank) return r;
  }
  LOG(FATAL) << "no plan for rank " << rank;
}

std::vector<const TaskProto*> TasksOfType(const PlanProto& plan, TaskProto::Type type, int rank) {
  std::vector<const TaskProto*> tasks;
  for (const RankPlanProto& r : plan.rank_plans()) {
    if (rank >= 0 && r.rank() != rank) continue;
    for (const TaskProto& t : r.tasks()) {
      if (t.type() == type) tasks.push_back(&t);
    }
  }
  return tasks;
}

int CountTasks(const PlanProto& plan, TaskProto::Type type, int rank) {
  return static_cast<int>(TasksOfType(plan, type, rank).size());
}

const TaskProto& FindTask(const PlanProto& plan, const std::string& name) {
  for (const RankPlanProto& r : plan.rank_plans()) {
    for (const TaskProto& t : r.tasks()) {
      if (t.name() == name) return t;
    }
  }
  LOG(FATAL) << "no task named " << name;
}

const RegisterProto* FindLocalRegister(const PlanProto& plan, int rank, int64_t id) {
  for (const RegisterProto& reg : RankPlan(plan, rank).registers()) {
    if (reg.id() == id && !reg.has_remote()) return &reg;
  }
  return nullptr;
}

const RegisterProto& FindRegisterByName(const PlanProto& plan, const std::string& name) {
  for (const RankPlanProto& r : plan.rank_plans()) {
    for (const RegisterProto& reg : r.registers()) {
      if (reg.name() == name && !reg.has_remote()) return reg;
    }
  }
  LOG(FATAL) << "no register named " << name;
}

std::vector<const RegisterProto*> Mirrors(const PlanProto& plan, int rank) {
  std::vector<const RegisterProto*> mirrors;
  for (const RegisterProto& reg : RankPlan(plan, rank).registers()) {
    if (reg.has_remote()) mirrors.push_back(&reg);
  }
  return mirrors;
}

}  // namespace testing
}  // namespace compiler
}  // namespace oneflow_like
