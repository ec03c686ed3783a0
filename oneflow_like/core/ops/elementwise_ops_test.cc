// Tests of add/sub/mul/div (numpy broadcasting), scalar_add/scalar_mul and bias_add: forward
// against a plain multi-index loop, gradients against finite differences (float64), every SBP
// signature on uneven splits, and error messages.
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "oneflow_like/core/testing/op_test_util.h"

namespace oneflow_like {
namespace {

using ::oneflow_like::testing::ExpectInvalidArgument;
using ::oneflow_like::testing::ExpectTensorNear;
using ::oneflow_like::testing::HasSignature;
using ::oneflow_like::testing::OpTest;
using ::oneflow_like::testing::RandomTensor;
using ::oneflow_like::testing::SbpCheckOptions;

using BinaryFn = std::function<double(double, double)>;

// Element (out multi-index) of `in`, aligned at the last axis; size-1 dims repeat.
double BroadcastGet(const Tensor& in, const std::vector<int64_t>& out_index) {
  const int r = in.shape().num_axes(), offset = static_cast<int>(out_index.size()) - r;
  int64_t flat = 0;
  for (int i = 0; i < r; ++i) {
    const int64_t d = in.shape().dim(i);
    flat = flat * d + (d == 1 ? 0 : out_index[offset + i]);
  }
  return in.GetAsDouble(flat);
}

Tensor ReferenceBinary(const Tensor& a, const Tensor& b, const Shape& out_shape, const BinaryFn& fn) {
  Tensor y(DataType::kFloat64, out_shape);
  std::vector<int64_t> index(out_shape.num_axes(), 0);
  for (int64_t e = 0; e < y.elem_count(); ++e) {
    int64_t rest = e;
    for (int i = out_shape.num_axes() - 1; i >= 0; --i) {
      index[i] = rest % out_shape.dim(i);
      rest /= out_shape.dim(i);
    }
    y.SetFromDouble(e, fn(BroadcastGet(a, index), BroadcastGet(b, index)));
  }
  return y;
}

struct BinaryOp {
  std::string name;
  BinaryFn fn;
};
std::vector<BinaryOp> BinaryOps() {
  return {
      {"add", [](double a, double b) { return a + b; }},
      {"sub", [](double a, double b) { return a - b; }},
      {"mul", [](double a, double b) { return a * b; }},
      {"div", [](double a, double b) { return a / b; }},
  };
}

struct ShapeCase {
  Shape a, b, out;
};
const std::vector<ShapeCase> kBroadcastCases = {
    {{5, 7}, {5, 7}, {5, 7}},                                  // same shape: one flat loop
    {{3, 37}, {37}, {3, 37}},                                  // row bias: inner stride (1, 1) per row
    {{37}, {3, 37}, {3, 37}},       {{5, 1}, {1, 7}, {5, 7}},  // outer product
    {{4, 19}, {4, 1}, {4, 19}},                                // column broadcast: inner stride (1, 0)
    {{2, 1, 3}, {4, 1}, {2, 4, 3}}, {{2, 3, 4}, {2, 1, 4}, {2, 3, 4}},  // a broadcast axis in the middle
    {{}, {3, 4}, {3, 4}},                                               // scalar
    {{3, 4}, {}, {3, 4}},           {{1}, {1}, {1}},
    {{0, 3}, {3}, {0, 3}},  // empty
};

// Inputs for which every op is well defined: b is kept away from zero.
std::vector<Tensor> Inputs(DataType dtype, const ShapeCase& c, uint64_t seed) {
  return {RandomTensor(dtype, c.a, seed, -2, 2), RandomTensor(dtype, c.b, seed + 1, 0.5, 2)};
}

class ElementwiseTest : public ::testing::Test {
 protected:
  OpTest t_;
};

TEST_F(ElementwiseTest, BinaryForwardWithBroadcasting) {
  uint64_t seed = 1;
  for (const BinaryOp& op : BinaryOps()) {
    for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
      for (const ShapeCase& c : kBroadcastCases) {
        const std::vector<Tensor> in = Inputs(dtype, c, seed += 2);
        auto out = t_.Run(op.name, in);
        ASSERT_TRUE(out.ok()) << out.status();
        EXPECT_EQ((*out)[0].dtype(), dtype);
        ExpectTensorNear((*out)[0], ReferenceBinary(in[0], in[1], c.out, op.fn), 1e-6, 1e-7,
                         absl::StrCat(op.name, " ", in[0].desc().ToString(), ", ", in[1].desc().ToString()));
      }
    }
  }
}

TEST_F(ElementwiseTest, KnownValues) {
  const Tensor a = Tensor::FromVector<float>({2, 2}, {1, 2, 3, 4});
  const Tensor b = Tensor::FromVector<float>({2}, {10, 20});
  auto add = t_.Run("add", {a, b});
  auto div = t_.Run("div", {b, a});
  ASSERT_TRUE(add.ok() && div.ok());
  ExpectTensorNear((*add)[0], Tensor::FromVector<float>({2, 2}, {11, 22, 13, 24}));
  ExpectTensorNear((*div)[0], Tensor::FromVector<float>({2, 2}, {10, 10, 10.f / 3, 5}));
}

TEST_F(ElementwiseTest, BinaryGradientsWithBroadcasting) {
  const std::vector<ShapeCase> cases = {
      {{3, 4}, {3, 4}, {}}, {{3, 4}, {4}, {}},          {{2, 1, 3}, {4, 1}, {}},
      {{}, {2, 3}, {}},     {{2, 3, 2}, {2, 1, 2}, {}},
  };
  uint64_t seed = 100;
  for (const BinaryOp& op : BinaryOps()) {
    for (const ShapeCase& c : cases) {
      SCOPED_TRACE(absl::StrCat(op.name, " ", c.a.ToString(), " ", c.b.ToString()));
      t_.ExpectGradientsMatch(op.name, Inputs(DataType::kFloat64, c, seed += 2));
    }
  }
}

TEST_F(ElementwiseTest, BinaryAllSbpSignaturesOnUnevenSplits) {
  const std::vector<ShapeCase> cases = {
      {{5, 7}, {5, 7}, {}}, {{5, 7}, {7}, {}},          {{5, 1}, {1, 7}, {}},
      {{7}, {5, 7}, {}},    {{5, 4, 7}, {5, 1, 7}, {}},
  };
  SbpCheckOptions options;
  options.min_signatures = 4;
  for (const BinaryOp& op : BinaryOps()) {
    for (const ShapeCase& c : cases) {
      t_.ExpectAllSbpSignaturesMatch(op.name, Inputs(DataType::kFloat32, c, 7), {}, options);
    }
  }
}

TEST_F(ElementwiseTest, PartialSumRulesPerOp) {
  const Sbp B = Sbp::Broadcast(), P = Sbp::PartialSum();
  const std::vector<TensorDesc> in = {{DataType::kFloat32, {5, 7}}, {DataType::kFloat32, {7}}};
  for (const std::string op : {"add", "sub"}) {
    auto sigs = t_.SbpSignatures(op, in);
    EXPECT_TRUE(HasSignature(sigs, {{P, P}, {P}})) << op;
    EXPECT_FALSE(HasSignature(sigs, {{P, B}, {P}})) << op;
    EXPECT_TRUE(HasSignature(sigs, {{Sbp::Split(0), B}, {Sbp::Split(0)}})) << op;
    EXPECT_TRUE(HasSignature(sigs, {{Sbp::Split(1), Sbp::Split(0)}, {Sbp::Split(1)}})) << op;
  }
  auto mul = t_.SbpSignatures("mul", in);
  EXPECT_TRUE(HasSignature(mul, {{P, B}, {P}}));
  EXPECT_TRUE(HasSignature(mul, {{B, P}, {P}}));
  EXPECT_FALSE(HasSignature(mul, {{P, P}, {P}}));
  auto div = t_.SbpSignatures("div", in);
  EXPECT_TRUE(HasSignature(div, {{P, B}, {P}}));
  EXPECT_FALSE(HasSignature(div, {{B, P}, {P}}));
  EXPECT_FALSE(HasSignature(t_.SbpSignatures("scalar_add", {in[0]}, {{"value", 1.0}}), {{P}, {P}}));
  EXPECT_TRUE(HasSignature(t_.SbpSignatures("scalar_mul", {in[0]}, {{"value", 1.0}}), {{P}, {P}}));
}

TEST_F(ElementwiseTest, NotBroadcastableNamesOpAndShapes) {
  const OpDef* def = t_.registry().Find("add");
  ASSERT_NE(def, nullptr);
  ExpectInvalidArgument(def->Infer("res1", {}, {{DataType::kFloat32, {3, 4}}, {DataType::kFloat32, {5}}}).status(),
                        {"add 'res1'", "float32[3,4]", "float32[5]", "axis -1 (4 vs 5)"});
  t_.ExpectRunFails("mul", {RandomTensor(DataType::kFloat32, {3}, 1), RandomTensor(DataType::kFloat64, {3}, 2)}, {},
                    {"dtypes differ"});
  t_.ExpectRunFails("sub", {RandomTensor(DataType::kInt32, {3}, 1, 0, 5), RandomTensor(DataType::kInt32, {3}, 2, 0, 5)},
                    {}, {"int32[3]"});
}

// ---- scalar ops ----

TEST_F(ElementwiseTest, ScalarOpsForward) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    const Tensor x = RandomTensor(dtype, {3, 11}, 5);
    auto add = t_.Run("scalar_add", {x}, {{"value", 2.5}});
    auto mul = t_.Run("scalar_mul", {x}, {{"value", -3.0}});
    ASSERT_TRUE(add.ok() && mul.ok());
    Tensor add_ref(DataType::kFloat64, x.shape()), mul_ref(DataType::kFloat64, x.shape());
    for (int64_t i = 0; i < x.elem_count(); ++i) {
      add_ref.SetFromDouble(i, x.GetAsDouble(i) + 2.5);
      mul_ref.SetFromDouble(i, x.GetAsDouble(i) * -3.0);
    }
    ExpectTensorNear((*add)[0], add_ref);
    ExpectTensorNear((*mul)[0], mul_ref);
  }
  t_.ExpectRunFails("scalar_mul", {RandomTensor(DataType::kFloat32, {2}, 1)}, {}, {"value"});
}

