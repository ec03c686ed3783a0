// CUDA element-wise kernels vs the CPU ops add/sub/mul/div (broadcasting), scalar_add,
// scalar_mul and bias_add.
#include <limits>
#include <string>
#include <vector>

#include "oneflow_like/core/cuda/cuda_test_util.h"
#include "oneflow_like/core/cuda/elementwise_kernels.h"

namespace oneflow_like {
namespace cuda {
namespace testing {
namespace {

using ::oneflow_like::testing::RandomTensor;

struct BinaryCase {
  std::vector<int64_t> a, b;
};

// Odd shapes: same shape, trailing vector, broadcasting on both sides, scalars, 1x1.
const std::vector<BinaryCase>& BinaryCases() {
  static const auto* cases = new std::vector<BinaryCase>{
      {{3, 5, 7}, {3, 5, 7}}, {{3, 5, 7}, {7}},     {{5, 1, 7}, {3, 1}}, {{1, 1}, {1, 1}},
      {{17, 33}, {17, 1}},    {{17, 33}, {}},       {{}, {17, 33}},      {{1, 33}, {17, 1}},
      {{2, 3, 4, 5, 6}, {3, 1, 5, 1}},
  };
  return *cases;
}

struct NamedOp {
  const char* name;
  BinaryOp op;
};

class ElementwiseTest : public CudaKernelTest {
 protected:
  template <typename T>
  void CheckBinary(const NamedOp& op, const BinaryCase& c, uint64_t seed) {
    const DataType dt = DataTypeOf<T>::value;
    const Tensor a = RandomTensor(dt, Shape(c.a), seed, -2.0, 2.0);
    // div: keep b away from 0.
    const Tensor b = op.op == BinaryOp::kDiv ? RandomTensor(dt, Shape(c.b), seed + 1, 0.5, 2.0)
                                             : RandomTensor(dt, Shape(c.b), seed + 1, -2.0, 2.0);
    const Tensor want = cpu().RunOne(op.name, {a, b});
    T* y = Output<T>(want.desc());
    ASSERT_OK(BroadcastBinary<T>(op.op, Upload<T>(a), c.a, Upload<T>(b), c.b, y, stream()));
    ExpectClose(Download(y, want.desc()), want, Tolerance::kElementwise,
                std::string(op.name) + " " + a.desc().ToString() + " " + b.desc().ToString());
  }

  template <typename T>
  void CheckAllBinary() {
    const NamedOp ops[] = {{"add", BinaryOp::kAdd}, {"sub", BinaryOp::kSub}, {"mul", BinaryOp::kMul},
                           {"div", BinaryOp::kDiv}};
    uint64_t seed = 1;
    for (const NamedOp& op : ops) {
      for (const BinaryCase& c : BinaryCases()) CheckBinary<T>(op, c, seed += 2);
    }
  }

  template <typename T>
  void CheckScalarAndBias() {
    const DataType dt = DataTypeOf<T>::value;
    for (const Shape& shape : {Shape({3, 5, 7}), Shape({1, 1}), Shape({17, 33})}) {
      const Tensor x = RandomTensor(dt, shape, 5);
      for (const auto& [name, op] : {std::pair<const char*, ScalarOp>{"scalar_add", ScalarOp::kAdd},
                                     std::pair<const char*, ScalarOp>{"scalar_mul", ScalarOp::kMul}}) {
        const Tensor want = cpu().RunOne(name, {x}, {{"value", 0.37}});
        T* y = Output<T>(x.desc());
        ASSERT_OK(ScalarApply<T>(op, Upload<T>(x), 0.37, y, x.elem_count(), stream()));
        ExpectClose(Download(y, x.desc()), want, Tolerance::kElementwise, std::string(name) + " " + shape.ToString());
      }
      for (int64_t axis = -1; axis < shape.num_axes(); ++axis) {
        const int a = static_cast<int>(axis < 0 ? axis + shape.num_axes() : axis);
        const Tensor bias = RandomTensor(dt, Shape({shape.dim(a)}), 6);
        const Tensor want = cpu().RunOne("bias_add", {x, bias}, {{"axis", axis}});
        T* y = Output<T>(x.desc());
        ASSERT_OK(BiasAdd<T>(Upload<T>(x), shape.dims(), static_cast<int>(axis), Upload<T>(bias), y, stream()));
        ExpectClose(Download(y, x.desc()), want, Tolerance::kElementwise,
                    "bias_add " + shape.ToString() + " axis " + std::to_string(axis));
      }
    }
  }
};

TEST_F(ElementwiseTest, BroadcastBinaryFloat) { CheckAllBinary<float>(); }
TEST_F(ElementwiseTest, BroadcastBinaryDouble) { CheckAllBinary<double>(); }
TEST_F(ElementwiseTest, ScalarAndBiasAddFloat) { CheckScalarAndBias<float>(); }
TEST_F(ElementwiseTest, ScalarAndBiasAddDouble) { CheckScalarAndBias<double>(); }

TEST_F(ElementwiseTest, InPlaceAdd) {
  const Tensor a = RandomTensor(DataType::kFloat32, Shape({17, 33}), 3);
  const Tensor b = RandomTensor(DataType::kFloat32, Shape({33}), 4);
  const Tensor want = cpu().RunOne("add", {a, b});
  float* pa = Upload<float>(a);
  ASSERT_OK(BroadcastBinary<float>(BinaryOp::kAdd, pa, {17, 33}, Upload<float>(b), {33}, pa, stream()));
  ExpectClose(Download(pa, a.desc()), want, Tolerance::kElementwise, "add in place");
}

// Host-side validation: runs without a GPU too.
// Integer add (the device backend's BOXING_ADD / ACCUMULATE of int32 / int64 registers) in
// place, exact, with wrap-free values near the types' ends.
template <typename T>
void CheckIntegerAddInPlace(ElementwiseTest* t) {
  const int64_t n = 17 * 33;
  std::vector<T> a(n), b(n), want(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = static_cast<T>(std::numeric_limits<T>::max() / 2 - i * 7);
    b[i] = static_cast<T>(i * 3 - 1000);
    want[i] = static_cast<T>(a[i] + b[i]);
  }
  const Tensor ta = Tensor::FromVector<T>(Shape({17, 33}), a), tb = Tensor::FromVector<T>(Shape({17, 33}), b);
  T* pa = t->Upload<T>(ta);
  ASSERT_OK(BroadcastBinary<T>(BinaryOp::kAdd, pa, {17, 33}, t->Upload<T>(tb), {17, 33}, pa, t->stream()));
  t->ExpectEqualValues(t->Download(pa, ta.desc()), Tensor::FromVector<T>(Shape({17, 33}), want),
                       std::string("integer add ") + DataTypeName(ta.dtype()));
}
TEST_F(ElementwiseTest, IntegerAddInPlace) {
  CheckIntegerAddInPlace<int32_t>(this);
  CheckIntegerAddInPlace<int64_t>(this);
}

TEST(ElementwiseShapes, BroadcastDimsMatchesTheCpuRules) {
  EXPECT_EQ(*BroadcastDims({5, 1, 7}, {3, 1}), (std::vector<int64_t>{5, 3, 7}));
  EXPECT_EQ(*BroadcastDims({}, {17, 33}), (std::vector<int64_t>{17, 33}));
  const absl::StatusOr<std::vector<int64_t>> bad = BroadcastDims({3, 5}, {4, 5});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("differ at axis -2 (3 vs 4)"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace testing
}  // namespace cuda
}  // namespace oneflow_like
