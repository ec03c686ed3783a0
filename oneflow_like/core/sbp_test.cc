#include "oneflow_like/core/sbp.h"

#include <set>

#include "absl/container/flat_hash_set.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oneflow_like {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Expects `status` to be InvalidArgument with a message containing every one of `parts`.
template <typename T>
void ExpectInvalid(const absl::StatusOr<T>& result, std::vector<std::string> parts) {
  ASSERT_FALSE(result.ok()) << "unexpectedly parsed";
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << result.status();
  for (const std::string& p : parts) EXPECT_THAT(std::string(result.status().message()), HasSubstr(p));
}
void ExpectInvalidStatus(const absl::Status& status, std::vector<std::string> parts) {
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  for (const std::string& p : parts) EXPECT_THAT(std::string(status.message()), HasSubstr(p));
}

Placement Mesh(std::vector<int64_t> hierarchy) {
  std::vector<Rank> ranks;
  int64_t n = 1;
  for (int64_t h : hierarchy) n *= h;
  for (int32_t i = 0; i < n; ++i) ranks.push_back(Rank(i));
  return Placement::Create(DeviceType::kCpu, ranks, hierarchy).value();
}

// ---- Sbp ----

TEST(SbpTest, NamedConstructorsAndPrinting) {
  EXPECT_EQ(Sbp::Split(0).ToString(), "S(0)");
  EXPECT_EQ(Sbp::Split(12).ToString(), "S(12)");
  EXPECT_EQ(Sbp::Broadcast().ToString(), "B");
  EXPECT_EQ(Sbp::PartialSum().ToString(), "P");
  EXPECT_TRUE(Sbp::Split(3).is_split());
  EXPECT_EQ(Sbp::Split(3).axis(), 3);
  EXPECT_TRUE(Sbp::Broadcast().is_broadcast());
  EXPECT_TRUE(Sbp::PartialSum().is_partial_sum());
}

TEST(SbpTest, ParseAcceptsSpaces) {
  EXPECT_EQ(*Sbp::Parse(" S( 1 ) "), Sbp::Split(1));
  EXPECT_EQ(*Sbp::Parse("B"), Sbp::Broadcast());
  EXPECT_EQ(*Sbp::Parse("  P\t"), Sbp::PartialSum());
}

TEST(SbpTest, RoundTripsThroughTextAndProto) {
  for (const Sbp& s : {Sbp::Split(0), Sbp::Split(1), Sbp::Split(7), Sbp::Broadcast(), Sbp::PartialSum()}) {
    auto parsed = Sbp::Parse(s.ToString());
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, s);
    auto from_proto = Sbp::FromProto(s.ToProto());
    ASSERT_TRUE(from_proto.ok()) << from_proto.status();
    EXPECT_EQ(*from_proto, s);
  }
  EXPECT_EQ(Sbp::Split(2).ToProto().kind(), SbpProto::SPLIT);
  EXPECT_EQ(Sbp::Split(2).ToProto().axis(), 2);
  EXPECT_EQ(Sbp::PartialSum().ToProto().kind(), SbpProto::PARTIAL_SUM);
}

TEST(SbpTest, EqualityAndHash) {
  EXPECT_EQ(Sbp::Split(1), Sbp::Split(1));
  EXPECT_NE(Sbp::Split(1), Sbp::Split(0));
  EXPECT_NE(Sbp::Broadcast(), Sbp::PartialSum());
  EXPECT_NE(Sbp::Split(0), Sbp::Broadcast());  // axis 0 does not make B equal to S(0)
  absl::flat_hash_set<Sbp> set = {Sbp::Split(0), Sbp::Split(0), Sbp::Split(1), Sbp::Broadcast(),
                                  Sbp::PartialSum()};
  EXPECT_EQ(set.size(), 4u);
  EXPECT_TRUE(set.contains(Sbp::Split(1)));
  EXPECT_FALSE(set.contains(Sbp::Split(2)));
}

