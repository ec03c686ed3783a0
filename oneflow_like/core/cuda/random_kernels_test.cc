// CUDA random ops vs the CPU ops random_uniform (bit-exact, all floating dtypes, whole and a
// shard), random_normal (float32 / float64 to the element-wise tolerance: the device's log/cos
// may differ in the last bit of a double) and dropout / dropout_grad (bit-exact).
#include <string>
#include <vector>

#include "oneflow_like/core/cuda/cuda_test_util.h"
#include "oneflow_like/core/cuda/random_kernels.h"

namespace oneflow_like {
namespace cuda {
namespace testing {
namespace {

using ::oneflow_like::testing::RandomTensor;

using RandomTest = CudaKernelTest;

TEST_F(RandomTest, UniformWholeAndShard) {
  for (DataType dt : {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16, DataType::kFloat16}) {
    const std::string what = std::string("random_uniform ") + DataTypeName(dt);
    const AttrMap attrs = {{"shape", std::vector<int64_t>{3, 5, 7}}, {"dtype", dt}, {"seed", int64_t{42}},
                           {"low", -2.0},                              {"high", 3.0}};
    const Tensor want = cpu().RunOne("random_uniform", {}, attrs);
    void* y = OutputRaw(want.byte_size());
    ASSERT_OK(RandomUniform(dt, ShardPosition{{3, 5, 7}, {}, {}}, 42, -2.0, 3.0, y, stream()));
    ExpectEqualValues(Download(y, want.desc()), want, what);

    // Rows 3..4 of axis 1: the shard's numbers are the logical tensor's.
    const TensorDesc part{dt, Shape({3, 2, 7})};
    absl::StatusOr<std::vector<Tensor>> want_part =
        cpu().RunShard("random_uniform", {}, attrs, {}, {part}, {ShardInfo{Shape({3, 5, 7}), {0, 3, 0}}});
    ASSERT_OK(want_part.status());
    void* yp = OutputRaw(part.byte_size());
    ASSERT_OK(RandomUniform(dt, ShardPosition{{3, 2, 7}, {3, 5, 7}, {0, 3, 0}}, 42, -2.0, 3.0, yp, stream()));
    ExpectEqualValues(Download(yp, part), (*want_part)[0], what + " shard");
  }
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
