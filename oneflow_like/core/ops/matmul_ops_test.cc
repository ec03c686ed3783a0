// Tests of matmul: forward against a plain triple loop (every transpose combination, batched,
// shared 2-D b, float32/float64, alpha, empty dims), gradients against finite differences,
// every SBP signature on uneven splits, and the error messages. matmul_batch_sum: forward
// against the per-matrix reference summed over the batch, its SBP signatures and errors.
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

// y[bi, i, j] = alpha * sum_p op(a)[bi, i, p] * op(b)[bi or 0, p, j], in double.
Tensor ReferenceMatmul(const Tensor& a, const Tensor& b, bool ta, bool tb, double alpha) {
  const int ra = a.shape().num_axes(), rb = b.shape().num_axes();
  const int64_t m = a.shape().dim(ta ? ra - 1 : ra - 2), k = a.shape().dim(ta ? ra - 2 : ra - 1);
  const int64_t n = b.shape().dim(tb ? rb - 2 : rb - 1);
  const int64_t batch = a.shape().Count(0, ra - 2);
  const bool shared = rb == 2;
  std::vector<int64_t> dims(a.shape().dims().begin(), a.shape().dims().end() - 2);
  dims.push_back(m);
  dims.push_back(n);
  Tensor y(DataType::kFloat64, Shape(dims));
  for (int64_t bi = 0; bi < batch; ++bi) {
    const int64_t a0 = bi * m * k, b0 = shared ? 0 : bi * k * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double av = a.GetAsDouble(a0 + (ta ? p * m + i : i * k + p));
          const double bv = b.GetAsDouble(b0 + (tb ? j * k + p : p * n + j));
          s += av * bv;
        }
        y.SetFromDouble(bi * m * n + i * n + j, alpha * s);
      }
    }
  }
  return y;
}

// Shape of a matrix operand [batch..., rows, cols], stored transposed when `t`.
Shape Operand(std::vector<int64_t> batch, int64_t rows, int64_t cols, bool t) {
  batch.push_back(t ? cols : rows);
  batch.push_back(t ? rows : cols);
  return Shape(batch);
}

AttrMap Flags(bool ta, bool tb, double alpha = 1.0) {
  return {{"transpose_a", ta}, {"transpose_b", tb}, {"alpha", alpha}};
}

struct Case {
  std::vector<int64_t> a_batch, b_batch;
  int64_t m, k, n;
};

class MatmulTest : public ::testing::Test {
 protected:
  void ExpectForward(const Case& c, DataType dtype, double alpha, uint64_t seed) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const Tensor a = RandomTensor(dtype, Operand(c.a_batch, c.m, c.k, ta), seed);
        const Tensor b = RandomTensor(dtype, Operand(c.b_batch, c.k, c.n, tb), seed + 1);
        auto out = t_.Run("matmul", {a, b}, Flags(ta, tb, alpha));
        ASSERT_TRUE(out.ok()) << out.status();
        ASSERT_EQ((*out)[0].dtype(), dtype);
        const double tol = dtype == DataType::kFloat32 ? 1e-5 : 1e-12;
        ExpectTensorNear(
            (*out)[0], ReferenceMatmul(a, b, ta, tb, alpha), tol, tol,
            absl::StrCat("a ", a.desc().ToString(), " ta=", ta, " b ", b.desc().ToString(), " tb=", tb));
      }
    }
  }
  OpTest t_;
};

TEST_F(MatmulTest, Forward2DAllTransposes) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    ExpectForward({{}, {}, 5, 7, 3}, dtype, 1.0, 1);
    ExpectForward({{}, {}, 1, 1, 1}, dtype, 1.0, 2);
    ExpectForward({{}, {}, 33, 65, 17}, dtype, -0.5, 3);
  }
}

TEST_F(MatmulTest, ForwardBatchedSameBatchDims) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    ExpectForward({{2, 3}, {2, 3}, 4, 5, 6}, dtype, 1.0, 4);
    ExpectForward({{3}, {3}, 7, 2, 5}, dtype, 2.0, 5);
  }
}

