// CUDA random ops vs the CPU ops random_uniform (bit-exact, all floating dtypes, whole and a
// shard), random_normal (float32 / float64 to the element-wise tolerance: the device's log/cos
// may differ in the last bit of a double) and dropout / dropout_grad (bit-exact).
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "oneflow_like/core/cuda/cuda_test_util.h"
#include "oneflow_like/core/cuda/random_kernels.h"
#include "oneflow_like/core/random.h"

namespace oneflow_like {
namespace cuda {
namespace testing {
namespace {

using ::oneflow_like::testing::RandomTensor;

using RandomTest = CudaKernelTest;

// [-0.1, 0.1): high - low = 0.2 is not a short binary fraction, so (high - low) * u rounds and a
// kernel that fused low + (high - low) * u into one fma (nvcc's default contraction) differs from
// the CPU in the last bit of float64 (NoFmaRangeIsSensitive below checks that on the host).
// [-2, 3) keeps the product exact (there both agree either way).
constexpr double kRanges[][2] = {{-0.1, 0.1}, {-2.0, 3.0}};

TEST_F(RandomTest, UniformWholeAndShard) {
  for (const auto& range : kRanges) {
    const double low = range[0], high = range[1];
    for (DataType dt : {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16, DataType::kFloat16}) {
      const std::string what = absl::StrCat("random_uniform ", DataTypeName(dt), " [", low, ", ", high, ")");
      const AttrMap attrs = {{"shape", std::vector<int64_t>{3, 5, 7}}, {"dtype", dt}, {"seed", int64_t{42}},
                             {"low", low},                               {"high", high}};
      const Tensor want = cpu().RunOne("random_uniform", {}, attrs);
      void* y = OutputRaw(want.byte_size());
      ASSERT_OK(RandomUniform(dt, ShardPosition{{3, 5, 7}, {}, {}}, 42, low, high, y, stream()));
      ExpectEqualValues(Download(y, want.desc()), want, what);

      // Rows 3..4 of axis 1: the shard's numbers are the logical tensor's.
      const TensorDesc part{dt, Shape({3, 2, 7})};
      absl::StatusOr<std::vector<Tensor>> want_part =
          cpu().RunShard("random_uniform", {}, attrs, {}, {part}, {ShardInfo{Shape({3, 5, 7}), {0, 3, 0}}});
      ASSERT_OK(want_part.status());
      void* yp = OutputRaw(part.byte_size());
      ASSERT_OK(RandomUniform(dt, ShardPosition{{3, 2, 7}, {3, 5, 7}, {0, 3, 0}}, 42, low, high, yp, stream()));
      ExpectEqualValues(Download(yp, part), (*want_part)[0], what + " shard");
    }
    }
}

// Host-side (runs without a GPU): the CPU reference of random_uniform is low + (high - low) * u
// rounded twice (not fused), and on the test's [-0.1, 0.1) range a fused fma gives a different
// float64 for some of the 105 elements, so the GPU comparison above would catch a contracted
// kernel; on [-2, 3) it would not.
TEST(RandomHost, NoFmaRangeIsSensitive) {
  const AttrMap attrs = {{"shape", std::vector<int64_t>{3, 5, 7}}, {"dtype", DataType::kFloat64},
                         {"seed", int64_t{42}}, {"low", -0.1}, {"high", 0.1}};
  const Tensor want = ::oneflow_like::testing::OpTest().RunOne("random_uniform", {}, attrs);
  ASSERT_EQ(want.elem_count(), 105);
  int fused_differs = 0, exact_range_differs = 0;
  for (int64_t i = 0; i < want.elem_count(); ++i) {
    const double u = PhiloxUniform(42, static_cast<uint64_t>(i));
    volatile double product = (0.1 - -0.1) * u;  // volatile: rounded on its own, never fused
    EXPECT_EQ(want.data<double>()[i], -0.1 + product) << "element " << i << ": the CPU reference is not unfused";
    if (std::fma(0.1 - -0.1, u, -0.1) != -0.1 + product) ++fused_differs;
    volatile double exact = 5.0 * u;
    if (std::fma(5.0, u, -2.0) != -2.0 + exact) ++exact_range_differs;
  }
  EXPECT_GT(fused_differs, 0) << "[-0.1, 0.1) does not tell a fused kernel from the CPU";
  EXPECT_EQ(exact_range_differs, 0);
}

TEST_F(RandomTest, Normal) {
  for (DataType dt : {DataType::kFloat32, DataType::kFloat64}) {
    const AttrMap attrs = {{"shape", std::vector<int64_t>{17, 33}}, {"dtype", dt}, {"seed", int64_t{7}},
                           {"mean", 0.5},                            {"std", 2.0}};
    const Tensor want = cpu().RunOne("random_normal", {}, attrs);
    void* y = OutputRaw(want.byte_size());
    ASSERT_OK(RandomNormal(dt, ShardPosition{{17, 33}, {}, {}}, 7, 0.5, 2.0, y, stream()));
    ExpectClose(Download(y, want.desc()), want, Tolerance::kElementwise,
                std::string("random_normal ") + DataTypeName(dt));
  }
}

template <typename T>
void CheckDropout(RandomTest* t) {
  const DataType dt = DataTypeOf<T>::value;
  const Tensor x = RandomTensor(dt, Shape({17, 33}), 9);
  const AttrMap attrs = {{"p", 0.3}, {"seed", int64_t{11}}};
  for (const char* op : {"dropout", "dropout_grad"}) {
    const Tensor want = t->cpu().RunOne(op, {x}, attrs);
    T* y = t->Output<T>(x.desc());
    ASSERT_OK(Dropout<T>(t->Upload<T>(x), ShardPosition{{17, 33}, {}, {}}, 0.3, 11, y, t->stream()));
    t->ExpectEqualValues(t->Download(y, x.desc()), want, std::string(op) + " " + DataTypeName(dt));
  }
}

TEST_F(RandomTest, DropoutFloat) { CheckDropout<float>(this); }
TEST_F(RandomTest, DropoutDouble) { CheckDropout<double>(this); }

TEST(RandomArguments, BadShardsAndDtypesAreInvalidArgument) {
  EXPECT_EQ(RandomUniform(DataType::kInt32, ShardPosition{{3}, {}, {}}, 1, 0, 1, nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RandomUniform(DataType::kFloat32, ShardPosition{{3}, {4}, {2}}, 1, 0, 1, nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Dropout<float>(nullptr, ShardPosition{{3}, {}, {}}, 1.0, 1, nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace testing
}  // namespace cuda
}  // namespace oneflow_like
