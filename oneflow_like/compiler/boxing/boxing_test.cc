// Classification, structure, determinism and error handling of the boxing planner. Numerical
// correctness of every transition is in boxing_sim_test.cc; costs in boxing_cost_test.cc.
#include "oneflow_like/compiler/boxing/boxing.h"

#include <set>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/boxing/boxing_test_util.h"

namespace oneflow_like {
namespace compiler {
namespace {

using testing_util::F32Bytes;
using testing_util::MakeRequest;
using testing_util::RoundTrips;

constexpr char kFour[] = "cpu:[0,1,2,3]";
constexpr char kMesh[] = "cpu:[[0,1],[2,3]]";

BoxingOptions Policy(SchedulePolicy policy) {
  BoxingOptions o;
  o.policy = policy;
  return o;
}

BoxingPlan Expand(const BoxingRequest& r, SchedulePolicy policy = SchedulePolicy::kAuto) {
  absl::StatusOr<BoxingPlan> plan = PointToPointExpander(Policy(policy)).Expand(r);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : BoxingPlan{};
}

Rank R(int r) { return Rank(r); }

// Bytes received by `rank` over transfers.
int64_t BytesReceived(const BoxingPlan& plan, Rank rank) {
  int64_t b = 0;
  for (const BoxingStep& s : plan.steps) {
    if (s.kind == StepKind::kTransfer && s.rank == rank) b += s.bytes;
  }
  return b;
}

TEST(ClassifyBoxingTest, OneDimensionalTransitions) {
  struct Case {
    const char* from;
    const char* to;
    BoxingKind kind;
  };
  const Case cases[] = {
      {"S(0)", "B", BoxingKind::kAllGather},        {"P", "B", BoxingKind::kAllReduce},
      {"P", "S(0)", BoxingKind::kReduceScatter},    {"S(0)", "S(1)", BoxingKind::kAllToAll},
      {"B", "S(1)", BoxingKind::kLocalSlice},       {"B", "P", BoxingKind::kBroadcastToPartial},
      {"S(0)", "P", BoxingKind::kSplitToPartial},   {"S(0)", "S(0)", BoxingKind::kIdentity},
      {"B", "B", BoxingKind::kIdentity},            {"P", "P", BoxingKind::kIdentity},
  };
  for (const Case& c : cases) {
    BoxingRequest r = MakeRequest("[7,5]", kFour, c.from, kFour, c.to);
    std::vector<BoxingKind> axes;
    EXPECT_EQ(ClassifyBoxing(r, &axes), c.kind) << c.from << " -> " << c.to;
    EXPECT_EQ(axes, std::vector<BoxingKind>{c.kind});
    EXPECT_EQ(Expand(r).kind, c.kind);
  }
  EXPECT_EQ(BoxingKindName(BoxingKind::kAllGather), "all_gather");
  EXPECT_EQ(BoxingKindName(BoxingKind::kBroadcastToPartial), "broadcast_to_partial");
}

TEST(ClassifyBoxingTest, NdAndCrossPlacement) {
  std::vector<BoxingKind> axes;
  EXPECT_EQ(ClassifyBoxing(MakeRequest("[7,5]", kMesh, "(S(0),P)", kMesh, "(S(0),B)"), &axes), BoxingKind::kNd);
  EXPECT_EQ(axes, (std::vector<BoxingKind>{BoxingKind::kIdentity, BoxingKind::kAllReduce}));
  EXPECT_EQ(ClassifyBoxing(MakeRequest("[7,5]", kMesh, "(S(0),S(1))", kMesh, "(S(0),S(1))")), BoxingKind::kIdentity);
  EXPECT_EQ(ClassifyBoxing(MakeRequest("[7,5]", "cpu:[0,1]", "S(0)", "cpu:[2,3,4]", "S(1)"), &axes),
            BoxingKind::kCrossPlacement);
  EXPECT_TRUE(axes.empty());
  // Same ranks but another hierarchy or device type is still another placement.
  EXPECT_EQ(ClassifyBoxing(MakeRequest("[8,4]", kFour, "S(0)", kMesh, "(S(0),B)")), BoxingKind::kCrossPlacement);
  EXPECT_EQ(ClassifyBoxing(MakeRequest("[8,4]", "cpu:[0,1]", "S(0)", "cuda:[0,1]", "S(0)")),
            BoxingKind::kCrossPlacement);
}

TEST(BoxingStructureTest, IdentityHasNoSteps) {
  BoxingPlan plan = Expand(MakeRequest("[7,5]", kFour, "S(1)", kFour, "S(1)"));
  EXPECT_TRUE(plan.steps.empty());
  EXPECT_EQ(plan.schedule, BoxingSchedule::kNone);
  EXPECT_EQ(plan.dst_values, (std::vector<int32_t>{0, 1, 2, 3}));
}

TEST(BoxingStructureTest, AllGatherDirectReceivesOneBlockFromEachPeer) {
  BoxingPlan plan = Expand(MakeRequest("[7,5]", kFour, "S(0)", kFour, "B"), SchedulePolicy::kDirect);
  EXPECT_EQ(plan.schedule, BoxingSchedule::kDirect);
  const int64_t rows[] = {2, 2, 2, 1};  // balanced split of 7 rows
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(plan.CountSteps(StepKind::kTransfer, R(r)), 3) << plan.ToString();
    EXPECT_EQ(plan.CountSteps(StepKind::kConcat, R(r)), 1);
    EXPECT_EQ(plan.CountSteps(StepKind::kSlice, R(r)), 0);  // whole shards travel
    EXPECT_EQ(BytesReceived(plan, R(r)), (7 - rows[r]) * 5 * 4);
    EXPECT_EQ(plan.values[plan.dst_values[r]].region, Region::Whole(Shape({7, 5})));
    EXPECT_EQ(plan.StepsOfRank(R(r)).size(), 3u + 3u + 1u);  // receives, sends, concat
  }
}

TEST(BoxingStructureTest, LocalSliceMovesNothing) {
  BoxingPlan plan = Expand(MakeRequest("[7,5]", kFour, "B", kFour, "S(1)"));
  EXPECT_EQ(plan.CountSteps(StepKind::kTransfer), 0);
  EXPECT_EQ(plan.CountSteps(StepKind::kSlice), 4);
  const int64_t col_begin[] = {0, 2, 3, 4};
  for (int r = 0; r < 4; ++r) {
    const BoxingValue& v = plan.values[plan.dst_values[r]];
    EXPECT_EQ(v.device.rank, R(r));
    EXPECT_EQ(v.region.begin[1], col_begin[r]);
  }
}

TEST(BoxingStructureTest, AllReduceDirectAndRing) {
  BoxingPlan direct = Expand(MakeRequest("[8,5]", kFour, "P", kFour, "B"), SchedulePolicy::kDirect);
  BoxingPlan ring = Expand(MakeRequest("[8,5]", kFour, "P", kFour, "B"), SchedulePolicy::kRing);
  EXPECT_EQ(ring.schedule, BoxingSchedule::kRing);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(direct.CountSteps(StepKind::kTransfer, R(r)), 3);
    EXPECT_EQ(direct.CountSteps(StepKind::kAdd, R(r)), 1);
    EXPECT_EQ(BytesReceived(direct, R(r)), 3 * 8 * 5 * 4);
    // Ring: 3 reduce-scatter + 3 all-gather messages of a quarter (2 rows) each.
    EXPECT_EQ(ring.CountSteps(StepKind::kTransfer, R(r)), 6);
    EXPECT_EQ(ring.CountSteps(StepKind::kAdd, R(r)), 3);
    EXPECT_EQ(ring.CountSteps(StepKind::kConcat, R(r)), 1);
    EXPECT_EQ(BytesReceived(ring, R(r)), 6 * 2 * 5 * 4);
  }
}

TEST(BoxingStructureTest, ReduceScatterAndAllToAll) {
  BoxingPlan rs = Expand(MakeRequest("[7,5]", kFour, "P", kFour, "S(0)"), SchedulePolicy::kDirect);
  BoxingPlan a2a = Expand(MakeRequest("[7,5]", kFour, "S(0)", kFour, "S(1)"));
  EXPECT_EQ(a2a.schedule, BoxingSchedule::kDirect);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(rs.CountSteps(StepKind::kTransfer, R(r)), 3);
    EXPECT_EQ(rs.CountSteps(StepKind::kSlice, R(r)), 4);  // one block per destination
    EXPECT_EQ(rs.CountSteps(StepKind::kAdd, R(r)), 1);
    EXPECT_EQ(a2a.CountSteps(StepKind::kTransfer, R(r)), 3);
    EXPECT_EQ(a2a.CountSteps(StepKind::kConcat, R(r)), 1);
  }
}

