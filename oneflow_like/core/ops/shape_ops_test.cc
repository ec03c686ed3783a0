// Tests for reshape, transpose, slice, slice_grad, concat, split and identity: forward against
// index-mapping references written here (several dtypes: the kernels move raw bytes), gradients
// against finite differences, every SBP signature through the shard simulator, and errors.
#include <functional>

#include "gtest/gtest.h"
#include "oneflow_like/core/testing/op_test_util.h"

namespace oneflow_like {
namespace {

using testing::ExpectTensorNear;
using testing::HasSignature;
using testing::OpTest;
using testing::RandomTensor;
using testing::RavelIndex;
using testing::UnravelIndex;
using Index = std::vector<int64_t>;

const DataType kAllTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kInt32,
                              DataType::kInt64,   DataType::kBool,    DataType::kBFloat16};

// y[idx] = x[source(idx)] for every idx of `out_shape`.
Tensor RefGather(const Tensor& x, const Shape& out_shape, const std::function<Index(const Index&)>& source) {
  Tensor y(x.dtype(), out_shape);
  for (int64_t i = 0; i < y.elem_count(); ++i) {
    y.SetFromDouble(i, x.GetAsDouble(RavelIndex(x.shape(), source(UnravelIndex(out_shape, i)))));
  }
  return y;
}

TEST(ShapeOpsTest, ReshapeKeepsRowMajorOrder) {
  OpTest t;
  for (DataType dtype : kAllTypes) {
    const Tensor x = RandomTensor(dtype, {2, 3, 5}, 1, -9, 9);
    Tensor y = t.RunOne("reshape", {x}, {{"shape", std::vector<int64_t>{5, -1}}});
    ASSERT_EQ(y.shape(), Shape({5, 6}));
    ExpectTensorNear(y.Reshaped(x.shape()), x, 0, 0, DataTypeName(dtype));
  }
  EXPECT_EQ(t.RunOne("reshape", {RandomTensor(DataType::kFloat32, {1}, 2)}, {{"shape", std::vector<int64_t>{}}})
                .shape(),
            Shape({}));
}

TEST(ShapeOpsTest, ReshapeGradSbpAndErrors) {
  OpTest t;
  t.ExpectGradientsMatch("reshape", {RandomTensor(DataType::kFloat64, {3, 4}, 3)},
                         {{"shape", std::vector<int64_t>{2, 6}}});
  // [6,5] -> [2,3,5]: axis 1 (5) maps to axis 2; axis 0 (6 = 2x3) has no exact image.
  const AttrMap attrs{{"shape", std::vector<int64_t>{2, 3, 5}}};
  const std::vector<TensorDesc> in{{DataType::kFloat32, Shape({6, 5})}};
  EXPECT_TRUE(HasSignature(t.SbpSignatures("reshape", in, attrs), {{Sbp::Split(1)}, {Sbp::Split(2)}}));
  EXPECT_FALSE(HasSignature(t.SbpSignatures("reshape", in, attrs), {{Sbp::Split(0)}, {Sbp::Split(0)}}));
  t.ExpectAllSbpSignaturesMatch("reshape", {RandomTensor(DataType::kFloat32, {6, 5}, 4)}, attrs);
  t.ExpectAllSbpSignaturesMatch("reshape", {RandomTensor(DataType::kFloat32, {5, 3, 7}, 4)},
                                {{"shape", std::vector<int64_t>{5, 21}}});
  EXPECT_EQ(t.ExpectAllSbpSignaturesMatch("reshape", {RandomTensor(DataType::kInt32, {5, 3, 7}, 4)},
                                          {{"shape", std::vector<int64_t>{15, 7}}}),
            3 + 9);  // S(2)->S(1), B, P (3-D: every pair)
  t.ExpectRunFails("reshape", {RandomTensor(DataType::kFloat32, {3, 4}, 5)}, {{"shape", std::vector<int64_t>{5, 2}}},
                {"[3,4]", "[5,2]"});
  t.ExpectRunFails("reshape", {RandomTensor(DataType::kFloat32, {3, 4}, 5)}, {{"shape", std::vector<int64_t>{-1, 5}}},
                {"[3,4]", "-1"});
  t.ExpectRunFails("reshape", {RandomTensor(DataType::kFloat32, {3, 4}, 5)}, {{"shape", std::vector<int64_t>{-1, -1}}},
                {"[3,4]"});
}

TEST(ShapeOpsTest, Transpose) {
  OpTest t;
  const std::vector<int64_t> perm{2, 0, 1};
  for (DataType dtype : kAllTypes) {
    const Tensor x = RandomTensor(dtype, {3, 4, 5}, 6, -9, 9);
    ExpectTensorNear(t.RunOne("transpose", {x}, {{"perm", perm}}),
                     RefGather(x, {5, 3, 4}, [](const Index& i) { return Index{i[1], i[2], i[0]}; }), 0, 0,
                     DataTypeName(dtype));
  }
  const Tensor x2 = RandomTensor(DataType::kFloat64, {7, 3}, 7);
  ExpectTensorNear(t.RunOne("transpose", {x2}, {{"perm", std::vector<int64_t>{1, 0}}}),
                   RefGather(x2, {3, 7}, [](const Index& i) { return Index{i[1], i[0]}; }), 0, 0);
  t.ExpectGradientsMatch("transpose", {RandomTensor(DataType::kFloat64, {2, 3, 4}, 8)}, {{"perm", perm}});
  EXPECT_TRUE(HasSignature(t.SbpSignatures("transpose", {{DataType::kFloat32, Shape({3, 4, 5})}}, {{"perm", perm}}),
                           {{Sbp::Split(2)}, {Sbp::Split(0)}}));
  t.ExpectAllSbpSignaturesMatch("transpose", {RandomTensor(DataType::kFloat32, {5, 3, 7}, 9)}, {{"perm", perm}});
  t.ExpectRunFails("transpose", {x2}, {{"perm", std::vector<int64_t>{0, 0}}}, {"perm", "[7,3]"});
  t.ExpectRunFails("transpose", {x2}, {{"perm", std::vector<int64_t>{1, 0, 2}}}, {"perm"});
}

TEST(ShapeOpsTest, SliceAndSliceGrad) {
  OpTest t;
  // x[5,6,7][1:4, :, -5:-1] (axis 1 uncut, so S(1) is valid).
  const AttrMap attrs{{"begin", std::vector<int64_t>{1, 0, -5}}, {"end", std::vector<int64_t>{4, 6, -1}}};
  for (DataType dtype : kAllTypes) {
    const Tensor x = RandomTensor(dtype, {5, 6, 7}, 10, -9, 9);
    ExpectTensorNear(t.RunOne("slice", {x}, attrs),
                     RefGather(x, {3, 6, 4}, [](const Index& i) { return Index{i[0] + 1, i[1], i[2] + 2}; }), 0, 0,
                     DataTypeName(dtype));
  }
  t.ExpectGradientsMatch("slice", {RandomTensor(DataType::kFloat64, {5, 6, 7}, 11)}, attrs);
  t.ExpectAllSbpSignaturesMatch("slice", {RandomTensor(DataType::kFloat32, {5, 6, 7}, 12)}, attrs);
  EXPECT_FALSE(HasSignature(t.SbpSignatures("slice", {{DataType::kFloat32, Shape({5, 6, 7})}}, attrs),
                            {{Sbp::Split(0)}, {Sbp::Split(0)}}));

  // slice_grad: zeros with dy placed at [begin, end).
  AttrMap grad_attrs = attrs;
  grad_attrs.Set("like_shape", std::vector<int64_t>{5, 6, 7});
  const Tensor dy = RandomTensor(DataType::kFloat64, {3, 6, 4}, 13);
  Tensor expected(DataType::kFloat64, {5, 6, 7});
  for (int64_t i = 0; i < dy.elem_count(); ++i) {
    Index idx = UnravelIndex(dy.shape(), i);
    expected.SetFromDouble(RavelIndex(expected.shape(), {idx[0] + 1, idx[1], idx[2] + 2}), dy.GetAsDouble(i));
  }
  ExpectTensorNear(t.RunOne("slice_grad", {dy}, grad_attrs), expected, 0, 0);
  t.ExpectGradientsMatch("slice_grad", {dy}, grad_attrs);
  t.ExpectAllSbpSignaturesMatch("slice_grad", {dy}, grad_attrs);

  const Tensor x = RandomTensor(DataType::kFloat32, {5, 6, 7}, 14);
  t.ExpectRunFails("slice", {x}, {{"begin", std::vector<int64_t>{0, 0, 0}}, {"end", std::vector<int64_t>{6, 6, 7}}},
                {"out of range", "[5,6,7]"});
  t.ExpectRunFails("slice", {x}, {{"begin", std::vector<int64_t>{3, 0, 0}}, {"end", std::vector<int64_t>{2, 6, 7}}},
                {"axis 0"});
  t.ExpectRunFails("slice", {x}, {{"begin", std::vector<int64_t>{0}}, {"end", std::vector<int64_t>{1}}}, {"per axis"});
  t.ExpectRunFails("slice_grad", {x}, grad_attrs, {"[5,6,7]", "[3,6,4]"});
}

TEST(ShapeOpsTest, ConcatAndSplit) {
  OpTest t;
  const std::vector<int64_t> sizes{2, 5, 1};
  for (DataType dtype : kAllTypes) {
    std::vector<Tensor> parts;
    for (int64_t s : sizes) parts.push_back(RandomTensor(dtype, {3, s, 4}, 20 + s, -9, 9));
    Tensor y = t.RunOne("concat", parts, {{"axis", int64_t{-2}}});
    Tensor expected(dtype, {3, 8, 4});
    for (int64_t i = 0; i < expected.elem_count(); ++i) {
      Index idx = UnravelIndex(expected.shape(), i);
      int k = 0;
      while (idx[1] >= sizes[k]) idx[1] -= sizes[k++];
      expected.SetFromDouble(i, parts[k].GetAsDouble(RavelIndex(parts[k].shape(), idx)));
    }
    ExpectTensorNear(y, expected, 0, 0, "concat " + DataTypeName(dtype));
    // split undoes concat.
    std::vector<Tensor> back = t.RunOk("split", {y}, {{"axis", int64_t{1}}, {"sizes", sizes}});
    ASSERT_EQ(back.size(), 3u);
    for (int k = 0; k < 3; ++k) ExpectTensorNear(back[k], parts[k], 0, 0, "split " + DataTypeName(dtype));
  }
  std::vector<Tensor> parts64;
  for (int64_t s : sizes) parts64.push_back(RandomTensor(DataType::kFloat64, {3, s, 4}, 30 + s));
  t.ExpectGradientsMatch("concat", parts64, {{"axis", int64_t{1}}});
  const Tensor x = RandomTensor(DataType::kFloat64, {3, 8, 5}, 31);
  t.ExpectGradientsMatch("split", {x}, {{"axis", int64_t{1}}, {"sizes", sizes}});

  std::vector<Tensor> odd;
  for (int64_t s : {3, 4}) odd.push_back(RandomTensor(DataType::kFloat32, {5, s, 7}, 40 + s));
  t.ExpectAllSbpSignaturesMatch("concat", odd, {{"axis", int64_t{1}}});
  EXPECT_FALSE(HasSignature(t.SbpSignatures("concat", {odd[0].desc(), odd[1].desc()}, {{"axis", int64_t{1}}}),
                            {{Sbp::Split(1), Sbp::Split(1)}, {Sbp::Split(1)}}));
  t.ExpectAllSbpSignaturesMatch("split", {RandomTensor(DataType::kFloat32, {5, 7, 9}, 41)},
                                {{"axis", int64_t{-1}}, {"sizes", std::vector<int64_t>{4, 1, 4}}});
  // An empty part (ValidateNdSbp rejects zero-size dims, so forward only).
  std::vector<Tensor> with_empty = t.RunOk("split", {x}, {{"axis", int64_t{1}}, {"sizes", std::vector<int64_t>{8, 0}}});
  ASSERT_EQ(with_empty.size(), 2u);
  ExpectTensorNear(with_empty[0], x, 0, 0);
  EXPECT_EQ(with_empty[1].shape(), Shape({3, 0, 5}));

  t.ExpectRunFails("concat", {odd[0], RandomTensor(DataType::kFloat32, {5, 3, 6}, 1)}, {{"axis", int64_t{1}}},
                {"input 1", "[5,3,6]", "[5,3,7]"});
  t.ExpectRunFails("concat", {odd[0], RandomTensor(DataType::kFloat64, {5, 3, 7}, 1)}, {{"axis", int64_t{1}}},
                {"float64"});
  t.ExpectRunFails("concat", {odd[0]}, {{"axis", int64_t{3}}}, {"axis 3"});
  t.ExpectRunFails("split", {x}, {{"axis", int64_t{1}}, {"sizes", std::vector<int64_t>{3, 3}}}, {"[3,3]", "sum to 8"});
  t.ExpectRunFails("split", {x}, {{"axis", int64_t{1}}, {"sizes", std::vector<int64_t>{9, -1}}}, {"non-negative"});
}

TEST(ShapeOpsTest, Identity) {
  OpTest t;
  for (DataType dtype : kAllTypes) {
    const Tensor x = RandomTensor(dtype, {4, 3}, 50, -9, 9);
    ExpectTensorNear(t.RunOne("identity", {x}, {}), x, 0, 0, DataTypeName(dtype));
  }
  t.ExpectGradientsMatch("identity", {RandomTensor(DataType::kFloat64, {4, 3}, 51)});
  EXPECT_EQ(t.ExpectAllSbpSignaturesMatch("identity", {RandomTensor(DataType::kFloat32, {5, 7}, 52)}), 4 + 16);
}

}  // namespace
}  // namespace oneflow_like
