// Tests for softmax, log_softmax, softmax_grad, log_softmax_grad against float64 references
// written here, numerical gradients and every SBP signature (uneven splits).
#include <cmath>
#include <limits>

#include "gtest/gtest.h"
#include "oneflow_like/core/testing/op_test_util.h"

namespace oneflow_like {
namespace {

using testing::ExpectTensorNear;
using testing::OpTest;
using testing::RandomTensor;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Row r of x[..., q, k] is query r % q; key j is kept when !causal or j <= r % q.
bool Kept(const Shape& s, int64_t r, int64_t j, bool causal) {
  return !causal || j <= r % s.dim(s.num_axes() - 2);
}

Tensor RefSoftmax(const Tensor& x, bool log, bool causal) {
  const Shape& s = x.shape();
  const int64_t k = s.dim(s.num_axes() - 1), rows = x.elem_count() / k;
  Tensor y(DataType::kFloat64, s);
  for (int64_t r = 0; r < rows; ++r) {
    double m = -kInf;
    for (int64_t j = 0; j < k; ++j) {
      if (Kept(s, r, j, causal)) m = std::max(m, x.GetAsDouble(r * k + j));
    }
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) {
      if (Kept(s, r, j, causal)) sum += std::exp(x.GetAsDouble(r * k + j) - m);
    }
    for (int64_t j = 0; j < k; ++j) {
      const double v = x.GetAsDouble(r * k + j);
      double out;
      if (!Kept(s, r, j, causal)) {
        out = log ? -kInf : 0.0;
      } else {
        out = log ? v - m - std::log(sum) : std::exp(v - m) / sum;
      }
      y.SetFromDouble(r * k + j, out);
    }
  }
  return y;
}

// dx of softmax (from y = softmax(x)) or log_softmax (from y = log_softmax(x)).
Tensor RefSoftmaxGrad(const Tensor& y, const Tensor& dy, bool log, bool causal) {
  const Shape& s = y.shape();
  const int64_t k = s.dim(s.num_axes() - 1), rows = y.elem_count() / k;
  Tensor dx(DataType::kFloat64, s);
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0;
    for (int64_t j = 0; j < k; ++j) {
      if (!Kept(s, r, j, causal)) continue;
      const double g = dy.GetAsDouble(r * k + j);
      acc += log ? g : g * y.GetAsDouble(r * k + j);
    }
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = r * k + j;
      double v = 0;
      if (Kept(s, r, j, causal)) {
        v = log ? dy.GetAsDouble(e) - std::exp(y.GetAsDouble(e)) * acc
                : y.GetAsDouble(e) * (dy.GetAsDouble(e) - acc);
      }
      dx.SetFromDouble(e, v);
    }
  }
  return dx;
}

class SoftmaxTest : public ::testing::Test {
 protected:
  OpTest t_;
};

TEST_F(SoftmaxTest, ForwardMatchesReference) {
  const std::vector<Shape> shapes = {{1}, {3, 5}, {2, 3, 17}, {4, 37}, {2, 1, 64}};
  for (const char* op : {"softmax", "log_softmax"}) {
    const bool log = std::string(op) == "log_softmax";
    for (const Shape& shape : shapes) {
      for (DataType dt : {DataType::kFloat32, DataType::kFloat64}) {
        // Wide range: exp(x) overflows float32 for x > 88, so this needs the max subtraction.
        Tensor x = RandomTensor(dt, shape, 3, -200, 200);
        auto y = t_.Run(op, {x});
        ASSERT_TRUE(y.ok()) << y.status();
        const bool f32 = dt == DataType::kFloat32;
        // log_softmax of the max entry is -log(1 + tiny): absolute error ~ machine epsilon.
        const double atol = !log ? 1e-30 : f32 ? 1e-7 : 1e-15;
        ExpectTensorNear((*y)[0], RefSoftmax(x, log, false), f32 ? 2e-5 : 1e-12, atol,
                         absl::StrCat(op, " ", shape.ToString(), " ", DataTypeName(dt)));
      }
    }
  }
}

TEST_F(SoftmaxTest, ModerateInputsFloat32) {
  // Typical attention logits: every output is well above underflow, so check tightly.
  Tensor x = RandomTensor(DataType::kFloat32, {6, 129}, 5, -8, 8);
  auto y = t_.Run("softmax", {x});
  ASSERT_TRUE(y.ok()) << y.status();
  ExpectTensorNear((*y)[0], RefSoftmax(x, false, false), 1e-5, 1e-9, "softmax float32");
  double row_sum = 0;
  for (int64_t j = 0; j < 129; ++j) row_sum += (*y)[0].GetAsDouble(j);
  EXPECT_NEAR(row_sum, 1.0, 1e-5);
}

