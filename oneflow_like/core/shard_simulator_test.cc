#include "oneflow_like/core/shard_simulator.h"

#include <cmath>
#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oneflow_like {
namespace {

using ::testing::HasSubstr;

const DataType kAllTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kInt64,
                              DataType::kBool,    DataType::kBFloat16, DataType::kFloat16};

// Distinct, type-representable values: element i gets a small varied number (or i % 2 for bool).
Tensor Iota(DataType dtype, const Shape& shape) {
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < t.elem_count(); ++i) {
    double v = dtype == DataType::kBool ? (i * 7 % 3 == 0) : ((i * 37) % 101 - 50) * 0.25;
    t.SetFromDouble(i, v);
  }
  return t;
}

bool BytesEqual(const Tensor& a, const Tensor& b) {
  return a.desc() == b.desc() && std::memcmp(a.raw_data(), b.raw_data(), static_cast<size_t>(a.byte_size())) == 0;
}

int64_t NumDevices(const std::vector<int64_t>& hierarchy) {
  int64_t n = 1;
  for (int64_t h : hierarchy) n *= h;
  return n;
}

// Element `idx` (a multi-index) of a row-major tensor, as double.
double At(const Tensor& t, const std::vector<int64_t>& idx) {
  int64_t flat = 0;
  for (int a = 0; a < t.shape().num_axes(); ++a) flat = flat * t.shape().dim(a) + idx[a];
  return t.GetAsDouble(flat);
}

TEST(CopyBlockTest, OutAndInMatchPlainLoops) {
  Tensor big = Iota(DataType::kFloat32, Shape{4, 5, 6});
  Tensor block(DataType::kFloat32, Shape{2, 3, 4});
  const std::vector<int64_t> off = {1, 2, 1};
  CopyBlockOut(big, off, &block);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k)
        ASSERT_EQ(At(block, {i, j, k}), At(big, {i + 1, j + 2, k + 1})) << i << j << k;

  Tensor dst(DataType::kFloat32, Shape{4, 5, 6});
  CopyBlockIn(block, off, &dst);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 5; ++j)
      for (int64_t k = 0; k < 6; ++k) {
        bool inside = i >= 1 && i < 3 && j >= 2 && j < 5 && k >= 1 && k < 5;
        ASSERT_EQ(At(dst, {i, j, k}), inside ? At(big, {i, j, k}) : 0.0) << i << j << k;
      }
}

TEST(CopyBlockTest, WorksForEveryElementSizeAndRankZero) {
  for (DataType dtype : kAllTypes) {
    Tensor big = Iota(dtype, Shape{3, 4});
    Tensor block(dtype, Shape{2, 2});
    CopyBlockOut(big, {1, 2}, &block);
    EXPECT_EQ(block.GetAsDouble(0), big.GetAsDouble(1 * 4 + 2)) << DataTypeName(dtype);
    EXPECT_EQ(block.GetAsDouble(3), big.GetAsDouble(2 * 4 + 3)) << DataTypeName(dtype);
  }
  Tensor scalar = Tensor::FromVector<int64_t>(Shape{}, {42});
  Tensor out(DataType::kInt64, Shape{});
  CopyBlockOut(scalar, {}, &out);
  EXPECT_EQ(out.data<int64_t>()[0], 42);
  Tensor empty(DataType::kFloat32, Shape{0, 3});
  CopyBlockOut(Iota(DataType::kFloat32, Shape{2, 3}), {2, 0}, &empty);  // no-op, no crash
}

