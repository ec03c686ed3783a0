// cuBLAS matmul vs the CPU ops matmul (2-D, batched, shared 2-D b; every transpose pair; alpha)
// and matmul_batch_sum; float32 without TF32.
#include <climits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/core/cuda/cuda_test_util.h"
#include "oneflow_like/core/cuda/matmul_kernels.h"

namespace oneflow_like {
namespace cuda {
namespace testing {
namespace {

using ::oneflow_like::testing::RandomTensor;

struct MatmulCase {
  std::vector<int64_t> batch;  // a's batch dims
  int64_t m, k, n;
  bool shared_b;
};

// The operand dims for op(a) [batch, m, k] and op(b) [(batch,) k, n] under the flags.
std::vector<int64_t> Operand(const std::vector<int64_t>& batch, int64_t rows, int64_t cols, bool transpose) {
  std::vector<int64_t> d = batch;
  d.push_back(transpose ? cols : rows);
  d.push_back(transpose ? rows : cols);
  return d;
}

class MatmulTest : public CudaKernelTest {
 protected:
  template <typename T>
  void Check(const MatmulCase& c, bool ta, bool tb, double alpha, bool batch_sum, uint64_t seed) {
    const DataType dt = DataTypeOf<T>::value;
    const std::vector<int64_t> a_dims = Operand(c.batch, c.m, c.k, ta);
    const std::vector<int64_t> b_dims = Operand(c.shared_b ? std::vector<int64_t>{} : c.batch, c.k, c.n, tb);
    const Tensor a = RandomTensor(dt, Shape(a_dims), seed);
    const Tensor b = RandomTensor(dt, Shape(b_dims), seed + 1);
    const AttrMap attrs = {{"transpose_a", ta}, {"transpose_b", tb}, {"alpha", alpha}};
    const char* op = batch_sum ? "matmul_batch_sum" : "matmul";
    const std::string what = absl::StrCat(op, " a [", absl::StrJoin(a_dims, ","), "] b [", absl::StrJoin(b_dims, ","),
                                          "] ta=", ta, " tb=", tb, " alpha=", alpha);
    const Tensor want = cpu().RunOne(op, {a, b}, attrs);
    absl::StatusOr<MatmulShape> shape = MatmulShapeOf(a_dims, b_dims, ta, tb, batch_sum);
    ASSERT_OK(shape.status());
    T* y = Output<T>(want.desc());
    if (batch_sum) {
      ASSERT_OK(MatmulBatchSum<T>(cublas(), *shape, alpha, Upload<T>(a), Upload<T>(b), y, stream()));
    } else {
      ASSERT_OK(Matmul<T>(cublas(), *shape, alpha, Upload<T>(a), Upload<T>(b), y, stream()));
    }
    ExpectClose(Download(y, want.desc()), want, Tolerance::kReduction, what);
  }

  template <typename T>
  void CheckAll() {
    const MatmulCase cases[] = {
        {{}, 3, 5, 7, false},     {{}, 1, 1, 1, false},      {{}, 17, 33, 9, false},  {{2}, 3, 5, 7, false},
        {{2, 3}, 4, 5, 6, false}, {{2}, 3, 5, 7, true},      {{3, 2}, 5, 7, 3, true}, {{}, 64, 300, 65, false},
    };
    uint64_t seed = 81;
    for (const MatmulCase& c : cases) {
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          Check<T>(c, ta, tb, c.m == 17 ? 0.5 : 1.0, /*batch_sum=*/false, seed += 2);
          if (!c.batch.empty() && !c.shared_b) Check<T>(c, ta, tb, 0.75, /*batch_sum=*/true, seed += 2);
        }
      }
    }
  }
};

TEST_F(MatmulTest, Float) { CheckAll<float>(); }
TEST_F(MatmulTest, Double) { CheckAll<double>(); }

// Host-side shape rules: run without a GPU too.
TEST(MatmulShapes, MatchTheCpuRules) {
  absl::StatusOr<MatmulShape> s = MatmulShapeOf({2, 3, 5}, {5, 7}, false, false);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->shared_b);
  EXPECT_EQ(s->batch, 2);
  EXPECT_EQ(s->m, 3);
  EXPECT_EQ(s->n, 7);
  s = MatmulShapeOf({3, 5}, {4, 7}, false, false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("inner dimensions differ"), std::string::npos) << s.status();
  s = MatmulShapeOf({2, 3, 5}, {3, 5, 7}, false, false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("batch dimensions differ"), std::string::npos) << s.status();
}

// cuBLAS needs each dim (and so each leading dim) and the batch count in int range, not their
// products: its strides between matrices are 64-bit. Host-side: runs without a GPU.
TEST(MatmulShapes, OnlyDimsNotTheirProductsMustFitCublasInt) {
  MatmulShape s;
  s.m = 50000;
  s.k = 50000;
  s.n = 50000;  // m*k = k*n = m*n = 2.5e9 > INT_MAX
  EXPECT_TRUE(CheckCublasDims(s).ok()) << CheckCublasDims(s);
  s.batch = 3;
  s.m = 1;
  s.k = int64_t{1} << 30;
  s.n = 4;  // k*n = 2^32
  EXPECT_TRUE(CheckCublasDims(s).ok()) << CheckCublasDims(s);
  s.k = int64_t{INT_MAX} + 1;
  absl::Status bad = CheckCublasDims(s);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_NE(bad.message().find("k = 2147483648 exceeds"), std::string::npos) << bad;
  s.k = 4;
  s.batch = int64_t{INT_MAX} + 1;
  bad = CheckCublasDims(s);
  EXPECT_NE(bad.message().find("batch = 2147483648 exceeds"), std::string::npos) << bad;
}

}  // namespace
}  // namespace testing
}  // namespace cuda
}  // namespace oneflow_like
