// The small CUDA device layer under the CUDA kernels: which devices exist, selecting one,
// streams and device buffers, with every failure an absl::Status naming the CUDA call
// (cuda_status.h). No global state: whoever needs a stream or a buffer creates and owns it.
//
//   ASSIGN_OR_RETURN(int count, cuda::DeviceCount());       // Unavailable without a driver/GPU
//   RETURN_IF_ERROR(cuda::UseDevice(local_rank));           // this host thread's device
//   ASSIGN_OR_RETURN(cuda::CudaStream stream, cuda::CudaStream::Create());
//   ASSIGN_OR_RETURN(cuda::DeviceBuffer x, cuda::DeviceBuffer::Allocate(bytes));
//   RETURN_IF_ERROR(x.CopyFromHost(host, bytes, stream.get()));
//   ... launch kernels on stream.get() ...
//   RETURN_IF_ERROR(x.CopyToHost(host, bytes, stream.get()));
//   RETURN_IF_ERROR(stream.Synchronize());                  // also reports faults in kernels
//
// Later (issue 14) a CudaDevice behind core/device.h's Device/Stream interface wraps these.
// Ownership: CudaStream and DeviceBuffer are move-only RAII owners; a buffer or stream must be
// destroyed while its device's context is alive (before process exit paths that tear CUDA
// down). Device selection (UseDevice) is per host thread, as in CUDA.
// Thread-safety: DeviceCount/UseDevice/DeviceDescription are thread-safe. A CudaStream is used
// by one thread at a time; DeviceBuffer methods are thread-compatible.
#ifndef ONEFLOW_LIKE_CORE_CUDA_CUDA_DEVICE_H_
#define ONEFLOW_LIKE_CORE_CUDA_CUDA_DEVICE_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace oneflow_like {
namespace cuda {

// Number of visible CUDA devices. Not OK (Unavailable) when there is no driver or no device:
// the message is CUDA's, e.g. "cudaGetDeviceCount failed: CUDA driver version is insufficient
// for CUDA runtime version (cudaErrorInsufficientDriver)". OK with 0 is possible too.
absl::StatusOr<int> DeviceCount();

// Selects device `index` for the calling host thread (cudaSetDevice).
absl::Status UseDevice(int index);

// One line, e.g. "NVIDIA H100 80GB HBM3: sm_90, 132 SMs, 79.2 GiB, driver 13.0, runtime 13.0".
absl::StatusOr<std::string> DeviceDescription(int index);

// A non-blocking stream on the current device (cudaStreamNonBlocking: no implicit ordering with
// the legacy default stream).
class CudaStream {
 public:
  static absl::StatusOr<CudaStream> Create();
  CudaStream() = default;
  CudaStream(CudaStream&& other) noexcept;
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  ~CudaStream();

  cudaStream_t get() const { return stream_; }
  // Waits for all work enqueued so far; returns the first error of that work (a fault in a
  // kernel included), naming cudaStreamSynchronize.
  absl::Status Synchronize() const;

 private:
  explicit CudaStream(cudaStream_t stream) : stream_(stream) {}
  cudaStream_t stream_ = nullptr;
};

// `bytes` of device memory on the current device (cudaMalloc; zero bytes: no allocation, a
// null pointer). Contents are uninitialized.
class DeviceBuffer {
 public:
  static absl::StatusOr<DeviceBuffer> Allocate(int64_t bytes);
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  int64_t bytes() const { return bytes_; }

  // Asynchronous copies of the first `bytes` bytes on `stream`; the host memory must stay valid
  // (and, for CopyToHost, unread) until the stream has passed the copy.
  // REQUIRES: bytes <= this->bytes() (checked: InvalidArgument).
  absl::Status CopyFromHost(const void* host, int64_t bytes, cudaStream_t stream);
  absl::Status CopyToHost(void* host, int64_t bytes, cudaStream_t stream) const;
  // Sets every byte to `value` (cudaMemsetAsync).
  absl::Status Fill(uint8_t value, cudaStream_t stream);

 private:
  DeviceBuffer(void* data, int64_t bytes) : data_(data), bytes_(bytes) {}
  void* data_ = nullptr;
  int64_t bytes_ = 0;
};

}  // namespace cuda
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_CUDA_CUDA_DEVICE_H_
