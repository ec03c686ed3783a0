// Tests of relu, relu_grad, gelu, gelu_grad (both approximate="tanh" and "none"): forward
// against plain references (std::tanh / std::erf in double, and torch's values), the *_grad
// kernels against the analytic derivative, the gradient rules against finite differences
// (float64), every SBP signature on uneven splits, and bad inputs.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/core/testing/op_test_util.h"

namespace oneflow_like {
namespace {

using ::oneflow_like::testing::ExpectInvalidArgument;
using ::oneflow_like::testing::ExpectTensorNear;
using ::oneflow_like::testing::OpTest;
using ::oneflow_like::testing::RandomTensor;
using ::oneflow_like::testing::SbpCheckOptions;

const double kC = std::sqrt(2.0 / M_PI);

double Gelu(double x) { return 0.5 * x * (1.0 + std::tanh(kC * (x + 0.044715 * x * x * x))); }
// Derivative of Gelu by the product and chain rules, written independently of the kernel.
double GeluDerivative(double x) {
  const double t = std::tanh(kC * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kC * (1.0 + 3 * 0.044715 * x * x);
}

const AttrMap kExact = {{"approximate", std::string("none")}};

// The exact gelu x Phi(x) and its derivative Phi(x) + x phi(x), in double.
double ErfGelu(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
double ErfGeluDerivative(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
}

template <typename Fn>
Tensor Map(const Tensor& x, Fn fn) {
  Tensor y(DataType::kFloat64, x.shape());
  for (int64_t i = 0; i < x.elem_count(); ++i) y.SetFromDouble(i, fn(x.GetAsDouble(i)));
  return y;
}

// Values across gelu's whole range, including the saturated tails and exact zeros.
Tensor WideInput(DataType dtype) {
  std::vector<double> v = {-100, -30,  -12, -9.5, -5, -3, -1,  -0.5, -1e-3, -1e-6, 0,
                           1e-6, 1e-3, 0.5, 1,    3,  5,  9.5, 12,   30,    100};
  return testing::TensorFromDoubles(dtype, Shape{static_cast<int64_t>(v.size())}, v);
}

class ActivationTest : public ::testing::Test {
 protected:
  OpTest t_;
};

TEST_F(ActivationTest, ReluForward) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    for (const Shape& shape : {Shape{5, 7}, Shape{37}, Shape{}, Shape{2, 0}}) {
      const Tensor x = RandomTensor(dtype, shape, 1);
      auto out = t_.Run("relu", {x});
      ASSERT_TRUE(out.ok()) << out.status();
      ExpectTensorNear((*out)[0], Map(x, [](double v) { return v > 0 ? v : 0.0; }), 0, 0, shape.ToString());
    }
  }
  auto nan = t_.Run("relu", {Tensor::FromVector<float>({1}, {std::numeric_limits<float>::quiet_NaN()})});
  ASSERT_TRUE(nan.ok());
  EXPECT_TRUE(std::isnan((*nan)[0].GetAsDouble(0))) << "relu should propagate NaN";
}

TEST_F(ActivationTest, GeluForward) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    // In the negative tail gelu is ill-conditioned (d log gelu / d log x ~ 0.27 |x|^3), so
    // float32 results there are only accurate in absolute terms (values < 1e-9 are float noise
    // next to the O(1) outputs).
    const double tol = dtype == DataType::kFloat32 ? 2e-6 : 1e-13;
    const double atol = dtype == DataType::kFloat32 ? 1e-9 : 1e-30;
    for (const Tensor& x : {RandomTensor(dtype, {5, 37}, 2, -6, 6), WideInput(dtype)}) {
      auto out = t_.Run("gelu", {x});
      ASSERT_TRUE(out.ok()) << out.status();
      ExpectTensorNear((*out)[0], Map(x, Gelu), tol, atol, x.desc().ToString());
    }
  }
  auto known = t_.Run("gelu", {Tensor::FromVector<double>({3}, {0.0, 1.0, -1.0})});
  ASSERT_TRUE(known.ok());
  // 0.5 * (1 + tanh(sqrt(2/pi) * 1.044715)) = 0.8411919906...
  ExpectTensorNear((*known)[0],
                   Tensor::FromVector<double>({3}, {0.0, 0.8411919906082768, -0.15880800939172324}), 1e-12,
                   1e-15);
}

