// Tests for sparse_softmax_cross_entropy and its gradient against float64 references written
// here, numerical gradients and every SBP signature (uneven splits, partial-sum loss).
#include <cmath>

#include "gtest/gtest.h"
#include "oneflow_like/core/testing/op_test_util.h"

namespace oneflow_like {
namespace {

using testing::ExpectTensorNear;
using testing::OpTest;
using testing::RandomTensor;

constexpr char kLoss[] = "sparse_softmax_cross_entropy";
constexpr char kLossGrad[] = "sparse_softmax_cross_entropy_grad";

// -log softmax(row)[label] in long double, the naive way made safe by the max shift.
double RefRowLoss(const Tensor& logits, int64_t r, int64_t c, int64_t label) {
  long double m = -INFINITY, s = 0;
  for (int64_t j = 0; j < c; ++j) m = std::max<long double>(m, logits.GetAsDouble(r * c + j));
  for (int64_t j = 0; j < c; ++j) s += std::exp(static_cast<long double>(logits.GetAsDouble(r * c + j)) - m);
  return static_cast<double>(m + std::log(s) - logits.GetAsDouble(r * c + label));
}

double RefLoss(const Tensor& logits, const Tensor& labels) {
  const int64_t c = logits.shape().dim(logits.shape().num_axes() - 1);
  double total = 0;
  for (int64_t r = 0; r < labels.elem_count(); ++r) {
    total += RefRowLoss(logits, r, c, static_cast<int64_t>(labels.GetAsDouble(r)));
  }
  return total / labels.elem_count();
}

Tensor RefLossGrad(const Tensor& logits, const Tensor& labels, double dloss) {
  const int64_t c = logits.shape().dim(logits.shape().num_axes() - 1), n = labels.elem_count();
  Tensor g(DataType::kFloat64, logits.shape());
  for (int64_t r = 0; r < n; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < c; ++j) m = std::max(m, logits.GetAsDouble(r * c + j));
    for (int64_t j = 0; j < c; ++j) s += std::exp(logits.GetAsDouble(r * c + j) - m);
    for (int64_t j = 0; j < c; ++j) {
      const double p = std::exp(logits.GetAsDouble(r * c + j) - m) / s;
      const double onehot = j == static_cast<int64_t>(labels.GetAsDouble(r)) ? 1.0 : 0.0;
      g.SetFromDouble(r * c + j, (p - onehot) * dloss / n);
    }
  }
  return g;
}

Shape LabelShape(const Shape& logits) {
  return Shape(std::vector<int64_t>(logits.dims().begin(), logits.dims().end() - 1));
}

class LossTest : public ::testing::Test {
 protected:
  OpTest t_;
};

TEST_F(LossTest, KnownValues) {
  // Row 0: two equal logits -> log 2. Row 1: log(e + e^2 + e^3) - 3.
  Tensor logits = Tensor::FromVector<double>({2, 3}, {5, 5, -INFINITY, 1, 2, 3});
  Tensor labels = Tensor::FromVector<int32_t>({2}, {1, 2});
  auto loss = t_.Run(kLoss, {logits, labels});
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_EQ((*loss)[0].shape(), Shape{});
  const double want = (std::log(2.0) + std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3) / 2;
  EXPECT_NEAR((*loss)[0].GetAsDouble(0), want, 1e-14);
}

TEST_F(LossTest, ForwardMatchesReference) {
  for (const Shape& shape : std::vector<Shape>{{1}, {4, 5}, {2, 3, 7}, {6, 37}}) {
    for (DataType dt : {DataType::kFloat32, DataType::kFloat64}) {
      for (DataType it : {DataType::kInt32, DataType::kInt64}) {
        const int64_t c = shape.dim(shape.num_axes() - 1);
        // +-300: exp overflows float32 (and float64 near 710) without the max shift.
        Tensor logits = RandomTensor(dt, shape, 1, -300, 300);
        Tensor labels = RandomTensor(it, LabelShape(shape), 2, 0, c);
        auto loss = t_.Run(kLoss, {logits, labels});
        ASSERT_TRUE(loss.ok()) << loss.status();
        const double want = RefLoss(logits, labels);
        const double tol = dt == DataType::kFloat32 ? 1e-5 : 1e-12;
        EXPECT_NEAR((*loss)[0].GetAsDouble(0), want, tol * (1 + std::abs(want))) << shape.ToString();
      }
    }
  }
}

TEST_F(LossTest, GradKernelMatchesReference) {
  for (DataType dt : {DataType::kFloat32, DataType::kFloat64}) {
    Tensor logits = RandomTensor(dt, {3, 4, 11}, 3, -5, 5);
    Tensor labels = RandomTensor(DataType::kInt64, {3, 4}, 4, 0, 11);
    Tensor dloss(dt, Shape{});
    dloss.SetFromDouble(0, 0.7);
    auto g = t_.Run(kLossGrad, {logits, labels, dloss});
    ASSERT_TRUE(g.ok()) << g.status();
    const double tol = dt == DataType::kFloat32 ? 1e-5 : 1e-13;
    ExpectTensorNear((*g)[0], RefLossGrad(logits, labels, 0.7), tol, tol * 1e-2, DataTypeName(dt));
  }
}

TEST_F(LossTest, GradientsMatchNumerical) {
  Tensor logits = RandomTensor(DataType::kFloat64, {2, 3, 5}, 5, -3, 3);
  Tensor labels = RandomTensor(DataType::kInt32, {2, 3}, 6, 0, 5);
  t_.ExpectGradientsMatch(kLoss, {logits, labels});
  auto grads = t_.RunGrad(kLoss, {logits, labels}, {}, {Tensor::FromVector<double>(Shape{}, {1.0})}, {true, false});
  ASSERT_TRUE(grads.ok()) << grads.status();
  EXPECT_FALSE((*grads)[1].defined()) << "labels have no gradient";
}

TEST_F(LossTest, AllSbpSignatures) {
  Tensor logits = RandomTensor(DataType::kFloat64, {5, 7, 9}, 7, -3, 3);
  Tensor labels = RandomTensor(DataType::kInt64, {5, 7}, 8, 0, 9);
  // S(0), S(1), B: 3 + 9; the partial losses divide by the logical count (35).
  EXPECT_EQ(t_.ExpectAllSbpSignaturesMatch(kLoss, {logits, labels}), 3 + 9);
  Tensor dloss = Tensor::FromVector<double>(Shape{}, {1.3});
  // S(0), S(1), B, (B, B, P): 4 + 16.
  EXPECT_EQ(t_.ExpectAllSbpSignaturesMatch(kLossGrad, {logits, labels, dloss}), 4 + 16);
}

TEST_F(LossTest, NoLabelsGiveZeroLoss) {
  Tensor logits(DataType::kFloat32, Shape{0, 3});
  Tensor labels(DataType::kInt64, Shape{0});
  auto loss = t_.Run(kLoss, {logits, labels});
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_EQ((*loss)[0].GetAsDouble(0), 0.0);
  auto g = t_.Run(kLossGrad, {logits, labels, Tensor::FromVector<float>(Shape{}, {1.0f})});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)[0].shape(), (Shape{0, 3}));
}