TEST_F(ElementwiseTest, ScalarOpsGradientsAndSbp) {
  const Tensor x64 = RandomTensor(DataType::kFloat64, {3, 4}, 9);
  t_.ExpectGradientsMatch("scalar_add", {x64}, {{"value", 0.7}});
  t_.ExpectGradientsMatch("scalar_mul", {x64}, {{"value", -1.5}});
  const Tensor x = RandomTensor(DataType::kFloat32, {5, 7}, 10);
  t_.ExpectAllSbpSignaturesMatch("scalar_add", {x}, {{"value", 0.7}});
  t_.ExpectAllSbpSignaturesMatch("scalar_mul", {x}, {{"value", -1.5}});
}

// ---- bias_add ----

Tensor ReferenceBiasAdd(const Tensor& x, const Tensor& b, int axis) {
  Tensor y(DataType::kFloat64, x.shape());
  const int64_t inner = x.shape().Count(axis + 1), channels = x.shape().dim(axis);
  for (int64_t e = 0; e < x.elem_count(); ++e)
    y.SetFromDouble(e, x.GetAsDouble(e) + b.GetAsDouble((e / inner) % channels));
  return y;
}

TEST_F(ElementwiseTest, BiasAddForward) {
  struct Case {
    Shape x;
    int64_t axis;
    int normalized;
  };
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    for (const Case& c :
         {Case{{4, 19}, -1, 1}, Case{{2, 3, 13}, 1, 1}, Case{{5, 3}, 0, 0}, Case{{7}, 0, 0}}) {
      const Tensor x = RandomTensor(dtype, c.x, 3);
      const Tensor b = RandomTensor(dtype, {c.x.dim(c.normalized)}, 4);
      auto out = t_.Run("bias_add", {x, b}, {{"axis", c.axis}});
      ASSERT_TRUE(out.ok()) << out.status();
      ExpectTensorNear((*out)[0], ReferenceBiasAdd(x, b, c.normalized), 1e-6, 1e-7, c.x.ToString());
    }
  }
}