TEST_F(ActivationTest, ExactGeluForward) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    const double tol = dtype == DataType::kFloat32 ? 2e-6 : 1e-13;
    const double atol = dtype == DataType::kFloat32 ? 1e-9 : 1e-30;
    for (const Tensor& x : {RandomTensor(dtype, {5, 37}, 2, -6, 6), WideInput(dtype)}) {
      auto out = t_.Run("gelu", {x}, kExact);
      ASSERT_TRUE(out.ok()) << out.status();
      ExpectTensorNear((*out)[0], Map(x, ErfGelu), tol, atol, x.desc().ToString());
    }
  }
  // torch 1.13: torch.nn.functional.gelu(torch.tensor([0., 1, -1, 3, -3], dtype=torch.float64)).
  const Tensor x = Tensor::FromVector<double>({5}, {0.0, 1.0, -1.0, 3.0, -3.0});
  auto known = t_.Run("gelu", {x}, kExact);
  ASSERT_TRUE(known.ok()) << known.status();
  ExpectTensorNear((*known)[0],
                   Tensor::FromVector<double>(
                       {5}, {0.0, 0.841344746068543, -0.15865525393145702, 2.99595030590511, -0.00404969409489031}),
                   1e-14, 1e-16);
  // The default stays the tanh approximation (0.8411919906... at 1).
  auto tanh = t_.Run("gelu", {x});
  ASSERT_TRUE(tanh.ok());
  EXPECT_NEAR((*tanh)[0].GetAsDouble(1), 0.8411919906082768, 1e-12);
}

TEST_F(ActivationTest, ExactGeluGradKernelAndRule) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    const double tol = dtype == DataType::kFloat32 ? 5e-6 : 1e-12;
    const Tensor x = RandomTensor(dtype, {3, 29}, 3, -6, 6);
    const Tensor dy = RandomTensor(dtype, {3, 29}, 4);
    auto dx = t_.Run("gelu_grad", {dy, x}, kExact);
    ASSERT_TRUE(dx.ok()) << dx.status();
    Tensor expected(DataType::kFloat64, x.shape());
    for (int64_t i = 0; i < x.elem_count(); ++i) {
      expected.SetFromDouble(i, dy.GetAsDouble(i) * ErfGeluDerivative(x.GetAsDouble(i)));
    }
    ExpectTensorNear((*dx)[0], expected, tol, 1e-7, "gelu_grad exact");
  }
  // The rule emits gelu_grad with the forward's attr: finite differences of the erf form.
  t_.ExpectGradientsMatch("gelu", {RandomTensor(DataType::kFloat64, {3, 5}, 7, -4, 4)}, kExact);
  t_.ExpectGradientsMatch("gelu", {WideInput(DataType::kFloat64)}, kExact);
  SbpCheckOptions forward;
  forward.min_signatures = 3 + 3 * 3;
  t_.ExpectAllSbpSignaturesMatch("gelu", {RandomTensor(DataType::kFloat32, {5, 7}, 8, -3, 3)}, kExact, forward);
  t_.ExpectAllSbpSignaturesMatch(
      "gelu_grad", {RandomTensor(DataType::kFloat32, {5, 7}, 9), RandomTensor(DataType::kFloat32, {5, 7}, 8, -3, 3)},
      kExact);
  t_.ExpectRunFails("gelu", {RandomTensor(DataType::kFloat32, {3}, 1)}, {{"approximate", std::string("erf")}},
                    {"approximate", "\"erf\""});
}

