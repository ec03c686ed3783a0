// Tests for cast, fill, random_uniform, random_normal, dropout and dropout_grad: known values
// and plain references, sample statistics for the random ops, layout independence (the SBP
// harness runs every shard with its own ShardInfo and compares with the single-device tensor),
// gradients and errors.
#include <cmath>
#include <limits>

#include "gtest/gtest.h"
#include "oneflow_like/core/testing/op_test_util.h"

namespace oneflow_like {
namespace {

using testing::ExpectTensorNear;
using testing::OpTest;
using testing::RandomTensor;

const DataType kAllTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kInt64,
                              DataType::kBool,    DataType::kBFloat16, DataType::kFloat16};

Tensor Values(DataType dtype, const std::vector<double>& v) {
  return testing::TensorFromDoubles(dtype, Shape({static_cast<int64_t>(v.size())}), v);
}

TEST(MiscOpsTest, CastBetweenEveryPairOfDtypes) {
  OpTest t;
  const std::vector<double> ints = {0, 1, -2, 3, 7, -100};  // exact in every dtype but bool
  for (DataType from : kAllTypes) {
    const Tensor x = Values(from, ints);
    for (DataType to : kAllTypes) {
      Tensor y = t.RunOne("cast", {x}, {{"dtype", to}});
      ASSERT_EQ(y.dtype(), to);
      std::vector<double> expected;
      for (double v : ints) {
        const double s = from == DataType::kBool ? (v != 0) : v;
        expected.push_back(to == DataType::kBool ? (s != 0) : s);
      }
      ExpectTensorNear(y, Values(DataType::kFloat64, expected), 0, 0, DataTypeName(from) + " -> " + DataTypeName(to));
    }
  }
}

TEST(MiscOpsTest, CastRoundsTruncatesAndSaturates) {
  OpTest t;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor i32 = t.RunOne("cast", {Values(DataType::kFloat64, {1.75, -2.5, 1e10, -1e10, nan})}, {{"dtype", DataType::kInt32}});
  EXPECT_EQ(i32.ToVector<int32_t>(), (std::vector<int32_t>{1, -2, std::numeric_limits<int32_t>::max(),
                                                           std::numeric_limits<int32_t>::min(), 0}));
  Tensor b = t.RunOne("cast", {Values(DataType::kFloat32, {0.5, 0.0, -3})}, {{"dtype", DataType::kBool}});
  EXPECT_EQ(b.ToVector<bool>(), (std::vector<bool>{true, false, true}));
  // Round to nearest even (values from numpy: float16(1/3), bfloat16 rounding by hand).
  const Tensor f = Values(DataType::kFloat32, {100.25, 1.0 / 3, 100.5, 65520.0});
  Tensor bf = t.RunOne("cast", {f}, {{"dtype", DataType::kBFloat16}});
  EXPECT_DOUBLE_EQ(bf.GetAsDouble(0), 100.0);
  EXPECT_DOUBLE_EQ(bf.GetAsDouble(1), 0.333984375);
  EXPECT_DOUBLE_EQ(bf.GetAsDouble(2), 100.5);
  Tensor half = t.RunOne("cast", {f}, {{"dtype", DataType::kFloat16}});
  EXPECT_DOUBLE_EQ(half.GetAsDouble(1), 0.333251953125);
  EXPECT_TRUE(std::isinf(half.GetAsDouble(3)));
  // Back to float32 from the storage types.
  ExpectTensorNear(t.RunOne("cast", {half}, {{"dtype", DataType::kFloat32}}), half, 0, 0);
  // int64 -> int64 and int64 -> float64 keep large integers exactly.
  const Tensor big = Tensor::FromVector<int64_t>({2}, {(int64_t{1} << 53) + 1, -(int64_t{1} << 40)});
  EXPECT_EQ(t.RunOne("cast", {big}, {{"dtype", DataType::kInt64}}).ToVector<int64_t>(), big.ToVector<int64_t>());
}

TEST(MiscOpsTest, CastGradSbpAndErrors) {
  OpTest t;
  t.ExpectGradientsMatch("cast", {RandomTensor(DataType::kFloat64, {3, 4}, 1)}, {{"dtype", DataType::kFloat64}});
  // float32 -> float64: the gradient is dy cast back to float32.
  const Tensor x = RandomTensor(DataType::kFloat32, {3, 4}, 2);
  const Tensor dy = RandomTensor(DataType::kFloat64, {3, 4}, 3);
  auto grads = t.RunGrad("cast", {x}, {{"dtype", DataType::kFloat64}}, {dy}, {true});
  ASSERT_TRUE(grads.ok()) << grads.status();
  ASSERT_EQ((*grads)[0].dtype(), DataType::kFloat32);
  ExpectTensorNear((*grads)[0], dy, 1e-6, 0);
  // Splits and broadcast always; P only between floating types.
  const Tensor odd = RandomTensor(DataType::kFloat32, {5, 7}, 4);
  EXPECT_EQ(t.ExpectAllSbpSignaturesMatch("cast", {odd}, {{"dtype", DataType::kFloat64}}), 4 + 16);
  EXPECT_EQ(t.ExpectAllSbpSignaturesMatch("cast", {odd}, {{"dtype", DataType::kInt32}}), 3 + 9);
  t.ExpectRunFails("cast", {odd}, {{"dtype", DataType::kInvalid}}, {"float32[5,7]"});
}

TEST(MiscOpsTest, Fill) {
  OpTest t;
  Tensor y = t.RunOne("fill", {}, {{"shape", std::vector<int64_t>{3, 4}}, {"dtype", DataType::kInt32}, {"value", 7.9}});
  EXPECT_EQ(y.shape(), Shape({3, 4}));
  EXPECT_EQ(y.ToVector<int32_t>(), std::vector<int32_t>(12, 7));
  y = t.RunOne("fill", {}, {{"shape", std::vector<int64_t>{2}}, {"value", -1.5}});
  EXPECT_EQ(y.ToVector<float>(), (std::vector<float>{-1.5f, -1.5f}));
  y = t.RunOne("fill", {}, {{"shape", std::vector<int64_t>{}}, {"dtype", DataType::kBool}, {"value", 1.0}});
  EXPECT_EQ(y.ToVector<bool>(), std::vector<bool>{true});
  EXPECT_EQ(t.ExpectAllSbpSignaturesMatch("fill", {}, {{"shape", std::vector<int64_t>{5, 7}}, {"value", 2.0}}), 3 + 9);
  t.ExpectRunFails("fill", {}, {{"shape", std::vector<int64_t>{2, -3}}}, {"[2,-3]"});
}

void ExpectMeanStd(const Tensor& y, double mean, double stddev, double tol) {
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < y.elem_count(); ++i) sum += y.GetAsDouble(i);
  const double m = sum / y.elem_count();
  for (int64_t i = 0; i < y.elem_count(); ++i) sq += (y.GetAsDouble(i) - m) * (y.GetAsDouble(i) - m);
  EXPECT_NEAR(m, mean, tol);
  EXPECT_NEAR(std::sqrt(sq / y.elem_count()), stddev, tol);
}

