#include "oneflow_like/core/shard_simulator.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace oneflow_like {
namespace {

// SplitMix64: a tiny deterministic stream for the pseudo-random partial-sum parts.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)

 private:
  uint64_t state_;
};

std::string ShapeOf(const std::vector<int64_t>& dims) { return absl::StrCat("[", absl::StrJoin(dims, ","), "]"); }

// Copies a block between `big` and `block` (both row-major, same dtype); `to_block` picks the
// direction. The block sits at `offset` in `big`.
void CopyBlock(const Tensor& big_in, const std::vector<int64_t>& offset, const Tensor& block_in, bool to_block,
               void* dst) {
  CHECK(big_in.dtype() == block_in.dtype())
      << DataTypeName(big_in.dtype()) << " vs " << DataTypeName(block_in.dtype());
  const Shape& big = big_in.shape();
  const Shape& blk = block_in.shape();
  const int n = big.num_axes();
  CHECK_EQ(n, blk.num_axes()) << big.ToString() << " vs block " << blk.ToString();
  CHECK_EQ(static_cast<int>(offset.size()), n) << "offset " << ShapeOf(offset) << " for " << big.ToString();
  for (int a = 0; a < n; ++a) {
    CHECK(offset[a] >= 0 && offset[a] + blk.dim(a) <= big.dim(a))
        << "block " << blk.ToString() << " at " << ShapeOf(offset) << " exceeds " << big.ToString();
  }
  const int64_t count = blk.elem_count();
  if (count == 0) return;
  const size_t elem = static_cast<size_t>(SizeOf(big_in.dtype()));
  const size_t row_bytes = n == 0 ? elem : static_cast<size_t>(blk.dim(n - 1)) * elem;
  const int64_t rows = n == 0 ? 1 : count / blk.dim(n - 1);
  const std::vector<int64_t> strides = big.Strides();
  char* big_ptr = static_cast<char*>(to_block ? const_cast<void*>(big_in.raw_data()) : dst);
  char* blk_ptr = static_cast<char*>(to_block ? dst : const_cast<void*>(block_in.raw_data()));
  std::vector<int64_t> idx(n, 0);  // index of the current row within the block (last axis 0)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t big_index = 0;
    for (int a = 0; a < n; ++a) big_index += (offset[a] + idx[a]) * strides[a];
    char* b = big_ptr + big_index * elem;
    char* k = blk_ptr + r * row_bytes;
    if (to_block) {
      std::memcpy(k, b, row_bytes);
    } else {
      std::memcpy(b, k, row_bytes);
    }
    for (int a = n - 2; a >= 0; --a) {
      if (++idx[a] < blk.dim(a)) break;
      idx[a] = 0;
    }
  }
}

// Splits every element of `whole` into `parts` tensors that sum to it (see the header).
// Floating types: part k = round(r * u) with u in [0.5, 1.5) and r the remainder so far, so
// r - part is exact in the storage type (Sterbenz) and summing the parts from the last to the
// first (as AssembleTensor does) reproduces `whole` bit for bit.
std::vector<Tensor> PartialParts(const Tensor& whole, int64_t parts, SplitMix64* rng) {
  std::vector<Tensor> out;
  for (int64_t k = 0; k < parts; ++k) out.emplace_back(whole.desc());
  const int64_t n = whole.elem_count();
  if (!IsFloatingPoint(whole.dtype())) {
    if (n > 0) std::memcpy(out[0].raw_data(), whole.raw_data(), static_cast<size_t>(whole.byte_size()));
    return out;
  }
  for (int64_t e = 0; e < n; ++e) {
    double r = whole.GetAsDouble(e);
    if (!std::isfinite(r)) {
      out[parts - 1].SetFromDouble(e, r);
      continue;
    }
    for (int64_t k = 0; k + 1 < parts; ++k) {
      out[k].SetFromDouble(e, r * (0.5 + rng->Uniform()));
      double p = out[k].GetAsDouble(e);  // rounded to the storage type
      if (!std::isfinite(p)) {            // overflow near the type's max: take all of r
        out[k].SetFromDouble(e, r);
        p = r;
      }
      r -= p;  // exact
    }
    out[parts - 1].SetFromDouble(e, r);
  }
  return out;
}