TEST_F(MatmulTest, ForwardSharedTwoDimensionalB) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    ExpectForward({{2, 3}, {}, 4, 5, 6}, dtype, 1.0, 6);  // !transpose_a folds the batch into m
    ExpectForward({{4}, {}, 3, 8, 2}, dtype, 0.25, 7);
  }
}

TEST_F(MatmulTest, KnownValues) {
  const Tensor a = Tensor::FromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor b = Tensor::FromVector<float>({3, 2}, {7, 8, 9, 10, 11, 12});
  auto out = t_.Run("matmul", {a, b}, {{"alpha", 2.0}});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorNear((*out)[0], Tensor::FromVector<float>({2, 2}, {2 * 58, 2 * 64, 2 * 139, 2 * 154}));
}

TEST_F(MatmulTest, EmptyInnerDimensionGivesZeros) {
  // The harness's output buffers start poisoned (NaN): k = 0 must write zeros.
  auto zeros = t_.Run("matmul", {Tensor(DataType::kFloat32, Shape{3, 0}), Tensor(DataType::kFloat32, Shape{0, 4})});
  ASSERT_TRUE(zeros.ok()) << zeros.status();
  ExpectTensorNear((*zeros)[0], Tensor(DataType::kFloat32, Shape{3, 4}));
  auto empty = t_.Run("matmul",
                      {Tensor(DataType::kFloat32, Shape{0, 5}), RandomTensor(DataType::kFloat32, {5, 2}, 2)});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ((*empty)[0].shape(), (Shape{0, 2}));
}

TEST_F(MatmulTest, Gradients) {
  const std::vector<Case> cases = {
      {{}, {}, 3, 4, 2},      // plain
      {{2}, {2}, 3, 2, 4},    // batched
      {{2, 2}, {}, 2, 3, 2},  // shared b: reshape folding (!ta) or reduce_sum + transpose (ta)
  };
  uint64_t seed = 20;
  for (const Case& c : cases) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        SCOPED_TRACE(absl::StrCat("ta=", ta, " tb=", tb, " a_batch=", c.a_batch.size(),
                                  " b_batch=", c.b_batch.size()));
        const Tensor a = RandomTensor(DataType::kFloat64, Operand(c.a_batch, c.m, c.k, ta), ++seed);
        const Tensor b = RandomTensor(DataType::kFloat64, Operand(c.b_batch, c.k, c.n, tb), ++seed);
        t_.ExpectGradientsMatch("matmul", {a, b}, Flags(ta, tb, 1.5));
      }
    }
  }
}

TEST_F(MatmulTest, AllSbpSignaturesOnUnevenSplits) {
  const std::vector<Case> cases = {
      {{}, {}, 5, 7, 9},
      {{5}, {5}, 4, 7, 5},  // every dim >= 4: each split is valid on 3 devices and on [2,2]
      {{5}, {}, 7, 5, 4},
  };
  for (const Case& c : cases) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const Tensor a = RandomTensor(DataType::kFloat32, Operand(c.a_batch, c.m, c.k, ta), 31);
        const Tensor b = RandomTensor(DataType::kFloat32, Operand(c.b_batch, c.k, c.n, tb), 32);
        SbpCheckOptions options;
        options.rtol = 1e-4;
        options.atol = 1e-5;
        // 6 matrix signatures (+1 per batch axis) on 3 devices, and their squares on [2,2].
        const int n1 = 6 + static_cast<int>(c.a_batch.size());
        options.min_signatures = n1 + n1 * n1;
        t_.ExpectAllSbpSignaturesMatch("matmul", {a, b}, Flags(ta, tb, 0.5), options);
      }
    }
  }
}

TEST_F(MatmulTest, SignaturesIncludeTheDocumentedOnes) {
  const Sbp B = Sbp::Broadcast(), P = Sbp::PartialSum();
  const std::vector<TensorDesc> in = {{DataType::kFloat32, {64, 128}}, {DataType::kFloat32, {10, 128}}};
  const std::vector<SbpSignature> sigs = t_.SbpSignatures("matmul", in, Flags(false, true));
  auto has = [&](const SbpSignature& s) { return HasSignature(sigs, s); };
  // b is stored [n, k] (transpose_b): its n axis is 0, its k axis is 1.
  EXPECT_TRUE(has({{Sbp::Split(0), B}, {Sbp::Split(0)}}));
  EXPECT_TRUE(has({{B, Sbp::Split(0)}, {Sbp::Split(1)}}));
  EXPECT_TRUE(has({{Sbp::Split(1), Sbp::Split(1)}, {P}}));
  EXPECT_TRUE(has({{P, B}, {P}}));
  EXPECT_TRUE(has({{B, P}, {P}}));
  EXPECT_TRUE(has({{B, B}, {B}}));
  EXPECT_FALSE(has({{P, P}, {P}}));
}