TEST(MiscOpsTest, RandomUniform) {
  OpTest t;
  const AttrMap attrs{{"shape", std::vector<int64_t>{100, 100}}, {"seed", int64_t{42}}, {"low", -2.0}, {"high", 4.0}};
  Tensor y = t.RunOne("random_uniform", {}, attrs);
  ASSERT_EQ(y.shape(), Shape({100, 100}));
  for (int64_t i = 0; i < y.elem_count(); ++i) {
    ASSERT_GE(y.GetAsDouble(i), -2.0);
    ASSERT_LT(y.GetAsDouble(i), 4.0);
  }
  ExpectMeanStd(y, 1.0, 6.0 / std::sqrt(12.0), 0.05);
  ExpectTensorNear(t.RunOne("random_uniform", {}, attrs), y, 0, 0, "same seed");
  AttrMap other = attrs;
  other.Set("seed", int64_t{43});
  Tensor z = t.RunOne("random_uniform", {}, other);
  int64_t same = 0;
  for (int64_t i = 0; i < y.elem_count(); ++i) same += y.GetAsDouble(i) == z.GetAsDouble(i);
  EXPECT_LT(same, 10);
  // Every shard generates exactly its part of the same logical tensor (S(0), S(1), B on 3 and 2x2).
  EXPECT_EQ(t.ExpectAllSbpSignaturesMatch("random_uniform", {},
                                          {{"shape", std::vector<int64_t>{7, 5}}, {"seed", int64_t{3}}}),
            3 + 9);
  t.ExpectRunFails("random_uniform", {}, {{"shape", std::vector<int64_t>{2}}, {"dtype", DataType::kInt32}}, {"int32"});
}

