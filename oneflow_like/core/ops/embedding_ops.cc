// Embedding family: a table lookup and its scatter-add gradient.
//
//   embedding(table[V, D], ids[...]) -> y[..., D],  y[p] = table[ids[p]]
//   embedding_grad(dy[..., D], ids[...]) {num_embeddings = V} -> dtable[V, D],
//     dtable = zeros; dtable[ids[p]] += dy[p] for every position p
// ids are int32 or int64; an id outside [0, V) is an InvalidArgument at run time that names
// the op, the id, its position and V.
//
// SBP, embedding (inputs table, ids; r = ids rank):
//   table:B,    ids:S(i)  -> y:S(i)     for i < r (positions are independent)
//   table:S(1), ids:B     -> y:S(r)     (the embedding dim is split)
//   table:S(0), ids:B     -> y:P        vocab-parallel (Megatron): a shard holding rows
//                                       [offset, offset + rows) looks up only ids in that range
//                                       and writes zeros elsewhere; the partial sums add up
//   table:P,    ids:B     -> y:P        (linear in the table)
//   table:B,    ids:B     -> y:B
// SBP, embedding_grad (inputs dy, ids):
//   dy:S(i), ids:S(i) -> dtable:P  for i < r (each shard scatters its positions)
//   dy:S(r), ids:B    -> dtable:S(1)
//   dy:B,    ids:B    -> dtable:S(0)  (each shard keeps the rows of its vocab range)
//   dy:P,    ids:B    -> dtable:P
//   dy:B,    ids:B    -> dtable:B
#include <algorithm>
#include <cstring>

#include "oneflow_like/core/ops/builtin_ops.h"
#include "oneflow_like/core/ops/op_util.h"
#include "oneflow_like/core/ops/row_math.h"