// The float32 erf kernels (a rational Mills ratio times exp(-x^2/2), activation_ops.cc) against
// float64 std::erfc on a dense grid over [-16, 16], through both tails: gelu to 1e-6 relative,
// gelu' to 1e-6 of Phi(x) + |x| phi(x) (the size of its terms: near gelu's minimum, x ~ -0.75,
// gelu' crosses 0 and only absolute accuracy means anything). Both may flush results below the
// smallest normal float (~1.2e-38; past x ~ -13.2) to 0.
TEST_F(ActivationTest, ExactGeluFloat32MatchesFloat64AcrossTheRange) {
  std::vector<float> v;
  for (int i = -16 * 1024; i <= 16 * 1024; ++i) v.push_back(static_cast<float>(i) / 1024.0f + 1.0f / 3072.0f);
  for (float big : {20.0f, 100.0f, 1e30f, 3.4e38f}) {
    v.push_back(big);
    v.push_back(-big);
  }
  const int64_t n = static_cast<int64_t>(v.size());
  const Tensor x = Tensor::FromVector<float>({n}, v);
  auto y = t_.Run("gelu", {x}, kExact);
  ASSERT_TRUE(y.ok()) << y.status();
  auto dx = t_.Run("gelu_grad", {Tensor::FromVector<float>({n}, std::vector<float>(v.size(), 1.0f)), x}, kExact);
  ASSERT_TRUE(dx.ok()) << dx.status();
  int bad = 0;
  for (int64_t i = 0; i < n && bad < 5; ++i) {
    const double xd = v[i];
    const double cdf = 0.5 * std::erfc(-xd / std::sqrt(2.0));
    const double x_pdf = std::abs(xd) < 100 ? xd * std::exp(-0.5 * xd * xd) / std::sqrt(2.0 * M_PI) : 0.0;
    const double got = (*y)[0].GetAsDouble(i), want = xd * cdf;
    const double got_d = (*dx)[0].GetAsDouble(i), want_d = cdf + x_pdf;
    if (!(std::abs(got - want) <= 1e-6 * std::abs(want) + 1.2e-37)) {
      ADD_FAILURE() << "gelu(" << xd << ") = " << got << ", float64 " << want;
      ++bad;
    }
    if (!(std::abs(got_d - want_d) <= 1e-6 * (cdf + std::abs(x_pdf)) + 1.2e-37)) {
      ADD_FAILURE() << "gelu'(" << xd << ") = " << got_d << ", float64 " << want_d;
      ++bad;
    }
  }
  // Non-finite inputs, float32 and float64: the limits at +-inf (gelu(inf) = inf, gelu(-inf) = 0,
  // gelu'(inf) = 1, gelu'(-inf) = 0), NaN propagates.
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    SCOPED_TRACE(DataTypeName(dtype));
    Tensor x(dtype, Shape({3})), dy(dtype, Shape({3}));
    const double xs[3] = {inf, -inf, nan};
    for (int i = 0; i < 3; ++i) x.SetFromDouble(i, xs[i]), dy.SetFromDouble(i, 1.0);
    auto special = t_.Run("gelu", {x}, kExact);
    ASSERT_TRUE(special.ok()) << special.status();
    EXPECT_EQ((*special)[0].GetAsDouble(0), inf);
    EXPECT_EQ((*special)[0].GetAsDouble(1), 0.0);
    EXPECT_TRUE(std::signbit((*special)[0].GetAsDouble(1))) << "gelu(-inf) = -inf * Phi(-inf) = -0";
    EXPECT_TRUE(std::isnan((*special)[0].GetAsDouble(2)));
    auto special_dx = t_.Run("gelu_grad", {dy, x}, kExact);
    ASSERT_TRUE(special_dx.ok()) << special_dx.status();
    EXPECT_EQ((*special_dx)[0].GetAsDouble(0), 1.0);
    EXPECT_EQ((*special_dx)[0].GetAsDouble(1), 0.0);
    EXPECT_TRUE(std::isnan((*special_dx)[0].GetAsDouble(2)));
  }
}