TEST(BoxingStructureTest, ToPartialKeepsOneContributor) {
  BoxingPlan b2p = Expand(MakeRequest("[7,5]", kFour, "B", kFour, "P"));
  EXPECT_EQ(b2p.CountSteps(StepKind::kTransfer), 0);
  EXPECT_EQ(b2p.dst_values[0], 0);  // rank 0 keeps its copy
  for (int r = 1; r < 4; ++r) {
    ASSERT_GE(b2p.dst_values[r], b2p.num_source_values());
    EXPECT_EQ(b2p.steps[b2p.dst_values[r] - b2p.num_source_values()].kind, StepKind::kZeros);
  }
  BoxingPlan s2p = Expand(MakeRequest("[7,5]", kFour, "S(0)", kFour, "P"));
  EXPECT_EQ(s2p.CountSteps(StepKind::kTransfer), 0);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(s2p.CountSteps(StepKind::kConcat, R(r)), 1);  // shard embedded in zeros
}

TEST(BoxingStructureTest, CrossPlacementDifferentRankCounts) {
  BoxingPlan plan = Expand(MakeRequest("[7,5]", "cpu:[0,1]", "S(0)", "cpu:[2,3,4]", "S(1)"));
  EXPECT_EQ(plan.kind, BoxingKind::kCrossPlacement);
  int64_t total = 0;
  for (int r = 2; r <= 4; ++r) {
    EXPECT_EQ(plan.CountSteps(StepKind::kTransfer, R(r)), 2);  // one block from each source rank
    total += BytesReceived(plan, R(r));
  }
  EXPECT_EQ(total, 7 * 5 * 4);  // every element crosses exactly once
  EXPECT_EQ(plan.CountSteps(StepKind::kSlice, R(0)), 3);
  EXPECT_EQ(plan.CountSteps(StepKind::kSlice, R(1)), 3);
}

