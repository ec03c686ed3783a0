// Tests for sgd_update and adam_update: three steps against references written from the
// PyTorch algorithm descriptions (torch.optim.SGD / Adam / AdamW), in-place updates (outputs
// aliasing the inputs), SBP signatures and errors.
#include <cmath>

#include "absl/strings/str_cat.h"

#include "gtest/gtest.h"
#include "oneflow_like/core/testing/op_test_util.h"

namespace oneflow_like {
namespace {

using testing::ExpectTensorNear;
using testing::OpTest;
using testing::RandomTensor;
using testing::TensorFromDoubles;

std::vector<double> AsDoubles(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.elem_count(); ++i) v.push_back(t.GetAsDouble(i));
  return v;
}

Tensor Step(int64_t t) { return Tensor::FromVector<int64_t>(Shape({}), {t}); }

struct SgdCase {
  double lr, momentum, weight_decay;
};

TEST(OptimizerOpsTest, SgdThreeStepsMatchReference) {
  OpTest t;
  const Shape shape({3, 5});
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    for (const SgdCase& c : {SgdCase{0.1, 0.9, 0.01}, SgdCase{0.05, 0.0, 0.0}, SgdCase{0.2, 0.5, 0.0}}) {
      const AttrMap attrs{{"lr", c.lr}, {"momentum", c.momentum}, {"weight_decay", c.weight_decay}};
      Tensor param = RandomTensor(dtype, shape, 1), buf(dtype, shape);
      std::vector<Tensor> in_place = {param.Clone(), Tensor(), Tensor(dtype, shape)};
      std::vector<double> p = AsDoubles(param), b(p.size(), 0.0);
      for (int step = 0; step < 3; ++step) {
        const Tensor grad = RandomTensor(dtype, shape, 10 + step);
        const std::vector<double> g = AsDoubles(grad);
        for (size_t i = 0; i < p.size(); ++i) {  // torch.optim.SGD, dampening 0, nesterov off
          double d_p = g[i] + c.weight_decay * p[i];
          if (c.momentum != 0) {
            b[i] = step == 0 ? d_p : c.momentum * b[i] + d_p;
            d_p = b[i];
          }
          p[i] -= c.lr * d_p;
        }
        std::vector<Tensor> out = t.RunOk("sgd_update", {param, grad, buf}, attrs);
        ASSERT_EQ(out.size(), 2u);
        param = out[0];
        buf = out[1];
        ExpectTensorNear(param, TensorFromDoubles(DataType::kFloat64, shape, p), 1e-5, 1e-6, "sgd param");
        if (c.momentum != 0) ExpectTensorNear(buf, TensorFromDoubles(DataType::kFloat64, shape, b), 1e-5, 1e-6, "sgd buf");
        in_place[1] = grad;
        ASSERT_TRUE(t.RunInPlace("sgd_update", in_place, attrs).ok());
        ExpectTensorNear(in_place[0], param, 0, 0, "in-place param");
        ExpectTensorNear(in_place[2], buf, 0, 0, "in-place buf");
      }
    }
  }
}

TEST(OptimizerOpsTest, SgdPlainThreeStepsMatchReferenceAndRunInPlace) {
  OpTest t;
  const Shape shape({4, 7});  // 28 elements: one 16-wide block and a scalar tail
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    const AttrMap attrs{{"lr", 0.1}, {"weight_decay", 0.05}};
    Tensor param = RandomTensor(dtype, shape, 3);
    std::vector<Tensor> in_place = {param.Clone(), Tensor()};
    std::vector<double> p = AsDoubles(param);
    for (int step = 0; step < 3; ++step) {
      const Tensor grad = RandomTensor(dtype, shape, 20 + step);
      const std::vector<double> g = AsDoubles(grad);
      for (size_t i = 0; i < p.size(); ++i) p[i] -= 0.1 * (g[i] + 0.05 * p[i]);  // torch.optim.SGD, momentum 0
      std::vector<Tensor> out = t.RunOk("sgd_plain_update", {param, grad}, attrs);
      ASSERT_EQ(out.size(), 1u);
      param = out[0];
      ExpectTensorNear(param, TensorFromDoubles(DataType::kFloat64, shape, p), 1e-5, 1e-6, "sgd_plain param");
      in_place[1] = grad;
      ASSERT_TRUE(t.RunInPlace("sgd_plain_update", in_place, attrs).ok());
      ExpectTensorNear(in_place[0], param, 0, 0, "in-place param");
    }
  }
  const Tensor p = RandomTensor(DataType::kFloat32, Shape({4, 3}), 1);
  t.ExpectRunFails("sgd_plain_update", {p, RandomTensor(DataType::kFloat32, Shape({3, 4}), 2)}, {{"lr", 0.1}},
                   {"grad float32[3,4]"});
  t.ExpectRunFails("sgd_plain_update", {p, p}, {}, {"lr"});
}

