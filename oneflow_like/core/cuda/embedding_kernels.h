// CUDA kernels of the embedding family (core/ops/embedding_ops.cc), same semantics:
//
//   Embedding      y[p, :] = table[ids[p] - row_begin, :] for ids in [row_begin, row_begin +
//                  table_rows), zeros otherwise (a vocab-parallel shard holds rows
//                  [row_begin, row_begin + table_rows) of the logical [V, dim] table; a whole
//                  table has row_begin 0).
//   EmbeddingGrad  dtable = zeros [table_rows, dim]; dtable[ids[p] - row_begin] += dy[p] for the
//                  ids in this shard's range.
//
// ids has n elements; y / dy are [n, dim]. Device pointers; enqueued on `stream`. Ids outside
// [0, V) are treated like ids of another shard (zeros / skipped): check them first where they
// are untrusted (index_kernels.h: FindIndexOutOfRange names the first bad position, as the CPU
// op's error). EmbeddingGrad adds with atomics: the order of the additions into one row varies
// between runs (float rounding only). Errors: Internal naming the kernel on a launch failure.
// T: float, double; I: int32_t, int64_t.
#ifndef ONEFLOW_LIKE_CORE_CUDA_EMBEDDING_KERNELS_H_
#define ONEFLOW_LIKE_CORE_CUDA_EMBEDDING_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace oneflow_like {
namespace cuda {

template <typename T, typename I>
absl::Status Embedding(const T* table, int64_t table_rows, int64_t dim, int64_t row_begin, const I* ids, int64_t n,
                       T* y, cudaStream_t stream);

template <typename T, typename I>
absl::Status EmbeddingGrad(const T* dy, const I* ids, int64_t n, int64_t dim, int64_t row_begin, int64_t table_rows,
                           T* dtable, cudaStream_t stream);

}  // namespace cuda
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_CUDA_EMBEDDING_KERNELS_H_