TEST(ShardTensorTest, SplitShardsAreTheExpectedBlocks) {
  Tensor x = Iota(DataType::kFloat32, Shape{7, 5});
  NdSbp nd{Sbp::Split(0), Sbp::Split(1)};
  auto shards = ShardTensor(x, nd, {2, 2});
  ASSERT_TRUE(shards.ok()) << shards.status();
  ASSERT_EQ(shards->size(), 4u);
  // Rows 0-3 / 4-6, columns 0-2 / 3-4, device order row-major over the mesh.
  const int64_t row0[] = {0, 0, 4, 4}, col0[] = {0, 3, 0, 3}, rows[] = {4, 4, 3, 3}, cols[] = {3, 2, 3, 2};
  for (int d = 0; d < 4; ++d) {
    const Tensor& s = (*shards)[d];
    ASSERT_EQ(s.shape(), (Shape{rows[d], cols[d]})) << d;
    for (int64_t i = 0; i < rows[d]; ++i)
      for (int64_t j = 0; j < cols[d]; ++j) ASSERT_EQ(At(s, {i, j}), At(x, {row0[d] + i, col0[d] + j}));
  }
}

TEST(ShardTensorTest, BroadcastShardsAreIndependentCopies) {
  Tensor x = Iota(DataType::kFloat32, Shape{3});
  auto shards = ShardTensor(x, NdSbp{Sbp::Broadcast()}, {2});
  ASSERT_TRUE(shards.ok());
  EXPECT_TRUE(BytesEqual((*shards)[0], x));
  EXPECT_TRUE(BytesEqual((*shards)[1], x));
  (*shards)[0].SetFromDouble(0, 99.0);
  EXPECT_NE(x.GetAsDouble(0), 99.0);
  EXPECT_NE((*shards)[1].GetAsDouble(0), 99.0);
}

TEST(ShardTensorTest, PartialPartsSumToTheTensorAndDiffer) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16, DataType::kFloat16}) {
    Tensor x = Iota(dtype, Shape{4, 3});
    auto shards = ShardTensor(x, NdSbp{Sbp::PartialSum()}, {3}, /*seed=*/5);
    ASSERT_TRUE(shards.ok());
    int differing = 0;
    for (int64_t e = 0; e < x.elem_count(); ++e) {
      double sum = 0;
      for (const Tensor& s : *shards) sum += s.GetAsDouble(e);
      EXPECT_EQ(sum, x.GetAsDouble(e)) << DataTypeName(dtype) << " element " << e;
      if ((*shards)[0].GetAsDouble(e) != (*shards)[1].GetAsDouble(e)) ++differing;
      if (x.GetAsDouble(e) != 0) {
        EXPECT_NE((*shards)[0].GetAsDouble(e), x.GetAsDouble(e));
      }
    }
    EXPECT_GT(differing, x.elem_count() / 2) << DataTypeName(dtype);
    // Deterministic in the seed, different across seeds.
    auto again = ShardTensor(x, NdSbp{Sbp::PartialSum()}, {3}, 5);
    auto other = ShardTensor(x, NdSbp{Sbp::PartialSum()}, {3}, 6);
    EXPECT_TRUE(BytesEqual((*again)[0], (*shards)[0]));
    EXPECT_FALSE(BytesEqual((*other)[0], (*shards)[0]));
  }
}

TEST(ShardTensorTest, IntegerPartialIsWholeOnPartZero) {
  Tensor x = Tensor::FromVector<int32_t>(Shape{4}, {5, -3, 0, 2000000000});
  auto shards = ShardTensor(x, NdSbp{Sbp::PartialSum()}, {3});
  ASSERT_TRUE(shards.ok());
  EXPECT_EQ((*shards)[0].ToVector<int32_t>(), x.ToVector<int32_t>());
  EXPECT_EQ((*shards)[1].ToVector<int32_t>(), std::vector<int32_t>(4, 0));
  EXPECT_EQ((*shards)[2].ToVector<int32_t>(), std::vector<int32_t>(4, 0));
}