struct AdamCase {
  double weight_decay;
  bool decoupled, bias_correction;
};

TEST(OptimizerOpsTest, AdamThreeStepsMatchReference) {
  OpTest t;
  const Shape shape({4, 3});
  const double lr = 0.01, b1 = 0.9, b2 = 0.99, eps = 1e-8;
  const std::vector<AdamCase> cases = {{0.1, true, true}, {0.0, true, true}, {0.1, false, true},
                                       {0.1, true, false}, {0.05, false, false}};
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    for (const AdamCase& c : cases) {
      SCOPED_TRACE(absl::StrCat(DataTypeName(dtype), " wd=", c.weight_decay, " decoupled=", c.decoupled,
                                " bias_correction=", c.bias_correction));
      const AttrMap attrs{{"lr", lr}, {"beta1", b1}, {"beta2", b2}, {"epsilon", eps},
                          {"weight_decay", c.weight_decay}, {"decoupled_weight_decay", c.decoupled},
                          {"bias_correction", c.bias_correction}};
      Tensor param = RandomTensor(dtype, shape, 2), m(dtype, shape), v(dtype, shape);
      std::vector<Tensor> in_place = {param.Clone(), Tensor(), Tensor(dtype, shape), Tensor(dtype, shape), Tensor()};
      std::vector<double> p = AsDoubles(param), rm(p.size(), 0.0), rv(p.size(), 0.0);
      for (int64_t step = 1; step <= 3; ++step) {
        const Tensor grad = RandomTensor(dtype, shape, 20 + step);
        const std::vector<double> g0 = AsDoubles(grad);
        const std::vector<double> p_before = p;
        for (size_t i = 0; i < p.size(); ++i) {  // torch.optim.Adam / AdamW
          double g = g0[i];
          if (c.decoupled) {
            p[i] *= 1 - lr * c.weight_decay;
          } else {
            g += c.weight_decay * p[i];
          }
          rm[i] = b1 * rm[i] + (1 - b1) * g;
          rv[i] = b2 * rv[i] + (1 - b2) * g * g;
          const double bc1 = c.bias_correction ? 1 - std::pow(b1, step) : 1.0;
          const double bc2 = c.bias_correction ? 1 - std::pow(b2, step) : 1.0;
          p[i] -= (lr / bc1) * rm[i] / (std::sqrt(rv[i]) / std::sqrt(bc2) + eps);
        }
        if (step == 1 && c.bias_correction && c.weight_decay == 0) {
          // Known value: the first bias-corrected step moves every weight by lr against its gradient.
          for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(p_before[i] - p[i], lr * (g0[i] > 0 ? 1 : -1), 1e-6);
        }
        std::vector<Tensor> out = t.RunOk("adam_update", {param, grad, m, v, Step(step)}, attrs);
        ASSERT_EQ(out.size(), 3u);
        param = out[0];
        m = out[1];
        v = out[2];
        ExpectTensorNear(param, TensorFromDoubles(DataType::kFloat64, shape, p), 1e-5, 1e-6, "adam param");
        ExpectTensorNear(m, TensorFromDoubles(DataType::kFloat64, shape, rm), 1e-5, 1e-7, "adam m");
        ExpectTensorNear(v, TensorFromDoubles(DataType::kFloat64, shape, rv), 1e-5, 1e-8, "adam v");
        in_place[1] = grad;
        in_place[4] = Step(step);
        ASSERT_TRUE(t.RunInPlace("adam_update", in_place, attrs).ok());
        ExpectTensorNear(in_place[0], param, 0, 0, "in-place param");
        ExpectTensorNear(in_place[2], m, 0, 0, "in-place m");
        ExpectTensorNear(in_place[3], v, 0, 0, "in-place v");
      }
    }
  }
}

