#include "oneflow_like/compiler/lower/lower_test_util.h"

#include "glog/logging.h"
#include "oneflow_like/compiler/lower/test_annotate.h"
#include "oneflow_like/compiler/test_util.h"

namespace oneflow_like {
namespace compiler {
namespace testing {

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
