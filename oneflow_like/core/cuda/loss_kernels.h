// CUDA kernels of the loss family (core/ops/loss_ops.cc), same semantics:
//
//   SparseSoftmaxCrossEntropy      loss = (1 / N) * sum over rows p of
//                                  (m_p - logits[p, labels[p]]) + log(sum_c exp(logits[p, c] - m_p)),
//                                  m_p the row max; N = logical_count (the LOGICAL labels'
//                                  element count; 0 gives loss 0). The per-row values are summed
//                                  in double in a fixed order (deterministic).
//   SparseSoftmaxCrossEntropyGrad  dlogits[p, c] = (softmax(logits[p])[c] - [c == labels[p]]) * dloss / N
//
// logits [rows, classes], labels [rows]; `loss` and `dloss` are device scalars. Device pointers;
// enqueued on `stream`. A label outside [0, classes) is not read: its row gives NaN (loss) / NaN
// (gradient row). Check labels first where they are untrusted (index_kernels.h:
// FindIndexOutOfRange, which names the first bad position like the CPU op's error).
// The forward needs `workspace` of CrossEntropyWorkspaceBytes(rows) device bytes.
// Errors: Internal naming the kernel on a launch failure. T: float, double; I: int32_t, int64_t.
#ifndef ONEFLOW_LIKE_CORE_CUDA_LOSS_KERNELS_H_
#define ONEFLOW_LIKE_CORE_CUDA_LOSS_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace oneflow_like {
namespace cuda {

int64_t CrossEntropyWorkspaceBytes(int64_t rows);

template <typename T, typename I>
absl::Status SparseSoftmaxCrossEntropy(const T* logits, const I* labels, int64_t rows, int64_t classes,
                                       int64_t logical_count, T* loss, void* workspace, cudaStream_t stream);

template <typename T, typename I>
absl::Status SparseSoftmaxCrossEntropyGrad(const T* logits, const I* labels, const T* dloss, int64_t rows,
                                           int64_t classes, int64_t logical_count, T* dlogits, cudaStream_t stream);

}  // namespace cuda
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_CUDA_LOSS_KERNELS_H_
