// Tests for layer_norm and layer_norm_grad against float64 references written here, numerical
// gradients and every SBP signature (uneven splits).
#include <cmath>

#include "gtest/gtest.h"
#include "oneflow_like/core/testing/op_test_util.h"

namespace oneflow_like {
namespace {

using testing::ExpectTensorNear;
using testing::OpTest;
using testing::RandomTensor;

Shape Rows(const Shape& x) { return Shape(std::vector<int64_t>(x.dims().begin(), x.dims().end() - 1)); }

struct LayerNormRef {
  Tensor y, mean, inv_std;
};

LayerNormRef RefLayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps) {
  const int64_t d = gamma.elem_count(), rows = x.elem_count() / d;
  LayerNormRef r{Tensor(DataType::kFloat64, x.shape()), Tensor(DataType::kFloat64, Rows(x.shape())),
                 Tensor(DataType::kFloat64, Rows(x.shape()))};
  for (int64_t i = 0; i < rows; ++i) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < d; ++j) mean += x.GetAsDouble(i * d + j);
    mean /= d;
    for (int64_t j = 0; j < d; ++j) var += std::pow(x.GetAsDouble(i * d + j) - mean, 2);
    var /= d;
    const double inv_std = 1 / std::sqrt(var + eps);
    for (int64_t j = 0; j < d; ++j) {
      r.y.SetFromDouble(i * d + j, (x.GetAsDouble(i * d + j) - mean) * inv_std * gamma.GetAsDouble(j) + beta.GetAsDouble(j));
    }
    r.mean.SetFromDouble(i, mean);
    r.inv_std.SetFromDouble(i, inv_std);
  }
  return r;
}

// Textbook layer-norm backward, written independently of the kernel.
std::vector<Tensor> RefLayerNormGrad(const Tensor& dy, const Tensor& x, const Tensor& gamma, double eps) {
  const int64_t d = gamma.elem_count(), rows = x.elem_count() / d;
  Tensor dx(DataType::kFloat64, x.shape()), dgamma(DataType::kFloat64, gamma.shape()),
      dbeta(DataType::kFloat64, gamma.shape());
  for (int64_t i = 0; i < rows; ++i) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < d; ++j) mean += x.GetAsDouble(i * d + j) / d;
    for (int64_t j = 0; j < d; ++j) var += std::pow(x.GetAsDouble(i * d + j) - mean, 2) / d;
    const double s = 1 / std::sqrt(var + eps);
    // dvar and dmean by the chain rule through var = mean((x - mean)^2).
    double dvar = 0, dmean = 0;
    for (int64_t j = 0; j < d; ++j) {
      const double dxhat = dy.GetAsDouble(i * d + j) * gamma.GetAsDouble(j);
      dvar += dxhat * (x.GetAsDouble(i * d + j) - mean) * -0.5 * s * s * s;
      dmean += -dxhat * s;
    }
    for (int64_t j = 0; j < d; ++j) {
      const int64_t e = i * d + j;
      const double xc = x.GetAsDouble(e) - mean;
      const double dxhat = dy.GetAsDouble(e) * gamma.GetAsDouble(j);
      dx.SetFromDouble(e, dxhat * s + dvar * 2 * xc / d + dmean / d);
      dgamma.SetFromDouble(j, dgamma.GetAsDouble(j) + dy.GetAsDouble(e) * xc * s);
      dbeta.SetFromDouble(j, dbeta.GetAsDouble(j) + dy.GetAsDouble(e));
    }
  }
  return {dx, dgamma, dbeta};
}

class LayerNormTest : public ::testing::Test {
 protected:
  OpTest t_;
};