// Sums `parts` (same shape and dtype) from the last to the first.
Tensor SumParts(const std::vector<Tensor>& parts) {
  Tensor sum(parts[0].desc());
  const int64_t n = sum.elem_count();
  switch (sum.dtype()) {
    case DataType::kInt32:
    case DataType::kInt64:
      for (int64_t e = 0; e < n; ++e) {
        int64_t acc = 0;
        for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
          acc += it->dtype() == DataType::kInt32 ? it->data<int32_t>()[e] : it->data<int64_t>()[e];
        }
        if (sum.dtype() == DataType::kInt32) {
          sum.data<int32_t>()[e] = static_cast<int32_t>(acc);
        } else {
          sum.data<int64_t>()[e] = acc;
        }
      }
      break;
    case DataType::kBool:
      for (int64_t e = 0; e < n; ++e) {
        bool any = false;
        for (const Tensor& p : parts) any = any || p.data<bool>()[e];
        sum.data<bool>()[e] = any;
      }
      break;
    default:
      for (int64_t e = 0; e < n; ++e) {
        double acc = 0;
        for (auto it = parts.rbegin(); it != parts.rend(); ++it) acc += it->GetAsDouble(e);
        sum.SetFromDouble(e, acc);
      }
      break;
  }
  return sum;
}

// True if element e of a and b agree within `tolerance` (exactly for integers; NaN == NaN).
bool ElementsAgree(const Tensor& a, const Tensor& b, int64_t e, double tolerance) {
  switch (a.dtype()) {
    case DataType::kInt64: {
      int64_t x = a.data<int64_t>()[e], y = b.data<int64_t>()[e];
      return x == y || std::fabs(static_cast<double>(x) - static_cast<double>(y)) <= tolerance;
    }
    default: {
      double x = a.GetAsDouble(e), y = b.GetAsDouble(e);
      if (std::isnan(x) && std::isnan(y)) return true;
      return x == y || std::fabs(x - y) <= tolerance;
    }
  }
}

std::vector<int64_t> MultiIndex(const Shape& shape, int64_t e) {
  std::vector<int64_t> idx(shape.num_axes());
  for (int a = shape.num_axes() - 1; a >= 0; --a) {
    idx[a] = shape.dim(a) == 0 ? 0 : e % shape.dim(a);
    e = shape.dim(a) == 0 ? 0 : e / shape.dim(a);
  }
  return idx;
}

absl::Status ValidateLayout(const Shape& logical_shape, const NdSbp& nd_sbp, const std::vector<int64_t>& hierarchy) {
  std::vector<Rank> ranks;
  int64_t n = 1;
  for (int64_t h : hierarchy) n *= h;
  for (int64_t i = 0; i < n && n > 0; ++i) ranks.push_back(Rank(static_cast<int32_t>(i)));
  ASSIGN_OR_RETURN(Placement placement, Placement::Create(DeviceType::kCpu, ranks, hierarchy));
  return ValidateNdSbp(nd_sbp, logical_shape, placement, /*allow_empty_shards=*/true);
}

struct Sharder {
  const NdSbp& nd_sbp;
  const std::vector<int64_t>& hierarchy;
  SplitMix64 rng;
  std::vector<Tensor> out;

  void Run(const Tensor& t, size_t level) {
    if (level == hierarchy.size()) {
      out.push_back(t);
      return;
    }
    const Sbp& s = nd_sbp[static_cast<int>(level)];
    const int64_t h = hierarchy[level];
    if (s.is_split()) {
      for (int64_t k = 0; k < h; ++k) {
        Range r = BalancedSplit(t.shape().dim(s.axis()), h, k);
        Shape part_shape = t.shape();
        part_shape.set_dim(s.axis(), r.size());
        std::vector<int64_t> offset(t.shape().num_axes(), 0);
        offset[s.axis()] = r.begin;
        Tensor part(t.dtype(), part_shape);
        CopyBlockOut(t, offset, &part);
        Run(part, level + 1);
      }
    } else if (s.is_broadcast()) {
      for (int64_t k = 0; k < h; ++k) Run(t.Clone(), level + 1);
    } else {
      for (const Tensor& part : PartialParts(t, h, &rng)) Run(part, level + 1);
    }
  }
};

struct Assembler {
  const std::vector<Tensor>& shards;
  const NdSbp& nd_sbp;
  const std::vector<int64_t>& hierarchy;
  double tolerance;

  // Devices under mesh prefix `prefix` (an index into the first `level` axes): the first is
  // prefix * devices_per_prefix.
  int64_t DevicesBelow(size_t level) const {
    int64_t n = 1;
    for (size_t i = level; i < hierarchy.size(); ++i) n *= hierarchy[i];
    return n;
  }