TEST_F(LossTest, BadInputsNameTheOpAndShapes) {
  Tensor logits(DataType::kFloat32, Shape{4, 6});
  t_.ExpectRunFails(kLoss, {logits, Tensor(DataType::kInt64, Shape{3})}, {}, {"labels", "int64[3]", "float32[4,6]"});
  t_.ExpectRunFails(kLoss, {logits, Tensor(DataType::kFloat32, Shape{4})}, {}, {"float32[4]"});
  Tensor bad = Tensor::FromVector<int64_t>({4}, {0, 5, 6, 1});
  t_.ExpectRunFails(kLoss, {logits, bad}, {}, {"label 6", "position 2", "C = 6"});
  Tensor negative = Tensor::FromVector<int32_t>({4}, {0, -2, 1, 1});
  t_.ExpectRunFails(kLoss, {logits, negative}, {}, {"label -2"});
  Tensor labels = Tensor::FromVector<int64_t>({4}, {0, 1, 2, 3});
  t_.ExpectRunFails(kLossGrad, {logits, bad, Tensor(DataType::kFloat32, Shape{})}, {}, {"label 6", "C = 6"});
  t_.ExpectRunFails(kLossGrad, {logits, labels, Tensor(DataType::kFloat32, Shape{1})}, {}, {"dloss", "float32[1]"});
}

}  // namespace
}  // namespace oneflow_like
