// Random kernels (random_kernels.h): core/random.cc's Philox-4x32-10 on the device, one thread
// per physical element, which maps its index to the logical index of its shard.
#include "oneflow_like/core/cuda/random_kernels.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/core/cuda/cuda_status.h"
#include "oneflow_like/core/cuda/dtype_convert.cuh"
#include "oneflow_like/core/cuda/kernel_util.cuh"

namespace oneflow_like {
namespace cuda {
namespace {

using internal::DispatchDtype;
using internal::FromDouble;
using internal::GridFor;
using internal::kMaxDims;
using internal::kThreads;

constexpr double k2Pow24Inv = 1.0 / 16777216.0;
constexpr double kPi = 3.14159265358979323846;  // M_PI

// Physical index -> logical index: physical dims, and the logical stride and offset term.
struct LogicalMap {
  int rank = 0;
  int64_t dims[kMaxDims];
  int64_t logical_strides[kMaxDims];
  int64_t base = 0;  // sum of offset[a] * logical_strides[a]

  __device__ uint64_t operator()(int64_t i) const {
    int64_t l = base;
    for (int a = rank - 1; a >= 0; --a) {
      l += (i % dims[a]) * logical_strides[a];
      i /= dims[a];
    }
    return static_cast<uint64_t>(l);
  }
};

// core/random.cc: Philox4x32(counter_lo = index, counter_hi = 0, key = seed), words 0 and 1.
__device__ void Philox(uint64_t index, uint64_t seed, uint32_t* r0, uint32_t* r1) {
  uint32_t c0 = static_cast<uint32_t>(index), c1 = static_cast<uint32_t>(index >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  *r0 = c0;
  *r1 = c1;
}

__device__ double ToUnit(uint32_t word) { return static_cast<double>(word >> 8) * k2Pow24Inv; }

__device__ double PhiloxUniform(uint64_t seed, uint64_t index) {
  uint32_t r0, r1;
  Philox(index, seed, &r0, &r1);
  return ToUnit(r0);
}

__device__ double PhiloxNormal(uint64_t seed, uint64_t index) {
  uint32_t r0, r1;
  Philox(index, seed, &r0, &r1);
  const double u1 = 1.0 - ToUnit(r0);
  const double u2 = ToUnit(r1);
  return sqrt(-2.0 * log(u1)) * cos(2.0 * kPi * u2);
}

// a + b * c rounded twice, as the CPU computes it (core/random.cc): nvcc contracts a plain
// `a + b * c` into one fma (rounded once), which differs in the last bit wherever b * c is not
// exact (e.g. low = -0.1, high = 0.1). The _rn intrinsics are never contracted. Every dtype goes
// through double here (FromDouble<T> rounds to T afterwards), as on the CPU.
__device__ __forceinline__ double AddMul(double a, double b, double c) { return __dadd_rn(a, __dmul_rn(b, c)); }

template <typename T>
__global__ void UniformKernel(LogicalMap map, uint64_t seed, double low, double high, T* y, int64_t n) {
  OL_GRID_STRIDE_LOOP(i, n) { y[i] = FromDouble<T>(AddMul(low, high - low, PhiloxUniform(seed, map(i)))); }
}

template <typename T>
__global__ void NormalKernel(LogicalMap map, uint64_t seed, double mean, double stddev, T* y, int64_t n) {
  OL_GRID_STRIDE_LOOP(i, n) { y[i] = FromDouble<T>(AddMul(mean, stddev, PhiloxNormal(seed, map(i)))); }
}

template <typename T>
__global__ void DropoutKernel(LogicalMap map, uint64_t seed, double p, T scale, const T* x, T* y, int64_t n) {
  OL_GRID_STRIDE_LOOP(i, n) { y[i] = PhiloxUniform(seed, map(i)) >= p ? x[i] * scale : T(0); }
}

std::string Dims(const std::vector<int64_t>& d) { return absl::StrCat("[", absl::StrJoin(d, ","), "]"); }

absl::Status MakeMap(const ShardPosition& shard, LogicalMap* map, int64_t* count) {
  const std::vector<int64_t>& phys = shard.physical_dims;
  const std::vector<int64_t>& logical = shard.logical_dims.empty() ? phys : shard.logical_dims;
  const std::vector<int64_t> offset =
      shard.offset.empty() ? std::vector<int64_t>(phys.size(), 0) : shard.offset;
  const int rank = static_cast<int>(phys.size());
  bool fits = logical.size() == phys.size() && offset.size() == phys.size() && rank <= kMaxDims;
  for (int a = 0; fits && a < rank; ++a) fits = offset[a] >= 0 && offset[a] + phys[a] <= logical[a];
  if (!fits) {
    return absl::InvalidArgumentError(absl::StrCat("cuda random: shard ", Dims(phys), " at ", Dims(offset),
                                                   " does not fit the logical ", Dims(logical), " (at most ",
                                                   kMaxDims, " axes)"));
  }
  map->rank = rank;
  map->base = 0;
  *count = 1;
  int64_t stride = 1;
  for (int a = rank - 1; a >= 0; --a) {
    map->dims[a] = phys[a];
    map->logical_strides[a] = stride;
    map->base += offset[a] * stride;
    stride *= logical[a];
    *count *= phys[a];
  }
  return absl::OkStatus();
}

bool IsFloating(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kBFloat16 || t == DataType::kFloat16;
}

template <typename Launch>
absl::Status Generate(const char* what, DataType dtype, const ShardPosition& shard, Launch&& launch) {
  if (!IsFloating(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("cuda ", what, ": dtype ", DataTypeName(dtype),
                                                   " is not floating point"));
  }
  LogicalMap map;
  int64_t n = 0;
  if (absl::Status s = MakeMap(shard, &map, &n); !s.ok()) return s;
  if (n == 0) return absl::OkStatus();
  DispatchDtype(dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (!std::is_integral_v<T>) launch(T{}, map, n);
  });
  return CudaLaunchStatus(what);
}

}  // namespace

absl::Status RandomUniform(DataType dtype, const ShardPosition& shard, uint64_t seed, double low, double high,
                           void* y, cudaStream_t stream) {
  return Generate("random_uniform", dtype, shard, [&](auto t, const LogicalMap& map, int64_t n) {
    using T = decltype(t);
    ClearLastError();
    UniformKernel<T><<<GridFor(n), kThreads, 0, stream>>>(map, seed, low, high, static_cast<T*>(y), n);
  });
}

absl::Status RandomNormal(DataType dtype, const ShardPosition& shard, uint64_t seed, double mean, double stddev,
                          void* y, cudaStream_t stream) {
  return Generate("random_normal", dtype, shard, [&](auto t, const LogicalMap& map, int64_t n) {
    using T = decltype(t);
    ClearLastError();
    NormalKernel<T><<<GridFor(n), kThreads, 0, stream>>>(map, seed, mean, stddev, static_cast<T*>(y), n);
  });
}

template <typename T>
absl::Status Dropout(const T* x, const ShardPosition& shard, double p, uint64_t seed, T* y, cudaStream_t stream) {
  if (!(p >= 0.0 && p < 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("cuda dropout: p = ", p, " is out of range [0, 1)"));
  }
  LogicalMap map;
  int64_t n = 0;
  if (absl::Status s = MakeMap(shard, &map, &n); !s.ok()) return s;
  if (n == 0) return absl::OkStatus();
  ClearLastError();
  DropoutKernel<T><<<GridFor(n), kThreads, 0, stream>>>(map, seed, p, static_cast<T>(1.0 / (1.0 - p)), x, y, n);
  return CudaLaunchStatus("dropout");
}

template absl::Status Dropout<float>(const float*, const ShardPosition&, double, uint64_t, float*, cudaStream_t);
template absl::Status Dropout<double>(const double*, const ShardPosition&, double, uint64_t, double*, cudaStream_t);

}  // namespace cuda
}  // namespace oneflow_like
