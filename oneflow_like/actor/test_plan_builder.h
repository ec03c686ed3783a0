// TestPlanBuilder (testonly): builds PlanProtos by hand for runtime tests, filling in what a
// compiler would (ids, producers/consumers, memory offsets, stream orders) so a test states
// only the structure it is about.
//
//   TestPlanBuilder b(/*world_size=*/1, /*pieces_per_step=*/2);
//   int64_t x = b.AddRegister(0, "x", /*count=*/2, {{DataType::kFloat32, Shape{2, 3}}});
//   int64_t y = b.AddRegister(0, "y", 1, {{DataType::kFloat32, Shape{2, 3}}});
//   b.AddSource(0, "x.source", "x", x);   b.BindInput(0, "x", x, Shape{2, 3});
//   b.AddCompute(0, "relu", "relu", {}, {x}, {y});
//   b.AddSink(0, "y.sink", "y", y);       b.BindOutput(0, "y", y, Shape{2, 3});
//   PlanProto plan = b.Build();
//
// Registers get consecutive 64-byte aligned offsets in one reusable block per rank (variables:
// one persistent block). Producers and consumers are derived from the tasks at Build().
// Not thread-safe (one test thread builds a plan).
#ifndef ONEFLOW_LIKE_ACTOR_TEST_PLAN_BUILDER_H_
#define ONEFLOW_LIKE_ACTOR_TEST_PLAN_BUILDER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "oneflow_like/core/attr.h"
#include "oneflow_like/core/proto/plan.pb.h"
#include "oneflow_like/core/shape.h"

namespace oneflow_like {
namespace actor {

class TestPlanBuilder {
 public:
  TestPlanBuilder(int32_t world_size, int64_t pieces_per_step);

  // A register produced on `rank`; `persistent` puts it in the variable block. No slots = a
  // control-only register. Returns its plan-wide id.
  int64_t AddRegister(int32_t rank, const std::string& name, int32_t count, const std::vector<TensorDesc>& slots,
                      bool persistent = false);
  // A mirror on `rank` of register `register_id` (produced on another rank).
  void AddMirror(int32_t rank, int64_t register_id);

  // A task; `stream` selects the thread. Its payload inputs/outputs (TaskProto.inputs/outputs)
  // are every slot of every consumed/produced register, in order; edit them for control-only
  // inputs. Returns the task for further edits (valid until the next Add*).
  TaskProto* AddTask(int32_t rank, TaskProto::Type type, const std::string& name, const std::vector<int64_t>& consumed,
                     const std::vector<int64_t>& produced, int32_t stream = 0);
  TaskProto* AddCompute(int32_t rank, const std::string& name, const std::string& op_type, const AttrMap& attrs,
                        const std::vector<int64_t>& consumed, const std::vector<int64_t>& produced, int32_t stream = 0);
  TaskProto* AddSource(int32_t rank, const std::string& name, const std::string& tensor, int64_t produced,
                       const std::vector<int64_t>& consumed = {});
  TaskProto* AddSink(int32_t rank, const std::string& name, const std::string& tensor, int64_t consumed);

  // Bindings (slot 0 of the register unless given). `nd_sbp` e.g. "S(0)" (informational).
  void BindInput(int32_t rank, const std::string& tensor, int64_t register_id, const Shape& logical,
                 const std::vector<int64_t>& offset = {}, const std::string& nd_sbp = "B");
  void BindOutput(int32_t rank, const std::string& tensor, int64_t register_id, const Shape& logical,
                  const std::vector<int64_t>& offset = {}, const std::string& nd_sbp = "B");
  void BindVariable(int32_t rank, const std::string& tensor, int64_t register_id, const Shape& logical,
                    const InitializerProto& initializer, const std::vector<int64_t>& offset = {},
                    const std::string& nd_sbp = "B");

  PlanProto Build() const;

 private:
  RankPlanProto& rank_plan(int32_t rank) { return *plan_.mutable_rank_plans(rank); }  // REQUIRES: rank < world
  void Bind(int32_t rank, const std::string& tensor, TensorBindingProto::Kind kind, int64_t register_id,
            const Shape& logical, const std::vector<int64_t>& offset, const std::string& nd_sbp,
            const InitializerProto* initializer);

  int SlotCount(int64_t register_id) const;

  PlanProto plan_;
  int64_t next_register_ = 100;
  int64_t next_task_ = 1;
  std::map<std::pair<int32_t, int32_t>, int64_t> next_order_;  // (rank, stream) -> order
  std::map<std::pair<int32_t, bool>, int64_t> block_used_;     // (rank, persistent) -> bytes
};

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_TEST_PLAN_BUILDER_H_
