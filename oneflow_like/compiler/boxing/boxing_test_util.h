// Test helpers for the boxing planner: request construction from text and the round trip
// "shard a random tensor -> simulate the plan -> assemble" against the original tensor.
#ifndef ONEFLOW_LIKE_COMPILER_BOXING_BOXING_TEST_UTIL_H_
#define ONEFLOW_LIKE_COMPILER_BOXING_BOXING_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "oneflow_like/compiler/boxing/boxing.h"
#include "oneflow_like/compiler/boxing/boxing_sim.h"
#include "oneflow_like/core/shard_simulator.h"

namespace oneflow_like {
namespace compiler {
namespace testing_util {

// E.g. MakeRequest("[7,5]", "cpu:[0,1,2,3]", "S(0)", "cpu:[0,1,2,3]", "B"). CHECK-fails on
// unparsable text (a test bug), not on an invalid layout (that is for the planner to reject).
inline BoxingRequest MakeRequest(const std::string& shape, const std::string& src_placement,
                                 const std::string& src_sbp, const std::string& dst_placement,
                                 const std::string& dst_sbp, DataType dtype = DataType::kFloat32) {
  BoxingRequest r;
  r.desc = TensorDesc{dtype, Shape::Parse(shape).value()};
  r.src_placement = Placement::Parse(src_placement).value();
  r.src_sbp = NdSbp::Parse(src_sbp).value();
  r.dst_placement = Placement::Parse(dst_placement).value();
  r.dst_sbp = NdSbp::Parse(dst_sbp).value();
  return r;
}

// Deterministic values k / 16 with k in [-800, 800] (exact in float32).
inline Tensor RandomTensor(DataType dtype, const Shape& shape, uint64_t seed) {
  Tensor t(dtype, shape);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t e = 0; e < t.elem_count(); ++e) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    t.SetFromDouble(e, static_cast<double>(static_cast<int64_t>((s >> 33) % 1601) - 800) / 16.0);
  }
  return t;
}

// Shards a random tensor by the plan's source layout, runs the plan, assembles the result by
// the destination layout and compares with the original: bit-exact if tolerance == 0, else
// |got - want| <= tolerance * max(1, |want|).
inline ::testing::AssertionResult RoundTrips(const BoxingPlan& plan, double tolerance, uint64_t seed = 1) {
  const Tensor x = RandomTensor(plan.desc.dtype, plan.desc.shape, seed);
  absl::StatusOr<std::vector<Tensor>> src = ShardTensor(x, plan.src_sbp, plan.src_placement.hierarchy(), seed + 1);
  if (!src.ok()) return ::testing::AssertionFailure() << "ShardTensor: " << src.status();
  absl::StatusOr<std::vector<Tensor>> dst = SimulateBoxing(plan, *src);
  if (!dst.ok()) return ::testing::AssertionFailure() << "SimulateBoxing: " << dst.status() << "\n" << plan.ToString();
  absl::StatusOr<Tensor> y =
      AssembleTensor(*dst, plan.desc.shape, plan.dst_sbp, plan.dst_placement.hierarchy(), tolerance * 64);
  if (!y.ok()) return ::testing::AssertionFailure() << "AssembleTensor: " << y.status() << "\n" << plan.ToString();
  for (int64_t e = 0; e < x.elem_count(); ++e) {
    const double want = x.GetAsDouble(e), got = y->GetAsDouble(e);
    const bool ok = tolerance == 0 ? want == got : std::fabs(got - want) <= tolerance * std::max(1.0, std::fabs(want));
    if (!ok) {
      return ::testing::AssertionFailure() << "element " << e << ": got " << got << ", want " << want << "\n"
                                           << plan.ToString();
    }
  }
  return ::testing::AssertionSuccess();
}

// Bytes of `region` in float32.
inline int64_t F32Bytes(const Region& r) { return r.elem_count() * 4; }

}  // namespace testing_util
}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_BOXING_BOXING_TEST_UTIL_H_
