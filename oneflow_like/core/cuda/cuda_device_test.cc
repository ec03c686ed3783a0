// The CUDA device layer: device count and description, streams, buffers and copies, and the
// error statuses (also without a GPU: the status mapping and the no-device skip reason).
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/core/cuda/cuda_device.h"
#include "oneflow_like/core/cuda/cuda_status.h"

namespace oneflow_like {
namespace cuda {
namespace {

TEST(CudaStatusTest, NamesTheCallAndMapsCodes) {
  EXPECT_TRUE(CudaStatus(cudaSuccess, "cudaFree").ok());
  const absl::Status oom = CudaStatus(cudaErrorMemoryAllocation, "cudaMalloc(4096 bytes)");
  EXPECT_EQ(oom.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(oom.message().find("cudaMalloc(4096 bytes) failed"), std::string::npos) << oom;
  EXPECT_NE(oom.message().find("cudaErrorMemoryAllocation"), std::string::npos) << oom;
  EXPECT_EQ(CudaStatus(cudaErrorNoDevice, "cudaGetDeviceCount").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(CudaStatus(cudaErrorLaunchFailure, "k").code(), absl::StatusCode::kInternal);
}

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const absl::StatusOr<int> count = DeviceCount();
    if (!count.ok()) GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount says " << count.status().message();
    if (*count == 0) GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount says 0 devices";
    ASSERT_TRUE(UseDevice(0).ok());
  }
};

TEST_F(CudaDeviceTest, DescribesDevice0) {
  const absl::StatusOr<std::string> d = DeviceDescription(0);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_NE(d->find("sm_"), std::string::npos) << *d;
  std::cout << "device 0: " << *d << "\n";
}

TEST_F(CudaDeviceTest, RoundTripThroughABuffer) {
  absl::StatusOr<CudaStream> stream = CudaStream::Create();
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::vector<float> host(1001), back(1001, -1.0f);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i) * 0.5f;
  absl::StatusOr<DeviceBuffer> buffer = DeviceBuffer::Allocate(host.size() * sizeof(float));
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  ASSERT_TRUE(buffer->CopyFromHost(host.data(), host.size() * sizeof(float), stream->get()).ok());
  ASSERT_TRUE(buffer->CopyToHost(back.data(), back.size() * sizeof(float), stream->get()).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  EXPECT_EQ(back, host);
  // Moving keeps the allocation; a copy past the end is refused.
  DeviceBuffer moved = std::move(buffer).value();
  EXPECT_EQ(moved.bytes(), static_cast<int64_t>(host.size() * sizeof(float)));
  const absl::Status too_big = moved.CopyToHost(back.data(), moved.bytes() + 4, stream->get());
  EXPECT_EQ(too_big.code(), absl::StatusCode::kInvalidArgument) << too_big;
}

TEST_F(CudaDeviceTest, AnImpossibleAllocationIsResourceExhausted) {
  const absl::StatusOr<DeviceBuffer> huge = DeviceBuffer::Allocate(int64_t{1} << 50);  // 1 PiB
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
  EXPECT_NE(huge.status().message().find("cudaMalloc("), std::string::npos) << huge.status();
}

}  // namespace
}  // namespace cuda
}  // namespace oneflow_like