TEST(BoxingStructureTest, StageBoundaryPullsFromNeighboursAndSpreadsBroadcastLoad) {
  BoxingPlan split = Expand(MakeRequest("[7,5]", kFour, "S(0)", "cpu:[4,5]", "S(0)"));
  // Rows [0,4) = shards of r0, r1; rows [4,7) = shards of r2, r3: whole shards, no slicing.
  std::set<int> peers4, peers5;
  for (const BoxingStep& s : split.steps) {
    EXPECT_NE(s.kind, StepKind::kSlice);
    if (s.kind == StepKind::kTransfer) (s.rank == R(4) ? peers4 : peers5).insert(s.peer.value());
  }
  EXPECT_EQ(peers4, (std::set<int>{0, 1}));
  EXPECT_EQ(peers5, (std::set<int>{2, 3}));
  BoxingPlan bcast = Expand(MakeRequest("[7,5]", kFour, "B", "cpu:[4,5]", "B"));
  ASSERT_EQ(bcast.CountSteps(StepKind::kTransfer), 2);
  EXPECT_NE(bcast.steps[0].peer, bcast.steps[1].peer);  // not both from rank 0
}

TEST(BoxingStructureTest, HostToDeviceOnOneRankIsACopy) {
  BoxingPlan plan = Expand(MakeRequest("[8,4]", "cpu:[0,1]", "S(0)", "cuda:[0,1]", "S(0)"));
  EXPECT_EQ(plan.CountSteps(StepKind::kTransfer), 0);
  ASSERT_EQ(plan.CountSteps(StepKind::kCopy), 2);
  for (int r = 0; r < 2; ++r) {
    const BoxingStep& s = plan.steps[r];
    EXPECT_EQ(s.kind, StepKind::kCopy);
    EXPECT_EQ(s.rank, R(r));
    EXPECT_EQ(s.bytes, 4 * 4 * 4);
    EXPECT_EQ(plan.values[s.inputs[0]].device, (DeviceRef{R(r), DeviceType::kCpu}));
    EXPECT_EQ(plan.values[s.output].device, (DeviceRef{R(r), DeviceType::kCuda}));
    EXPECT_EQ(plan.dst_values[r], s.output);
  }
  EXPECT_NE(plan.ToString().find("copy r1 cpu -> cuda"), std::string::npos) << plan.ToString();
  // And back: device -> host, still no transfer.
  BoxingPlan back = Expand(MakeRequest("[8,4]", "cuda:[0,1]", "S(0)", "cpu:[0,1]", "B"));
  EXPECT_EQ(back.CountSteps(StepKind::kCopy), 2);  // each rank's shard to its host, ...
  EXPECT_EQ(back.CountSteps(StepKind::kTransfer), 2);  // ... then the other half from the other host
  for (const BoxingStep& s : back.steps) {
    if (s.kind == StepKind::kTransfer) EXPECT_NE(s.peer, s.rank);
  }
}