TEST(ShardTensorTest, RejectsInvalidLayoutsAndAllowsEmptyShards) {
  Tensor x = Iota(DataType::kFloat32, Shape{2, 3});
  auto bad_axis = ShardTensor(x, NdSbp{Sbp::Split(2)}, {2});
  ASSERT_FALSE(bad_axis.ok());
  EXPECT_EQ(bad_axis.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad_axis.status().message()), HasSubstr("split axis 2"));
  EXPECT_FALSE(ShardTensor(x, NdSbp{Sbp::Split(0)}, {2, 2}).ok());  // wrong number of SBPs

  auto empty = ShardTensor(x, NdSbp{Sbp::Split(0)}, {3});  // 2 rows on 3 devices
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ((*empty)[2].shape(), (Shape{0, 3}));
  auto back = AssembleTensor(*empty, x.shape(), NdSbp{Sbp::Split(0)}, {3});
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(BytesEqual(*back, x));
}

struct Layout {
  std::string nd_sbp;
  std::vector<int64_t> hierarchy;
};

TEST(AssembleTensorTest, RoundTripsEveryLayoutAndType) {
  const std::vector<Layout> layouts = {
      {"S(0)", {3}},          {"S(1)", {3}},           {"B", {3}},           {"P", {3}},
      {"(S(0), S(1))", {2, 2}}, {"(S(1), B)", {2, 2}}, {"(P, S(0))", {2, 2}}, {"(S(0), S(0))", {2, 2}},
      {"(B, P)", {2, 2}},     {"(P, P)", {2, 3}},      {"(S(1), S(1))", {2, 2}}, {"(S(0), P)", {3, 2}},
      {"(S(1), S(0), P)", {2, 2, 2}},
  };
  const Shape shape{7, 5};  // uneven for every split above
  int checked = 0;
  for (DataType dtype : kAllTypes) {
    Tensor x = Iota(dtype, shape);
    for (const Layout& l : layouts) {
      NdSbp nd = NdSbp::Parse(l.nd_sbp).value();
      auto shards = ShardTensor(x, nd, l.hierarchy, /*seed=*/17);
      ASSERT_TRUE(shards.ok()) << l.nd_sbp << ": " << shards.status();
      ASSERT_EQ(static_cast<int64_t>(shards->size()), NumDevices(l.hierarchy));
      for (int64_t d = 0; d < NumDevices(l.hierarchy); ++d) {
        EXPECT_EQ((*shards)[d].shape(), PhysicalShape(shape, nd, l.hierarchy, d)) << l.nd_sbp << " device " << d;
      }
      auto back = AssembleTensor(*shards, shape, nd, l.hierarchy);
      ASSERT_TRUE(back.ok()) << l.nd_sbp << " " << DataTypeName(dtype) << ": " << back.status();
      EXPECT_TRUE(BytesEqual(*back, x)) << l.nd_sbp << " " << DataTypeName(dtype);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 7 * 13);
}

TEST(AssembleTensorTest, SumsPartialsFromAnySource) {
  // Partials not made by ShardTensor (e.g. a kernel's outputs) are summed too.
  Tensor a = Tensor::FromVector<float>(Shape{2}, {1.0f, 2.0f});
  Tensor b = Tensor::FromVector<float>(Shape{2}, {10.0f, -2.5f});
  auto sum = AssembleTensor({a, b}, Shape{2}, NdSbp{Sbp::PartialSum()}, {2});
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->ToVector<float>(), std::vector<float>({11.0f, -0.5f}));
  Tensor i = Tensor::FromVector<int64_t>(Shape{1}, {(int64_t{1} << 60) + 1});
  Tensor j = Tensor::FromVector<int64_t>(Shape{1}, {1});
  auto isum = AssembleTensor({i, j}, Shape{1}, NdSbp{Sbp::PartialSum()}, {2});
  ASSERT_TRUE(isum.ok());
  EXPECT_EQ(isum->ToVector<int64_t>()[0], (int64_t{1} << 60) + 2);  // exact, not via double
}

