// Tests for reduce_sum, reduce_mean and broadcast_to: forward against plain loops, gradients
// against finite differences, every SBP signature through the shard simulator, and errors.
#include <algorithm>

#include "gtest/gtest.h"
#include "oneflow_like/core/testing/op_test_util.h"

namespace oneflow_like {
namespace {

using testing::ExpectTensorNear;
using testing::OpTest;
using testing::RandomTensor;
using testing::RavelIndex;
using testing::UnravelIndex;

// Plain reference: sum (or mean) of x over `axes` (non-negative; empty = all), in float64.
Tensor RefReduce(const Tensor& x, std::vector<int> axes, bool keepdims, bool mean) {
  const Shape& xs = x.shape();
  if (axes.empty()) {
    for (int a = 0; a < xs.num_axes(); ++a) axes.push_back(a);
  }
  std::vector<int64_t> kept_dims = xs.dims(), out_dims;
  int64_t n = 1;
  for (int a : axes) {
    kept_dims[a] = 1;
    n *= xs[a];
  }
  for (int a = 0; a < xs.num_axes(); ++a) {
    const bool reduced = std::find(axes.begin(), axes.end(), a) != axes.end();
    if (!reduced) out_dims.push_back(xs[a]);
    if (reduced && keepdims) out_dims.push_back(1);
  }
  const Shape kept(kept_dims);
  Tensor y(DataType::kFloat64, kept);
  for (int64_t i = 0; i < x.elem_count(); ++i) {
    std::vector<int64_t> idx = UnravelIndex(xs, i);
    for (int a : axes) idx[a] = 0;
    const int64_t o = RavelIndex(kept, idx);
    y.SetFromDouble(o, y.GetAsDouble(o) + x.GetAsDouble(i));
  }
  if (mean) {
    for (int64_t o = 0; o < y.elem_count(); ++o) y.SetFromDouble(o, y.GetAsDouble(o) / n);
  }
  return y.Reshaped(Shape(out_dims));
}

struct ReduceCase {
  std::vector<int64_t> axes;  // as passed (may be negative)
  std::vector<int> normalized;
  bool keepdims;
};

const std::vector<ReduceCase>& Cases() {
  static const auto* cases = new std::vector<ReduceCase>{
      {{1}, {1}, false}, {{-1}, {2}, false}, {{0, 2}, {0, 2}, true}, {{}, {}, false},
      {{}, {}, true},    {{2, 0}, {0, 2}, false}, {{0}, {0}, true}};
  return *cases;
}

TEST(ReduceOpsTest, ReduceSumAndMeanMatchPlainLoops) {
  OpTest t;
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    const Tensor x = RandomTensor(dtype, {3, 5, 7}, 1);
    for (const ReduceCase& c : Cases()) {
      const AttrMap attrs{{"axes", c.axes}, {"keepdims", c.keepdims}};
      ExpectTensorNear(t.RunOne("reduce_sum", {x}, attrs), RefReduce(x, c.normalized, c.keepdims, false), 1e-5, 1e-5,
                       "reduce_sum " + AttrValueToString(c.axes));
      ExpectTensorNear(t.RunOne("reduce_mean", {x}, attrs), RefReduce(x, c.normalized, c.keepdims, true), 1e-5,
                       1e-6, "reduce_mean " + AttrValueToString(c.axes));
    }
  }
}

// A column sum (the bias gradient: x[R, C] summed over R, also with leading axes merged) adds
// the rows in row order: exactly the float32 sums of a plain loop, whatever the kernel's
// vector blocks (16 columns, tails of odd widths).
TEST(ReduceOpsTest, ColumnSumsAddRowsInOrder) {
  OpTest t;
  for (const Shape& shape : std::vector<Shape>{{1, 5}, {7, 33}, {8, 16}, {29, 47}, {3, 11, 20}, {130, 1025}}) {
    const Tensor x = RandomTensor(DataType::kFloat32, shape, 7, -3, 3);
    std::vector<int64_t> axes;
    for (int a = 0; a + 1 < shape.num_axes(); ++a) axes.push_back(a);
    const Tensor y = t.RunOne("reduce_sum", {x}, {{"axes", axes}});
    const int64_t c = shape.dim(shape.num_axes() - 1), r = shape.elem_count() / c;
    const float* px = x.data<float>();
    for (int64_t j = 0; j < c; ++j) {
      float want = 0;
      for (int64_t i = 0; i < r; ++i) want += px[i * c + j];
      ASSERT_EQ(y.data<float>()[j], want) << shape.ToString() << " column " << j;
    }
  }
}

TEST(ReduceOpsTest, ReduceSumIntegersAndScalars) {
  OpTest t;
  const Tensor xi = RandomTensor(DataType::kInt64, {4, 3}, 2, -50, 50);
  Tensor y = t.RunOne("reduce_sum", {xi}, {{"axes", std::vector<int64_t>{0}}});
  EXPECT_EQ(y.dtype(), DataType::kInt64);
  ExpectTensorNear(y, RefReduce(xi, {0}, false, false), 0, 0);
  // A full reduction yields a scalar; reducing a scalar is the identity.
  const Tensor x = Tensor::FromVector<double>({2, 2}, {1.5, 2.0, -4.0, 8.0});
  Tensor s = t.RunOne("reduce_sum", {x}, {});
  EXPECT_EQ(s.shape(), Shape({}));
  EXPECT_DOUBLE_EQ(s.GetAsDouble(0), 7.5);
  EXPECT_DOUBLE_EQ(t.RunOne("reduce_mean", {s}, {}).GetAsDouble(0), 7.5);
}

TEST(ReduceOpsTest, Gradients) {
  OpTest t;
  const Tensor x = RandomTensor(DataType::kFloat64, {3, 4, 5}, 3);
  for (const ReduceCase& c : Cases()) {
    const AttrMap attrs{{"axes", c.axes}, {"keepdims", c.keepdims}};
    t.ExpectGradientsMatch("reduce_sum", {x}, attrs);
    t.ExpectGradientsMatch("reduce_mean", {x}, attrs);
  }
}

TEST(ReduceOpsTest, AllSbpSignatures) {
  OpTest t;
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    const Tensor x = RandomTensor(dtype, {5, 7, 6}, 4);
    for (const ReduceCase& c : Cases()) {
      const AttrMap attrs{{"axes", c.axes}, {"keepdims", c.keepdims}};
      // 3 splits + P + B in 1-D; the 2-D ones are all pairs.
      EXPECT_EQ(t.ExpectAllSbpSignaturesMatch("reduce_sum", {x}, attrs), 5 + 25);
      EXPECT_EQ(t.ExpectAllSbpSignaturesMatch("reduce_mean", {x}, attrs), 5 + 25);
    }
  }
}