TEST(MiscOpsTest, RandomNormal) {
  OpTest t;
  const AttrMap attrs{{"shape", std::vector<int64_t>{10000}}, {"dtype", DataType::kFloat64},
                      {"seed", int64_t{5}}, {"mean", 3.0}, {"std", 0.5}};
  Tensor y = t.RunOne("random_normal", {}, attrs);
  EXPECT_EQ(y.dtype(), DataType::kFloat64);
  ExpectMeanStd(y, 3.0, 0.5, 0.03);
  ExpectTensorNear(t.RunOne("random_normal", {}, attrs), y, 0, 0, "same seed");
  t.ExpectAllSbpSignaturesMatch("random_normal", {}, {{"shape", std::vector<int64_t>{3, 5, 7}}, {"seed", int64_t{9}}});
  t.ExpectRunFails("random_normal", {}, {{"shape", std::vector<int64_t>{2}}, {"std", -1.0}}, {"std"});
  t.ExpectRunFails("random_normal", {}, {{"shape", std::vector<int64_t>{2}}, {"dtype", DataType::kBool}}, {"bool"});
}

TEST(MiscOpsTest, DropoutKeepsAFractionAndScales) {
  OpTest t;
  const double p = 0.3;
  Tensor ones(DataType::kFloat32, {100, 100});
  for (int64_t i = 0; i < ones.elem_count(); ++i) ones.SetFromDouble(i, 1.0);
  Tensor y = t.RunOne("dropout", {ones}, {{"p", p}, {"seed", int64_t{1}}});
  int64_t kept = 0;
  for (int64_t i = 0; i < y.elem_count(); ++i) {
    const double v = y.GetAsDouble(i);
    if (v != 0) {
      ++kept;
      ASSERT_NEAR(v, 1.0 / (1.0 - p), 1e-6);
    }
  }
  EXPECT_NEAR(static_cast<double>(kept) / y.elem_count(), 1 - p, 0.02);
  // y = x * mask / (1 - p) for an arbitrary x, with the mask read off the run on ones.
  const Tensor x = RandomTensor(DataType::kFloat32, {100, 100}, 2);
  Tensor yx = t.RunOne("dropout", {x}, {{"p", p}, {"seed", int64_t{1}}});
  Tensor expected(DataType::kFloat32, x.shape());
  for (int64_t i = 0; i < x.elem_count(); ++i) expected.SetFromDouble(i, x.GetAsDouble(i) * y.GetAsDouble(i));
  ExpectTensorNear(yx, expected, 1e-6, 1e-7);
  // dropout_grad applies the same mask.
  ExpectTensorNear(t.RunOne("dropout_grad", {x}, {{"p", p}, {"seed", int64_t{1}}}), yx, 0, 0, "grad mask");
  // Another seed gives another mask; p = 0 is the identity.
  Tensor other = t.RunOne("dropout", {ones}, {{"p", p}, {"seed", int64_t{2}}});
  int64_t differ = 0;
  for (int64_t i = 0; i < y.elem_count(); ++i) differ += (y.GetAsDouble(i) == 0) != (other.GetAsDouble(i) == 0);
  EXPECT_GT(differ, 1000);
  ExpectTensorNear(t.RunOne("dropout", {x}, {{"p", 0.0}}), x, 0, 0, "p = 0");
}

TEST(MiscOpsTest, DropoutGradLayoutsAndErrors) {
  OpTest t;
  const AttrMap attrs{{"p", 0.4}, {"seed", int64_t{77}}};
  t.ExpectGradientsMatch("dropout", {RandomTensor(DataType::kFloat64, {4, 5}, 3)}, attrs);
  t.ExpectGradientsMatch("dropout_grad", {RandomTensor(DataType::kFloat64, {4, 5}, 4)}, attrs);
  // The mask depends on the logical index only: every S/B layout reproduces the whole tensor.
  EXPECT_EQ(t.ExpectAllSbpSignaturesMatch("dropout", {RandomTensor(DataType::kFloat32, {7, 5, 4}, 5)}, attrs), 4 + 16);
  EXPECT_EQ(t.ExpectAllSbpSignaturesMatch("dropout_grad", {RandomTensor(DataType::kFloat64, {5, 7}, 6)}, attrs), 3 + 9);
  const std::vector<SbpSignature> sigs = t.SbpSignatures("dropout", {{DataType::kFloat32, Shape({4, 4})}}, attrs);
  ASSERT_FALSE(sigs.empty());
  for (const SbpSignature& s : sigs) {
    EXPECT_FALSE(s.inputs[0].is_partial_sum()) << s.ToString();
  }
  const Tensor x = RandomTensor(DataType::kFloat32, {3}, 7);
  t.ExpectRunFails("dropout", {x}, {{"p", 1.0}}, {"p = 1"});
  t.ExpectRunFails("dropout", {x}, {{"p", -0.1}}, {"[0, 1)"});
  t.ExpectRunFails("dropout_grad", {x}, {{"p", 1.5}}, {"[0, 1)"});
  t.ExpectRunFails("dropout", {RandomTensor(DataType::kInt32, {3}, 7)}, {{"p", 0.5}}, {"int32"});
}

}  // namespace
}  // namespace oneflow_like
