// Tests only: a small builder of PlanProtos, so plan tests read as the graph they describe.
//
// Every call keeps both sides of an edge in sync (a register's producer / consumers and the
// tasks' produced / consumed ids and slot refs), gives each task the next order_in_stream of
// its (rank, stream) on device cpu:0, and places each register with payload at its own 64-byte
// aligned bytes (no reuse: block 0 persistent for variables, block 1 for the rest). Build()
// sizes the blocks and fills PlanProto.memory, so a plan built only through these calls
// passes the structural checks of VerifyPlan; tests then break one thing on purpose.
//
// Example (2 ranks, 1 piece per step: rank 0 computes y, rank 1 pulls and prints it):
//   TestPlanBuilder b(/*world_size=*/2, /*pieces_per_step=*/1);
//   auto [x_source, x] = b.AddInput(0, "x");
//   int64_t relu = b.AddTask(0, TaskProto::COMPUTE, "relu");
//   b.Connect(x, relu);
//   int64_t y = b.AddRegister(relu, "y");
//   int64_t pull = b.AddTransfer(y, /*to_rank=*/1, "y.transfer");
//   b.AddSink(b.AddRegister(pull, "y@1"), "y");
//   PlanProto plan = b.Build();   // VerifyPlan(plan) is OK
//
// Ids: tasks from 1, registers from 101, in call order (so messages are easy to predict).
#ifndef ONEFLOW_LIKE_COMPILER_PLAN_PLAN_TEST_UTIL_H_
#define ONEFLOW_LIKE_COMPILER_PLAN_PLAN_TEST_UTIL_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace compiler {

// A float32 slot of the given dims.
TensorDescProto F32(std::vector<int64_t> dims);

class TestPlanBuilder {
 public:
  TestPlanBuilder(int32_t world_size, int64_t pieces_per_step);

  // A task on `rank` (cpu:0, `stream`; stream kind COMPUTE for 0, else COMM). Returns its id.
  int64_t AddTask(int32_t rank, TaskProto::Type type, const std::string& name, int32_t stream = 0);
  // ACCUMULATE or REPEAT with CountParams.count = `count`.
  int64_t AddCountTask(int32_t rank, TaskProto::Type type, const std::string& name, int64_t count);
  // COLLECTIVE on stream 1 with the given group and global order. Its geometry is that of an
  // all-reduce of the default float32[2,2] slot (logical_dims [2,2], every region [0:2,0:2]);
  // SetCollectiveGeometry changes it.
  int64_t AddCollective(int32_t rank, const std::string& name, std::vector<int32_t> group,
                        int64_t global_order,
                        CollectiveParams::Kind kind = CollectiveParams::ALL_REDUCE);
  // Replaces the geometry of COLLECTIVE `task`: regions as {begin, end} pairs, one per member.
  using Box = std::pair<std::vector<int64_t>, std::vector<int64_t>>;
  void SetCollectiveGeometry(int64_t task, std::vector<int64_t> logical_dims, Box group_region,
                             std::vector<Box> input_regions, std::vector<Box> output_regions);

  // A register produced by `producer_task` (on its rank), one output slot ref per slot.
  // Empty `slots` = a control register without memory.
  int64_t AddRegister(int64_t producer_task, const std::string& name, int32_t count = 1,
                      std::vector<TensorDescProto> slots = {F32({2, 2})}, bool persistent = false);
  // `consumer_task` (same rank as the register's producer) consumes `register_id`; adds an
  // input slot ref to slot 0 when the register has slots.
  void Connect(int64_t register_id, int64_t consumer_task);
  // A TRANSFER task on `to_rank` (stream 1) pulling `register_id` through a new mirror.
  int64_t AddTransfer(int64_t register_id, int32_t to_rank, const std::string& name);

  // SOURCE + register (one slot, `slot`) + INPUT binding. Returns {task id, register id}.
  std::pair<int64_t, int64_t> AddInput(int32_t rank, const std::string& tensor, int32_t count = 1,
                                       TensorDescProto slot = F32({2, 2}));
  // The variable holder: SOURCE + persistent register (count 1) + VARIABLE binding.
  std::pair<int64_t, int64_t> AddVariable(int32_t rank, const std::string& tensor);
  // SINK consuming `register_id` + OUTPUT binding. Returns the task id.
  int64_t AddSink(int64_t register_id, const std::string& tensor);

  // Mutable access before Build(), for tests that break an invariant on purpose.
  TaskProto* task(int64_t id);
  RegisterProto* producing_register(int64_t id);

  // The finished plan (ranks ascending, blocks sized, memory summary filled).
  PlanProto Build() const;

 private:
  RankPlanProto* Rank(int32_t rank);

  PlanProto plan_;  // rank_plans are kept in ranks_ until Build()
  std::map<int32_t, RankPlanProto> ranks_;
  std::map<int64_t, std::pair<int32_t, int>> task_at_;      // id -> (rank, index)
  std::map<int64_t, std::pair<int32_t, int>> register_at_;  // producing entries
  std::map<std::pair<int32_t, int32_t>, int64_t> next_order_;
  std::map<int32_t, std::pair<int64_t, int64_t>> used_bytes_;  // rank -> (persistent, reusable)
  int64_t next_task_id_ = 1;
  int64_t next_register_id_ = 101;
};

// Lookups into a built plan (nullptr if absent).
TaskProto* FindTask(PlanProto* plan, int64_t id);
RegisterProto* FindEntry(PlanProto* plan, int32_t rank, int64_t register_id);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_PLAN_PLAN_TEST_UTIL_H_