TEST_F(MatmulTest, CostCountsMultiplyAdds) {
  const OpDef* def = t_.registry().Find("matmul");
  ASSERT_NE(def, nullptr);
  const std::vector<TensorDesc> in = {{DataType::kFloat32, {4, 64, 128}}, {DataType::kFloat32, {128, 10}}};
  const std::vector<TensorDesc> out = {{DataType::kFloat32, {4, 64, 10}}};
  OpCost c = def->Cost(Flags(false, false), in, out);
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 4 * 64 * 128 * 10);
  EXPECT_DOUBLE_EQ(c.bytes_moved, 4.0 * (4 * 64 * 128 + 128 * 10 + 4 * 64 * 10));
}

absl::Status InferError(const OpTest& t, const TensorDesc& a, const TensorDesc& b, const AttrMap& attrs) {
  const OpDef* def = t.registry().Find("matmul");
  auto full = def->ValidateAttrs("fc1", attrs);
  if (!full.ok()) return full.status();
  return def->Infer("fc1", *full, {a, b}).status();
}

TEST_F(MatmulTest, InnerDimensionMismatchNamesOpAndShapes) {
  ExpectInvalidArgument(InferError(t_, {DataType::kFloat32, {64, 128}}, {DataType::kFloat32, {256, 10}}, {}),
                        {"matmul 'fc1': inner dimensions differ: a float32[64,128] (transpose_a=false) has k=128, "
                         "b float32[256,10] has k=256"});
  ExpectInvalidArgument(
      InferError(t_, {DataType::kFloat32, {128, 64}}, {DataType::kFloat32, {10, 256}}, Flags(true, true)),
      {"(transpose_a=true) has k=128", "has k=256 (transpose_b=true)"});
}

TEST_F(MatmulTest, BadInputsAreInvalidArgument) {
  struct Bad {
    TensorDesc a, b;
    std::string expect;
  };
  const std::vector<Bad> bad = {
      {{DataType::kFloat32, {2, 3, 4}}, {DataType::kFloat32, {3, 4, 5}}, "batch dimensions differ"},
      {{DataType::kFloat32, {3, 4}}, {DataType::kFloat32, {2, 4, 5}}, "batch dimensions differ"},
      {{DataType::kFloat32, {4}}, {DataType::kFloat32, {4, 5}}, "at least 2 axes"},
      {{DataType::kFloat32, {3, 4}}, {DataType::kFloat64, {4, 5}}, "dtypes differ"},
      {{DataType::kInt32, {3, 4}}, {DataType::kInt32, {4, 5}}, "must be float32 or float64"},
  };
  for (const Bad& c : bad) {
    ExpectInvalidArgument(InferError(t_, c.a, c.b, {}), {"matmul 'fc1'", c.expect, c.a.ToString(), c.b.ToString()});
  }
  // Through the eager runner too.
  t_.ExpectRunFails("matmul", {RandomTensor(DataType::kFloat32, {2, 3}, 1), RandomTensor(DataType::kFloat32, {4, 2}, 2)},
                    {}, {"inner dimensions differ"});
}

// sum over the batch axes of ReferenceMatmul (a and b batched alike) -> [m, n].
Tensor ReferenceBatchSum(const Tensor& a, const Tensor& b, bool ta, bool tb, double alpha) {
  const Tensor per = ReferenceMatmul(a, b, ta, tb, alpha);
  const int r = per.shape().num_axes();
  const int64_t m = per.shape().dim(r - 2), n = per.shape().dim(r - 1), batch = per.shape().Count(0, r - 2);
  Tensor y(DataType::kFloat64, Shape({m, n}));
  for (int64_t i = 0; i < m * n; ++i) {
    double s = 0;
    for (int64_t bi = 0; bi < batch; ++bi) s += per.GetAsDouble(bi * m * n + i);
    y.SetFromDouble(i, s);
  }
  return y;
}