TEST(SbpTest, ParseErrorsQuoteTheText) {
  ExpectInvalid(Sbp::Parse("Q(1)"), {"unknown SBP 'Q(1)'", "expected S(axis), B or P"});
  ExpectInvalid(Sbp::Parse("S(x)"), {"'S(x)'", "'x' is not an integer"});
  ExpectInvalid(Sbp::Parse("S(-1)"), {"'S(-1)'", ">= 0"});
  ExpectInvalid(Sbp::Parse("S(1"), {"unbalanced", "'S(1'"});
  ExpectInvalid(Sbp::Parse(""), {"unknown SBP ''"});
  ExpectInvalid(Sbp::Parse("b"), {"unknown SBP 'b'"});
  ExpectInvalid(Sbp::Parse("S()"), {"'S()'", "not an integer"});
}

TEST(SbpTest, FromProtoRejectsBadValues) {
  SbpProto p;
  p.set_kind(SbpProto::SPLIT);
  p.set_axis(-2);
  ExpectInvalid(Sbp::FromProto(p), {"-2"});
  p.set_kind(SbpProto::BROADCAST);
  p.set_axis(1);
  ExpectInvalid(Sbp::FromProto(p), {"BROADCAST"});
  p.set_kind(static_cast<SbpProto::Kind>(9));
  p.set_axis(0);
  ExpectInvalid(Sbp::FromProto(p), {"unknown kind 9"});
}

// ---- NdSbp ----

TEST(NdSbpTest, PrintsAndParsesAllForms) {
  NdSbp nd{Sbp::Split(0), Sbp::Broadcast()};
  EXPECT_EQ(nd.ToString(), "(S(0), B)");
  EXPECT_EQ(NdSbp{Sbp::Split(0)}.ToString(), "(S(0))");
  EXPECT_EQ(*NdSbp::Parse("(S(0), B)"), nd);
  EXPECT_EQ(*NdSbp::Parse("[S(0),B]"), nd);
  EXPECT_EQ(*NdSbp::Parse("S(0), B"), nd);
  EXPECT_EQ(*NdSbp::Parse(" S(0) "), NdSbp{Sbp::Split(0)});
  EXPECT_EQ(*NdSbp::Parse("(S(0))"), NdSbp{Sbp::Split(0)});
  EXPECT_EQ(*NdSbp::Parse("(P)"), NdSbp{Sbp::PartialSum()});
}

