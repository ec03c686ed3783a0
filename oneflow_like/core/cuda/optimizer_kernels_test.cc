// CUDA optimizer kernels vs the CPU ops sgd_plain_update, sgd_update (momentum 0 and 0.9) and
// adam_update (AdamW and L2, with and without bias correction; int64 and int32 step on the
// device), out of place and in place.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "oneflow_like/core/cuda/cuda_test_util.h"
#include "oneflow_like/core/cuda/optimizer_kernels.h"

namespace oneflow_like {
namespace cuda {
namespace testing {
namespace {

using ::oneflow_like::testing::RandomTensor;
using ::oneflow_like::testing::TensorFromDoubles;

class OptimizerTest : public CudaKernelTest {
 protected:
  template <typename T>
  void CheckSgd(const Shape& shape, double momentum, uint64_t seed) {
    const DataType dt = DataTypeOf<T>::value;
    const Tensor param = RandomTensor(dt, shape, seed), grad = RandomTensor(dt, shape, seed + 1);
    const Tensor buf = RandomTensor(dt, shape, seed + 2);
    const int64_t n = param.elem_count();
    const SgdOptions o{0.1, momentum, 0.01};
    const std::string what = absl::StrCat("sgd ", param.desc().ToString(), " momentum ", momentum);

    const Tensor want_plain = cpu().RunOne("sgd_plain_update", {param, grad}, {{"lr", o.lr}, {"weight_decay", 0.01}});
    T* p = Output<T>(param.desc());
    ASSERT_OK(SgdPlainUpdate<T>(Upload<T>(param), Upload<T>(grad), n, o, p, stream()));
    ExpectClose(Download(p, param.desc()), want_plain, Tolerance::kElementwise, what + " plain");

    const std::vector<Tensor> want =
        cpu().RunOk("sgd_update", {param, grad, buf}, {{"lr", o.lr}, {"momentum", momentum}, {"weight_decay", 0.01}});
    T* p2 = Output<T>(param.desc());
    T* b2 = Output<T>(param.desc());
    ASSERT_OK(SgdUpdate<T>(Upload<T>(param), Upload<T>(grad), Upload<T>(buf), n, o, p2, b2, stream()));
    ExpectClose(Download(p2, param.desc()), want[0], Tolerance::kElementwise, what + " param");
    ExpectClose(Download(b2, param.desc()), want[1], Tolerance::kElementwise, what + " buf");
    // In place: outputs are the inputs' buffers.
    T* pi = Upload<T>(param);
    T* bi = Upload<T>(buf);
    ASSERT_OK(SgdUpdate<T>(pi, Upload<T>(grad), bi, n, o, pi, bi, stream()));
    ExpectClose(Download(pi, param.desc()), want[0], Tolerance::kElementwise, what + " param in place");
    if (momentum != 0) ExpectClose(Download(bi, param.desc()), want[1], Tolerance::kElementwise, what + " buf in place");
  }

  template <typename T, typename I>
  void CheckAdam(const Shape& shape, bool decoupled, bool bias_correction, int64_t step, uint64_t seed) {
    const DataType dt = DataTypeOf<T>::value;
    const Tensor param = RandomTensor(dt, shape, seed), grad = RandomTensor(dt, shape, seed + 1);
    const Tensor m = RandomTensor(dt, shape, seed + 2, -0.1, 0.1);
    const Tensor v = RandomTensor(dt, shape, seed + 3, 0.0, 0.01);
    const Tensor step_t = TensorFromDoubles(DataTypeOf<I>::value, Shape{}, {static_cast<double>(step)});
    const int64_t n = param.elem_count();
    AdamOptions o;
    o.lr = 1e-3;
    o.weight_decay = 0.1;
    o.decoupled_weight_decay = decoupled;
    o.bias_correction = bias_correction;
    const AttrMap attrs = {{"lr", o.lr},
                           {"weight_decay", o.weight_decay},
                           {"decoupled_weight_decay", decoupled},
                           {"bias_correction", bias_correction}};
    const std::string what = absl::StrCat("adam ", param.desc().ToString(), " decoupled=", decoupled,
                                          " bias_correction=", bias_correction, " step=", step);
    const std::vector<Tensor> want = cpu().RunOk("adam_update", {param, grad, m, v, step_t}, attrs);
    ASSERT_EQ(want.size(), 3u);
    T* po = Output<T>(param.desc());
    T* mo = Output<T>(param.desc());
    T* vo = Output<T>(param.desc());
    ASSERT_OK(AdamUpdate<T, I>(Upload<T>(param), Upload<T>(grad), Upload<T>(m), Upload<T>(v), Upload<I>(step_t), n, o,
                               po, mo, vo, stream()));
    ExpectClose(Download(po, param.desc()), want[0], Tolerance::kElementwise, what + " param");
    ExpectClose(Download(mo, param.desc()), want[1], Tolerance::kElementwise, what + " m");
    ExpectClose(Download(vo, param.desc()), want[2], Tolerance::kElementwise, what + " v");
    // In place.
    T* pi = Upload<T>(param);
    T* mi = Upload<T>(m);
    T* vi = Upload<T>(v);
    ASSERT_OK(AdamUpdate<T, I>(pi, Upload<T>(grad), mi, vi, Upload<I>(step_t), n, o, pi, mi, vi, stream()));
    ExpectClose(Download(pi, param.desc()), want[0], Tolerance::kElementwise, what + " param in place");
  }

  template <typename T>
  void CheckAll() {
    uint64_t seed = 91;
    for (const Shape& shape : {Shape({3, 5, 7}), Shape({1, 1}), Shape({17, 33})}) {
      for (double momentum : {0.0, 0.9}) CheckSgd<T>(shape, momentum, seed += 4);
      for (bool decoupled : {true, false}) {
        for (bool bias_correction : {true, false}) {
          CheckAdam<T, int64_t>(shape, decoupled, bias_correction, 3, seed += 4);
        }
      }
      CheckAdam<T, int32_t>(shape, true, true, 1, seed += 4);
    }
  }
};

TEST_F(OptimizerTest, StepIncrement) {
  for (DataType dt : {DataType::kInt64, DataType::kInt32}) {
    const Tensor step = TensorFromDoubles(dt, Shape{}, {41});
    const Tensor want = cpu().RunOne("step_increment", {step});
    void* s = UploadRaw(step);
    if (dt == DataType::kInt64) {
      ASSERT_OK(StepIncrement<int64_t>(static_cast<int64_t*>(s), static_cast<int64_t*>(s), stream()));
    } else {
      ASSERT_OK(StepIncrement<int32_t>(static_cast<int32_t*>(s), static_cast<int32_t*>(s), stream()));
    }
    ExpectEqualValues(Download(s, step.desc()), want, std::string("step_increment ") + DataTypeName(dt));
  }
}

TEST_F(OptimizerTest, Float) { CheckAll<float>(); }
TEST_F(OptimizerTest, Double) { CheckAll<double>(); }

}  // namespace
}  // namespace testing
}  // namespace cuda
}  // namespace oneflow_like