TEST_F(LayerNormTest, ForwardMatchesReference) {
  const std::vector<Shape> shapes = {{1}, {3, 8}, {2, 3, 17}, {4, 1}, {5, 37}};
  for (const Shape& shape : shapes) {
    for (DataType dt : {DataType::kFloat32, DataType::kFloat64}) {
      const int64_t d = shape.dim(shape.num_axes() - 1);
      Tensor x = RandomTensor(dt, shape, 1, -3, 3);
      Tensor gamma = RandomTensor(dt, {d}, 2, 0.5, 1.5);
      Tensor beta = RandomTensor(dt, {d}, 3);
      for (double eps : {1e-5, 1e-2}) {
        auto out = t_.Run("layer_norm", {x, gamma, beta}, {{"epsilon", eps}});
        ASSERT_TRUE(out.ok()) << out.status();
        ASSERT_EQ(out->size(), 3u);
        LayerNormRef ref = RefLayerNorm(x, gamma, beta, eps);
        const double tol = dt == DataType::kFloat32 ? 1e-5 : 1e-12;
        const std::string what = absl::StrCat(shape.ToString(), " ", DataTypeName(dt), " eps ", eps);
        ExpectTensorNear((*out)[0], ref.y, tol, tol, "y " + what);
        ExpectTensorNear((*out)[1], ref.mean, tol, tol, "mean " + what);
        ExpectTensorNear((*out)[2], ref.inv_std, tol, tol, "inv_std " + what);
      }
    }
  }
}

TEST_F(LayerNormTest, StableForLargeMeanSmallVariance) {
  // mean 1000, std ~0.01: the one-pass E[x^2] - E[x]^2 loses every digit in float32.
  Tensor x = RandomTensor(DataType::kFloat32, {4, 64}, 5, 999.98, 1000.02);
  Tensor gamma = Tensor::FromVector<float>({64}, std::vector<float>(64, 1.0f));
  Tensor beta(DataType::kFloat32, Shape{64});
  auto out = t_.Run("layer_norm", {x, gamma, beta}, {{"epsilon", 0.0}});
  ASSERT_TRUE(out.ok()) << out.status();
  LayerNormRef ref = RefLayerNorm(x, gamma, beta, 0.0);
  ExpectTensorNear((*out)[0], ref.y, 1e-3, 1e-3, "y");
  ExpectTensorNear((*out)[2], ref.inv_std, 1e-3, 0, "inv_std");
}

TEST_F(LayerNormTest, GradKernelMatchesReference) {
  for (DataType dt : {DataType::kFloat32, DataType::kFloat64}) {
    const Shape shape{3, 5, 19};
    Tensor x = RandomTensor(dt, shape, 7, -2, 2);
    Tensor gamma = RandomTensor(dt, {19}, 8);
    Tensor beta = RandomTensor(dt, {19}, 9);
    Tensor dy = RandomTensor(dt, shape, 10);
    auto fwd = t_.Run("layer_norm", {x, gamma, beta});
    ASSERT_TRUE(fwd.ok()) << fwd.status();
    auto grads = t_.Run("layer_norm_grad", {dy, x, (*fwd)[1], (*fwd)[2], gamma});
    ASSERT_TRUE(grads.ok()) << grads.status();
    std::vector<Tensor> ref = RefLayerNormGrad(dy, x, gamma, 1e-5);
    const double tol = dt == DataType::kFloat32 ? 2e-5 : 1e-11;
    const char* names[] = {"dx", "dgamma", "dbeta"};
    for (int k = 0; k < 3; ++k) {
      ExpectTensorNear((*grads)[k], ref[k], tol, tol, absl::StrCat(names[k], " ", DataTypeName(dt)));
    }
  }
}

TEST_F(LayerNormTest, GradientsMatchNumerical) {
  testing::GradCheckOptions opts;
  opts.outputs = {0};  // mean and inv_std are auxiliary outputs
  for (const Shape& shape : std::vector<Shape>{{3, 7}, {2, 2, 5}}) {
    const int64_t d = shape.dim(shape.num_axes() - 1);
    Tensor x = RandomTensor(DataType::kFloat64, shape, 11, -2, 2);
    Tensor gamma = RandomTensor(DataType::kFloat64, {d}, 12);
    Tensor beta = RandomTensor(DataType::kFloat64, {d}, 13);
    t_.ExpectGradientsMatch("layer_norm", {x, gamma, beta}, {{"epsilon", 1e-3}}, opts);
  }
}

