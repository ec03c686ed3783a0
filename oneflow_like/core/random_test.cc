#include "oneflow_like/core/random.h"

#include <cmath>
#include <cstring>

#include "gtest/gtest.h"
#include "oneflow_like/core/shard_simulator.h"

namespace oneflow_like {
namespace {

uint64_t Pack(uint32_t lo, uint32_t hi) { return (static_cast<uint64_t>(hi) << 32) | lo; }

// Known-answer vectors from Random123's kat_vectors (counter words c0..c3, key words k0, k1).
TEST(PhiloxTest, MatchesRandom123KnownAnswers) {
  struct Kat {
    uint32_t ctr[4];
    uint32_t key[2];
    std::array<uint32_t, 4> expected;
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    EXPECT_EQ(Philox4x32(Pack(k.ctr[0], k.ctr[1]), Pack(k.ctr[2], k.ctr[3]), Pack(k.key[0], k.key[1])), k.expected);
  }
}

TEST(PhiloxTest, UniformUsesTheFirstWordsTop24Bits) {
  for (uint64_t i : {0ull, 1ull, 12345ull}) {
    uint32_t w = Philox4x32(i, 0, 77)[0];
    EXPECT_EQ(PhiloxUniform(77, i), static_cast<double>(w >> 8) / 16777216.0);
  }
  // Counter 0, key 0: first word 0x6627e8d5 -> 0x6627e8 / 2^24.
  EXPECT_EQ(PhiloxUniform(0, 0), static_cast<double>(0x6627e8) / 16777216.0);
}

TEST(PhiloxTest, DeterministicAndSensitiveToSeedAndIndex) {
  EXPECT_EQ(PhiloxUniform(3, 10), PhiloxUniform(3, 10));
  EXPECT_EQ(PhiloxNormal(3, 10), PhiloxNormal(3, 10));
  EXPECT_NE(PhiloxUniform(3, 10), PhiloxUniform(4, 10));
  EXPECT_NE(PhiloxUniform(3, 10), PhiloxUniform(3, 11));
  EXPECT_NE(PhiloxNormal(3, 10), PhiloxNormal(3, 11));
}

TEST(PhiloxTest, UniformStatistics) {
  const int n = 100000;
  double sum = 0, sum_sq = 0;
  int buckets[10] = {0};
  for (int i = 0; i < n; ++i) {
    double u = PhiloxUniform(42, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    ASSERT_EQ(u * 16777216.0, std::floor(u * 16777216.0));  // a multiple of 2^-24
    sum += u;
    sum_sq += u * u;
    ++buckets[static_cast<int>(u * 10)];
  }
  const double mean = sum / n, var = sum_sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.5, 0.005);  // sd of the mean ~0.0009
  EXPECT_NEAR(var, 1.0 / 12, 0.002);
  for (int b : buckets) EXPECT_NEAR(b, n / 10, 600);  // sd ~95
}

TEST(PhiloxTest, NormalStatistics) {
  const int n = 100000;
  double sum = 0, sum_sq = 0, sum_4 = 0;
  int within_one = 0;
  for (int i = 0; i < n; ++i) {
    double z = PhiloxNormal(9, i);
    ASSERT_TRUE(std::isfinite(z));
    sum += z;
    sum_sq += z * z;
    sum_4 += z * z * z * z;
    if (std::fabs(z) < 1) ++within_one;
  }
  const double mean = sum / n, var = sum_sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.02);   // sd ~0.003
  EXPECT_NEAR(var, 1.0, 0.03);    // sd ~0.0045
  EXPECT_NEAR(sum_4 / n, 3.0, 0.15);
  EXPECT_NEAR(static_cast<double>(within_one) / n, 0.6827, 0.01);
}

TEST(ForEachLogicalIndexTest, VisitsTheBlockInPhysicalOrder) {
  const Shape logical{4, 5, 6};
  const Shape physical{2, 3, 2};
  const std::vector<int64_t> offset = {1, 2, 3};
  std::vector<std::pair<int64_t, int64_t>> visited;
  ForEachLogicalIndex(physical, logical, offset, [&](int64_t p, int64_t l) { visited.push_back({p, l}); });
  std::vector<std::pair<int64_t, int64_t>> expected;
  int64_t p = 0;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 2; ++k) expected.push_back({p++, ((i + 1) * 5 + (j + 2)) * 6 + (k + 3)});
  EXPECT_EQ(visited, expected);
  int calls = 0;
  ForEachLogicalIndex(Shape{0, 3}, Shape{2, 3}, {2, 0}, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(FillTest, ElementGetsTheValueOfItsLogicalIndex) {
  const Shape logical{6, 4};
  Tensor shard(DataType::kFloat64, Shape{3, 2});
  const std::vector<int64_t> offset = {2, 1};
  FillUniform(&shard, logical, offset, 5, -2.0, 3.0);
  Tensor normal(DataType::kFloat64, Shape{3, 2});
  FillNormal(&normal, logical, offset, 5, 1.5, 0.25);
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 2; ++j) {
      const uint64_t l = (i + 2) * 4 + (j + 1);
      EXPECT_DOUBLE_EQ(shard.GetAsDouble(i * 2 + j), -2.0 + 5.0 * PhiloxUniform(5, l));
      EXPECT_DOUBLE_EQ(normal.GetAsDouble(i * 2 + j), 1.5 + 0.25 * PhiloxNormal(5, l));
    }
  }
}

