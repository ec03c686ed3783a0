// CUDA reduce kernels vs the CPU ops reduce_sum and reduce_mean over every axis set the CPU op
// takes (and int sums), including a sharded reduce_mean (divides by the logical size).
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_join.h"
#include "oneflow_like/core/cuda/cuda_test_util.h"
#include "oneflow_like/core/cuda/reduce_kernels.h"

namespace oneflow_like {
namespace cuda {
namespace testing {
namespace {

using ::oneflow_like::testing::RandomTensor;

struct ReduceCase {
  std::vector<int64_t> dims;
  std::vector<int64_t> axes;  // [] = all
};

const std::vector<ReduceCase>& Cases() {
  static const auto* cases = new std::vector<ReduceCase>{
      {{3, 5, 7}, {}},     {{3, 5, 7}, {0}},    {{3, 5, 7}, {1}},     {{3, 5, 7}, {2}},
      {{3, 5, 7}, {0, 2}}, {{3, 5, 7}, {1, 2}}, {{3, 5, 7}, {0, 1}},  {{3, 5, 7}, {-1}},
      {{17, 33}, {0}},     {{17, 33}, {1}},     {{1, 1}, {}},         {{1, 1}, {0}},
      {{3, 1, 7}, {1}},    {{1000, 3}, {0}},    {{3, 1000}, {1}},     {{2, 3, 4, 5}, {0, 2}},
      {{0, 5}, {0}},
      // The column kernel's paths: rows not a multiple of its 4 x lanes, narrowed tiles, an outer
      // kept axis, two reduced and two kept axis runs (the general offset walk), a bias gradient.
      {{4100, 40}, {0}},   {{2, 700, 300}, {1}}, {{6, 257, 2, 33}, {0, 2}}, {{4096, 96}, {0}},
  };
  return *cases;
}

std::vector<bool> Mask(const ReduceCase& c) {
  std::vector<bool> mask(c.dims.size(), c.axes.empty());
  for (int64_t a : c.axes) mask[a < 0 ? a + static_cast<int64_t>(c.dims.size()) : a] = true;
  return mask;
}

class ReduceTest : public CudaKernelTest {
 protected:
  template <typename T>
  void CheckAll(bool mean) {
    const char* op = mean ? "reduce_mean" : "reduce_sum";
    uint64_t seed = 21;
    for (const ReduceCase& c : Cases()) {
      for (bool keepdims : {false, true}) {
        const Tensor x = RandomTensor(DataTypeOf<T>::value, Shape(c.dims), ++seed, -3.0, 3.0);
        const Tensor want = cpu().RunOne(op, {x}, {{"axes", c.axes}, {"keepdims", keepdims}});
        const std::vector<bool> mask = Mask(c);
        int64_t reduced_count = 1;
        for (size_t a = 0; a < c.dims.size(); ++a) reduced_count *= mask[a] ? c.dims[a] : 1;
        T* y = Output<T>(want.desc());
        if constexpr (std::is_floating_point<T>::value) {
          if (mean) {
            ASSERT_OK(ReduceMean<T>(Upload<T>(x), c.dims, mask, reduced_count, y, stream()));
          } else {
            ASSERT_OK(ReduceSum<T>(Upload<T>(x), c.dims, mask, y, stream()));
          }
        } else {
          ASSERT_FALSE(mean) << "reduce_mean is float-only";
          ASSERT_OK(ReduceSum<T>(Upload<T>(x), c.dims, mask, y, stream()));
        }
        const Tolerance tol = std::is_integral<T>::value ? Tolerance::kElementwise : Tolerance::kReduction;
        ExpectClose(Download(y, want.desc()), want, tol,
                    std::string(op) + " " + x.desc().ToString() + " axes [" + absl::StrJoin(c.axes, ",") + "]");
      }
    }
  }
};

TEST_F(ReduceTest, SumFloat) { CheckAll<float>(/*mean=*/false); }
TEST_F(ReduceTest, SumDouble) { CheckAll<double>(/*mean=*/false); }
TEST_F(ReduceTest, SumInt64) { CheckAll<int64_t>(/*mean=*/false); }
TEST_F(ReduceTest, SumInt32) { CheckAll<int32_t>(/*mean=*/false); }
TEST_F(ReduceTest, MeanFloat) { CheckAll<float>(/*mean=*/true); }
TEST_F(ReduceTest, MeanDouble) { CheckAll<double>(/*mean=*/true); }

// x:S(1) -> P: a shard [3, 2, 7] of logical [3, 5, 7] divides by the logical 5.
TEST_F(ReduceTest, ShardedMeanDividesByTheLogicalSize) {
  const Tensor x = RandomTensor(DataType::kFloat32, Shape({3, 2, 7}), 3);
  const AttrMap attrs = {{"axes", std::vector<int64_t>{1}}, {"keepdims", false}};
  const TensorDesc out{DataType::kFloat32, Shape({3, 7})};
  absl::StatusOr<std::vector<Tensor>> want =
      cpu().RunShard("reduce_mean", {x}, attrs, {ShardInfo{Shape({3, 5, 7}), {0, 3, 0}}}, {out}, {});
  ASSERT_OK(want.status());
  float* y = Output<float>(out);
  ASSERT_OK(ReduceMean<float>(Upload<float>(x), {3, 2, 7}, {false, true, false}, 5, y, stream()));
  ExpectClose(Download(y, out), (*want)[0], Tolerance::kReduction, "reduce_mean shard");
}

}  // namespace
}  // namespace testing
}  // namespace cuda
}  // namespace oneflow_like
