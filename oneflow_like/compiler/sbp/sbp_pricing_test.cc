#include "oneflow_like/compiler/sbp/sbp_pricing.h"

#include <chrono>
#include <cmath>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace oneflow_like {
namespace compiler {
namespace {

BoxingRequest Request(const std::string& shape, const std::string& placement, const std::string& from,
                      const std::string& to) {
  const Placement p = Placement::Parse(placement).value();
  std::vector<int64_t> dims;
  for (absl::string_view d : absl::StrSplit(shape, ',')) dims.push_back(std::stoll(std::string(d)));
  return BoxingRequest{TensorDesc{DataType::kFloat32, Shape(dims)}, p, NdSbp::Parse(from).value(), p,
                       NdSbp::Parse(to).value(), ""};
}

// The analytic model tracks the planner within a small factor on placements small enough to
// price exactly, and ranks the common transitions the same way.
TEST(SbpPricingTest, AnalyticModelTracksTheBoxingPlanner) {
  const CostConfig config;
  struct Case {
    std::string placement, from, to;
  };
  const std::vector<Case> cases = {
      {"cpu:0-15", "S(0)", "B"},          {"cpu:0-15", "P", "B"},
      {"cpu:0-15", "P", "S(0)"},          {"cpu:0-15", "S(0)", "S(1)"},
      {"cpu:0-15", "B", "S(1)"},          {"cpu:[[0,1,2,3],[4,5,6,7]]", "(S(0),P)", "(S(0),B)"},
      {"cpu:[[0,1,2,3],[4,5,6,7]]", "(P,P)", "(B,B)"}, {"cpu:[[0,1,2,3],[4,5,6,7]]", "(S(0),S(1))", "(B,B)"},
  };
  for (const std::string shape : {"64,64", "1024,1024"}) {
    std::vector<double> exact, analytic;
    for (const Case& c : cases) {
      const BoxingRequest r = Request(shape, c.placement, c.from, c.to);
      const BoxingEstimate e = EstimateBoxing(r).value();
      const BoxingQuote q = AnalyticBoxingQuote(r, config);
      EXPECT_FALSE(q.exact);
      EXPECT_EQ(q.kind, BoxingKindName(e.kind)) << r.ToString();
      EXPECT_GT(q.seconds, e.cost.seconds / 3) << r.ToString() << " planner " << e.cost.ToString();
      EXPECT_LT(q.seconds, e.cost.seconds * 3) << r.ToString() << " planner " << e.cost.ToString();
      exact.push_back(e.cost.seconds);
      analytic.push_back(q.seconds);
    }
    // all-gather < all-reduce and local slice < all-to-all in both models.
    EXPECT_LT(exact[0], exact[1]);
    EXPECT_LT(analytic[0], analytic[1]);
    EXPECT_LT(exact[4], exact[3]);
    EXPECT_LT(analytic[4], analytic[3]);
  }
}

TEST(SbpPricingTest, PriceBookMemoizesAndSwitchesRegimeBySize) {
  BoxingPriceBook book(BoxingOptions{}, /*exact_max_devices=*/8);
  const int desc = book.DescId(TensorDesc{DataType::kFloat32, Shape({64, 64})});
  const int four = book.PlacementId(Placement::Parse("cpu:[0,1,2,3]").value());
  const int many = book.PlacementId(Placement::Parse("cpu:0-511").value());
  const int s0 = book.NdSbpId(NdSbp({Sbp::Split(0)})), b = book.NdSbpId(NdSbp({Sbp::Broadcast()}));
  const int q = book.Quote(desc, four, s0, four, b);
  EXPECT_EQ(book.Quote(desc, four, s0, four, b), q);
  EXPECT_TRUE(book.quote(q).exact);
  EXPECT_EQ(book.quote(q).kind, "all_gather");
  EXPECT_GT(book.quote(q).bytes, 0);
  EXPECT_EQ(book.quote(book.Quote(desc, four, b, four, b)).seconds, 0.0);
  const auto start = std::chrono::steady_clock::now();
  const int wide = book.DescId(TensorDesc{DataType::kFloat32, Shape({1024, 64})});
  const int big = book.Quote(wide, many, s0, many, b);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.5);
  EXPECT_FALSE(book.quote(big).exact);
  EXPECT_GT(book.quote(big).seconds, book.quote(q).seconds);
  EXPECT_EQ(book.num_exact(), 1);
  EXPECT_EQ(book.num_analytic(), 1);
  // A layout that cannot hold the shape is refused with the planner's reason.
  const int s1x = book.NdSbpId(NdSbp({Sbp::Split(5)}));
  const BoxingQuote& bad = book.quote(book.Quote(desc, four, s0, four, s1x));
  EXPECT_TRUE(std::isinf(bad.seconds));
  EXPECT_NE(bad.error.find("out of range"), std::string::npos) << bad.error;
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
