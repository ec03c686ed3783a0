#include "oneflow_like/core/cuda/cuda_device.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "oneflow_like/core/cuda/cuda_status.h"

namespace oneflow_like {
namespace cuda {

absl::StatusOr<int> DeviceCount() {
  int count = 0;
  const absl::Status status = CudaStatus(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (!status.ok()) return status;
  return count;
}

absl::Status UseDevice(int index) { return CudaStatus(cudaSetDevice(index), absl::StrCat("cudaSetDevice(", index, ")")); }

absl::StatusOr<std::string> DeviceDescription(int index) {
  cudaDeviceProp prop;
  absl::Status status = CudaStatus(cudaGetDeviceProperties(&prop, index), absl::StrCat("cudaGetDeviceProperties(", index, ")"));
  if (!status.ok()) return status;
  int driver = 0, runtime = 0;
  status = CudaStatus(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  if (!status.ok()) return status;
  status = CudaStatus(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  if (!status.ok()) return status;
  return absl::StrFormat("%s: sm_%d%d, %d SMs, %.1f GiB, driver %d.%d, runtime %d.%d", prop.name, prop.major,
                         prop.minor, prop.multiProcessorCount,
                         static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0), driver / 1000,
                         (driver % 1000) / 10, runtime / 1000, (runtime % 1000) / 10);
}

// ---- CudaStream ----

absl::StatusOr<CudaStream> CudaStream::Create() {
  cudaStream_t stream = nullptr;
  const absl::Status status =
      CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  if (!status.ok()) return status;
  return CudaStream(stream);
}

CudaStream::CudaStream(CudaStream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

CudaStream::~CudaStream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::Status CudaStream::Synchronize() const {
  return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

// ---- DeviceBuffer ----

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(int64_t bytes) {
  if (bytes < 0) return absl::InvalidArgumentError(absl::StrCat("DeviceBuffer::Allocate: negative size ", bytes));
  if (bytes == 0) return DeviceBuffer();
  void* data = nullptr;
  const absl::Status status =
      CudaStatus(cudaMalloc(&data, static_cast<size_t>(bytes)), absl::StrCat("cudaMalloc(", bytes, " bytes)"));
  if (!status.ok()) return status;
  return DeviceBuffer(data, bytes);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

namespace {
absl::Status CheckSize(const char* what, int64_t bytes, int64_t capacity) {
  if (bytes >= 0 && bytes <= capacity) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("DeviceBuffer::", what, ": ", bytes, " bytes do not fit the buffer of ", capacity, " bytes"));
}
}  // namespace

absl::Status DeviceBuffer::CopyFromHost(const void* host, int64_t bytes, cudaStream_t stream) {
  if (absl::Status s = CheckSize("CopyFromHost", bytes, bytes_); !s.ok()) return s;
  if (bytes == 0) return absl::OkStatus();
  return CudaStatus(cudaMemcpyAsync(data_, host, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream),
                    absl::StrCat("cudaMemcpyAsync(", bytes, " bytes host to device)"));
}

absl::Status DeviceBuffer::CopyToHost(void* host, int64_t bytes, cudaStream_t stream) const {
  if (absl::Status s = CheckSize("CopyToHost", bytes, bytes_); !s.ok()) return s;
  if (bytes == 0) return absl::OkStatus();
  return CudaStatus(cudaMemcpyAsync(host, data_, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, stream),
                    absl::StrCat("cudaMemcpyAsync(", bytes, " bytes device to host)"));
}

absl::Status DeviceBuffer::Fill(uint8_t value, cudaStream_t stream) {
  if (bytes_ == 0) return absl::OkStatus();
  return CudaStatus(cudaMemsetAsync(data_, value, static_cast<size_t>(bytes_), stream),
                    absl::StrCat("cudaMemsetAsync(", bytes_, " bytes)"));
}

}  // namespace cuda
}  // namespace oneflow_like