  absl::StatusOr<Tensor> Run(size_t level, int64_t prefix) const {
    if (level == hierarchy.size()) return shards[prefix];
    const Sbp& s = nd_sbp[static_cast<int>(level)];
    const int64_t h = hierarchy[level];
    std::vector<Tensor> children;
    for (int64_t k = 0; k < h; ++k) {
      ASSIGN_OR_RETURN(Tensor c, Run(level + 1, prefix * h + k));
      children.push_back(std::move(c));
    }
    if (s.is_split()) {
      Shape shape = children[0].shape();
      int64_t total = 0;
      for (const Tensor& c : children) total += c.shape().dim(s.axis());
      shape.set_dim(s.axis(), total);
      Tensor whole(children[0].dtype(), shape);
      std::vector<int64_t> offset(shape.num_axes(), 0);
      for (const Tensor& c : children) {
        CopyBlockIn(c, offset, &whole);
        offset[s.axis()] += c.shape().dim(s.axis());
      }
      return whole;
    }
    if (s.is_partial_sum()) return SumParts(children);
    const int64_t per_child = DevicesBelow(level + 1);
    for (int64_t k = 1; k < h; ++k) {
      for (int64_t e = 0; e < children[0].elem_count(); ++e) {
        if (ElementsAgree(children[0], children[k], e, tolerance)) continue;
        const int64_t d0 = (prefix * h) * per_child;
        const int64_t dk = (prefix * h + k) * per_child;
        return absl::InvalidArgumentError(absl::StrCat(
            "broadcast copies disagree under ", nd_sbp.ToString(), " on hierarchy ", ShapeOf(hierarchy),
            ": mesh axis ", level, " is B but device ", d0, " and device ", dk, " differ at element ", e,
            " (index ", ShapeOf(MultiIndex(children[0].shape(), e)), "): ", children[0].GetAsDouble(e), " vs ",
            children[k].GetAsDouble(e), " (tolerance ", tolerance, ")"));
      }
    }
    return children[0];
  }
};

}  // namespace

void CopyBlockOut(const Tensor& src, const std::vector<int64_t>& offset, Tensor* out) {
  CopyBlock(src, offset, *out, /*to_block=*/true, out->raw_data());
}

void CopyBlockIn(const Tensor& block, const std::vector<int64_t>& offset, Tensor* dst) {
  CopyBlock(*dst, offset, block, /*to_block=*/false, dst->raw_data());
}

absl::StatusOr<std::vector<Tensor>> ShardTensor(const Tensor& logical, const NdSbp& nd_sbp,
                                                const std::vector<int64_t>& hierarchy, uint64_t seed) {
  RETURN_IF_ERROR(ValidateLayout(logical.shape(), nd_sbp, hierarchy));
  Sharder sharder{nd_sbp, hierarchy, SplitMix64(seed), {}};
  sharder.Run(logical, 0);
  return std::move(sharder.out);
}

absl::StatusOr<Tensor> AssembleTensor(const std::vector<Tensor>& shards, const Shape& logical_shape,
                                      const NdSbp& nd_sbp, const std::vector<int64_t>& hierarchy,
                                      double broadcast_tolerance) {
  RETURN_IF_ERROR(ValidateLayout(logical_shape, nd_sbp, hierarchy));
  int64_t devices = 1;
  for (int64_t h : hierarchy) devices *= h;
  if (static_cast<int64_t>(shards.size()) != devices) {
    return absl::InvalidArgumentError(absl::StrCat("AssembleTensor: got ", shards.size(), " shards for ", devices,
                                                   " devices (hierarchy ", ShapeOf(hierarchy), ")"));
  }
  for (int64_t d = 0; d < devices; ++d) {
    Shape expected = PhysicalShape(logical_shape, nd_sbp, hierarchy, d);
    if (shards[d].shape() != expected || shards[d].dtype() != shards[0].dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "AssembleTensor: shard of device ", d, " is ", shards[d].desc().ToString(), " but ", nd_sbp.ToString(),
          " of logical shape ", logical_shape.ToString(), " on hierarchy ", ShapeOf(hierarchy), " needs ",
          DataTypeName(shards[0].dtype()), expected.ToString()));
    }
  }
  Assembler assembler{shards, nd_sbp, hierarchy, broadcast_tolerance};
  ASSIGN_OR_RETURN(Tensor whole, assembler.Run(0, 0));
  // A broadcast/leaf result may share a shard's buffer; hand back an independent tensor.
  return whole.Clone();
}

}  // namespace oneflow_like
