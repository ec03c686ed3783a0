// Index validation on the device, for the ops whose CPU kernels reject out-of-range ids or
// labels (embedding, cross-entropy): the CUDA kernels themselves never read out of range but do
// not fail, so a caller with untrusted indices checks them first.
//
//   ASSIGN_OR_RETURN(int64_t bad, FindIndexOutOfRange(labels, n, classes, scratch, stream));
//   if (bad >= 0) return InvalidArgument("label ... at position " + bad ...);
//
// FindIndexOutOfRange enqueues a scan on `stream` and then SYNCHRONIZES the stream (it reads
// the result back): -1 when every index is in [0, limit), else the smallest bad position.
// `scratch` is one device int64. Errors: the CUDA call that failed. I: int32_t, int64_t.
#ifndef ONEFLOW_LIKE_CORE_CUDA_INDEX_KERNELS_H_
#define ONEFLOW_LIKE_CORE_CUDA_INDEX_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/statusor.h"

namespace oneflow_like {
namespace cuda {

template <typename I>
absl::StatusOr<int64_t> FindIndexOutOfRange(const I* ids, int64_t n, int64_t limit, int64_t* scratch,
                                            cudaStream_t stream);

}  // namespace cuda
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_CUDA_INDEX_KERNELS_H_