TEST(FillTest, UniformRangeAndStorageTypes) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16, DataType::kFloat16}) {
    Tensor t(dtype, Shape{50, 40});
    FillUniform(&t, t.shape(), {0, 0}, 1, -0.5, 0.5);
    double sum = 0;
    for (int64_t i = 0; i < t.elem_count(); ++i) {
      ASSERT_GE(t.GetAsDouble(i), -0.5) << DataTypeName(dtype);
      ASSERT_LE(t.GetAsDouble(i), 0.5) << DataTypeName(dtype);
      sum += t.GetAsDouble(i);
    }
    EXPECT_NEAR(sum / t.elem_count(), 0.0, 0.03) << DataTypeName(dtype);
  }
}

bool BytesEqual(const Tensor& a, const Tensor& b) {
  return a.desc() == b.desc() && std::memcmp(a.raw_data(), b.raw_data(), static_cast<size_t>(a.byte_size())) == 0;
}

// The key promise: filling each shard separately and assembling gives exactly the tensor that
// a single-device fill produces, whatever the layout.
TEST(FillTest, ShardedFillEqualsWholeFillForEveryLayout) {
  const Shape logical{7, 5};
  struct Layout {
    const char* nd_sbp;
    std::vector<int64_t> hierarchy;
  };
  const std::vector<Layout> layouts = {{"S(0)", {3}},           {"S(1)", {3}},           {"B", {3}},
                                       {"(S(0), S(1))", {2, 2}}, {"(S(1), S(1))", {2, 2}}, {"(S(0), S(0))", {2, 2}},
                                       {"(B, S(1))", {2, 3}},   {"(S(1), S(0))", {3, 2}}};
  int checked = 0;
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16, DataType::kFloat16}) {
    for (bool normal : {false, true}) {
      auto fill = [&](Tensor* t, const std::vector<int64_t>& offset) {
        if (normal) {
          FillNormal(t, logical, offset, 1234, 0.0, 0.02);
        } else {
          FillUniform(t, logical, offset, 1234, -0.1, 0.1);
        }
      };
      Tensor whole(dtype, logical);
      fill(&whole, {0, 0});
      for (const Layout& l : layouts) {
        NdSbp nd = NdSbp::Parse(l.nd_sbp).value();
        int64_t devices = 1;
        for (int64_t h : l.hierarchy) devices *= h;
        std::vector<Tensor> shards;
        for (int64_t d = 0; d < devices; ++d) {
          ShardSlice slice = GetShardSlice(logical, nd, l.hierarchy, d);
          Tensor shard(dtype, slice.shape);
          fill(&shard, slice.offset);
          shards.push_back(shard);
        }
        auto assembled = AssembleTensor(shards, logical, nd, l.hierarchy);
        ASSERT_TRUE(assembled.ok()) << l.nd_sbp << ": " << assembled.status();
        EXPECT_TRUE(BytesEqual(*assembled, whole)) << l.nd_sbp << " " << DataTypeName(dtype);
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 4 * 2 * 8);
}

// Known answers of tools/bench/peers/peerlib.py (torch_gpt.py's init), produced with numpy by
//   cd tools/bench/peers && /usr/bin/python3 -c "import numpy as np
//   from peerlib import splitmix64, portable_uniform, portable_values
//   print([hex(int(v)) for v in splitmix64(np.array([0,1,0x123456789ABCDEF],dtype=np.uint64))])
//   for seed,stream in [(0,0),(0,5),(7,3)]:
//     u=portable_uniform(seed,stream,100000); w=portable_values(seed,stream,100000,0.02)
//     print(seed,stream,[repr(float(u[i])) for i in [0,1,2,99999]],[repr(float(w[i])) for i in [0,1,2,99999]])"
TEST(PortableTest, SplitMix64KnownAnswers) {
  EXPECT_EQ(SplitMix64(0), 0xe220a8397b1dcdafull);
  EXPECT_EQ(SplitMix64(1), 0x910a2dec89025cc1ull);
  EXPECT_EQ(SplitMix64(0x123456789ABCDEFull), 0x157a3807a48faa9dull);
}

TEST(PortableTest, UniformAndValueMatchTorchGptPy) {
  struct Case {
    uint64_t seed, stream;
    double u[4];
    float w[4];
  };
  const uint64_t index[4] = {0, 1, 2, 99999};
  const Case cases[] = {
      {0, 0, {0.8833107948303223, 0.5665615200996399, 0.5911896824836731, 0.565308690071106},
       {0.026556551456451416f, 0.0046115173026919365f, 0.006317806430160999f, 0.0045247189700603485f}},
      {0, 5, {0.7116989493370056, 0.4415163993835449, 0.10161781311035156, 0.9492842555046082},
       {0.014666933566331863f, -0.004051862750202417f, -0.0276007279753685f, 0.03112732619047165f}},
      {7, 3, {0.8835062384605408, 0.35016828775405884, 0.9914383292198181, 0.34107518196105957},
       {0.026570091024041176f, -0.010380645282566547f, 0.034047845751047134f, -0.01101063471287489f}},
  };
  for (const Case& c : cases) {
    for (int k = 0; k < 4; ++k) {
      EXPECT_EQ(PortableUniform(c.seed, c.stream, index[k]), c.u[k]) << c.seed << "/" << c.stream << "/" << index[k];
      EXPECT_EQ(PortableUniformValue(c.seed, c.stream, index[k], 0.02), c.w[k])
          << c.seed << "/" << c.stream << "/" << index[k];
    }
  }
}

// Every shard of every layout holds exactly the slice of the whole portable fill.
TEST(PortableTest, ShardedFillEqualsWholeFill) {
  const Shape logical{9, 6};
  Tensor whole(DataType::kFloat32, logical);
  FillPortableUniform(&whole, logical, {0, 0}, 3, 11, 0.02);
  for (int64_t i = 0; i < whole.elem_count(); ++i) {
    ASSERT_EQ(whole.data<float>()[i], PortableUniformValue(3, 11, static_cast<uint64_t>(i), 0.02)) << i;
  }
  for (const auto& [text, hierarchy] : std::vector<std::pair<const char*, std::vector<int64_t>>>{
           {"S(0)", {2}}, {"S(1)", {4}}, {"(S(0), S(1))", {2, 2}}, {"(B, S(0))", {2, 4}}}) {
    NdSbp nd = NdSbp::Parse(text).value();
    int64_t devices = 1;
    for (int64_t h : hierarchy) devices *= h;
    for (int64_t d = 0; d < devices; ++d) {
      ShardSlice slice = GetShardSlice(logical, nd, hierarchy, d);
      Tensor shard(DataType::kFloat32, slice.shape);
      FillPortableUniform(&shard, logical, slice.offset, 3, 11, 0.02);
      Tensor expected(DataType::kFloat32, slice.shape);
      CopyBlockOut(whole, slice.offset, &expected);
      EXPECT_TRUE(BytesEqual(shard, expected)) << text << " device " << d;
    }
  }
}

}  // namespace
}  // namespace oneflow_like