TEST_F(ActivationTest, GradKernelsMatchAnalyticDerivatives) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    const double tol = dtype == DataType::kFloat32 ? 5e-6 : 1e-12;
    const Tensor x = RandomTensor(dtype, {3, 29}, 3, -6, 6);
    const Tensor dy = RandomTensor(dtype, {3, 29}, 4);
    auto gelu_dx = t_.Run("gelu_grad", {dy, x});
    ASSERT_TRUE(gelu_dx.ok()) << gelu_dx.status();
    Tensor expected(DataType::kFloat64, x.shape());
    for (int64_t i = 0; i < x.elem_count(); ++i) {
      expected.SetFromDouble(i, dy.GetAsDouble(i) * GeluDerivative(x.GetAsDouble(i)));
    }
    ExpectTensorNear((*gelu_dx)[0], expected, tol, 1e-7, "gelu_grad");

    const Tensor wide = WideInput(dtype);
    const Tensor ones = Map(wide, [](double) { return 1.0; });
    auto wide_dx = t_.Run("gelu_grad", {dtype == DataType::kFloat32 ? testing::ToFloat(ones) : ones, wide});
    ASSERT_TRUE(wide_dx.ok()) << wide_dx.status();
    ExpectTensorNear((*wide_dx)[0], Map(wide, GeluDerivative), tol, 1e-7, "gelu_grad wide");

    auto y = t_.Run("relu", {x});
    ASSERT_TRUE(y.ok());
    auto relu_dx = t_.Run("relu_grad", {dy, (*y)[0]});
    ASSERT_TRUE(relu_dx.ok()) << relu_dx.status();
    for (int64_t i = 0; i < x.elem_count(); ++i) {
      expected.SetFromDouble(i, x.GetAsDouble(i) > 0 ? dy.GetAsDouble(i) : 0.0);
    }
    ExpectTensorNear((*relu_dx)[0], expected, 0, 0, "relu_grad");
  }
}

TEST_F(ActivationTest, GradientRules) {
  // Keep relu's inputs away from the kink at 0, where the finite difference is meaningless.
  Tensor x = RandomTensor(DataType::kFloat64, {3, 5}, 5, 0.1, 1.0);
  const Tensor sign = RandomTensor(DataType::kFloat64, {3, 5}, 6);
  for (int64_t i = 0; i < x.elem_count(); ++i)
    x.SetFromDouble(i, sign.GetAsDouble(i) < 0 ? -x.GetAsDouble(i) : x.GetAsDouble(i));
  t_.ExpectGradientsMatch("relu", {x});
  t_.ExpectGradientsMatch("gelu", {RandomTensor(DataType::kFloat64, {3, 5}, 7, -4, 4)});
  t_.ExpectGradientsMatch("gelu", {WideInput(DataType::kFloat64)});
}

TEST_F(ActivationTest, AllSbpSignaturesOnUnevenSplits) {
  const Tensor x = RandomTensor(DataType::kFloat32, {5, 7}, 8, -3, 3);
  const Tensor dy = RandomTensor(DataType::kFloat32, {5, 7}, 9);
  SbpCheckOptions forward;
  forward.min_signatures = 3 + 3 * 3;  // S(0), S(1), B
  t_.ExpectAllSbpSignaturesMatch("relu", {x}, {}, forward);
  t_.ExpectAllSbpSignaturesMatch("gelu", {x}, {}, forward);
  SbpCheckOptions backward;
  backward.min_signatures = 4 + 4 * 4;  // S(0), S(1), B, (P, B) -> P
  t_.ExpectAllSbpSignaturesMatch("relu_grad", {dy, x}, {}, backward);
  t_.ExpectAllSbpSignaturesMatch("gelu_grad", {dy, x}, {}, backward);
  // A 3-D tensor with a dim smaller than the device count still has valid signatures.
  t_.ExpectAllSbpSignaturesMatch("gelu", {RandomTensor(DataType::kFloat32, {2, 5, 3}, 10)});
}

TEST_F(ActivationTest, ForwardOpsHaveNoPartialSignature) {
  for (const std::string op : {"relu", "gelu"}) {
    const std::vector<SbpSignature> sigs = t_.SbpSignatures(op, {{DataType::kFloat32, {4, 4}}});
    ASSERT_FALSE(sigs.empty()) << op;
    for (const SbpSignature& s : sigs) {
      EXPECT_FALSE(s.inputs[0].is_partial_sum()) << op << ": " << s.ToString();
    }
  }
}

TEST_F(ActivationTest, BadInputsAreInvalidArgument) {
  t_.ExpectRunFails("gelu", {RandomTensor(DataType::kInt32, {3}, 1, 0, 4)}, {}, {"int32[3]"});
  const OpDef* def = t_.registry().Find("relu_grad");
  ASSERT_NE(def, nullptr);
  ExpectInvalidArgument(
      def->Infer("act1.grad", {}, {{DataType::kFloat32, {4, 3}}, {DataType::kFloat32, {4, 5}}}).status(),
      {"relu_grad 'act1.grad'", "float32[4,3]", "float32[4,5]"});
}

}  // namespace
}  // namespace oneflow_like