TEST(AssembleTensorTest, DetectsBroadcastMismatch) {
  Tensor x = Iota(DataType::kFloat32, Shape{2, 3});
  NdSbp nd{Sbp::Split(1), Sbp::Broadcast()};
  auto shards = ShardTensor(x, nd, {2, 2}).value();
  // Device 3 = mesh (1, 1): column 2 of x (shape [2,1]), a copy of device 2's shard.
  ASSERT_EQ(shards[3].shape(), (Shape{2, 1}));
  float* p = shards[3].data<float>();
  p[1] += 0.5f;  // element 1 = index [1,0]
  auto bad = AssembleTensor(shards, x.shape(), nd, {2, 2});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(bad.status().message());
  EXPECT_THAT(msg, HasSubstr("device 2 and device 3"));
  EXPECT_THAT(msg, HasSubstr("element 1"));
  EXPECT_THAT(msg, HasSubstr("index [1,0]"));
  EXPECT_THAT(msg, HasSubstr("mesh axis 1 is B"));
  // Within tolerance it passes, using the first copy.
  auto ok = AssembleTensor(shards, x.shape(), nd, {2, 2}, /*broadcast_tolerance=*/0.6);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(BytesEqual(*ok, x));

  // Mismatch across the outer axis names the first device of each sub-mesh.
  NdSbp outer{Sbp::Broadcast(), Sbp::Split(0)};
  auto s2 = ShardTensor(x, outer, {2, 2}).value();
  s2[3].data<float>()[2] = 1000.0f;
  auto bad2 = AssembleTensor(s2, x.shape(), outer, {2, 2});
  ASSERT_FALSE(bad2.ok());
  EXPECT_THAT(std::string(bad2.status().message()), HasSubstr("device 0 and device 2"));
  EXPECT_THAT(std::string(bad2.status().message()), HasSubstr("mesh axis 0 is B"));
}

TEST(AssembleTensorTest, RejectsWrongShards) {
  Tensor x = Iota(DataType::kFloat32, Shape{5});
  NdSbp nd{Sbp::Split(0)};
  auto shards = ShardTensor(x, nd, {2}).value();
  auto too_few = AssembleTensor({shards[0]}, x.shape(), nd, {2});
  ASSERT_FALSE(too_few.ok());
  EXPECT_THAT(std::string(too_few.status().message()), HasSubstr("1 shards for 2 devices"));
  std::swap(shards[0], shards[1]);  // shapes [2] and [3] in the wrong order
  auto swapped = AssembleTensor(shards, x.shape(), nd, {2});
  ASSERT_FALSE(swapped.ok());
  EXPECT_THAT(std::string(swapped.status().message()), HasSubstr("device 0 is float32[2]"));
  EXPECT_THAT(std::string(swapped.status().message()), HasSubstr("float32[3]"));
  auto mixed = AssembleTensor({Iota(DataType::kFloat32, Shape{5}), Iota(DataType::kFloat64, Shape{5})}, x.shape(),
                              NdSbp{Sbp::Broadcast()}, {2});
  EXPECT_FALSE(mixed.ok());
}

TEST(AssembleTensorTest, ResultDoesNotAliasShards) {
  Tensor x = Iota(DataType::kFloat32, Shape{3});
  auto shards = ShardTensor(x, NdSbp{Sbp::Broadcast()}, {1}).value();
  auto back = AssembleTensor(shards, x.shape(), NdSbp{Sbp::Broadcast()}, {1}).value();
  back.SetFromDouble(0, 123.0);
  EXPECT_NE(shards[0].GetAsDouble(0), 123.0);
}

TEST(AssembleTensorTest, ScalarUnderBroadcastAndPartial) {
  Tensor x = Tensor::FromVector<double>(Shape{}, {3.75});
  for (const char* text : {"(B, P)", "(P, P)", "(P, B)"}) {
    NdSbp nd = NdSbp::Parse(text).value();
    auto shards = ShardTensor(x, nd, {2, 2}, 3).value();
    auto back = AssembleTensor(shards, Shape{}, nd, {2, 2});
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->ToVector<double>()[0], 3.75) << text;
  }
}

}  // namespace
}  // namespace oneflow_like
