// CUDA op kernels of softmax, log_softmax and their grads, layer_norm, layer_norm_grad,
// embedding, embedding_grad, sparse_softmax_cross_entropy and its grad, on the kernels of
// softmax_kernels.h, norm_kernels.h, embedding_kernels.h and loss_kernels.h.
//
// Ids and labels are range-checked as on the CPU (an id outside [0, V), a label outside [0, C):
// InvalidArgument naming the value, its position and the range) when ctx.check_indices, the
// default. The check (index_kernels.h) reads its result back, so it synchronizes ctx.stream once
// per launch of these four kernels. Unchecked, an out-of-range id looks up zeros and adds
// nothing, an out-of-range label gives a NaN loss / gradient row. See op_kernels.h.
#include <string>
#include <vector>

#include "oneflow_like/core/cuda/cuda_status.h"
#include "oneflow_like/core/cuda/embedding_kernels.h"
#include "oneflow_like/core/cuda/index_kernels.h"
#include "oneflow_like/core/cuda/loss_kernels.h"
#include "oneflow_like/core/cuda/norm_kernels.h"
#include "oneflow_like/core/cuda/op_kernels_util.h"
#include "oneflow_like/core/cuda/softmax_kernels.h"

namespace oneflow_like {
namespace cuda {
namespace op_kernels_internal {
namespace {

// x's shape without its last axis.
Shape RowShape(const Shape& x) { return Shape(std::vector<int64_t>(x.dims().begin(), x.dims().end() - 1)); }

// ---- softmax family ----

// The options of softmax / its grad: `causal` and, for a shard, its first query's logical index.
absl::StatusOr<SoftmaxOptions> SoftmaxOptionsOf(const std::string& op, const CudaKernelContext& ctx, bool log,
                                                const Tensor& x, const std::string& what) {
  SoftmaxOptions options;
  options.log = log;
  options.causal = ctx.attrs.Bool("causal");
  const int rank = x.shape().num_axes();
  if (rank < 1) {
    return OpError(op, ctx, what, " must have at least one axis (the op runs over the last axis), got ",
                   x.desc().ToString());
  }
  if (options.causal && rank < 2) {
    return OpError(op, ctx, "causal=true needs ", what, " of rank >= 2 ([..., q, k]), got ", x.desc().ToString());
  }
  if (options.causal && !ctx.input_shards.empty() && static_cast<int>(ctx.input_shards[0].offset.size()) == rank) {
    options.q_offset = ctx.input_shards[0].offset[rank - 2];
  }
  return options;
}

CudaKernelFn SoftmaxKernel(const std::string& op, bool log) {
  return [op, log](const CudaKernelContext& ctx) -> absl::Status {
    RETURN_IF_ERROR(CheckArity(op, ctx, 1, 1));
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    ASSIGN_OR_RETURN(const SoftmaxOptions options, SoftmaxOptionsOf(op, ctx, log, x, "x"));
    RETURN_IF_ERROR(CheckDesc(op, ctx, "output y", y, x.desc()));
    return DispatchFloat(op, ctx, "x", x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      return Annotate(op, ctx, Softmax<T>(x.data<T>(), x.shape().dims(), options, y.data<T>(), ctx.stream));
    });
  };
}

// Inputs (y, dy): y the forward output.
CudaKernelFn SoftmaxGradKernel(const std::string& op, bool log) {
  return [op, log](const CudaKernelContext& ctx) -> absl::Status {
    RETURN_IF_ERROR(CheckArity(op, ctx, 2, 1));
    const Tensor& y = *ctx.inputs[0];
    const Tensor& dy = *ctx.inputs[1];
    Tensor& dx = *ctx.outputs[0];
    ASSIGN_OR_RETURN(const SoftmaxOptions options, SoftmaxOptionsOf(op, ctx, log, y, "y"));
    RETURN_IF_ERROR(CheckDesc(op, ctx, "dy", dy, y.desc()));
    RETURN_IF_ERROR(CheckDesc(op, ctx, "output dx", dx, y.desc()));
    return DispatchFloat(op, ctx, "y", y.dtype(), [&](auto tag) {
      using T = decltype(tag);
      return Annotate(op, ctx,
                      SoftmaxGrad<T>(y.data<T>(), dy.data<T>(), y.shape().dims(), options, dx.data<T>(), ctx.stream));
    });
  };
}

// ---- layer_norm ----

absl::Status CheckX(const std::string& op, const CudaKernelContext& ctx, const Tensor& x) {
  if ((x.dtype() != DataType::kFloat32 && x.dtype() != DataType::kFloat64) || x.shape().num_axes() < 1) {
    return OpError(op, ctx, "x must be a float32 or float64 tensor with at least one axis, got ", x.desc().ToString());
  }
  return absl::OkStatus();
}

absl::Status LayerNormKernel(const CudaKernelContext& ctx) {
  const std::string op = "layer_norm";
  RETURN_IF_ERROR(CheckArity(op, ctx, 3, 3));
  const Tensor& x = *ctx.inputs[0];
  RETURN_IF_ERROR(CheckX(op, ctx, x));
  const int64_t d = x.shape().dim(x.shape().num_axes() - 1);
  const TensorDesc param{x.dtype(), Shape({d})}, stat{x.dtype(), RowShape(x.shape())};
  RETURN_IF_ERROR(CheckDesc(op, ctx, "gamma", *ctx.inputs[1], param));
  RETURN_IF_ERROR(CheckDesc(op, ctx, "beta", *ctx.inputs[2], param));
  RETURN_IF_ERROR(CheckDesc(op, ctx, "output y", *ctx.outputs[0], x.desc()));
  RETURN_IF_ERROR(CheckDesc(op, ctx, "output mean", *ctx.outputs[1], stat));
  RETURN_IF_ERROR(CheckDesc(op, ctx, "output inv_std", *ctx.outputs[2], stat));
  const double epsilon = ctx.attrs.Float("epsilon");
  if (!(epsilon >= 0)) return OpError(op, ctx, "epsilon must be >= 0, got ", epsilon);
  const int64_t rows = stat.shape.elem_count();
  return DispatchFloat(op, ctx, "x", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return Annotate(op, ctx,
                    LayerNorm<T>(x.data<T>(), ctx.inputs[1]->data<T>(), ctx.inputs[2]->data<T>(),
                                 static_cast<double>(static_cast<T>(epsilon)), rows, d, ctx.outputs[0]->data<T>(),
                                 ctx.outputs[1]->data<T>(), ctx.outputs[2]->data<T>(), ctx.stream));
  });
}

// Inputs (dy, x, mean, inv_std, gamma) -> (dx, dgamma, dbeta).
absl::Status LayerNormGradKernel(const CudaKernelContext& ctx) {
  const std::string op = "layer_norm_grad";
  RETURN_IF_ERROR(CheckArity(op, ctx, 5, 3));
  const Tensor& x = *ctx.inputs[1];
  RETURN_IF_ERROR(CheckX(op, ctx, x));
  const int64_t d = x.shape().dim(x.shape().num_axes() - 1);
  const TensorDesc param{x.dtype(), Shape({d})}, stat{x.dtype(), RowShape(x.shape())};
  RETURN_IF_ERROR(CheckDesc(op, ctx, "dy", *ctx.inputs[0], x.desc()));
  RETURN_IF_ERROR(CheckDesc(op, ctx, "mean", *ctx.inputs[2], stat));
  RETURN_IF_ERROR(CheckDesc(op, ctx, "inv_std", *ctx.inputs[3], stat));
  RETURN_IF_ERROR(CheckDesc(op, ctx, "gamma", *ctx.inputs[4], param));
  RETURN_IF_ERROR(CheckDesc(op, ctx, "output dx", *ctx.outputs[0], x.desc()));
  RETURN_IF_ERROR(CheckDesc(op, ctx, "output dgamma", *ctx.outputs[1], param));
  RETURN_IF_ERROR(CheckDesc(op, ctx, "output dbeta", *ctx.outputs[2], param));
  const int64_t rows = stat.shape.elem_count();
  return DispatchFloat(op, ctx, "x", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return Annotate(op, ctx,
                    LayerNormGrad<T>(ctx.inputs[0]->data<T>(), x.data<T>(), ctx.inputs[2]->data<T>(),
                                     ctx.inputs[3]->data<T>(), ctx.inputs[4]->data<T>(), rows, d,
                                     ctx.outputs[0]->data<T>(), ctx.outputs[1]->data<T>(), ctx.outputs[2]->data<T>(),
                                     ctx.stream));
  });
}

// ---- index checks ----

// The first of the n indices at `ids` (device memory) outside [0, limit): its position and value,
// or position -1 when all are in range. Skipped (-1) unless ctx.check_indices. SYNCHRONIZES
// ctx.stream (FindIndexOutOfRange reads its result back); the value is read only for a bad one.
struct BadIndex {
  int64_t position = -1;
  int64_t value = 0;
};
template <typename I>
absl::StatusOr<BadIndex> FindBadIndex(const CudaKernelContext& ctx, const I* ids, int64_t n, int64_t limit) {
  BadIndex bad;
  if (!ctx.check_indices || n == 0) return bad;
  void* scratch = nullptr;
  RETURN_IF_ERROR(CudaStatus(cudaMallocAsync(&scratch, sizeof(int64_t), ctx.stream),
                             "cudaMallocAsync(index check scratch)"));
  absl::StatusOr<int64_t> found =
      FindIndexOutOfRange<I>(ids, n, limit, static_cast<int64_t*>(scratch), ctx.stream);
  const absl::Status freed = CudaStatus(cudaFreeAsync(scratch, ctx.stream), "cudaFreeAsync(index check scratch)");
  if (!found.ok()) return found.status();
  RETURN_IF_ERROR(freed);
  bad.position = *found;
  if (bad.position >= 0) {  // the stream is idle (the check synchronized it): a plain copy
    I value{};
    RETURN_IF_ERROR(CudaStatus(cudaMemcpy(&value, ids + bad.position, sizeof(I), cudaMemcpyDeviceToHost),
                               "cudaMemcpy(the out-of-range index)"));
    bad.value = static_cast<int64_t>(value);
  }
  return bad;
}

// The CPU embedding kernels' error for an id outside [0, vocab) (core/ops/embedding_ops.cc).
template <typename I>
absl::Status CheckIds(const std::string& op, const CudaKernelContext& ctx, const I* ids, int64_t n, int64_t vocab) {
  const absl::StatusOr<BadIndex> bad = FindBadIndex<I>(ctx, ids, n, vocab);
  if (!bad.ok()) return Annotate(op, ctx, bad.status());
  if (bad->position < 0) return absl::OkStatus();
  return OpError(op, ctx, "id ", bad->value, " at position ", bad->position, " of ids is out of range [0, ", vocab,
                 ") (V = ", vocab, "); hint: check the tokenizer's vocabulary size against the table");
}

// The CPU cross-entropy kernels' error for a label outside [0, classes) (core/ops/loss_ops.cc).
template <typename I>
absl::Status CheckLabels(const std::string& op, const CudaKernelContext& ctx, const I* labels, int64_t n,
                         int64_t classes) {
  const absl::StatusOr<BadIndex> bad = FindBadIndex<I>(ctx, labels, n, classes);
  if (!bad.ok()) return Annotate(op, ctx, bad.status());
  if (bad->position < 0) return absl::OkStatus();
  return OpError(op, ctx, "label ", bad->value, " at position ", bad->position, " is out of range [0, ", classes,
                 ") (C = ", classes, " classes)");
}

// ---- embedding ----

// First row of the vocab range that tensor i of `shards` holds (0 for a whole table).
int64_t RowBegin(const std::vector<ShardInfo>& shards, int i) {
  return static_cast<int>(shards.size()) > i && !shards[i].offset.empty() ? shards[i].offset[0] : 0;
}

// Inputs (table[V or a vocab range, D], ids) -> y[ids..., D].
absl::Status EmbeddingKernel(const CudaKernelContext& ctx) {
  const std::string op = "embedding";
  RETURN_IF_ERROR(CheckArity(op, ctx, 2, 1));
  const Tensor& table = *ctx.inputs[0];
  const Tensor& ids = *ctx.inputs[1];
  Tensor& y = *ctx.outputs[0];
  if (table.shape().num_axes() != 2) {
    return OpError(op, ctx, "table must be a float32 or float64 [V, D] tensor, got ", table.desc().ToString());
  }
  std::vector<int64_t> y_dims = ids.shape().dims();
  y_dims.push_back(table.shape().dim(1));
  RETURN_IF_ERROR(CheckDesc(op, ctx, "output y", y, TensorDesc{table.dtype(), Shape(y_dims)}));
  const int64_t row_begin = RowBegin(ctx.input_shards, 0);
  // The logical V (a vocab shard holds rows [row_begin, row_begin + rows) of it), as on the CPU.
  const int64_t vocab = !ctx.input_shards.empty() && ctx.input_shards[0].logical_shape.num_axes() == 2
                            ? ctx.input_shards[0].logical_shape.dim(0)
                            : table.shape().dim(0);
  return DispatchFloat(op, ctx, "table", table.dtype(), [&](auto ftag) {
    using T = decltype(ftag);
    return DispatchIndex(op, ctx, "ids", ids.dtype(), [&](auto itag) -> absl::Status {
      using I = decltype(itag);
      RETURN_IF_ERROR(CheckIds<I>(op, ctx, ids.data<I>(), ids.elem_count(), vocab));
      return Annotate(op, ctx,
                      Embedding<T, I>(table.data<T>(), table.shape().dim(0), table.shape().dim(1), row_begin,
                                      ids.data<I>(), ids.elem_count(), y.data<T>(), ctx.stream));
    });
  });
}

// Inputs (dy[ids..., D], ids) {num_embeddings} -> dtable[V or a vocab range, D].
absl::Status EmbeddingGradKernel(const CudaKernelContext& ctx) {
  const std::string op = "embedding_grad";
  RETURN_IF_ERROR(CheckArity(op, ctx, 2, 1));
  const Tensor& dy = *ctx.inputs[0];
  const Tensor& ids = *ctx.inputs[1];
  Tensor& dtable = *ctx.outputs[0];
  const int64_t vocab = ctx.attrs.Int("num_embeddings");
  if (vocab < 0) return OpError(op, ctx, "num_embeddings must be >= 0, got ", vocab);
  if (dy.shape().num_axes() < 1 || RowShape(dy.shape()) != ids.shape()) {
    return OpError(op, ctx, "dy ", dy.desc().ToString(), " must be ids.shape + [D], but ids is ",
                   ids.desc().ToString());
  }
  const int64_t d = dy.shape().dim(dy.shape().num_axes() - 1);
  const int64_t rows = dtable.shape().num_axes() == 2 ? dtable.shape().dim(0) : -1;
  const int64_t row_begin = RowBegin(ctx.output_shards, 0);
  if (rows < 0 || dtable.dtype() != dy.dtype() || dtable.shape().dim(1) != d || row_begin < 0 ||
      row_begin + rows > vocab) {
    return OpError(op, ctx, "output ", dtable.desc().ToString(), " at row ", row_begin, " does not fit ",
                   DataTypeName(dy.dtype()), "[", vocab, ",", d, "]");
  }
  return DispatchFloat(op, ctx, "dy", dy.dtype(), [&](auto ftag) {
    using T = decltype(ftag);
    return DispatchIndex(op, ctx, "ids", ids.dtype(), [&](auto itag) -> absl::Status {
      using I = decltype(itag);
      RETURN_IF_ERROR(CheckIds<I>(op, ctx, ids.data<I>(), ids.elem_count(), vocab));
      return Annotate(op, ctx,
                      EmbeddingGrad<T, I>(dy.data<T>(), ids.data<I>(), ids.elem_count(), d, row_begin, rows,
                                          dtable.data<T>(), ctx.stream));
    });
  });
}

// ---- sparse_softmax_cross_entropy ----

absl::Status CheckLogitsLabels(const std::string& op, const CudaKernelContext& ctx, const Tensor& logits,
                               const Tensor& labels) {
  if (logits.shape().num_axes() < 1 || RowShape(logits.shape()) != labels.shape()) {
    return OpError(op, ctx, "labels ", labels.desc().ToString(), " must have the shape of logits ",
                   logits.desc().ToString(), " without its class axis");
  }
  return absl::OkStatus();
}

// N: the element count of the LOGICAL labels (input 1), so that shards' partial losses add up.
int64_t LogicalCount(const CudaKernelContext& ctx) {
  if (ctx.input_shards.size() > 1) return ctx.input_shards[1].logical_shape.elem_count();
  return ctx.inputs[1]->elem_count();
}

// Inputs (logits[..., C], labels[...]) -> loss[]. The row losses need a workspace: taken from the
// stream-ordered allocator (cudaMallocAsync / cudaFreeAsync on ctx.stream).
absl::Status LossKernel(const CudaKernelContext& ctx) {
  const std::string op = "sparse_softmax_cross_entropy";
  RETURN_IF_ERROR(CheckArity(op, ctx, 2, 1));
  const Tensor& logits = *ctx.inputs[0];
  const Tensor& labels = *ctx.inputs[1];
  Tensor& loss = *ctx.outputs[0];
  RETURN_IF_ERROR(CheckLogitsLabels(op, ctx, logits, labels));
  RETURN_IF_ERROR(CheckDesc(op, ctx, "output loss", loss, TensorDesc{logits.dtype(), Shape{}}));
  const int64_t rows = labels.elem_count();
  const int64_t classes = logits.shape().dim(logits.shape().num_axes() - 1);
  const int64_t n = LogicalCount(ctx);
  return DispatchFloat(op, ctx, "logits", logits.dtype(), [&](auto ftag) {
    using T = decltype(ftag);
    return DispatchIndex(op, ctx, "labels", labels.dtype(), [&](auto itag) -> absl::Status {
      using I = decltype(itag);
      RETURN_IF_ERROR(CheckLabels<I>(op, ctx, labels.data<I>(), rows, classes));
      void* workspace = nullptr;
      const int64_t bytes = CrossEntropyWorkspaceBytes(rows);
      if (bytes > 0) {
        RETURN_IF_ERROR(Annotate(op, ctx,
                                 CudaStatus(cudaMallocAsync(&workspace, static_cast<size_t>(bytes), ctx.stream),
                                            "cudaMallocAsync(cross-entropy workspace)")));
      }
      const absl::Status run =
          Annotate(op, ctx,
                   SparseSoftmaxCrossEntropy<T, I>(logits.data<T>(), labels.data<I>(), rows, classes, n,
                                                   loss.data<T>(), workspace, ctx.stream));
      if (workspace != nullptr) {
        const absl::Status freed = Annotate(
            op, ctx, CudaStatus(cudaFreeAsync(workspace, ctx.stream), "cudaFreeAsync(cross-entropy workspace)"));
        if (run.ok()) return freed;
      }
      return run;
    });
  });
}

// Inputs (logits, labels, dloss[]) -> dlogits.
absl::Status LossGradKernel(const CudaKernelContext& ctx) {
  const std::string op = "sparse_softmax_cross_entropy_grad";
  RETURN_IF_ERROR(CheckArity(op, ctx, 3, 1));
  const Tensor& logits = *ctx.inputs[0];
  const Tensor& labels = *ctx.inputs[1];
  const Tensor& dloss = *ctx.inputs[2];
  Tensor& dlogits = *ctx.outputs[0];
  RETURN_IF_ERROR(CheckLogitsLabels(op, ctx, logits, labels));
  RETURN_IF_ERROR(CheckDesc(op, ctx, "dloss", dloss, TensorDesc{logits.dtype(), Shape{}}));
  RETURN_IF_ERROR(CheckDesc(op, ctx, "output dlogits", dlogits, logits.desc()));
  const int64_t rows = labels.elem_count();
  const int64_t classes = logits.shape().dim(logits.shape().num_axes() - 1);
  const int64_t n = LogicalCount(ctx);
  return DispatchFloat(op, ctx, "logits", logits.dtype(), [&](auto ftag) {
    using T = decltype(ftag);
    return DispatchIndex(op, ctx, "labels", labels.dtype(), [&](auto itag) -> absl::Status {
      using I = decltype(itag);
      RETURN_IF_ERROR(CheckLabels<I>(op, ctx, labels.data<I>(), rows, classes));
      return Annotate(op, ctx,
                      SparseSoftmaxCrossEntropyGrad<T, I>(logits.data<T>(), labels.data<I>(), dloss.data<T>(), rows,
                                                          classes, n, dlogits.data<T>(), ctx.stream));
    });
  });
}

}  // namespace