TEST_F(SoftmaxTest, CausalMaskUsesQueryIndex) {
  // q < k, q > k and q == k.
  for (const Shape& shape : std::vector<Shape>{{2, 5, 7}, {6, 4}, {3, 9, 9}}) {
    for (const char* op : {"softmax", "log_softmax"}) {
      const bool log = std::string(op) == "log_softmax";
      Tensor x = RandomTensor(DataType::kFloat64, shape, 9, -4, 4);
      auto y = t_.Run(op, {x}, {{"causal", true}});
      ASSERT_TRUE(y.ok()) << y.status();
      ExpectTensorNear((*y)[0], RefSoftmax(x, log, true), 1e-12, 1e-15, absl::StrCat(op, " causal ", shape.ToString()));
    }
  }
  // Known values: row 0 keeps only key 0 (probability 1); row 1 splits evenly over equal logits.
  Tensor x = Tensor::FromVector<double>({2, 3}, {5, 1, 2, 7, 7, 3});
  auto y = t_.Run("softmax", {x}, {{"causal", true}});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ((*y)[0].ToVector<double>(), (std::vector<double>{1, 0, 0, 0.5, 0.5, 0}));
}

// Causal rows of 16 keys and more run as whole blocks with masked lanes plus, where the row
// length is not a multiple of 16, a scalar tail: masked entries must not count whatever they
// hold (here NaN and inf in x and dy), and every row length from 1 to k must come out right.
TEST_F(SoftmaxTest, CausalRowsInWholeBlocksIgnoreMaskedValues) {
  for (const Shape& shape : std::vector<Shape>{{2, 40, 40}, {3, 20, 35}, {1, 70, 64}, {33, 16}}) {
    for (DataType dt : {DataType::kFloat32, DataType::kFloat64}) {
      Tensor x = RandomTensor(dt, shape, 5, -6, 6);
      Tensor dy = RandomTensor(dt, shape, 6);
      const int64_t k = shape.dim(shape.num_axes() - 1);
      for (int64_t e = 0; e < x.elem_count(); ++e) {
        if (!Kept(shape, e / k, e % k, true)) {
          x.SetFromDouble(e, e % 2 ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity());
          dy.SetFromDouble(e, std::numeric_limits<double>::quiet_NaN());
        }
      }
      const double rtol = dt == DataType::kFloat32 ? 1e-5 : 1e-12;
      for (const char* op : {"softmax", "log_softmax"}) {
        const bool log = std::string(op) == "log_softmax";
        const std::string what = absl::StrCat(op, " ", shape.ToString(), " ", DataTypeName(dt));
        auto y = t_.Run(op, {x}, {{"causal", true}});
        ASSERT_TRUE(y.ok()) << y.status();
        // log_softmax's outputs near 0 carry log(sum)'s rounding: absolute accuracy there.
        ExpectTensorNear((*y)[0], RefSoftmax(x, log, true), rtol, dt == DataType::kFloat32 ? 1e-6 : 1e-12, what);
        auto dx = t_.Run(absl::StrCat(op, "_grad"), {(*y)[0], dy}, {{"causal", true}});
        ASSERT_TRUE(dx.ok()) << dx.status();
        ExpectTensorNear((*dx)[0], RefSoftmaxGrad((*y)[0], dy, log, true), rtol, rtol, what + " grad");
      }
      t_.ExpectWritesEveryOutput("softmax", {x}, {{"causal", true}});
    }
  }
}

// A causal row whose kept scores are all -inf (a padding mask added to them) has NaN kept
// outputs, as PyTorch gives; its masked outputs stay exactly 0 (log_softmax: -inf).
TEST_F(SoftmaxTest, CausalMaskedOutputsStayZeroWhenTheKeptSumIsNaN) {
  for (DataType dt : {DataType::kFloat32, DataType::kFloat64}) {
    Tensor x = RandomTensor(dt, {40, 40}, 7);
    for (int64_t j = 0; j < 40; ++j) x.SetFromDouble(20 * 40 + j, -std::numeric_limits<double>::infinity());
    auto y = t_.Run("softmax", {x}, {{"causal", true}});
    ASSERT_TRUE(y.ok()) << y.status();
    for (int64_t j = 0; j < 40; ++j) {
      const double v = (*y)[0].GetAsDouble(20 * 40 + j);
      if (j <= 20) {
        EXPECT_TRUE(std::isnan(v)) << DataTypeName(dt) << " kept entry " << j << ": " << v;
      } else {
        EXPECT_EQ(v, 0.0) << DataTypeName(dt) << " masked entry " << j;
      }
    }
  }
}

