// Numerical correctness: for every SBP transition on uneven shapes, 1-D, 2-D and across
// placements, every expander's plan run by the reference interpreter reproduces the logical
// tensor (bit-exact when no sums are involved, within tolerance otherwise).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/boxing/boxing_test_util.h"

namespace oneflow_like {
namespace compiler {
namespace {

using testing_util::MakeRequest;
using testing_util::RoundTrips;

// A partial-sum source needs additions, so exact equality is not guaranteed.
double ToleranceFor(const BoxingRequest& r) { return r.src_sbp.any_partial() ? 1e-5 : 0.0; }

// Every (from, to) pair of `sbps` on src_placement -> dst_placement, through each expander and
// each applicable forced schedule. Returns the number of plans checked.
int Sweep(const std::string& shape, const std::string& src_placement, const std::string& dst_placement,
          const std::vector<std::string>& src_sbps, const std::vector<std::string>& dst_sbps) {
  int checked = 0;
  for (const std::string& from : src_sbps) {
    for (const std::string& to : dst_sbps) {
      BoxingRequest r = MakeRequest(shape, src_placement, from, dst_placement, to);
      if (!ValidateBoxingRequest(r).ok()) continue;  // e.g. a split of a too-short axis
      const double tol = ToleranceFor(r);
      for (SchedulePolicy policy : {SchedulePolicy::kAuto, SchedulePolicy::kDirect, SchedulePolicy::kRing,
                                    SchedulePolicy::kStaged}) {
        BoxingOptions options;
        options.policy = policy;
        absl::StatusOr<BoxingPlan> plan = PointToPointExpander(options).Expand(r);
        if (!plan.ok()) {
          // Only forced schedules that do not apply may fail.
          EXPECT_TRUE(policy == SchedulePolicy::kRing || policy == SchedulePolicy::kStaged) << plan.status();
          continue;
        }
        EXPECT_TRUE(RoundTrips(*plan, tol)) << r.ToString() << " policy " << static_cast<int>(policy);
        ++checked;
      }
      absl::StatusOr<BoxingPlan> collective = CollectiveExpander().Expand(r);
      EXPECT_TRUE(collective.ok()) << collective.status();
      if (!collective.ok()) continue;
      EXPECT_TRUE(RoundTrips(*collective, tol)) << r.ToString() << " collective";
      ++checked;
    }
  }
  return checked;
}

const std::vector<std::string> k2dSbps = {"S(0)", "S(1)", "B", "P"};
const std::vector<std::string> k3dSbps = {"S(0)", "S(1)", "S(2)", "B", "P"};

std::vector<std::string> MeshSbps(const std::vector<std::string>& one_d) {
  std::vector<std::string> out;
  for (const std::string& a : one_d) {
    for (const std::string& b : one_d) out.push_back("(" + a + "," + b + ")");
  }
  return out;
}

TEST(BoxingSimTest, OneDimensionalAllTransitionsUneven) {
  EXPECT_GT(Sweep("[7,5]", "cpu:[0,1,2,3]", "cpu:[0,1,2,3]", k2dSbps, k2dSbps), 60);
  EXPECT_GT(Sweep("[5,3,4]", "cpu:[0,1,2]", "cpu:[0,1,2]", k3dSbps, k3dSbps), 80);
}

TEST(BoxingSimTest, RingScheduleIsExactlyTheSum) {
  // Large enough for the ring to win under kAuto; the ring re-associates sums.
  BoxingRequest r = MakeRequest("[64,33]", "cpu:[0,1,2,3,4]", "P", "cpu:[0,1,2,3,4]", "B");
  BoxingOptions options;
  options.policy = SchedulePolicy::kRing;
  BoxingPlan plan = PointToPointExpander(options).Expand(r).value();
  EXPECT_TRUE(RoundTrips(plan, 1e-5));
  r.dst_sbp = NdSbp::Parse("S(1)").value();
  EXPECT_TRUE(RoundTrips(PointToPointExpander(options).Expand(r).value(), 1e-5));
}

TEST(BoxingSimTest, TwoDimensionalAllTransitions) {
  const std::vector<std::string> mesh = MeshSbps(k2dSbps);
  EXPECT_GT(Sweep("[7,5]", "cpu:[[0,1],[2,3]]", "cpu:[[0,1],[2,3]]", mesh, mesh), 500);
}

TEST(BoxingSimTest, TwoDimensionalNamedCases) {
  const char* mesh = "cpu:[[0,1],[2,3]]";
  struct Case {
    const char* shape;
    const char* from;
    const char* to;
  };
  const Case cases[] = {
      {"[7,5]", "(S(0),P)", "(S(0),B)"},   {"[7,5]", "(P,P)", "(B,B)"},         {"[7,5]", "(S(0),S(1))", "(B,B)"},
      {"[7,5]", "(S(1),B)", "(S(0),S(0))"}, {"[5,3,4]", "(S(1),B)", "(S(0),S(0))"}, {"[5,3,4]", "(P,S(2))", "(S(0),P)"},
  };
  for (const Case& c : cases) {
    BoxingRequest r = MakeRequest(c.shape, mesh, c.from, mesh, c.to);
    BoxingPlan plan = PointToPointExpander().Expand(r).value();
    EXPECT_EQ(plan.kind, BoxingKind::kNd);
    EXPECT_TRUE(RoundTrips(plan, ToleranceFor(r))) << r.ToString();
  }
  // A 2 x 3 mesh: uneven in both mesh axes.
  const std::vector<std::string> mesh23 = MeshSbps({"S(0)", "S(1)", "B", "P"});
  EXPECT_GT(Sweep("[7,6]", "cpu:[[0,1,2],[3,4,5]]", "cpu:[[0,1,2],[3,4,5]]", mesh23, mesh23), 500);
}

TEST(BoxingSimTest, CrossPlacement) {
  // Different rank counts, disjoint ranks.
  EXPECT_GT(Sweep("[7,5]", "cpu:[0,1]", "cpu:[2,3,4]", k2dSbps, k2dSbps), 30);
  // A pipeline stage boundary.
  EXPECT_GT(Sweep("[7,5]", "cpu:[0,1,2,3]", "cpu:[4,5]", k2dSbps, k2dSbps), 30);
  // Overlapping ranks, 2-D to 1-D and back, another hierarchy over the same ranks.
  EXPECT_GT(Sweep("[7,5]", "cpu:[[0,1],[2,3]]", "cpu:[2,3,4]", MeshSbps(k2dSbps), k2dSbps), 100);
  EXPECT_GT(Sweep("[7,5]", "cpu:[0,1,2,3]", "cpu:[[0,1],[2,3]]", k2dSbps, MeshSbps(k2dSbps)), 100);
  EXPECT_GT(Sweep("[5,3,4]", "cpu:[0,1,2]", "cuda:[0,1,2]", k3dSbps, k3dSbps), 30);
}

TEST(BoxingSimTest, NamedCrossPlacementCasesAreExact) {
  for (BoxingRequest r : {MakeRequest("[7,5]", "cpu:[0,1]", "S(0)", "cpu:[2,3,4]", "S(1)"),
                          MakeRequest("[7,5]", "cpu:[0,1,2,3]", "S(0)", "cpu:[4,5]", "S(0)"),
                          MakeRequest("[5,3,4]", "cpu:[0,1,2,3]", "S(0)", "cpu:[4,5]", "S(2)")}) {
    EXPECT_TRUE(RoundTrips(PointToPointExpander().Expand(r).value(), 0)) << r.ToString();
  }
}

TEST(BoxingSimTest, OtherDtypes) {
  for (DataType dtype : {DataType::kFloat64, DataType::kInt32, DataType::kInt64, DataType::kBFloat16}) {
    for (const char* from : {"P", "S(0)", "B"}) {
      BoxingRequest r = MakeRequest("[7,5]", "cpu:[0,1,2]", from, "cpu:[0,1,2]", "S(1)", dtype);
      EXPECT_TRUE(RoundTrips(PointToPointExpander().Expand(r).value(), IsFloatingPoint(dtype) ? 1e-2 : 0))
          << r.ToString();
    }
  }
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
