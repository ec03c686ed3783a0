// CUDA cast and fill vs the CPU ops, for all 7 x 7 dtype pairs on special values (signed zeros,
// float16 subnormals and overflow, int saturation, inf, NaN). Exact: equal values, or NaN on
// both sides (NaN payloads are not compared).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "oneflow_like/core/cuda/cuda_test_util.h"
#include "oneflow_like/core/cuda/misc_kernels.h"

namespace oneflow_like {
namespace cuda {
namespace testing {
namespace {

using ::oneflow_like::testing::TensorFromDoubles;

const DataType kAll[] = {DataType::kFloat32, DataType::kFloat64, DataType::kInt32,  DataType::kInt64,
                         DataType::kBool,    DataType::kBFloat16, DataType::kFloat16};

std::vector<double> ValuesFor(DataType dt) {
  const double inf = std::numeric_limits<double>::infinity();
  if (dt == DataType::kBool) return {0, 1, 1, 0};
  if (dt == DataType::kInt32 || dt == DataType::kInt64) {
    return {0, 1, -1, 7, -300, 70000, 65504, -65536, 123456789, -2147483647, 2147483647};
  }
  return {0.0,   -0.0,  1.5,  -2.5,  1e-8,  6e-5,  3e-6,      65504, 65520, 70000, 3e9,
          -3e9,  1e20,  -1e20, inf,  -inf,  std::nan(""), 0.1, 2.75, -7.5, 1.00390625, 255.5};
}

using MiscTest = CudaKernelTest;

TEST_F(MiscTest, CastEveryPair) {
  for (DataType from : kAll) {
    const std::vector<double> values = ValuesFor(from);
    const Tensor x = TensorFromDoubles(from, Shape({static_cast<int64_t>(values.size())}), values);
    for (DataType to : kAll) {
      const std::string what = std::string("cast ") + DataTypeName(from) + " -> " + DataTypeName(to);
      const Tensor want = cpu().RunOne("cast", {x}, {{"dtype", to}});
      void* y = OutputRaw(want.byte_size());
      ASSERT_OK(Cast(from, UploadRaw(x), to, y, x.elem_count(), stream()));
      ExpectEqualValues(Download(y, want.desc()), want, what);
    }
  }
}

TEST_F(MiscTest, FillEveryDtype) {
  for (DataType dt : kAll) {
    for (double value : {0.0, 2.5, -1e10, 1e-8, 70000.75, -0.0}) {
      const std::string what = std::string("fill ") + DataTypeName(dt) + " " + std::to_string(value);
      const Tensor want =
          cpu().RunOne("fill", {}, {{"shape", std::vector<int64_t>{3, 5}}, {"dtype", dt}, {"value", value}});
      void* y = OutputRaw(want.byte_size());
      ASSERT_OK(Fill(dt, value, y, want.elem_count(), stream()));
      ExpectEqualValues(Download(y, want.desc()), want, what);
    }
  }
}

TEST(MiscArguments, InvalidDtypeIsInvalidArgument) {
  EXPECT_EQ(Fill(DataType::kInvalid, 1.0, nullptr, 3, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Cast(DataType::kFloat32, nullptr, DataType::kInvalid, nullptr, 3, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace testing
}  // namespace cuda
}  // namespace oneflow_like