absl::Status AddNnKernels(CudaKernelTable* table) {
  RETURN_IF_ERROR(table->Add("softmax", SoftmaxKernel("softmax", /*log=*/false)));
  RETURN_IF_ERROR(table->Add("log_softmax", SoftmaxKernel("log_softmax", /*log=*/true)));
  RETURN_IF_ERROR(table->Add("softmax_grad", SoftmaxGradKernel("softmax_grad", /*log=*/false)));
  RETURN_IF_ERROR(table->Add("log_softmax_grad", SoftmaxGradKernel("log_softmax_grad", /*log=*/true)));
  RETURN_IF_ERROR(table->Add("layer_norm", LayerNormKernel));
  RETURN_IF_ERROR(table->Add("layer_norm_grad", LayerNormGradKernel));
  RETURN_IF_ERROR(table->Add("embedding", EmbeddingKernel));
  RETURN_IF_ERROR(table->Add("embedding_grad", EmbeddingGradKernel));
  RETURN_IF_ERROR(table->Add("sparse_softmax_cross_entropy", LossKernel));
  RETURN_IF_ERROR(table->Add("sparse_softmax_cross_entropy_grad", LossGradKernel));
  return absl::OkStatus();
}

}  // namespace op_kernels_internal
}  // namespace cuda
}  // namespace oneflow_like