TEST(ReduceOpsTest, SplitOnReducedAxisGivesPartialSum) {
  OpTest t;
  const auto sigs = t.SbpSignatures("reduce_mean", {{DataType::kFloat32, Shape({4, 5, 6})}},
                                    {{"axes", std::vector<int64_t>{1}}, {"keepdims", false}});
  ASSERT_FALSE(sigs.empty());
  auto has = [&](const SbpSignature& s) { return testing::HasSignature(sigs, s); };
  EXPECT_TRUE(has({{Sbp::Split(0)}, {Sbp::Split(0)}}));
  EXPECT_TRUE(has({{Sbp::Split(1)}, {Sbp::PartialSum()}}));
  EXPECT_TRUE(has({{Sbp::Split(2)}, {Sbp::Split(1)}}));
  EXPECT_TRUE(has({{Sbp::PartialSum()}, {Sbp::PartialSum()}}));
  EXPECT_TRUE(has({{Sbp::Broadcast()}, {Sbp::Broadcast()}}));
}

// Reference numpy broadcast: y[idx] = x[idx aligned from the right, 0 where x has size 1].
Tensor RefBroadcast(const Tensor& x, const Shape& target) {
  Tensor y(DataType::kFloat64, target);
  const int off = target.num_axes() - x.shape().num_axes();
  for (int64_t i = 0; i < y.elem_count(); ++i) {
    const std::vector<int64_t> idx = UnravelIndex(target, i);
    std::vector<int64_t> src;
    for (int a = 0; a < x.shape().num_axes(); ++a) src.push_back(x.shape()[a] == 1 ? 0 : idx[a + off]);
    y.SetFromDouble(i, x.GetAsDouble(RavelIndex(x.shape(), src)));
  }
  return y;
}

struct BroadcastCase {
  Shape from, to;
};

TEST(ReduceOpsTest, BroadcastToForwardGradAndSbp) {
  OpTest t;
  const std::vector<BroadcastCase> cases = {
      {{3, 1}, {2, 3, 5}}, {{}, {4, 3}}, {{5}, {3, 5}}, {{1, 5, 1}, {3, 5, 7}}, {{2, 3}, {2, 3}}, {{1}, {1}}};
  for (const BroadcastCase& c : cases) {
    const AttrMap attrs{{"shape", c.to.dims()}};
    for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kBool}) {
      const Tensor x = RandomTensor(dtype, c.from, 5, -3, 3);
      ExpectTensorNear(t.RunOne("broadcast_to", {x}, attrs), RefBroadcast(x, c.to), 0, 0,
                       c.from.ToString() + " -> " + c.to.ToString());
    }
    const Tensor x64 = RandomTensor(DataType::kFloat64, c.from, 6);
    t.ExpectGradientsMatch("broadcast_to", {x64}, attrs);
    SCOPED_TRACE(c.from.ToString() + " -> " + c.to.ToString());
    t.ExpectAllSbpSignaturesMatch("broadcast_to", {RandomTensor(DataType::kFloat32, c.from, 7)}, attrs);
  }
}

TEST(ReduceOpsTest, BadInputsNameTheOp) {
  OpTest t;
  const Tensor x = RandomTensor(DataType::kFloat32, {3, 4}, 8);
  t.ExpectRunFails("reduce_sum", {x}, {{"axes", std::vector<int64_t>{2}}}, {"[3,4]"});
  t.ExpectRunFails("reduce_sum", {x}, {{"axes", std::vector<int64_t>{-3}}}, {"out of range"});
  t.ExpectRunFails("reduce_mean", {x}, {{"axes", std::vector<int64_t>{1, -1}}}, {"twice"});
  t.ExpectRunFails("reduce_mean", {RandomTensor(DataType::kInt32, {3}, 1)}, {}, {"int32"});
  t.ExpectRunFails("broadcast_to", {x}, {{"shape", std::vector<int64_t>{3, 5}}}, {"[3,5]"});
  t.ExpectRunFails("broadcast_to", {x}, {{"shape", std::vector<int64_t>{4}}}, {"[3,4]"});
}

}  // namespace
}  // namespace oneflow_like
