// CUDA activation kernels vs the CPU ops relu, relu_grad, gelu, gelu_grad (tanh and exact).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "oneflow_like/core/cuda/activation_kernels.h"
#include "oneflow_like/core/cuda/cuda_test_util.h"

namespace oneflow_like {
namespace cuda {
namespace testing {
namespace {

using ::oneflow_like::testing::RandomTensor;

class ActivationTest : public CudaKernelTest {
 protected:
  template <typename T>
  void CheckAll() {
    const DataType dt = DataTypeOf<T>::value;
    for (const Shape& shape : {Shape({3, 5, 7}), Shape({1, 1}), Shape({17, 33}), Shape({1000})}) {
      const std::string where = " " + shape.ToString();
      const Tensor x = RandomTensor(dt, shape, 11, -4.0, 4.0);
      const Tensor dy = RandomTensor(dt, shape, 12);
      const int64_t n = x.elem_count();
      // relu and relu_grad (which takes the forward output).
      const Tensor relu = cpu().RunOne("relu", {x});
      T* y = Output<T>(x.desc());
      ASSERT_OK(Relu<T>(Upload<T>(x), y, n, stream()));
      ExpectClose(Download(y, x.desc()), relu, Tolerance::kElementwise, "relu" + where);
      const Tensor relu_dx = cpu().RunOne("relu_grad", {dy, relu});
      T* dx = Output<T>(x.desc());
      ASSERT_OK(ReluGrad<T>(Upload<T>(dy), Upload<T>(relu), dx, n, stream()));
      ExpectClose(Download(dx, x.desc()), relu_dx, Tolerance::kElementwise, "relu_grad" + where);
      // gelu and gelu_grad, both forms.
      for (const auto& [attr, approximation] :
           {std::pair<const char*, GeluApproximation>{"tanh", GeluApproximation::kTanh},
            std::pair<const char*, GeluApproximation>{"none", GeluApproximation::kExact}}) {
        const AttrMap attrs = {{"approximate", std::string(attr)}};
        const Tensor gelu = cpu().RunOne("gelu", {x}, attrs);
        T* gy = Output<T>(x.desc());
        ASSERT_OK(Gelu<T>(approximation, Upload<T>(x), gy, n, stream()));
        ExpectClose(Download(gy, x.desc()), gelu, Tolerance::kElementwise, std::string("gelu ") + attr + where);
        const Tensor gelu_dx = cpu().RunOne("gelu_grad", {dy, x}, attrs);
        T* gdx = Output<T>(x.desc());
        ASSERT_OK(GeluGrad<T>(approximation, Upload<T>(dy), Upload<T>(x), gdx, n, stream()));
        ExpectClose(Download(gdx, x.desc()), gelu_dx, Tolerance::kElementwise,
                    std::string("gelu_grad ") + attr + where);
      }
    }
  }
};

TEST_F(ActivationTest, Float) { CheckAll<float>(); }
TEST_F(ActivationTest, Double) { CheckAll<double>(); }

// The exact gelu's limits at +-inf, as the CPU op: gelu(inf) = inf, gelu(-inf) = 0,
// gelu'(inf) = 1, gelu'(-inf) = 0; NaN passes.
TEST_F(ActivationTest, ExactGeluAtInfinity) {
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor x = Tensor::FromVector<float>({3}, {static_cast<float>(inf), static_cast<float>(-inf), NAN});
  const Tensor dy = Tensor::FromVector<float>({3}, {1.0f, 1.0f, 1.0f});
  float* y = Output<float>(x.desc());
  ASSERT_OK(Gelu<float>(GeluApproximation::kExact, Upload<float>(x), y, 3, stream()));
  const Tensor got = Download(y, x.desc());
  EXPECT_EQ(got.GetAsDouble(0), inf);
  EXPECT_EQ(got.GetAsDouble(1), 0.0);
  EXPECT_TRUE(std::isnan(got.GetAsDouble(2)));
  float* dx = Output<float>(x.desc());
  ASSERT_OK(GeluGrad<float>(GeluApproximation::kExact, Upload<float>(dy), Upload<float>(x), dx, 3, stream()));
  const Tensor got_dx = Download(dx, x.desc());
  EXPECT_EQ(got_dx.GetAsDouble(0), 1.0);
  EXPECT_EQ(got_dx.GetAsDouble(1), 0.0);
  EXPECT_TRUE(std::isnan(got_dx.GetAsDouble(2)));
}

}  // namespace
}  // namespace testing
}  // namespace cuda
}  // namespace oneflow_like