TEST_F(ElementwiseTest, BiasAddGradientsAndSbp) {
  t_.ExpectGradientsMatch(
      "bias_add", {RandomTensor(DataType::kFloat64, {3, 4}, 1), RandomTensor(DataType::kFloat64, {4}, 2)});
  t_.ExpectGradientsMatch(
      "bias_add", {RandomTensor(DataType::kFloat64, {2, 3, 2}, 3), RandomTensor(DataType::kFloat64, {3}, 4)},
      {{"axis", int64_t{1}}});
  t_.ExpectGradientsMatch(
      "bias_add", {RandomTensor(DataType::kFloat64, {5}, 3), RandomTensor(DataType::kFloat64, {5}, 4)});
  SbpCheckOptions options;
  options.min_signatures = 4 + 4 * 4;  // S(0), S(1), B, P on 3 devices, all pairs on [2,2]
  t_.ExpectAllSbpSignaturesMatch(
      "bias_add", {RandomTensor(DataType::kFloat32, {5, 7}, 5), RandomTensor(DataType::kFloat32, {7}, 6)}, {},
      options);
  t_.ExpectAllSbpSignaturesMatch(
      "bias_add", {RandomTensor(DataType::kFloat32, {5, 7}, 5), RandomTensor(DataType::kFloat32, {5}, 6)},
      {{"axis", int64_t{0}}}, options);
}

TEST_F(ElementwiseTest, BiasAddBadInputs) {
  const OpDef* def = t_.registry().Find("bias_add");
  ASSERT_NE(def, nullptr);
  auto attrs = def->ValidateAttrs("fc1.bias", {{"axis", int64_t{1}}});
  ASSERT_TRUE(attrs.ok());
  ExpectInvalidArgument(def->Infer("fc1.bias", *attrs, {{DataType::kFloat32, {4, 10}}, {DataType::kFloat32, {4}}}).status(),
                        {"bias_add 'fc1.bias'", "float32[4]", "float32[4,10]"});
  auto bad_axis = def->ValidateAttrs("fc1.bias", {{"axis", int64_t{2}}});
  ASSERT_TRUE(bad_axis.ok());
  ExpectInvalidArgument(
      def->Infer("fc1.bias", *bad_axis, {{DataType::kFloat32, {4, 10}}, {DataType::kFloat32, {10}}}).status(),
      {"axis 2"});
}

}  // namespace
}  // namespace oneflow_like
