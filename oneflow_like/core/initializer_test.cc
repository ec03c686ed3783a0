// InitializeShard: every kind, shard semantics (a shard equals the slice of the whole), and
// errors. Portable values are checked against numbers of tools/bench/peers/torch_gpt.py (see
// random_test.cc for the producing command).
#include "oneflow_like/core/initializer.h"

#include <cmath>
#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "oneflow_like/core/random.h"
#include "oneflow_like/core/shard_simulator.h"

namespace oneflow_like {
namespace {

InitializerProto Portable(double stddev, uint64_t stream, uint64_t seed) {
  InitializerProto init;
  init.set_kind(InitializerProto::PORTABLE_UNIFORM);
  init.set_stddev(stddev);
  init.set_stream(stream);
  init.set_portable_seed(seed);
  return init;
}

TEST(InitializerTest, PortableWholeTensorMatchesTorchGptPy) {
  // torch_gpt.py init_weights(seed=0): parameter 5, elements 0..2 and 99999 (row-major).
  Tensor w(DataType::kFloat32, Shape{1000, 100});
  InitializerProto init = Portable(0.02, 5, 0);
  init.set_seed(12345);  // the Philox key is ignored by this kind
  ASSERT_TRUE(InitializeShard(init, w.shape(), {0, 0}, &w).ok());
  EXPECT_EQ(w.data<float>()[0], 0.014666933566331863f);
  EXPECT_EQ(w.data<float>()[1], -0.004051862750202417f);
  EXPECT_EQ(w.data<float>()[2], -0.0276007279753685f);
  EXPECT_EQ(w.data<float>()[99999], 0.03112732619047165f);
  // Uniform with std 0.02: bounded by 0.02 sqrt(3), sample std near 0.02.
  double sum = 0, sum_sq = 0;
  for (int64_t i = 0; i < w.elem_count(); ++i) {
    const double v = w.data<float>()[i];
    ASSERT_LE(std::abs(v), 0.02 * std::sqrt(3.0) + 1e-9);
    sum += v;
    sum_sq += v * v;
  }
  const double n = static_cast<double>(w.elem_count());
  EXPECT_NEAR(sum / n, 0.0, 3e-4);
  EXPECT_NEAR(std::sqrt(sum_sq / n), 0.02, 3e-4);
}

TEST(InitializerTest, ShardsAreSlicesOfTheWholeForEveryKind) {
  const Shape logical{7, 10};
  InitializerProto normal;
  normal.set_kind(InitializerProto::NORMAL);
  normal.set_stddev(0.5);
  normal.set_seed(9);
  InitializerProto constant;
  constant.set_kind(InitializerProto::CONSTANT);
  constant.set_value(2.5);
  for (const InitializerProto& init : {Portable(0.02, 3, 0), Portable(1.0, 0, 7), normal, constant}) {
    Tensor whole(DataType::kFloat32, logical);
    ASSERT_TRUE(InitializeShard(init, logical, {0, 0}, &whole).ok());
    for (const char* text : {"S(0)", "S(1)"}) {
      const NdSbp nd = NdSbp::Parse(text).value();
      for (int64_t d = 0; d < 3; ++d) {
        const ShardSlice slice = GetShardSlice(logical, nd, {3}, d);
        Tensor shard(DataType::kFloat32, slice.shape);
        ASSERT_TRUE(InitializeShard(init, logical, slice.offset, &shard).ok());
        Tensor expected(DataType::kFloat32, slice.shape);
        CopyBlockOut(whole, slice.offset, &expected);
        EXPECT_EQ(std::memcmp(shard.raw_data(), expected.raw_data(), static_cast<size_t>(shard.byte_size())), 0)
            << init.ShortDebugString() << " " << text << " device " << d;
      }
    }
  }
}

TEST(InitializerTest, DeterministicKindsAndErrors) {
  EXPECT_TRUE(IsDeterministicInGraph(Portable(0.02, 1, 0)));
  EXPECT_TRUE(IsDeterministicInGraph(InitializerProto()));  // zeros
  InitializerProto uniform;
  uniform.set_kind(InitializerProto::UNIFORM);
  EXPECT_FALSE(IsDeterministicInGraph(uniform));

  Tensor ints(DataType::kInt64, Shape{4});
  absl::Status s = InitializeShard(Portable(0.02, 1, 0), ints.shape(), {0}, &ints);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("int64"), std::string::npos) << s;
  Tensor shard(DataType::kFloat32, Shape{3, 2});
  s = InitializeShard(Portable(0.02, 1, 0), Shape{4, 2}, {2, 0}, &shard);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("does not fit"), std::string::npos) << s;
}

}  // namespace
}  // namespace oneflow_like