TEST(NdSbpTest, RoundTripsManyValues) {
  const std::vector<Sbp> atoms = {Sbp::Split(0), Sbp::Split(1), Sbp::Split(2), Sbp::Broadcast(),
                                  Sbp::PartialSum()};
  int checked = 0;
  for (const Sbp& a : atoms) {
    for (const Sbp& b : atoms) {
      for (const Sbp& c : atoms) {
        for (const NdSbp& nd : {NdSbp{a}, NdSbp{a, b}, NdSbp{a, b, c}}) {
          auto parsed = NdSbp::Parse(nd.ToString());
          ASSERT_TRUE(parsed.ok()) << nd.ToString() << ": " << parsed.status();
          EXPECT_EQ(*parsed, nd);
          auto from_proto = NdSbp::FromProto(nd.ToProto());
          ASSERT_TRUE(from_proto.ok()) << from_proto.status();
          EXPECT_EQ(*from_proto, nd);
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 3 * 125);
}

TEST(NdSbpTest, EqualityHashAndPredicates) {
  NdSbp a{Sbp::Split(0), Sbp::Split(1)};
  NdSbp b{Sbp::Split(1), Sbp::Split(0)};
  EXPECT_NE(a, b);  // order matters
  EXPECT_EQ(a, (NdSbp{Sbp::Split(0), Sbp::Split(1)}));
  EXPECT_NE(NdSbp{Sbp::Broadcast()}, (NdSbp{Sbp::Broadcast(), Sbp::Broadcast()}));
  absl::flat_hash_set<NdSbp> set = {a, b, a, NdSbp{Sbp::Broadcast()}};
  EXPECT_EQ(set.size(), 3u);
  EXPECT_TRUE((NdSbp{Sbp::Broadcast(), Sbp::Broadcast()}).all_broadcast());
  EXPECT_FALSE((NdSbp{Sbp::Broadcast(), Sbp::PartialSum()}).all_broadcast());
  EXPECT_TRUE((NdSbp{Sbp::Broadcast(), Sbp::PartialSum()}).any_partial());
  EXPECT_FALSE(a.any_partial());
}

TEST(NdSbpTest, ParseErrors) {
  ExpectInvalid(NdSbp::Parse("(S(0), Q(1))"), {"(S(0), Q(1))", "unknown SBP 'Q(1)'"});
  ExpectInvalid(NdSbp::Parse("(S(0), B"), {"unbalanced", "'(S(0), B'"});
  ExpectInvalid(NdSbp::Parse("S(0)), B"), {"unbalanced", "unexpected ')'"});
  ExpectInvalid(NdSbp::Parse("(S(0)]"), {"unbalanced"});
  ExpectInvalid(NdSbp::Parse("()"), {"empty NdSbp '()'"});
  ExpectInvalid(NdSbp::Parse("(S(0),)"), {"unknown SBP ''"});
  ExpectInvalid(NdSbp::Parse("(S(y), B)"), {"'y' is not an integer"});
}

// ---- Placement ----

TEST(PlacementTest, ParsesOneDimensionalForms) {
  auto p = Placement::Parse("cpu:[0,1,2,3]");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->device_type(), DeviceType::kCpu);
  EXPECT_EQ(p->num_devices(), 4);
  EXPECT_EQ(p->hierarchy(), std::vector<int64_t>({4}));
  EXPECT_EQ(p->ranks()[2], Rank(2));
  EXPECT_EQ(*Placement::Parse("cpu:0-3"), *p);
  EXPECT_EQ(*Placement::Parse(" cpu : [ 0 , 1, 2,3 ] "), *p);
  EXPECT_EQ(*Placement::Parse("cpu:0-3"), Placement(DeviceType::kCpu, {Rank(0), Rank(1), Rank(2), Rank(3)}));
  auto cuda = Placement::Parse("cuda:[5,2]");
  ASSERT_TRUE(cuda.ok());
  EXPECT_EQ(cuda->device_type(), DeviceType::kCuda);
  EXPECT_EQ(cuda->IndexOf(Rank(2)), 1);
  EXPECT_EQ(cuda->IndexOf(Rank(0)), -1);
  EXPECT_TRUE(cuda->Contains(Rank(5)));
  EXPECT_EQ(cuda->ToString(), "cuda:[5,2]");
}

TEST(PlacementTest, ParsesMeshes) {
  auto p = Placement::Parse("cpu:[[0,1],[2,3]]");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->hierarchy(), std::vector<int64_t>({2, 2}));
  EXPECT_EQ(p->ToString(), "cpu:[[0,1],[2,3]]");
  EXPECT_EQ(p->Coordinates(0), std::vector<int64_t>({0, 0}));
  EXPECT_EQ(p->Coordinates(1), std::vector<int64_t>({0, 1}));
  EXPECT_EQ(p->Coordinates(2), std::vector<int64_t>({1, 0}));
  EXPECT_EQ(p->Coordinates(3), std::vector<int64_t>({1, 1}));
  auto p3 = Placement::Parse("cpu:[[[0,1,2],[3,4,5]]]");
  ASSERT_TRUE(p3.ok()) << p3.status();
  EXPECT_EQ(p3->hierarchy(), std::vector<int64_t>({1, 2, 3}));
  EXPECT_EQ(p3->Coordinates(4), std::vector<int64_t>({0, 1, 1}));
}

TEST(PlacementTest, RoundTripsThroughTextAndProto) {
  std::vector<Placement> values = {
      Placement(DeviceType::kCpu, {Rank(0)}),
      Placement(DeviceType::kCuda, {Rank(3), Rank(1), Rank(2)}),
      *Placement::Create(DeviceType::kCpu, {Rank(0), Rank(1), Rank(2), Rank(3), Rank(4), Rank(5)}, {2, 3}),
      *Placement::Create(DeviceType::kCuda, {Rank(7), Rank(6), Rank(5), Rank(4), Rank(3), Rank(2)}, {3, 2}),
      *Placement::Create(DeviceType::kCpu, {Rank(0), Rank(1), Rank(2), Rank(3), Rank(4), Rank(5), Rank(6), Rank(7)},
                         {2, 2, 2}),
      *Placement::Create(DeviceType::kCpu, {Rank(0), Rank(1)}, {1, 2}),
  };
  for (const Placement& p : values) {
    auto parsed = Placement::Parse(p.ToString());
    ASSERT_TRUE(parsed.ok()) << p.ToString() << ": " << parsed.status();
    EXPECT_EQ(*parsed, p) << p.ToString();
    auto from_proto = Placement::FromProto(p.ToProto());
    ASSERT_TRUE(from_proto.ok()) << from_proto.status();
    EXPECT_EQ(*from_proto, p);
  }
  EXPECT_EQ(values[2].ToProto().device_type(), "cpu");
  EXPECT_EQ(values[2].ToProto().hierarchy_size(), 2);
}

TEST(PlacementTest, EqualityAndHash) {
  Placement a = *Placement::Parse("cpu:[0,1,2,3]");
  Placement b = *Placement::Parse("cpu:[[0,1],[2,3]]");
  Placement c = *Placement::Parse("cuda:[0,1,2,3]");
  Placement d = *Placement::Parse("cpu:[1,0,2,3]");
  EXPECT_NE(a, b);  // same ranks, different hierarchy
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  absl::flat_hash_set<Placement> set = {a, b, c, d, *Placement::Parse("cpu:0-3")};
  EXPECT_EQ(set.size(), 4u);
}

TEST(PlacementTest, ParseErrorsNameTheProblem) {
  ExpectInvalid(Placement::Parse("cpu:[0,1,1]"), {"duplicate rank 1", "'cpu:[0,1,1]'"});
  ExpectInvalid(Placement::Parse("cpu:[[0,1],[2]]"), {"ragged", "'cpu:[[0,1],[2]]'"});
  ExpectInvalid(Placement::Parse("cpu:[0,[1,2]]"), {"ragged"});
  ExpectInvalid(Placement::Parse("tpu:[0,1]"), {"unknown device type 'tpu'", "expected cpu or cuda"});
  ExpectInvalid(Placement::Parse("cpu:[0,1"), {"unbalanced", "'cpu:[0,1'"});
  ExpectInvalid(Placement::Parse("cpu:[[0,1],[2,3]"), {"unbalanced"});
  ExpectInvalid(Placement::Parse("cpu:[0,1]]"), {"unbalanced"});
  ExpectInvalid(Placement::Parse("cpu:[0,x]"), {"rank 'x' is not an integer"});
  ExpectInvalid(Placement::Parse("cpu:[]"), {"empty rank list"});
  ExpectInvalid(Placement::Parse("cpu:[0,,1]"), {"empty entry"});
  ExpectInvalid(Placement::Parse("[0,1]"), {"no device type"});
  ExpectInvalid(Placement::Parse("cpu:3-1"), {"empty rank range 3-1"});
  ExpectInvalid(Placement::Parse("cpu:"), {"no ranks"});
}

TEST(PlacementTest, CreateChecksHierarchy) {
  ExpectInvalid(Placement::Create(DeviceType::kCpu, {Rank(0), Rank(1), Rank(2)}, {2, 2}),
                {"hierarchy product 4 != number of ranks 3"});
  ExpectInvalid(Placement::Create(DeviceType::kCpu, {Rank(0), Rank(0)}, {2}), {"duplicate rank 0"});
  ExpectInvalid(Placement::Create(DeviceType::kCpu, {}, {}), {"no ranks"});
  ExpectInvalid(Placement::Create(DeviceType::kCpu, {Rank(0)}, {1, 0}), {"positive"});
  PlacementProto proto;
  proto.set_device_type("gpu");
  proto.add_ranks(0);
  ExpectInvalid(Placement::FromProto(proto), {"unknown device type 'gpu'"});
  EXPECT_EQ(DeviceTypeName(DeviceType::kCpu), "cpu");
  EXPECT_EQ(DeviceTypeName(DeviceType::kCuda), "cuda");
}

// ---- Layout ----

TEST(BalancedSplitTest, KnownSizes) {
  EXPECT_EQ(BalancedSplit(10, 3, 0).begin, 0);
  EXPECT_EQ(BalancedSplit(10, 3, 0).size(), 4);
  EXPECT_EQ(BalancedSplit(10, 3, 1).begin, 4);
  EXPECT_EQ(BalancedSplit(10, 3, 1).size(), 3);
  EXPECT_EQ(BalancedSplit(10, 3, 2).begin, 7);
  EXPECT_EQ(BalancedSplit(10, 3, 2).end, 10);
  EXPECT_EQ(BalancedSplit(2, 4, 3).size(), 0);
  EXPECT_EQ(BalancedSplit(2, 4, 1).size(), 1);
}

TEST(BalancedSplitTest, CoversTheRangeWithSizesWithinOne) {
  for (int64_t dim = 0; dim <= 40; ++dim) {
    for (int64_t parts = 1; parts <= 9; ++parts) {
      int64_t next = 0, min_size = dim, max_size = 0;
      for (int64_t i = 0; i < parts; ++i) {
        Range r = BalancedSplit(dim, parts, i);
        EXPECT_EQ(r.begin, next) << dim << "/" << parts << " part " << i;
        if (i > 0) {
          EXPECT_LE(r.size(), BalancedSplit(dim, parts, i - 1).size());  // larger parts first
        }
        min_size = std::min(min_size, r.size());
        max_size = std::max(max_size, r.size());
        next = r.end;
      }
      EXPECT_EQ(next, dim);
      EXPECT_LE(max_size - min_size, 1);
    }
  }
}

TEST(ShardSliceTest, OneDimensionalMesh) {
  Shape shape{10, 5};
  NdSbp s0{Sbp::Split(0)};
  ShardSlice a = GetShardSlice(shape, s0, {3}, 1);
  EXPECT_EQ(a.shape, (Shape{3, 5}));
  EXPECT_EQ(a.offset, std::vector<int64_t>({4, 0}));
  ShardSlice b = GetShardSlice(shape, NdSbp{Sbp::Split(1)}, {3}, 2);
  EXPECT_EQ(b.shape, (Shape{10, 1}));
  EXPECT_EQ(b.offset, std::vector<int64_t>({0, 4}));
  for (const Sbp& s : {Sbp::Broadcast(), Sbp::PartialSum()}) {
    ShardSlice c = GetShardSlice(shape, NdSbp{s}, {3}, 2);
    EXPECT_EQ(c.shape, shape);
    EXPECT_EQ(c.offset, std::vector<int64_t>({0, 0}));
  }
  EXPECT_EQ(PhysicalShape(shape, s0, {3}, 2), (Shape{3, 5}));
}

TEST(ShardSliceTest, TwoDimensionalMesh) {
  Shape shape{7, 5};
  // (S(0), S(1)) on [2,2]: rows 0-3 / 4-6, cols 0-2 / 3-4.
  NdSbp nd{Sbp::Split(0), Sbp::Split(1)};
  const std::vector<std::pair<Shape, std::vector<int64_t>>> expected = {
      {Shape{4, 3}, {0, 0}}, {Shape{4, 2}, {0, 3}}, {Shape{3, 3}, {4, 0}}, {Shape{3, 2}, {4, 3}}};
  for (int d = 0; d < 4; ++d) {
    ShardSlice s = GetShardSlice(shape, nd, {2, 2}, d);
    EXPECT_EQ(s.shape, expected[d].first) << d;
    EXPECT_EQ(s.offset, expected[d].second) << d;
  }
  // (P, S(1)) and (S(1), B): only the split axis changes the slice.
  ShardSlice p = GetShardSlice(shape, NdSbp{Sbp::PartialSum(), Sbp::Split(1)}, {2, 3}, 4);  // coords (1,1)
  EXPECT_EQ(p.shape, (Shape{7, 2}));
  EXPECT_EQ(p.offset, std::vector<int64_t>({0, 2}));
  ShardSlice b = GetShardSlice(shape, NdSbp{Sbp::Split(1), Sbp::Broadcast()}, {3, 2}, 5);  // coords (2,1)
  EXPECT_EQ(b.shape, (Shape{7, 1}));
  EXPECT_EQ(b.offset, std::vector<int64_t>({0, 4}));
}

// Sizes (or offsets) along axis 0 of every shard of a 1-D tensor under (S(0), S(0)).
std::vector<int64_t> NestedRowSizes(int64_t rows, std::vector<int64_t> mesh, bool offsets = false) {
  std::vector<int64_t> out;
  for (int64_t d = 0; d < mesh[0] * mesh[1]; ++d) {
    ShardSlice s = GetShardSlice(Shape{rows}, NdSbp{Sbp::Split(0), Sbp::Split(0)}, mesh, d);
    out.push_back(offsets ? s.offset[0] : s.shape[0]);
  }
  return out;
}

TEST(ShardSliceTest, NestedSplitsOfOneAxis) {
  // (S(0), S(0)) on [2,3] of 11 rows: 11 -> 6,5; 6 -> 2,2,2; 5 -> 2,2,1. Other axes untouched.
  const std::vector<int64_t> begins = {0, 2, 4, 6, 8, 10};
  const std::vector<int64_t> sizes = {2, 2, 2, 2, 2, 1};
  for (int d = 0; d < 6; ++d) {
    ShardSlice s = GetShardSlice(Shape{11, 2}, NdSbp{Sbp::Split(0), Sbp::Split(0)}, {2, 3}, d);
    EXPECT_EQ(s.offset, std::vector<int64_t>({begins[d], 0})) << d;
    EXPECT_EQ(s.shape, (Shape{sizes[d], 2})) << d;
  }
  // 14 on [3,2]: 5,5,4 -> (3,2),(3,2),(2,2). A flat split into 6 would give 3,3,2,2,2,2.
  EXPECT_EQ(NestedRowSizes(14, {3, 2}), std::vector<int64_t>({3, 2, 3, 2, 2, 2}));
  EXPECT_EQ(NestedRowSizes(14, {3, 2}, /*offsets=*/true), std::vector<int64_t>({0, 3, 5, 8, 10, 12}));
  // 9 on [2,2]: 5,4 -> (3,2),(2,2).
  EXPECT_EQ(NestedRowSizes(9, {2, 2}, /*offsets=*/true), std::vector<int64_t>({0, 3, 5, 7}));
  // 10 on [3,3]: 4,3,3 -> (2,1,1),(1,1,1),(1,1,1).
  EXPECT_EQ(NestedRowSizes(10, {3, 3}), std::vector<int64_t>({2, 1, 1, 1, 1, 1, 1, 1, 1}));
  // (S(1), S(1)) behaves the same on axis 1.
  ShardSlice s = GetShardSlice(Shape{2, 14}, NdSbp{Sbp::Split(1), Sbp::Split(1)}, {3, 2}, 3);
  EXPECT_EQ(s.shape, (Shape{2, 2}));
  EXPECT_EQ(s.offset, std::vector<int64_t>({0, 8}));
}

TEST(ShardSliceTest, SlicesTileTheLogicalTensor) {
  // For many layouts, the shards' blocks cover every logical element exactly once (splits) or
  // every device sees the whole tensor (no splits).
  Shape shape{5, 7};
  const std::vector<Sbp> atoms = {Sbp::Split(0), Sbp::Split(1), Sbp::Broadcast(), Sbp::PartialSum()};
  for (const Sbp& a : atoms) {
    for (const Sbp& b : atoms) {
      NdSbp nd{a, b};
      std::vector<int> hits(shape.elem_count(), 0);
      for (int d = 0; d < 6; ++d) {
        ShardSlice s = GetShardSlice(shape, nd, {2, 3}, d);
        for (int64_t i = 0; i < s.shape[0]; ++i)
          for (int64_t j = 0; j < s.shape[1]; ++j) ++hits[(s.offset[0] + i) * 7 + s.offset[1] + j];
      }
      int copies = 6;
      if (a.is_split()) copies /= 2;
      if (b.is_split()) copies /= 3;
      for (int h : hits) ASSERT_EQ(h, copies) << nd.ToString();
    }
  }
}

TEST(ValidateNdSbpTest, AcceptsValidLayouts) {
  EXPECT_TRUE(ValidateNdSbp(NdSbp{Sbp::Split(0)}, Shape{3, 1}, Mesh({3})).ok());
  EXPECT_TRUE(ValidateNdSbp(NdSbp{Sbp::Split(0), Sbp::Split(0)}, Shape{4}, Mesh({2, 2})).ok());
  EXPECT_TRUE(ValidateNdSbp(NdSbp{Sbp::PartialSum(), Sbp::Broadcast()}, Shape{}, Mesh({2, 2})).ok());
  EXPECT_TRUE(ValidateNdSbp(NdSbp{Sbp::Split(1), Sbp::Split(0)}, Shape{2, 2}, Mesh({2, 2})).ok());
}

TEST(ValidateNdSbpTest, ErrorsNameSbpShapeAndPlacement) {
  ExpectInvalidStatus(ValidateNdSbp(NdSbp{Sbp::Split(2)}, Shape{4, 4}, Mesh({2})),
                      {"(S(2))", "[4,4]", "cpu:[0,1]", "split axis 2", "2 axes"});
  ExpectInvalidStatus(ValidateNdSbp(NdSbp{Sbp::Split(0)}, Shape{2, 9}, Mesh({3})),
                      {"(S(0))", "[2,9]", "cpu:[0,1,2]", "axis 0 has 2 elements", "3 parts"});
  ExpectInvalidStatus(ValidateNdSbp(NdSbp{Sbp::Split(0)}, Shape{4}, Mesh({2, 2})),
                      {"(S(0))", "cpu:[[0,1],[2,3]]", "1 SBP", "2 axes"});
  ExpectInvalidStatus(ValidateNdSbp(NdSbp{Sbp::Split(0), Sbp::Split(0), Sbp::Broadcast()}, Shape{4}, Mesh({4})),
                      {"3 SBP", "1 axes"});
  // Nested splits multiply: 3 rows cannot be split 2 x 2 ways.
  ExpectInvalidStatus(ValidateNdSbp(NdSbp{Sbp::Split(0), Sbp::Split(0)}, Shape{3, 8}, Mesh({2, 2})),
                      {"(S(0), S(0))", "[3,8]", "4 parts", "mesh axes 0, 1"});
  ExpectInvalidStatus(ValidateNdSbp(NdSbp{Sbp::Split(0)}, Shape{}, Mesh({2})), {"split axis 0", "0 axes"});
}

TEST(ValidateNdSbpTest, AllowEmptyShards) {
  EXPECT_TRUE(ValidateNdSbp(NdSbp{Sbp::Split(0)}, Shape{2}, Mesh({3}), /*allow_empty_shards=*/true).ok());
  EXPECT_TRUE(ValidateNdSbp(NdSbp{Sbp::Split(0), Sbp::Split(0)}, Shape{3}, Mesh({2, 2}), true).ok());
  // Out-of-range axes and wrong arity are still errors.
  EXPECT_FALSE(ValidateNdSbp(NdSbp{Sbp::Split(1)}, Shape{2}, Mesh({3}), true).ok());
  EXPECT_FALSE(ValidateNdSbp(NdSbp{Sbp::Split(0)}, Shape{2}, Mesh({1, 3}), true).ok());
  EXPECT_EQ(GetShardSlice(Shape{2}, NdSbp{Sbp::Split(0)}, {3}, 2).shape, Shape{0});
}

}  // namespace
}  // namespace oneflow_like