namespace oneflow_like {
namespace {

namespace rm = ops::row_math;
using ops::OpError;

constexpr char kEmbedding[] = "embedding";
constexpr char kEmbeddingGrad[] = "embedding_grad";

bool IsFloat(DataType t) { return t == DataType::kFloat32 || t == DataType::kFloat64; }
bool IsIndex(DataType t) { return t == DataType::kInt32 || t == DataType::kInt64; }

// The vocab rows [begin, end) that a shard of a [V, D] tensor holds, from its ShardInfo.
struct VocabRange {
  int64_t begin = 0;
  int64_t end = 0;
};
VocabRange RangeOf(const std::vector<ShardInfo>& shards, int64_t physical_rows) {
  const int64_t begin = !shards.empty() && !shards[0].offset.empty() ? shards[0].offset[0] : 0;
  return {begin, begin + physical_rows};
}

// InvalidArgument for the first id outside [0, vocab), or OK.
template <typename I>
absl::Status CheckIds(const char* op, const std::string& name, const I* ids, int64_t n, int64_t vocab) {
  for (int64_t p = 0; p < n; ++p) {
    if (ids[p] < 0 || ids[p] >= vocab) {
      return OpError(op, name, "id ", static_cast<int64_t>(ids[p]), " at position ", p, " of ids is out of range [0, ",
                     vocab, ") (V = ", vocab, "); hint: check the tokenizer's vocabulary size against the table");
    }
  }
  return absl::OkStatus();
}

// dst += src.
template <typename T>
inline void AddRow(const T* __restrict src, T* __restrict dst, int64_t n) {
  int64_t i = 0;
  for (; i + rm::kLanes <= n; i += rm::kLanes) {
    for (int k = 0; k < rm::kLanes; ++k) dst[i + k] += src[i + k];
  }
  for (; i < n; ++i) dst[i] += src[i];
}

// ---- embedding ----

absl::StatusOr<std::vector<TensorDesc>> InferEmbedding(const InferContext& ctx) {
  const TensorDesc& table = ctx.inputs[0];
  const TensorDesc& ids = ctx.inputs[1];
  if (!IsFloat(table.dtype) || table.shape.num_axes() != 2) {
    return OpError(kEmbedding, ctx.op_name, "table must be a float32 or float64 [V, D] tensor, got ",
                   table.ToString());
  }
  if (!IsIndex(ids.dtype)) {
    return OpError(kEmbedding, ctx.op_name, "ids must be int32 or int64, got ", ids.ToString());
  }
  std::vector<int64_t> dims = ids.shape.dims();
  dims.push_back(table.shape.dim(1));
  return std::vector<TensorDesc>{{table.dtype, Shape(std::move(dims))}};
}

absl::Status EmbeddingKernel(const KernelContext& ctx) {
  const Tensor& table = *ctx.inputs[0];
  const Tensor& ids = *ctx.inputs[1];
  Tensor& y = *ctx.outputs[0];
  const std::vector<TensorDesc> in = {table.desc(), ids.desc()};
  InferContext ictx{ctx.op_name, ctx.attrs, in};
  ASSIGN_OR_RETURN(std::vector<TensorDesc> want, InferEmbedding(ictx));
  if (y.desc() != want[0]) {
    return OpError(kEmbedding, ctx.op_name, "output ", y.desc().ToString(), " does not match ", want[0].ToString());
  }
  const int64_t vocab = !ctx.input_shards.empty() && ctx.input_shards[0].logical_shape.num_axes() == 2
                            ? ctx.input_shards[0].logical_shape.dim(0)
                            : table.shape().dim(0);
  const VocabRange range = RangeOf(ctx.input_shards, table.shape().dim(0));
  const int64_t row_bytes = table.shape().dim(1) * SizeOf(table.dtype());
  const char* src = static_cast<const char*>(table.raw_data());
  char* dst = static_cast<char*>(y.raw_data());
  return ops::DispatchIndex(ids.dtype(), kEmbedding, [&](auto tag) -> absl::Status {
    using I = decltype(tag);
    const I* id = ids.data<I>();
    const int64_t n = ids.elem_count();
    RETURN_IF_ERROR(CheckIds(kEmbedding, ctx.op_name, id, n, vocab));
    for (int64_t p = 0; p < n; ++p) {
      const int64_t v = static_cast<int64_t>(id[p]);
      if (v >= range.begin && v < range.end) {
        std::memcpy(dst + p * row_bytes, src + (v - range.begin) * row_bytes, row_bytes);
      } else {
        std::memset(dst + p * row_bytes, 0, row_bytes);  // another vocab shard holds this row
      }
    }
    return absl::OkStatus();
  });
}

std::vector<SbpSignature> EmbeddingSbp(const AttrMap&, const std::vector<TensorDesc>& in) {
  const int r = in[1].shape.num_axes();
  const Sbp b = Sbp::Broadcast(), p = Sbp::PartialSum();
  std::vector<SbpSignature> sigs;
  for (int i = 0; i < r; ++i) sigs.push_back({{b, Sbp::Split(i)}, {Sbp::Split(i)}});
  sigs.push_back({{Sbp::Split(1), b}, {Sbp::Split(r)}});
  sigs.push_back({{Sbp::Split(0), b}, {p}});
  sigs.push_back({{p, b}, {p}});
  sigs.push_back({{b, b}, {b}});
  return sigs;
}

absl::Status EmbeddingGradRule(GradContext* ctx) {
  if (!ctx->needs_input_grad(0)) return absl::OkStatus();  // ids have no gradient
  AttrMap attrs;
  attrs.Set("num_embeddings", ctx->input_desc(0).shape.dim(0));
  ASSIGN_OR_RETURN(std::string dtable, ctx->EmitOne(kEmbeddingGrad, {ctx->output_grad(0), ctx->input(1)}, attrs));
  ctx->SetInputGrad(0, dtable);
  return absl::OkStatus();
}

// ---- embedding_grad ----

absl::StatusOr<std::vector<TensorDesc>> InferEmbeddingGrad(const InferContext& ctx) {
  const TensorDesc& dy = ctx.inputs[0];
  const TensorDesc& ids = ctx.inputs[1];
  if (!IsFloat(dy.dtype) || dy.shape.num_axes() < 1) {
    return OpError(kEmbeddingGrad, ctx.op_name, "dy must be a float32 or float64 [..., D] tensor, got ",
                   dy.ToString());
  }
  if (!IsIndex(ids.dtype)) {
    return OpError(kEmbeddingGrad, ctx.op_name, "ids must be int32 or int64, got ", ids.ToString());
  }
  const std::vector<int64_t>& d = dy.shape.dims();
  if (Shape(std::vector<int64_t>(d.begin(), d.end() - 1)) != ids.shape) {
    return OpError(kEmbeddingGrad, ctx.op_name, "dy ", dy.ToString(), " must be ids.shape + [D], but ids is ",
                   ids.ToString());
  }
  const int64_t vocab = ctx.attrs.Int("num_embeddings");
  if (vocab < 0) {
    return OpError(kEmbeddingGrad, ctx.op_name, "num_embeddings must be >= 0, got ", vocab);
  }
  return std::vector<TensorDesc>{{dy.dtype, Shape{vocab, d.back()}}};
}

absl::Status EmbeddingGradKernel(const KernelContext& ctx) {
  const Tensor& dy = *ctx.inputs[0];
  const Tensor& ids = *ctx.inputs[1];
  Tensor& dtable = *ctx.outputs[0];
  const int64_t vocab = ctx.attrs.Int("num_embeddings");
  // The physical output may hold a vocab range (S(0)) or a column range (S(1)) of [V, D].
  const std::vector<TensorDesc> in = {dy.desc(), ids.desc()};
  InferContext ictx{ctx.op_name, ctx.attrs, in};
  ASSIGN_OR_RETURN(std::vector<TensorDesc> want, InferEmbeddingGrad(ictx));
  const int64_t rows = dtable.shape().num_axes() == 2 ? dtable.shape().dim(0) : -1;
  if (rows < 0 || dtable.dtype() != want[0].dtype || dtable.shape().dim(1) != want[0].shape.dim(1) || rows > vocab) {
    return OpError(kEmbeddingGrad, ctx.op_name, "output ", dtable.desc().ToString(), " does not fit ",
                   want[0].ToString());
  }
  const VocabRange range = RangeOf(ctx.output_shards, rows);
  const int64_t d = dy.shape().dim(dy.shape().num_axes() - 1);
  return ops::DispatchFloat(dy.dtype(), kEmbeddingGrad, [&](auto ftag) {
    using T = decltype(ftag);
    return ops::DispatchIndex(ids.dtype(), kEmbeddingGrad, [&](auto itag) -> absl::Status {
      using I = decltype(itag);
      const I* id = ids.data<I>();
      const int64_t n = ids.elem_count();
      RETURN_IF_ERROR(CheckIds(kEmbeddingGrad, ctx.op_name, id, n, vocab));
      const T* g = dy.data<T>();
      T* out = dtable.data<T>();
      std::fill(out, out + dtable.elem_count(), T(0));
      for (int64_t p = 0; p < n; ++p) {
        const int64_t v = static_cast<int64_t>(id[p]);
        if (v >= range.begin && v < range.end) AddRow(g + p * d, out + (v - range.begin) * d, d);
      }
      return absl::OkStatus();
    });
  });
}

std::vector<SbpSignature> EmbeddingGradSbp(const AttrMap&, const std::vector<TensorDesc>& in) {
  const int r = in[1].shape.num_axes();
  const Sbp b = Sbp::Broadcast(), p = Sbp::PartialSum();
  std::vector<SbpSignature> sigs;
  for (int i = 0; i < r; ++i) sigs.push_back({{Sbp::Split(i), Sbp::Split(i)}, {p}});
  sigs.push_back({{Sbp::Split(r), b}, {Sbp::Split(1)}});
  sigs.push_back({{b, b}, {Sbp::Split(0)}});
  sigs.push_back({{p, b}, {p}});
  sigs.push_back({{b, b}, {b}});
  return sigs;
}

}  // namespace

absl::Status RegisterEmbeddingOps(OpRegistry* registry) {
  OpDef fwd;
  fwd.name = kEmbedding;
  fwd.doc = "looks up rows of table[V, D] by integer ids: y[..., :] = table[ids[...], :]";
  fwd.inputs = {"table", "ids"};
  fwd.outputs = {"y"};
  fwd.infer = InferEmbedding;
  fwd.sbp = EmbeddingSbp;
  fwd.grad = EmbeddingGradRule;
  fwd.cost = [](const AttrMap&, const std::vector<TensorDesc>& in, const std::vector<TensorDesc>& out) {
    // Reads one table row per id and writes it: the table itself is not streamed.
    return OpCost{0, static_cast<double>(in[1].byte_size()) + 2.0 * ops::TotalBytes(out)};
  };
  fwd.cpu_kernel = EmbeddingKernel;
  RETURN_IF_ERROR(registry->Register(std::move(fwd)));

  OpDef bwd;
  bwd.name = kEmbeddingGrad;
  bwd.doc = "scatter-add of dy rows into zeros[num_embeddings, D] at ids (the gradient of embedding)";
  bwd.inputs = {"dy", "ids"};
  bwd.outputs = {"dtable"};
  bwd.attrs = {{"num_embeddings", AttrType::kInt, std::nullopt, "V, the number of table rows"}};
  bwd.infer = InferEmbeddingGrad;
  bwd.sbp = EmbeddingGradSbp;
  bwd.cost = [](const AttrMap&, const std::vector<TensorDesc>& in, const std::vector<TensorDesc>& out) {
    return OpCost{static_cast<double>(in[0].shape.elem_count()), ops::TotalBytes(in) + 2.0 * ops::TotalBytes(out)};
  };
  bwd.cpu_kernel = EmbeddingGradKernel;
  return registry->Register(std::move(bwd));
}

}  // namespace oneflow_like
