// CUDA layer-norm kernels vs the CPU ops layer_norm and layer_norm_grad (also rows with a large
// mean and a small variance, which the CPU kernel centres for accuracy).
#include <string>
#include <vector>

#include "oneflow_like/core/cuda/cuda_test_util.h"
#include "oneflow_like/core/cuda/norm_kernels.h"

namespace oneflow_like {
namespace cuda {
namespace testing {
namespace {

using ::oneflow_like::testing::RandomTensor;

class LayerNormTest : public CudaKernelTest {
 protected:
  template <typename T>
  void Check(const Shape& shape, double low, double high, uint64_t seed) {
    const DataType dt = DataTypeOf<T>::value;
    const int64_t d = shape.dim(shape.num_axes() - 1), rows = shape.elem_count() / d;
    const Tensor x = RandomTensor(dt, shape, seed, low, high);
    const Tensor gamma = RandomTensor(dt, Shape({d}), seed + 1, 0.5, 1.5);
    const Tensor beta = RandomTensor(dt, Shape({d}), seed + 2);
    const AttrMap attrs = {{"epsilon", 1e-5}};
    const std::vector<Tensor> want = cpu().RunOk("layer_norm", {x, gamma, beta}, attrs);
    ASSERT_EQ(want.size(), 3u);
    const std::string what = "layer_norm " + x.desc().ToString();
    T* y = Output<T>(x.desc());
    T* mean = Output<T>(want[1].desc());
    T* inv_std = Output<T>(want[2].desc());
    ASSERT_OK(LayerNorm<T>(Upload<T>(x), Upload<T>(gamma), Upload<T>(beta), 1e-5, rows, d, y, mean, inv_std,
                           stream()));
    ExpectClose(Download(y, x.desc()), want[0], Tolerance::kReduction, what + " y");
    ExpectClose(Download(mean, want[1].desc()), want[1], Tolerance::kReduction, what + " mean");
    ExpectClose(Download(inv_std, want[2].desc()), want[2], Tolerance::kReduction, what + " inv_std");

    const Tensor dy = RandomTensor(dt, shape, seed + 3);
    const std::vector<Tensor> grads = cpu().RunOk("layer_norm_grad", {dy, x, want[1], want[2], gamma}, {});
    ASSERT_EQ(grads.size(), 3u);
    T* dx = Output<T>(x.desc());
    T* dgamma = Output<T>(gamma.desc());
    T* dbeta = Output<T>(gamma.desc());
    ASSERT_OK(LayerNormGrad<T>(Upload<T>(dy), Upload<T>(x), Upload<T>(want[1]), Upload<T>(want[2]),
                               Upload<T>(gamma), rows, d, dx, dgamma, dbeta, stream()));
    ExpectClose(Download(dx, x.desc()), grads[0], Tolerance::kReduction, what + " dx");
    ExpectClose(Download(dgamma, gamma.desc()), grads[1], Tolerance::kReduction, what + " dgamma");
    ExpectClose(Download(dbeta, gamma.desc()), grads[2], Tolerance::kReduction, what + " dbeta");
  }

  template <typename T>
  void CheckAll() {
    uint64_t seed = 41;
    for (const Shape& shape : {Shape({3, 5, 7}), Shape({1, 1}), Shape({17, 33}), Shape({5, 1500}), Shape({300, 3}),
                              Shape({2049, 40})}) {
      Check<T>(shape, -2.0, 2.0, seed += 5);
    }
    Check<T>(Shape({6, 64}), 1000.0, 1000.01, seed += 5);  // large mean, tiny variance
  }
};

TEST_F(LayerNormTest, Float) { CheckAll<float>(); }
TEST_F(LayerNormTest, Double) { CheckAll<double>(); }

}  // namespace
}  // namespace testing
}  // namespace cuda
}  // namespace oneflow_like