TEST(BoxingStructureTest, MovesBetweenDeviceTypesAcrossRanksGoThroughHostMemory) {
  // cpu r0 -> cuda r1: a host transfer, then a copy on the receiver.
  BoxingPlan up = Expand(MakeRequest("[8,4]", "cpu:[0]", "B", "cuda:[1]", "B"));
  ASSERT_EQ(up.steps.size(), 2u) << up.ToString();
  EXPECT_EQ(up.steps[0].kind, StepKind::kTransfer);
  EXPECT_EQ(up.values[up.steps[0].output].device, (DeviceRef{R(1), DeviceType::kCpu}));
  EXPECT_EQ(up.steps[1].kind, StepKind::kCopy);
  EXPECT_EQ(up.values[up.dst_values[0]].device, (DeviceRef{R(1), DeviceType::kCuda}));
  // cuda r0 -> cpu r1: a copy on the sender, then a host transfer.
  BoxingPlan down = Expand(MakeRequest("[8,4]", "cuda:[0]", "B", "cpu:[1]", "B"));
  ASSERT_EQ(down.steps.size(), 2u) << down.ToString();
  EXPECT_EQ(down.steps[0].kind, StepKind::kCopy);
  EXPECT_EQ(down.steps[0].rank, R(0));
  EXPECT_EQ(down.steps[1].kind, StepKind::kTransfer);
  EXPECT_EQ(down.values[down.steps[1].inputs[0]].device, (DeviceRef{R(0), DeviceType::kCpu}));
  // cuda -> cuda across ranks: a transfer of device memory, no copy.
  BoxingPlan same = Expand(MakeRequest("[8,4]", "cuda:[0]", "B", "cuda:[1]", "B"));
  EXPECT_EQ(same.CountSteps(StepKind::kCopy), 0);
  EXPECT_EQ(same.CountSteps(StepKind::kTransfer), 1);
}

TEST(BoxingStructureTest, TwoDimensionalCompositions) {
  // (S(0),P) -> (S(0),B): an all-reduce inside each mesh row.
  BoxingPlan rows = Expand(MakeRequest("[7,5]", kMesh, "(S(0),P)", kMesh, "(S(0),B)"), SchedulePolicy::kDirect);
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(rows.CountSteps(StepKind::kTransfer, R(r)), 1);
    EXPECT_EQ(rows.CountSteps(StepKind::kAdd, R(r)), 1);
  }
  for (const BoxingStep& s : rows.steps) {
    if (s.kind == StepKind::kTransfer) {
      EXPECT_EQ(s.peer.value() / 2, s.rank.value() / 2);  // same row
    }
  }
  // (P,P) -> (B,B): direct sums 4 contributions; staged does two group all-reduces.
  BoxingRequest pp = MakeRequest("[7,5]", kMesh, "(P,P)", kMesh, "(B,B)");
  BoxingPlan direct = Expand(pp, SchedulePolicy::kDirect);
  BoxingPlan best = Expand(pp);
  EXPECT_EQ(best.schedule, BoxingSchedule::kStaged) << best.schedule_detail;
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(direct.CountSteps(StepKind::kTransfer, R(r)), 3);
    EXPECT_EQ(best.CountSteps(StepKind::kTransfer, R(r)), 2);
  }
  // (S(0),S(1)) -> (B,B): staged gathers along one axis, then the other.
  BoxingPlan gather = Expand(MakeRequest("[7,5]", kMesh, "(S(0),S(1))", kMesh, "(B,B)"));
  EXPECT_EQ(gather.schedule, BoxingSchedule::kStaged);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(gather.CountSteps(StepKind::kTransfer, R(r)), 2);
}

