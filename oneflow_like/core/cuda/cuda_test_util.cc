#include "oneflow_like/core/cuda/cuda_test_util.h"

#include <cmath>
#include <cstdlib>

#include "oneflow_like/core/cuda/cuda_status.h"

namespace oneflow_like {
namespace cuda {
namespace testing {

void CudaKernelTest::SetUp() {
  const absl::StatusOr<int> count = DeviceCount();
  if (!count.ok()) GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount says " << count.status().message();
  if (*count == 0) GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount says 0 devices";
  const char* env = std::getenv("OL_CUDA_DEVICE");
  const int device = env != nullptr ? std::atoi(env) : 0;
  ASSERT_OK(UseDevice(device));
  absl::StatusOr<CudaStream> stream = CudaStream::Create();
  ASSERT_OK(stream.status());
  stream_ = std::move(stream).value();
}

const CublasHandle& CudaKernelTest::cublas() {
  if (cublas_ == nullptr) {
    absl::StatusOr<CublasHandle> handle = CublasHandle::Create();
    EXPECT_TRUE(handle.ok()) << handle.status();
    cublas_ = std::make_unique<CublasHandle>(handle.ok() ? std::move(handle).value() : CublasHandle());
  }
  return *cublas_;
}

void* CudaKernelTest::UploadRaw(const Tensor& t) {
  // At least one byte, so that an empty tensor still has a distinct pointer.
  absl::StatusOr<DeviceBuffer> buffer = DeviceBuffer::Allocate(t.byte_size() > 0 ? t.byte_size() : 1);
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  if (!buffer.ok()) return nullptr;
  const absl::Status copy = buffer->CopyFromHost(t.raw_data(), t.byte_size(), stream());
  EXPECT_TRUE(copy.ok()) << copy;
  buffers_.push_back(std::move(buffer).value());
  return buffers_.back().data();
}

void* CudaKernelTest::OutputRaw(int64_t bytes) {
  absl::StatusOr<DeviceBuffer> buffer = DeviceBuffer::Allocate(bytes > 0 ? bytes : 1);
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  if (!buffer.ok()) return nullptr;
  const absl::Status fill = buffer->Fill(0xFF, stream());
  EXPECT_TRUE(fill.ok()) << fill;
  buffers_.push_back(std::move(buffer).value());
  return buffers_.back().data();
}

Tensor CudaKernelTest::Download(const void* device, const TensorDesc& desc) {
  Tensor t(desc);
  if (desc.byte_size() > 0) {
    const absl::Status copy =
        CudaStatus(cudaMemcpyAsync(t.raw_data(), device, static_cast<size_t>(desc.byte_size()), cudaMemcpyDeviceToHost,
                                   stream()),
                   "cudaMemcpyAsync(download)");
    EXPECT_TRUE(copy.ok()) << copy;
  }
  const absl::Status sync = stream_.Synchronize();
  EXPECT_TRUE(sync.ok()) << sync;
  return t;
}

void CudaKernelTest::ExpectClose(const Tensor& actual, const Tensor& expected, Tolerance tolerance,
                                 const std::string& what) {
  const bool f64 = expected.dtype() == DataType::kFloat64;
  double rtol = 0, atol = 0;
  switch (tolerance) {
    case Tolerance::kElementwise:
      rtol = f64 ? 1e-12 : 1e-5;
      atol = f64 ? 1e-14 : 1e-6;
      break;
    case Tolerance::kReduction:
      rtol = f64 ? 1e-10 : 1e-4;
      atol = f64 ? 1e-12 : 1e-4;
      break;
  }
  ::oneflow_like::testing::ExpectTensorNear(actual, expected, rtol, atol, what);
}

void CudaKernelTest::ExpectEqualValues(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.desc(), expected.desc()) << what;
  int reported = 0;
  for (int64_t i = 0; i < expected.elem_count() && reported < 5; ++i) {
    const double a = actual.GetAsDouble(i), e = expected.GetAsDouble(i);
    if ((std::isnan(a) && std::isnan(e)) || a == e) continue;
    ADD_FAILURE() << what << ": element " << i << " is " << a << ", the CPU gives " << e;
    ++reported;
  }
}

}  // namespace testing
}  // namespace cuda
}  // namespace oneflow_like
