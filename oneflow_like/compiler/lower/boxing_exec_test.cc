// Runs the lowered boxing tasks on real numbers: a tiny interpreter executes every SOURCE,
// TRANSFER, BOXING_SLICE, BOXING_CONCAT, BOXING_ADD and COLLECTIVE of a plan in id order, then
// checks that the register each consumer reads holds exactly its shard of the global tensor.
// This pins down the region conventions (slice regions relative to the input, concat regions
// relative to the output, concat outputs start as zeros; collective regions in logical
// coordinates) against independent references (GetShardSlice, core's shard simulator).
//
// A COLLECTIVE is run as a CPU fallback backend would, from CollectiveParams alone: when the
// first member task of a call (global_order) is reached (every member's input is ready, as the
// boxing plan defines them before the call), a zero buffer over group_region gets each member's
// input added at its input region (a sum for the whole-region sides of ALL_REDUCE /
// REDUCE_SCATTER, a placement for the tiles of ALL_GATHER / ALL_TO_ALL), and each member's
// output is that buffer cut at its output region.
#include <algorithm>
#include <map>
#include <random>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/lower/lower_test_util.h"
#include "oneflow_like/core/shard_simulator.h"

namespace oneflow_like {
namespace compiler {
namespace testing {
namespace {

struct Array {
  std::vector<int64_t> dims;
  std::vector<double> data;
};

int64_t Count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Calls f(index in `outer`, index in the box) for every element of the box [begin, end) of a
// row-major array with dims `outer`.
template <typename F>
void ForBox(const std::vector<int64_t>& outer, const std::vector<int64_t>& begin, const std::vector<int64_t>& end,
            F f) {
  const int axes = static_cast<int>(outer.size());
  std::vector<int64_t> box(axes);
  for (int a = 0; a < axes; ++a) box[a] = end[a] - begin[a];
  const int64_t n = Count(box);
  std::vector<int64_t> at(axes, 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t flat = 0;
    for (int a = 0; a < axes; ++a) flat = flat * outer[a] + begin[a] + at[a];
    f(flat, k);
    for (int a = axes - 1; a >= 0 && ++at[a] == box[a]; --a) at[a] = 0;
  }
}

std::vector<int64_t> Ints(const google::protobuf::RepeatedField<int64_t>& field) {
  return std::vector<int64_t>(field.begin(), field.end());
}

// Executes the data tasks of `plan`. The source x lives on `source`: a device's shard is its
// box of `global`, times w(c) = 2 (c + 1) / (m (m + 1)) for each partial mesh axis of size m
// on which the device has coordinate c (the weights of an axis sum to 1).
std::map<int64_t, Array> Execute(const PlanProto& plan, const Array& global, const Placement& source,
                                 const NdSbp& source_sbp) {
  std::map<int64_t, const TaskProto*> tasks;
  std::map<int64_t, std::vector<int64_t>> slot_dims;  // by register id
  std::map<std::pair<int, int64_t>, const TensorBindingProto*> binding_of;  // (rank, register)
  for (const RankPlanProto& r : plan.rank_plans()) {
    for (const TaskProto& t : r.tasks()) tasks[t.id()] = &t;
    for (const RegisterProto& reg : r.registers()) slot_dims[reg.id()] = Ints(reg.slots(0).dims());
    for (const TensorBindingProto& b : r.bindings()) binding_of[{r.rank(), b.slot().register_id()}] = &b;
  }
  std::map<int64_t, std::vector<const TaskProto*>> members;  // global_order -> member tasks
  for (const auto& [id, t] : tasks) {
    if (t->type() == TaskProto::COLLECTIVE) members[t->collective().global_order()].push_back(t);
  }
  std::map<int64_t, Array> value;
  for (const auto& [id, t] : tasks) {
    if (t->type() == TaskProto::COMPUTE || t->type() == TaskProto::SINK) continue;
    const int64_t out = t->outputs(0).register_id();
    if (t->type() == TaskProto::COLLECTIVE) {
      if (value.count(out)) continue;  // done with the call's first member
      const CollectiveParams& params = t->collective();
      const std::vector<int64_t> group_begin = Ints(params.group_region().begin());
      const std::vector<int64_t> group_end = Ints(params.group_region().end());
      auto relative = [&](const RegionProto& region, std::vector<int64_t>* begin, std::vector<int64_t>* end) {
        *begin = Ints(region.begin());
        *end = Ints(region.end());
        for (size_t a = 0; a < begin->size(); ++a) (*begin)[a] -= group_begin[a], (*end)[a] -= group_begin[a];
      };
      std::vector<int64_t> group_dims(group_begin.size());
      for (size_t a = 0; a < group_dims.size(); ++a) group_dims[a] = group_end[a] - group_begin[a];
      Array group{group_dims, std::vector<double>(Count(group_dims), 0.0)};
      const std::vector<const TaskProto*>& call = members.at(params.global_order());
      EXPECT_EQ(static_cast<int>(call.size()), params.ranks_size()) << t->name();
      for (const TaskProto* member : call) {
        const int m = static_cast<int>(std::find(params.ranks().begin(), params.ranks().end(), member->rank()) -
                                       params.ranks().begin());
        const Array& in = value.at(member->inputs(0).register_id());
        std::vector<int64_t> begin, end;
        relative(params.input_regions(m), &begin, &end);
        ForBox(group.dims, begin, end, [&](int64_t g, int64_t k) { group.data[g] += in.data[k]; });
      }
      for (const TaskProto* member : call) {
        const int m = static_cast<int>(std::find(params.ranks().begin(), params.ranks().end(), member->rank()) -
                                       params.ranks().begin());
        const int64_t member_out = member->outputs(0).register_id();
        Array result{slot_dims[member_out], std::vector<double>(Count(slot_dims[member_out]), 0.0)};
        std::vector<int64_t> begin, end;
        relative(params.output_regions(m), &begin, &end);
        ForBox(group.dims, begin, end, [&](int64_t g, int64_t k) { result.data[k] = group.data[g]; });
        value[member_out] = std::move(result);
      }
      continue;
    }
    Array result{slot_dims[out], std::vector<double>(Count(slot_dims[out]), 0.0)};
    switch (t->type()) {
      case TaskProto::SOURCE: {
        const ShardInfoProto& shard = binding_of.at({t->rank(), out})->shard();
        std::vector<int64_t> begin = Ints(shard.offset()), end = begin;
        for (size_t a = 0; a < end.size(); ++a) end[a] += result.dims[a];
        const std::vector<int64_t> coords = source.Coordinates(source.IndexOf(Rank(t->rank())));
        double scale = 1;
        for (int a = 0; a < source_sbp.num_axes(); ++a) {
          if (!source_sbp[a].is_partial_sum()) continue;
          const double m = static_cast<double>(source.hierarchy()[a]);
          scale *= 2.0 * (coords[a] + 1) / (m * (m + 1));
        }
        ForBox(global.dims, begin, end, [&](int64_t g, int64_t k) { result.data[k] = global.data[g] * scale; });
        break;
      }
      case TaskProto::TRANSFER:
        result = value.at(t->inputs(0).register_id());
        break;
      case TaskProto::BOXING_SLICE: {
        const Array& in = value.at(t->inputs(0).register_id());
        const RegionProto& region = t->slice().output_regions(0);
        ForBox(in.dims, Ints(region.begin()), Ints(region.end()),
               [&](int64_t i, int64_t k) { result.data[k] = in.data[i]; });
        break;
      }
      case TaskProto::BOXING_CONCAT:
        for (int i = 0; i < t->inputs_size(); ++i) {
          const Array& in = value.at(t->inputs(i).register_id());
          const RegionProto& region = t->concat().input_regions(i);
          ForBox(result.dims, Ints(region.begin()), Ints(region.end()),
                 [&](int64_t o, int64_t k) { result.data[o] = in.data[k]; });
        }
        break;
      case TaskProto::BOXING_ADD:
        for (const SlotRefProto& in : t->inputs()) {
          const Array& a = value.at(in.register_id());
          for (size_t i = 0; i < a.data.size(); ++i) result.data[i] += a.data[i];
        }
        break;
      default:
        ADD_FAILURE() << "unexpected task " << t->name();
    }
    value[out] = std::move(result);
  }
  return value;
}

struct Transition {
  std::string src_placement, src_sbp, dst_placement, dst_sbp;
};

TEST(BoxingExecTest, ConsumersReadTheirShardOfTheGlobalTensor) {
  const std::vector<Transition> transitions = {
      {"cpu:[0,1]", "S(0)", "cpu:[0,1]", "B"},
      {"cpu:[0,1,2]", "P", "cpu:[0,1,2]", "B"},
      {"cpu:[0,1,2]", "P", "cpu:[0,1,2]", "S(1)"},
      {"cpu:[0,1,2]", "S(0)", "cpu:[0,1,2]", "S(1)"},
      {"cpu:[0,1]", "B", "cpu:[0,1]", "S(0)"},
      {"cpu:[0,1]", "S(0)", "cpu:[2,3,4]", "S(0)"},
      {"cpu:[0,1]", "S(1)", "cpu:[2,3,4]", "B"},
      {"cpu:[[0,1],[2,3]]", "S(0), B", "cpu:[[0,1],[2,3]]", "B, S(1)"},
      {"cpu:[[0,1],[2,3]]", "P, S(1)", "cpu:[[0,1],[2,3]]", "S(0), S(0)"},
  };
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> digit(-9, 9);
  for (const Transition& c : transitions) {
    SCOPED_TRACE(c.src_placement + " (" + c.src_sbp + ") -> " + c.dst_placement + " (" + c.dst_sbp + ")");
    const std::string text = "x = input(shape=[6,5]) placement=" + c.src_placement + " sbp=[" + c.src_sbp +
                             "]\ny = relu(x) placement=" + c.dst_placement + " in_sbp=[[" + c.dst_sbp +
                             "]]\noutput(y)\n";
    absl::StatusOr<PlanProto> plan = LowerText(text);
    ASSERT_TRUE(plan.ok()) << plan.status();
    Array global{{6, 5}, std::vector<double>(30)};
    for (double& v : global.data) v = digit(rng);
    absl::StatusOr<Placement> source = Placement::Parse(c.src_placement);
    absl::StatusOr<NdSbp> source_sbp = NdSbp::Parse(c.src_sbp);
    ASSERT_TRUE(source.ok() && source_sbp.ok());
    const std::map<int64_t, Array> value = Execute(*plan, global, *source, *source_sbp);
    int checked = 0;
    for (const TaskProto* relu : TasksOfType(*plan, TaskProto::COMPUTE)) {
      const Array& in = value.at(relu->inputs(0).register_id());
      const ShardInfoProto& shard = relu->compute().input_shards(0);
      std::vector<int64_t> begin = Ints(shard.offset()), end = begin;
      for (size_t a = 0; a < end.size(); ++a) end[a] += in.dims[a];
      ForBox(global.dims, begin, end, [&](int64_t g, int64_t k) {
        EXPECT_NEAR(in.data[k], global.data[g], 1e-9) << relu->name() << " element " << k;
      });
      ++checked;
    }
    EXPECT_GT(checked, 0);
  }
}

// Collective-style lowering (BoxingStyle::kCollective) of uneven [7,5] tensors: the interpreter
// runs the COLLECTIVE tasks from their regions alone, and every consumer's input must equal
// core's shard simulator's shard of the global tensor for its device under the consumer's
// NdSbp (ShardTensor, an implementation independent of the boxing planner).
TEST(BoxingExecTest, CollectivesFromTheirRegionsReproduceTheShardSimulator) {
  const std::vector<Transition> transitions = {
      {"cpu:[0,1,2]", "S(0)", "cpu:[0,1,2]", "B"},
      {"cpu:[0,1,2]", "P", "cpu:[0,1,2]", "B"},
      {"cpu:[0,1,2]", "P", "cpu:[0,1,2]", "S(1)"},
      {"cpu:[0,1,2]", "S(0)", "cpu:[0,1,2]", "S(1)"},
      {"cpu:[[0,1],[2,3]]", "S(0), S(1)", "cpu:[[0,1],[2,3]]", "B, B"},
      {"cpu:[[0,1],[2,3]]", "P, S(1)", "cpu:[[0,1],[2,3]]", "B, S(1)"},
      {"cpu:[[0,1],[2,3]]", "S(0), P", "cpu:[[0,1],[2,3]]", "S(1), S(0)"},
  };
  LowerOptions options;
  options.boxing = BoxingStyle::kCollective;
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> digit(-9, 9);
  for (const Transition& c : transitions) {
    SCOPED_TRACE(c.src_placement + " (" + c.src_sbp + ") -> " + c.dst_placement + " (" + c.dst_sbp + ")");
    const std::string text = "x = input(shape=[7,5]) placement=" + c.src_placement + " sbp=[" + c.src_sbp +
                             "]\ny = relu(x) placement=" + c.dst_placement + " in_sbp=[[" + c.dst_sbp +
                             "]]\noutput(y)\n";
    absl::StatusOr<PlanProto> plan = LowerText(text, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_GT(CountTasks(*plan, TaskProto::COLLECTIVE), 0);
    Array global{{7, 5}, std::vector<double>(35)};
    for (double& v : global.data) v = digit(rng);
    absl::StatusOr<Placement> source = Placement::Parse(c.src_placement);
    absl::StatusOr<NdSbp> source_sbp = NdSbp::Parse(c.src_sbp);
    absl::StatusOr<Placement> destination = Placement::Parse(c.dst_placement);
    absl::StatusOr<NdSbp> destination_sbp = NdSbp::Parse(c.dst_sbp);
    ASSERT_TRUE(source.ok() && source_sbp.ok() && destination.ok() && destination_sbp.ok());
    absl::StatusOr<std::vector<Tensor>> expected =
        ShardTensor(Tensor::FromVector(Shape({7, 5}), global.data), *destination_sbp, destination->hierarchy());
    ASSERT_TRUE(expected.ok()) << expected.status();
    const std::map<int64_t, Array> value = Execute(*plan, global, *source, *source_sbp);
    int checked = 0;
    for (const TaskProto* relu : TasksOfType(*plan, TaskProto::COMPUTE)) {
      const Tensor& want = (*expected)[destination->IndexOf(Rank(relu->rank()))];
      const Array& have = value.at(relu->inputs(0).register_id());
      ASSERT_EQ(have.dims, want.shape().dims()) << relu->name();
      const std::vector<double> want_values = want.ToVector<double>();
      for (size_t k = 0; k < want_values.size(); ++k) {
        EXPECT_NEAR(have.data[k], want_values[k], 1e-9) << relu->name() << " element " << k;
      }
      ++checked;
    }
    EXPECT_EQ(checked, destination->num_devices());
  }
}

}  // namespace
}  // namespace testing
}  // namespace compiler
}  // namespace oneflow_like