TEST(BoxingStructureTest, ValuesAreDefinedBeforeUse) {
  BoxingPlan plan = Expand(MakeRequest("[7,5]", kMesh, "(S(1),B)", kMesh, "(S(0),S(0))"));
  std::vector<bool> defined(plan.values.size(), false);
  for (int32_t i = 0; i < plan.num_source_values(); ++i) defined[i] = true;
  for (const BoxingStep& s : plan.steps) {
    for (int32_t in : s.inputs) EXPECT_TRUE(defined[in]) << plan.ToString();
    EXPECT_EQ(plan.values[s.output].device.rank, s.rank);
    defined[s.output] = true;
  }
  for (int32_t v : plan.dst_values) EXPECT_TRUE(defined[v]);
}

TEST(BoxingDeterminismTest, SameRequestSamePlan) {
  const BoxingRequest requests[] = {
      MakeRequest("[7,5]", kMesh, "(S(1),B)", kMesh, "(S(0),S(0))"),
      MakeRequest("[7,5]", "cpu:[0,1]", "S(0)", "cpu:[2,3,4]", "S(1)"),
      MakeRequest("[64,64]", kFour, "P", kFour, "B"),
      MakeRequest("[5,3,4]", "cpu:[0,1,2]", "P", "cpu:[0,1,2]", "S(2)"),
  };
  for (const BoxingRequest& r : requests) {
    const std::string a = PointToPointExpander().Expand(r)->ToString();
    const std::string b = PointToPointExpander().Expand(r)->ToString();
    EXPECT_EQ(a, b);
    EXPECT_EQ(CollectiveExpander().Expand(r)->ToString(), CollectiveExpander().Expand(r)->ToString());
  }
}

TEST(CollectiveExpanderTest, OneCollectivePerGroup) {
  CollectiveExpander expander;
  BoxingPlan ar = expander.Expand(MakeRequest("[7,5]", kFour, "P", kFour, "B")).value();
  ASSERT_EQ(ar.steps.size(), 1u);
  EXPECT_EQ(ar.schedule, BoxingSchedule::kCollective);
  EXPECT_EQ(ar.steps[0].collective, CollectiveKind::kAllReduce);
  EXPECT_EQ(ar.steps[0].group, (std::vector<Rank>{R(0), R(1), R(2), R(3)}));
  EXPECT_TRUE(RoundTrips(ar, 1e-5));

  BoxingPlan rows = expander.Expand(MakeRequest("[7,5]", kMesh, "(S(0),P)", kMesh, "(S(0),B)")).value();
  ASSERT_EQ(rows.steps.size(), 2u);
  EXPECT_EQ(rows.steps[0].group, (std::vector<Rank>{R(0), R(1)}));
  EXPECT_EQ(rows.steps[1].group, (std::vector<Rank>{R(2), R(3)}));
  EXPECT_TRUE(RoundTrips(rows, 1e-5));

  BoxingPlan a2a = expander.Expand(MakeRequest("[7,5]", kFour, "S(0)", kFour, "S(1)")).value();
  ASSERT_EQ(a2a.steps.size(), 1u);
  EXPECT_EQ(a2a.steps[0].collective, CollectiveKind::kAllToAll);
  EXPECT_TRUE(RoundTrips(a2a, 0));

  BoxingPlan pp = expander.Expand(MakeRequest("[7,5]", kMesh, "(P,P)", kMesh, "(B,B)")).value();
  EXPECT_EQ(pp.CountSteps(StepKind::kCollective), 4);  // 2 groups per mesh axis
  EXPECT_TRUE(RoundTrips(pp, 1e-5));
}