TEST_F(SoftmaxTest, CausalShardUsesLogicalOffset) {
  // The second half of the queries of a [4, 6] causal softmax, run as a shard at offset 2.
  Tensor x = RandomTensor(DataType::kFloat64, {4, 6}, 4);
  Tensor tail(DataType::kFloat64, {2, 6});
  for (int64_t e = 0; e < 12; ++e) tail.SetFromDouble(e, x.GetAsDouble(12 + e));
  auto out = t_.RunShard("softmax", {tail}, {{"causal", true}}, {ShardInfo{Shape{4, 6}, {2, 0}}},
                         {tail.desc()}, {ShardInfo{Shape{4, 6}, {2, 0}}});
  ASSERT_TRUE(out.ok()) << out.status();
  Tensor ref = RefSoftmax(x, false, true);
  for (int64_t e = 0; e < 12; ++e) EXPECT_NEAR((*out)[0].GetAsDouble(e), ref.GetAsDouble(12 + e), 1e-14) << e;
  EXPECT_EQ((*out)[0].GetAsDouble(3), 0.0);  // query 2 masks key 3
  EXPECT_GT((*out)[0].GetAsDouble(2), 0.0);
}

TEST_F(SoftmaxTest, GradKernelsMatchReference) {
  for (bool causal : {false, true}) {
    for (const char* op : {"softmax", "log_softmax"}) {
      const bool log = std::string(op) == "log_softmax";
      for (DataType dt : {DataType::kFloat32, DataType::kFloat64}) {
        Tensor x = RandomTensor(dt, {3, 5, 11}, 2, -3, 3);
        auto y = t_.Run(op, {x}, {{"causal", causal}});
        ASSERT_TRUE(y.ok()) << y.status();
        Tensor dy = RandomTensor(dt, {3, 5, 11}, 8);
        auto dx = t_.Run(absl::StrCat(op, "_grad"), {(*y)[0], dy}, {{"causal", causal}});
        ASSERT_TRUE(dx.ok()) << dx.status();
        const double rtol = dt == DataType::kFloat32 ? 1e-5 : 1e-12;
        ExpectTensorNear((*dx)[0], RefSoftmaxGrad((*y)[0], dy, log, causal), rtol, rtol,
                         absl::StrCat(op, "_grad causal=", causal, " ", DataTypeName(dt)));
      }
    }
  }
}

TEST_F(SoftmaxTest, GradientsMatchNumerical) {
  Tensor x = RandomTensor(DataType::kFloat64, {2, 3, 5}, 12, -2, 2);
  t_.ExpectGradientsMatch("softmax", {x});
  t_.ExpectGradientsMatch("log_softmax", {x});
  t_.ExpectGradientsMatch("softmax", {x}, {{"causal", true}});
}

TEST_F(SoftmaxTest, CausalLogSoftmaxGradientIgnoresMaskedEntries) {
  // log_softmax's masked outputs are -inf, so the harness's weighted sum is not finite; check
  // d/dx of sum over KEPT outputs of y * w by central differences here instead.
  const Shape shape{2, 4, 5};
  Tensor x = RandomTensor(DataType::kFloat64, shape, 21, -2, 2);
  Tensor w = RandomTensor(DataType::kFloat64, shape, 22);
  const int64_t k = 5;
  auto kept_sum = [&](const Tensor& xv) {
    auto y = t_.Run("log_softmax", {xv}, {{"causal", true}});
    EXPECT_TRUE(y.ok());
    double l = 0;
    for (int64_t e = 0; e < xv.elem_count(); ++e) {
      if (Kept(shape, e / k, e % k, true)) l += (*y)[0].GetAsDouble(e) * w.GetAsDouble(e);
    }
    return l;
  };
  // dy = w, with garbage at masked positions: it must not leak into dx.
  Tensor dy = w.Clone();
  for (int64_t e = 0; e < dy.elem_count(); ++e) {
    if (!Kept(shape, e / k, e % k, true)) dy.SetFromDouble(e, 1e6);
  }
  auto grads = t_.RunGrad("log_softmax", {x}, {{"causal", true}}, {dy}, {true});
  ASSERT_TRUE(grads.ok()) << grads.status();
  Tensor numeric(DataType::kFloat64, shape);
  Tensor xp = x.Clone();
  const double eps = 1e-6;
  for (int64_t e = 0; e < x.elem_count(); ++e) {
    const double x0 = x.GetAsDouble(e);
    xp.SetFromDouble(e, x0 + eps);
    const double plus = kept_sum(xp);
    xp.SetFromDouble(e, x0 - eps);
    const double minus = kept_sum(xp);
    xp.SetFromDouble(e, x0);
    numeric.SetFromDouble(e, (plus - minus) / (2 * eps));
  }
  ExpectTensorNear((*grads)[0], numeric, 1e-5, 1e-7, "causal log_softmax gradient");
}

