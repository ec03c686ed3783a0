// Test fixture for the CUDA kernels: every CUDA kernel is compared with the CPU kernel of the
// same op (core/ops, run through the op test harness) on the same random inputs.
//
//   TEST_F(CudaKernelTest, Relu) {
//     const Tensor x = RandomTensor(DataType::kFloat32, Shape({3, 5, 7}), 1);
//     const Tensor want = cpu().RunOne("relu", {x});
//     float* y = Output<float>(x.desc());
//     ASSERT_OK(cuda::Relu(Upload<float>(x), y, x.elem_count(), stream()));
//     ExpectClose(Download(y, x.desc()), want, Tolerance::kElementwise, "relu");
//   }
//
// SetUp skips the test, naming the reason, when no CUDA device is visible (no driver, no GPU):
//   "no CUDA device: cudaGetDeviceCount says cudaGetDeviceCount failed: ..."
// Device: OL_CUDA_DEVICE (default 0). Buffers made by Upload / Output live until the test ends;
// Output buffers start as 0xFF bytes (NaN for floats), so an element a kernel forgets to write
// fails the comparison. Download synchronizes the stream, so a fault inside a kernel fails the
// test there, naming cudaStreamSynchronize.
//
// Tolerances (|gpu - cpu| <= atol + rtol * |cpu|; inputs are O(1)), float32 / float64:
//   kElementwise  1e-5 / 1e-6      1e-12 / 1e-14   (one rounding per op, different exp/erf code)
//   kReduction    1e-4 / 1e-4      1e-10 / 1e-12   (sums in another order: reductions, softmax,
//                                                   layer norm, cross-entropy, matmul, embedding
//                                                   gradients)
#ifndef ONEFLOW_LIKE_CORE_CUDA_CUDA_TEST_UTIL_H_
#define ONEFLOW_LIKE_CORE_CUDA_CUDA_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/core/cuda/cuda_device.h"
#include "oneflow_like/core/cuda/matmul_kernels.h"
#include "oneflow_like/core/tensor.h"
#include "oneflow_like/core/testing/op_test_util.h"

namespace oneflow_like {
namespace cuda {
namespace testing {

enum class Tolerance { kElementwise, kReduction };

// ASSERT_OK(status): a test failure naming the status, and return, when it is not OK. Variadic
// so that template arguments with commas need no extra parentheses.
#define ASSERT_OK(...)                                      \
  do {                                                      \
    const ::absl::Status ol_test_status_ = (__VA_ARGS__);   \
    ASSERT_TRUE(ol_test_status_.ok()) << ol_test_status_;   \
  } while (0)

class CudaKernelTest : public ::testing::Test {
 public:
  void SetUp() override;

  cudaStream_t stream() const { return stream_.get(); }
  const ::oneflow_like::testing::OpTest& cpu() const { return cpu_; }
  // The cuBLAS handle of this test (created on first use; a failure fails the test).
  const CublasHandle& cublas();

  // A device copy of `t` (any dtype; T must match it).
  template <typename T>
  T* Upload(const Tensor& t) {
    EXPECT_EQ(t.dtype(), DataTypeOf<T>::value) << "Upload<T> of " << t.desc().ToString();
    return static_cast<T*>(UploadRaw(t));
  }
  // A device buffer for a tensor of `desc`, every byte 0xFF.
  template <typename T>
  T* Output(const TensorDesc& desc) {
    EXPECT_EQ(desc.dtype, DataTypeOf<T>::value) << "Output<T> of " << desc.ToString();
    return static_cast<T*>(OutputRaw(desc.byte_size()));
  }
  void* OutputRaw(int64_t bytes);
  // Upload / Output for raw bytes (any dtype).
  void* UploadRaw(const Tensor& t);
  // Synchronizes the stream and copies `desc` back from `device`.
  Tensor Download(const void* device, const TensorDesc& desc);

  // gtest assertion with the tolerance for the dtype of `expected`.
  static void ExpectClose(const Tensor& actual, const Tensor& expected, Tolerance tolerance, const std::string& what);
  // gtest assertion: same desc and equal values (any dtype, compared as doubles; NaN equals NaN,
  // payloads are not compared).
  static void ExpectEqualValues(const Tensor& actual, const Tensor& expected, const std::string& what);

 private:
  ::oneflow_like::testing::OpTest cpu_;
  CudaStream stream_;
  std::unique_ptr<CublasHandle> cublas_;
  std::vector<DeviceBuffer> buffers_;
};

}  // namespace testing
}  // namespace cuda
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_CUDA_CUDA_TEST_UTIL_H_