TEST_F(LayerNormTest, AllSbpSignatures) {
  const Shape shape{5, 7, 9};
  Tensor x = RandomTensor(DataType::kFloat64, shape, 21, -2, 2);
  Tensor gamma = RandomTensor(DataType::kFloat64, {9}, 22);
  Tensor beta = RandomTensor(DataType::kFloat64, {9}, 23);
  // S(0), S(1), B: 3 + 9.
  EXPECT_EQ(t_.ExpectAllSbpSignaturesMatch("layer_norm", {x, gamma, beta}), 3 + 9);
  auto fwd = t_.Run("layer_norm", {x, gamma, beta});
  ASSERT_TRUE(fwd.ok()) << fwd.status();
  Tensor dy = RandomTensor(DataType::kFloat64, shape, 24);
  // S(0), S(1), B, (P, B...): 4 + 16.
  EXPECT_EQ(t_.ExpectAllSbpSignaturesMatch("layer_norm_grad", {dy, x, (*fwd)[1], (*fwd)[2], gamma}), 4 + 16);
}

TEST_F(LayerNormTest, KernelsWriteEveryOutput) {
  // Includes zero rows: dgamma and dbeta must still be written (as zeros) into the harness's
  // poisoned buffers.
  for (const Shape& shape : std::vector<Shape>{{3, 5, 8}, {0, 8}}) {
    Tensor x = RandomTensor(DataType::kFloat32, shape, 31), dy = RandomTensor(DataType::kFloat32, shape, 32);
    Tensor g = RandomTensor(DataType::kFloat32, {8}, 33), b = RandomTensor(DataType::kFloat32, {8}, 34);
    t_.ExpectWritesEveryOutput("layer_norm", {x, g, b});
    auto fwd = t_.Run("layer_norm", {x, g, b});
    ASSERT_TRUE(fwd.ok()) << fwd.status();
    const std::vector<Tensor> args = {dy, x, (*fwd)[1], (*fwd)[2], g};
    t_.ExpectWritesEveryOutput("layer_norm_grad", args);
    auto bwd = t_.Run("layer_norm_grad", args);
    ASSERT_TRUE(bwd.ok()) << bwd.status();
    std::vector<Tensor> ref = RefLayerNormGrad(dy, x, g, 1e-5);
    for (int k = 0; k < 3; ++k) {
      ExpectTensorNear((*bwd)[k], ref[k], 2e-5, 2e-5,
                       absl::StrCat("layer_norm_grad output ", k, " ", shape.ToString()));
    }
  }
}

TEST_F(LayerNormTest, BadInputsNameTheOpAndShapes) {
  Tensor x(DataType::kFloat32, Shape{2, 8});
  Tensor g8(DataType::kFloat32, Shape{8}), g5(DataType::kFloat32, Shape{5});
  t_.ExpectRunFails("layer_norm", {x, g5, g8}, {}, {"gamma", "float32[5]", "float32[2,8]"});
  t_.ExpectRunFails("layer_norm", {x, g8, Tensor(DataType::kFloat64, Shape{8})}, {}, {"beta", "float64[8]"});
  t_.ExpectRunFails("layer_norm", {x, g8, g8}, {{"epsilon", -1.0}}, {"epsilon"});
  t_.ExpectRunFails("layer_norm", {Tensor(DataType::kFloat32, Shape{}), g8, g8}, {}, {"float32[]"});
  Tensor stat(DataType::kFloat32, Shape{2}), bad_stat(DataType::kFloat32, Shape{3});
  t_.ExpectRunFails("layer_norm_grad", {x, x, bad_stat, stat, g8}, {}, {"mean", "float32[3]", "float32[2]"});
  t_.ExpectRunFails("layer_norm_grad", {Tensor(DataType::kFloat32, Shape{2, 7}), x, stat, stat, g8}, {},
                    {"dy", "float32[2,7]"});
}

}  // namespace
}  // namespace oneflow_like