TEST(CollectiveExpanderTest, FallsBackToPointToPoint) {
  CollectiveExpander expander;
  const BoxingRequest requests[] = {
      MakeRequest("[7,5]", kFour, "B", kFour, "S(0)"),                // local: nothing to collect
      MakeRequest("[7,5]", "cpu:[0,1]", "S(0)", "cpu:[2,3,4]", "S(1)"),  // different placements
      MakeRequest("[8,5]", kMesh, "(S(0),S(0))", kMesh, "(B,S(0))"),  // split nested in the changing axis
  };
  for (const BoxingRequest& r : requests) {
    BoxingPlan plan = expander.Expand(r).value();
    EXPECT_NE(plan.schedule, BoxingSchedule::kCollective) << r.ToString();
    EXPECT_EQ(plan.CountSteps(StepKind::kCollective), 0);
    EXPECT_TRUE(RoundTrips(plan, 0)) << r.ToString();
  }
}

TEST(BoxingErrorTest, BadRequestsNameTheProblem) {
  auto error = [](BoxingRequest r, SchedulePolicy policy = SchedulePolicy::kAuto) {
    r.name = "fc1.out -> fc2.in";
    absl::StatusOr<BoxingPlan> plan = PointToPointExpander(Policy(policy)).Expand(r);
    EXPECT_FALSE(plan.ok());
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(plan.status().message().find("fc1.out -> fc2.in"), std::string::npos) << plan.status();
    return std::string(plan.status().message());
  };
  std::string m = error(MakeRequest("[3,5]", kFour, "S(0)", kFour, "B"));
  EXPECT_NE(m.find("source layout invalid"), std::string::npos) << m;
  EXPECT_NE(m.find("[3,5]"), std::string::npos) << m;
  m = error(MakeRequest("[7,5]", kFour, "S(0)", kFour, "(S(0),B)"));
  EXPECT_NE(m.find("destination layout invalid"), std::string::npos) << m;
  m = error(MakeRequest("[7,5]", kFour, "S(2)", kFour, "B"));
  EXPECT_NE(m.find("split axis 2"), std::string::npos) << m;
  m = error(MakeRequest("[7,5]", kFour, "S(0)", kFour, "B", DataType::kInvalid));
  EXPECT_NE(m.find("invalid dtype"), std::string::npos) << m;
  m = error(MakeRequest("[7,5]", kFour, "B", kFour, "S(0)"), SchedulePolicy::kRing);
  EXPECT_NE(m.find("ring"), std::string::npos) << m;
  m = error(MakeRequest("[7,5]", kFour, "P", kFour, "B"), SchedulePolicy::kStaged);
  EXPECT_NE(m.find("staged"), std::string::npos) << m;
  EXPECT_FALSE(EstimateBoxing(MakeRequest("[3,5]", kFour, "S(0)", kFour, "B")).ok());
  EXPECT_FALSE(CollectiveExpander().Expand(MakeRequest("[3,5]", kFour, "S(0)", kFour, "B")).ok());
}

TEST(BoxingErrorTest, SimulatorRejectsMismatchedShards) {
  BoxingPlan plan = Expand(MakeRequest("[8,4]", "cpu:[0,1]", "S(0)", "cpu:[0,1]", "B"));
  std::vector<Tensor> f64 = {Tensor(DataType::kFloat64, Shape({4, 4})), Tensor(DataType::kFloat64, Shape({4, 4}))};
  absl::Status s = SimulateBoxing(plan, f64).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("mismatched dtype"), std::string::npos) << s;
  EXPECT_NE(s.message().find("float64"), std::string::npos) << s;
  std::vector<Tensor> one = {Tensor(DataType::kFloat32, Shape({4, 4}))};
  EXPECT_EQ(SimulateBoxing(plan, one).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