TEST_F(SoftmaxTest, AllSbpSignatures) {
  Tensor x = RandomTensor(DataType::kFloat64, {5, 7, 9}, 31, -3, 3);
  Tensor dy = RandomTensor(DataType::kFloat64, {5, 7, 9}, 32);
  for (bool causal : {false, true}) {
    for (const char* op : {"softmax", "log_softmax"}) {
      // S(0), S(1), B: 3 one-D and 9 two-D signatures.
      EXPECT_EQ(t_.ExpectAllSbpSignaturesMatch(op, {x}, {{"causal", causal}}), 3 + 9) << op;
      auto y = t_.Run(op, {x}, {{"causal", causal}});
      ASSERT_TRUE(y.ok());
      // S(0), S(1), B, (B, P): 4 + 16.
      EXPECT_EQ(t_.ExpectAllSbpSignaturesMatch(absl::StrCat(op, "_grad"), {(*y)[0], dy}, {{"causal", causal}}),
                4 + 16)
          << op;
    }
  }
}

TEST_F(SoftmaxTest, NeverSplitsTheSoftmaxAxis) {
  const std::vector<SbpSignature> sigs =
      t_.SbpSignatures("softmax", {TensorDesc{DataType::kFloat32, Shape{2, 3, 4}}}, {{"causal", true}});
  ASSERT_FALSE(sigs.empty());
  for (const SbpSignature& sig : sigs) {
    EXPECT_NE(sig.inputs[0], Sbp::Split(2)) << sig.ToString();
    EXPECT_FALSE(sig.outputs[0].is_partial_sum()) << sig.ToString();
  }
}

TEST_F(SoftmaxTest, KernelsWriteEveryOutput) {
  // Masked entries too: the harness's output buffers start poisoned, never zeroed.
  Tensor x = RandomTensor(DataType::kFloat32, {2, 5, 7}, 41);
  Tensor dy = RandomTensor(DataType::kFloat32, {2, 5, 7}, 42);
  for (const char* op : {"softmax", "log_softmax"}) {
    const bool log = std::string(op) == "log_softmax";
    t_.ExpectWritesEveryOutput(op, {x}, {{"causal", true}});
    auto y = t_.Run(op, {x}, {{"causal", true}});
    ASSERT_TRUE(y.ok()) << y.status();
    ExpectTensorNear((*y)[0], RefSoftmax(x, log, true), 2e-5, 1e-7, op);
    t_.ExpectWritesEveryOutput(absl::StrCat(op, "_grad"), {(*y)[0], dy}, {{"causal", true}});
    auto dx = t_.Run(absl::StrCat(op, "_grad"), {(*y)[0], dy}, {{"causal", true}});
    ASSERT_TRUE(dx.ok()) << dx.status();
    ExpectTensorNear((*dx)[0], RefSoftmaxGrad((*y)[0], dy, log, true), 1e-5, 1e-5, absl::StrCat(op, "_grad"));
  }
}

TEST_F(SoftmaxTest, EmptyInputs) {
  for (const Shape& shape : std::vector<Shape>{{0, 4}, {3, 0}, {2, 0, 5}}) {
    for (const char* op : {"softmax", "log_softmax"}) {
      auto y = t_.Run(op, {Tensor(DataType::kFloat32, shape)}, {{"causal", true}});
      ASSERT_TRUE(y.ok()) << op << " " << shape.ToString() << ": " << y.status();
      EXPECT_EQ((*y)[0].shape(), shape);
    }
  }
}

TEST_F(SoftmaxTest, BadInputsNameTheOpAndShape) {
  t_.ExpectRunFails("softmax", {Tensor(DataType::kFloat32, Shape{})}, {}, {"float32[]"});
  t_.ExpectRunFails("log_softmax", {Tensor(DataType::kFloat32, Shape{4})}, {{"causal", true}},
                    {"causal", "float32[4]"});
  t_.ExpectRunFails("softmax", {Tensor(DataType::kInt32, Shape{2, 3})}, {}, {"int32[2,3]"});
  t_.ExpectRunFails("softmax_grad", {Tensor(DataType::kFloat32, Shape{2, 3}), Tensor(DataType::kFloat32, Shape{2, 4})},
                    {}, {"float32[2,3]", "float32[2,4]"});
}

}  // namespace
}  // namespace oneflow_like