TEST(OptimizerOpsTest, SbpSignaturesSplitEverythingTogether) {
  OpTest t;
  const Shape shape({5, 7});
  const Tensor p = RandomTensor(DataType::kFloat32, shape, 1), g = RandomTensor(DataType::kFloat32, shape, 2);
  const Tensor s = RandomTensor(DataType::kFloat32, shape, 3, 0, 1), s2 = RandomTensor(DataType::kFloat32, shape, 4, 0, 1);
  EXPECT_EQ(t.ExpectAllSbpSignaturesMatch("sgd_update", {p, g, s}, {{"lr", 0.1}, {"momentum", 0.9}, {"weight_decay", 0.1}}),
            3 + 9);
  EXPECT_EQ(t.ExpectAllSbpSignaturesMatch("adam_update", {p, g, s, s2, Step(4)}, {{"lr", 0.1}, {"weight_decay", 0.1}}),
            3 + 9);
  const OpDef* adam = t.registry().Find("adam_update");
  ASSERT_NE(adam, nullptr);
  EXPECT_TRUE(adam->is_optimizer);
  EXPECT_TRUE(t.registry().Find("sgd_update")->is_optimizer);
  EXPECT_FALSE(adam->grad);
  for (const SbpSignature& sig : adam->sbp({}, {p.desc(), g.desc(), s.desc(), s2.desc(), Step(1).desc()})) {
    EXPECT_TRUE(sig.inputs[4].is_broadcast()) << sig.ToString();
    for (int i = 1; i < 4; ++i) EXPECT_EQ(sig.inputs[i], sig.inputs[0]) << sig.ToString();
  }
}

TEST(OptimizerOpsTest, BadInputsNameTheOp) {
  OpTest t;
  const Tensor p = RandomTensor(DataType::kFloat32, {3, 4}, 1);
  const Tensor wrong = RandomTensor(DataType::kFloat32, {4, 3}, 2);
  t.ExpectRunFails("sgd_update", {p, wrong, p}, {{"lr", 0.1}}, {"grad float32[4,3]"});
  t.ExpectRunFails("sgd_update", {p, p}, {{"lr", 0.1}}, {"3 input"});
  t.ExpectRunFails("sgd_update", {p, p, p}, {}, {"lr"});
  t.ExpectRunFails("adam_update", {p, p, p, wrong, Step(1)}, {{"lr", 0.1}}, {"v float32[4,3]"});
  t.ExpectRunFails("adam_update", {p, p, p, p, Tensor::FromVector<float>(Shape({}), {1.0f})}, {{"lr", 0.1}}, {"step"});
  t.ExpectRunFails("adam_update", {p, p, p, p, Step(0)}, {{"lr", 0.1}}, {"step = 0"});
  const Tensor ip = RandomTensor(DataType::kInt32, {3}, 3, 0, 5);
  t.ExpectRunFails("sgd_update", {ip, ip, ip}, {{"lr", 0.1}}, {"int32"});
}

TEST(OptimizerOpsTest, StepIncrementAddsOneToTheCounter) {
  OpTest t;
  EXPECT_EQ(t.RunOne("step_increment", {Step(0)}).ToVector<int64_t>(), std::vector<int64_t>{1});
  EXPECT_EQ(t.RunOne("step_increment", {Step(41)}).ToVector<int64_t>(), std::vector<int64_t>{42});
  EXPECT_EQ(t.RunOne("step_increment", {Tensor::FromVector<int32_t>(Shape({}), {7})}).ToVector<int32_t>(),
            std::vector<int32_t>{8});
  std::vector<Tensor> in_place = {Step(5)};
  ASSERT_TRUE(t.RunInPlace("step_increment", in_place).ok());
  EXPECT_EQ(in_place[0].ToVector<int64_t>(), std::vector<int64_t>{6});
  const OpDef* def = t.registry().Find("step_increment");
  ASSERT_NE(def, nullptr);
  EXPECT_TRUE(def->is_optimizer);
  EXPECT_FALSE(def->grad);
  EXPECT_EQ(t.ExpectAllSbpSignaturesMatch("step_increment", {Step(3)}), 1 + 1);  // B only, 1-D and [2,2]
  t.ExpectRunFails("step_increment", {Tensor::FromVector<float>(Shape({}), {1.0f})}, {}, {"float32[]"});
  t.ExpectRunFails("step_increment", {Tensor::FromVector<int64_t>(Shape({2}), {1, 2})}, {}, {"int64[2]"});
}

}  // namespace
}  // namespace oneflow_like