TEST_F(MatmulTest, BatchSumForwardAllTransposes) {
  const std::vector<Case> cases = {{{3}, {3}, 4, 5, 6}, {{2, 3}, {2, 3}, 7, 2, 5}, {{1}, {1}, 33, 17, 65}};
  uint64_t seed = 60;
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    for (const Case& c : cases) {
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          const Tensor a = RandomTensor(dtype, Operand(c.a_batch, c.m, c.k, ta), ++seed);
          const Tensor b = RandomTensor(dtype, Operand(c.b_batch, c.k, c.n, tb), ++seed);
          auto out = t_.Run("matmul_batch_sum", {a, b}, Flags(ta, tb, -1.5));
          ASSERT_TRUE(out.ok()) << out.status();
          ASSERT_EQ((*out)[0].shape(), Shape({c.m, c.n}));
          const double tol = dtype == DataType::kFloat32 ? 1e-4 : 1e-12;
          ExpectTensorNear((*out)[0], ReferenceBatchSum(a, b, ta, tb, -1.5), tol, tol,
                           absl::StrCat("a ", a.desc().ToString(), " ta=", ta, " b ", b.desc().ToString(), " tb=", tb));
        }
      }
    }
  }
}

TEST_F(MatmulTest, BatchSumEmptyBatchOrInnerGivesZeros) {
  for (const Shape& a_shape : {Shape({0, 3, 2}), Shape({2, 3, 0})}) {
    const Shape b_shape({a_shape.dim(0), a_shape.dim(2), 4});
    // The runner poisons outputs with NaN, so this checks that the kernel writes the zeros.
    auto out = t_.Run("matmul_batch_sum", {Tensor(DataType::kFloat32, a_shape), Tensor(DataType::kFloat32, b_shape)},
                      Flags(false, false));
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectTensorNear((*out)[0], Tensor(DataType::kFloat32, Shape({3, 4})));
  }
}

TEST_F(MatmulTest, BatchSumSbpSignaturesOnUnevenSplits) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const Tensor a = RandomTensor(DataType::kFloat32, Operand({5}, 4, 7, ta), 71);
      const Tensor b = RandomTensor(DataType::kFloat32, Operand({5}, 7, 5, tb), 72);
      SbpCheckOptions options;
      options.rtol = 1e-4;
      options.atol = 1e-5;
      const int n1 = 6 + 1;  // the 2-D matmul signatures + the batch axis (-> P)
      options.min_signatures = n1 + n1 * n1;
      t_.ExpectAllSbpSignaturesMatch("matmul_batch_sum", {a, b}, Flags(ta, tb, 0.5), options);
    }
  }
}

TEST_F(MatmulTest, BatchSumBadInputsAreInvalidArgument) {
  const OpDef* def = t_.registry().Find("matmul_batch_sum");
  ASSERT_NE(def, nullptr);
  EXPECT_FALSE(static_cast<bool>(def->grad));
  auto infer = [&](const TensorDesc& a, const TensorDesc& b) {
    return def->Infer("fc1.dw", *def->ValidateAttrs("fc1.dw", {}), {a, b}).status();
  };
  ExpectInvalidArgument(infer({DataType::kFloat32, {2, 3, 4}}, {DataType::kFloat32, {3, 4, 5}}),
                        {"matmul_batch_sum 'fc1.dw'", "same batch dims"});
  ExpectInvalidArgument(infer({DataType::kFloat32, {3, 4}}, {DataType::kFloat32, {4, 5}}), {"at least 3 axes"});
  ExpectInvalidArgument(infer({DataType::kFloat32, {2, 3, 4}}, {DataType::kFloat32, {2, 5, 6}}),
                        {"inner dimensions differ", "has k=4", "has k=5"});
  ExpectInvalidArgument(infer({DataType::kFloat32, {2, 3, 4}}, {DataType::kFloat64, {2, 4, 5}}), {"dtypes differ"});
}

}  // namespace
}  // namespace oneflow_like
