// CUDA softmax kernels vs the CPU ops softmax, log_softmax and their grads, plain and causal
// (also a shard of the query axis, whose mask uses logical query indices).
#include <string>
#include <vector>

#include "oneflow_like/core/cuda/cuda_test_util.h"
#include "oneflow_like/core/cuda/softmax_kernels.h"

namespace oneflow_like {
namespace cuda {
namespace testing {
namespace {

using ::oneflow_like::testing::RandomTensor;

class SoftmaxTest : public CudaKernelTest {
 protected:
  template <typename T>
  void CheckAll() {
    const DataType dt = DataTypeOf<T>::value;
    uint64_t seed = 31;
    for (const Shape& shape : {Shape({3, 5, 7}), Shape({1, 1}), Shape({17, 33}), Shape({2, 9, 9}), Shape({4, 1500})}) {
      for (bool log : {false, true}) {
        for (bool causal : {false, true}) {
          const std::string what = std::string(log ? "log_softmax" : "softmax") + (causal ? " causal " : " ") +
                                   shape.ToString();
          const Tensor x = RandomTensor(dt, shape, ++seed, -5.0, 5.0);
          const AttrMap attrs = {{"causal", causal}};
          const Tensor want = cpu().RunOne(log ? "log_softmax" : "softmax", {x}, attrs);
          SoftmaxOptions options;
          options.log = log;
          options.causal = causal;
          T* y = Output<T>(x.desc());
          ASSERT_OK(Softmax<T>(Upload<T>(x), shape.dims(), options, y, stream()));
          ExpectClose(Download(y, x.desc()), want, Tolerance::kReduction, what);
          // Backward from the CPU's forward output.
          const Tensor dy = RandomTensor(dt, shape, ++seed);
          const Tensor want_dx = cpu().RunOne(log ? "log_softmax_grad" : "softmax_grad", {want, dy}, attrs);
          T* dx = Output<T>(x.desc());
          ASSERT_OK(SoftmaxGrad<T>(Upload<T>(want), Upload<T>(dy), shape.dims(), options, dx, stream()));
          ExpectClose(Download(dx, x.desc()), want_dx, Tolerance::kReduction, what + " grad");
        }
      }
    }
  }
};

TEST_F(SoftmaxTest, Float) { CheckAll<float>(); }
TEST_F(SoftmaxTest, Double) { CheckAll<double>(); }

// Rows 3..6 of a causal [2, 12, 9] softmax: the shard knows its query offset.
TEST_F(SoftmaxTest, CausalShardUsesLogicalQueries) {
  const Tensor x = RandomTensor(DataType::kFloat32, Shape({2, 4, 9}), 5);
  const ShardInfo shard{Shape({2, 12, 9}), {0, 3, 0}};
  absl::StatusOr<std::vector<Tensor>> want =
      cpu().RunShard("softmax", {x}, {{"causal", true}}, {shard}, {x.desc()}, {shard});
  ASSERT_OK(want.status());
  SoftmaxOptions options;
  options.causal = true;
  options.q_offset = 3;
  float* y = Output<float>(x.desc());
  ASSERT_OK(Softmax<float>(Upload<float>(x), {2, 4, 9}, options, y, stream()));
  ExpectClose(Download(y, x.desc()), (*want)[0], Tolerance::kReduction, "causal softmax shard");
}

}  // namespace
}  // namespace testing
}  // namespace cuda
}  // namespace oneflow_like
