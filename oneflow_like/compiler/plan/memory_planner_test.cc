#include "oneflow_like/compiler/plan/memory_planner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace oneflow_like {
namespace compiler {
namespace {

int64_t Aligned(int64_t bytes, int64_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

bool LifetimesMeet(const BufferRequest& a, const BufferRequest& b) {
  return a.first_use <= b.last_use && b.first_use <= a.last_use;
}

// Independent reference for the lower bound: the live sum at every time point, brute force.
int64_t BruteForcePeak(const std::vector<BufferRequest>& requests, int64_t alignment) {
  int64_t peak = 0;
  for (const BufferRequest& at : requests) {
    int64_t live = 0;
    for (const BufferRequest& other : requests) {
      if (other.first_use <= at.first_use && at.first_use <= other.last_use) {
        live += Aligned(other.bytes, alignment);
      }
    }
    peak = std::max(peak, live);
  }
  return peak;
}

// Checks every guarantee of the contract by brute force over all pairs.
void ExpectValid(const std::vector<BufferRequest>& requests, const MemoryAssignment& result,
                 int64_t alignment) {
  ASSERT_EQ(result.offsets.size(), requests.size());
  int64_t naive = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const int64_t size = Aligned(requests[i].bytes, alignment);
    naive += size;
    EXPECT_EQ(result.offsets[i] % alignment, 0) << "buffer " << i;
    EXPECT_GE(result.offsets[i], 0) << "buffer " << i;
    EXPECT_LE(result.offsets[i] + size, result.block_bytes) << "buffer " << i;
    if (size == 0) {
      EXPECT_EQ(result.offsets[i], 0) << "zero-size buffer " << i;
    }
  }
  EXPECT_EQ(result.naive_bytes, naive);
  EXPECT_LE(result.block_bytes, result.naive_bytes);
  EXPECT_GE(result.block_bytes, BruteForcePeak(requests, alignment));
  for (size_t i = 0; i < requests.size(); ++i) {
    for (size_t j = i + 1; j < requests.size(); ++j) {
      if (!LifetimesMeet(requests[i], requests[j])) continue;
      const int64_t end_i = result.offsets[i] + Aligned(requests[i].bytes, alignment);
      const int64_t end_j = result.offsets[j] + Aligned(requests[j].bytes, alignment);
      const bool disjoint = end_i <= result.offsets[j] || end_j <= result.offsets[i];
      ASSERT_TRUE(disjoint) << "buffers " << i << " and " << j << " are alive together and "
                            << "overlap: [" << result.offsets[i] << ", " << end_i << ") vs ["
                            << result.offsets[j] << ", " << end_j << ")";
    }
  }
}

TEST(MemoryPlannerTest, WorkedExampleFromHeader) {
  const std::vector<BufferRequest> requests = {{100, 0, 1}, {64, 1, 2}, {128, 2, 3}};
  absl::StatusOr<MemoryAssignment> result = AssignOffsets(requests);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->offsets, (std::vector<int64_t>{0, 128, 0}));
  EXPECT_EQ(result->block_bytes, 192);
  EXPECT_EQ(result->naive_bytes, 320);
  ExpectValid(requests, *result, 64);
}

TEST(MemoryPlannerTest, DisjointChainReusesOneSlot) {
  // 10 buffers alive one after another: all fit at offset 0 of a block of the largest size.
  std::vector<BufferRequest> requests;
  for (int i = 0; i < 10; ++i) requests.push_back({64 * (1 + i % 3), i, i});
  absl::StatusOr<MemoryAssignment> result = AssignOffsets(requests);
  ASSERT_TRUE(result.ok()) << result.status();
  for (int64_t offset : result->offsets) EXPECT_EQ(offset, 0);
  EXPECT_EQ(result->block_bytes, 192);
  EXPECT_EQ(result->naive_bytes, 64 * (4 * 1 + 3 * 2 + 3 * 3));
}

TEST(MemoryPlannerTest, InclusiveEndpointsCountAsOverlap) {
  // [0, 1] and [1, 2] share position 1, so they must not share bytes.
  const std::vector<BufferRequest> requests = {{64, 0, 1}, {64, 1, 2}};
  absl::StatusOr<MemoryAssignment> result = AssignOffsets(requests);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->block_bytes, 128);
  EXPECT_NE(result->offsets[0], result->offsets[1]);
}

TEST(MemoryPlannerTest, AlignmentIsRespected) {
  const std::vector<BufferRequest> requests = {{1, 0, 5}, {300, 0, 5}, {257, 3, 9}, {7, 6, 9}};
  for (int64_t alignment : {1, 8, 64, 256, 4096}) {
    absl::StatusOr<MemoryAssignment> result = AssignOffsets(requests, alignment);
    ASSERT_TRUE(result.ok()) << result.status();
    ExpectValid(requests, *result, alignment);
  }
  // Alignment 1: exact sizes, 1 + 300 live together, then 257 + 7 + ... peak = 301 + 257.
  absl::StatusOr<MemoryAssignment> exact = AssignOffsets(requests, 1);
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->naive_bytes, 1 + 300 + 257 + 7);
  EXPECT_EQ(exact->block_bytes, 558);
}

TEST(MemoryPlannerTest, ZeroSizeBuffersOccupyNothing) {
  const std::vector<BufferRequest> requests = {{0, 0, 10}, {64, 0, 10}, {0, 3, 4}, {64, 2, 8}};
  absl::StatusOr<MemoryAssignment> result = AssignOffsets(requests);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->offsets[0], 0);
  EXPECT_EQ(result->offsets[2], 0);
  EXPECT_EQ(result->block_bytes, 128);
  EXPECT_EQ(result->naive_bytes, 128);
  ExpectValid(requests, *result, 64);

  absl::StatusOr<MemoryAssignment> empty = AssignOffsets({});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->offsets.empty());
  EXPECT_EQ(empty->block_bytes, 0);
  EXPECT_EQ(empty->naive_bytes, 0);
}

TEST(MemoryPlannerTest, RejectsBadRequests) {
  absl::StatusOr<MemoryAssignment> negative = AssignOffsets({{64, 0, 1}, {-1, 0, 1}});
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(negative.status().message().find("buffer 1 has negative size"), std::string::npos)
      << negative.status();
  absl::StatusOr<MemoryAssignment> backwards = AssignOffsets({{64, 5, 4}});
  EXPECT_EQ(backwards.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(backwards.status().message().find("buffer 0 has an empty lifetime [5, 4]"),
            std::string::npos)
      << backwards.status();
  EXPECT_EQ(AssignOffsets({{64, 0, 1}}, 0).status().code(), absl::StatusCode::kInvalidArgument);
  const int64_t huge = std::numeric_limits<int64_t>::max() / 2 + 1;
  EXPECT_EQ(AssignOffsets({{huge, 0, 1}, {huge, 2, 3}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MemoryPlannerTest, PeakLiveBytesMatchesBruteForce) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<BufferRequest> requests;
    for (int i = 0; i < 40; ++i) {
      const int64_t first = static_cast<int64_t>(rng() % 50) - 10;
      requests.push_back(
          {static_cast<int64_t>(rng() % 1000), first, first + static_cast<int64_t>(rng() % 12)});
    }
    EXPECT_EQ(PeakLiveBytes(requests, 64), BruteForcePeak(requests, 64)) << "trial " << trial;
  }
}

// Random schedules: brute-force validity, and the block stays close to the lower bound.
TEST(MemoryPlannerTest, RandomCasesAreValidAndTight) {
  std::mt19937_64 rng(20261123);
  double worst_ratio = 1;
  double ratio_sum = 0;
  const int trials = 300;
  for (int trial = 0; trial < trials; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 120);
    const int64_t horizon = 1 + static_cast<int64_t>(rng() % 200);
    const int64_t max_life = 1 + static_cast<int64_t>(rng() % 40);
    const int64_t alignment = int64_t{1} << (rng() % 8);
    std::vector<BufferRequest> requests;
    for (int i = 0; i < n; ++i) {
      const int64_t first = static_cast<int64_t>(rng() % horizon);
      const int64_t bytes =
          rng() % 10 == 0 ? 0 : static_cast<int64_t>(rng() % (rng() % 2 ? 100 : 10000));
      requests.push_back({bytes, first, first + static_cast<int64_t>(rng() % max_life)});
    }
    absl::StatusOr<MemoryAssignment> result = AssignOffsets(requests, alignment);
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_NO_FATAL_FAILURE(ExpectValid(requests, *result, alignment)) << "trial " << trial;
    absl::StatusOr<MemoryAssignment> again = AssignOffsets(requests, alignment);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->offsets, result->offsets) << "not deterministic, trial " << trial;
    const int64_t peak = PeakLiveBytes(requests, alignment);
    const double ratio = peak == 0 ? 1.0 : static_cast<double>(result->block_bytes) / peak;
    worst_ratio = std::max(worst_ratio, ratio);
    ratio_sum += ratio;
  }
  std::printf("block / peak-live lower bound: mean %.3f, worst %.3f over %d cases\n",
              ratio_sum / trials, worst_ratio, trials);
  EXPECT_LT(ratio_sum / trials, 1.25);
  EXPECT_LT(worst_ratio, 2.0);
}

TEST(MemoryPlannerTest, LargeScheduleIsFast) {
  // 100k buffers over a 100k-position schedule with short lifetimes (activations): prints the
  // time instead of asserting it, checks the lower bound and a sample of pairs.
  std::mt19937_64 rng(3);
  std::vector<BufferRequest> requests;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const int64_t first = static_cast<int64_t>(rng() % n);
    requests.push_back({64 + static_cast<int64_t>(rng() % (1 << 20)), first,
                        first + static_cast<int64_t>(rng() % 64)});
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<MemoryAssignment> result = AssignOffsets(requests);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(result.ok()) << result.status();
  const int64_t peak = PeakLiveBytes(requests);
  std::printf("100k buffers: %.3f s, block %lld bytes, peak live %lld, naive %lld\n", seconds,
              static_cast<long long>(result->block_bytes), static_cast<long long>(peak),
              static_cast<long long>(result->naive_bytes));
  EXPECT_GE(result->block_bytes, peak);
  EXPECT_LT(result->block_bytes, result->naive_bytes / 100);
  // Sampled pair check (all pairs would be 5e9): each buffer against the next 200 by start.
  std::vector<int> by_start(n);
  for (int i = 0; i < n; ++i) by_start[i] = i;
  std::sort(by_start.begin(), by_start.end(),
            [&](int a, int b) { return requests[a].first_use < requests[b].first_use; });
  for (int k = 0; k < n; ++k) {
    for (int m = k + 1; m < std::min(n, k + 200); ++m) {
      const int i = by_start[k], j = by_start[m];
      if (!LifetimesMeet(requests[i], requests[j])) continue;
      const int64_t end_i = result->offsets[i] + Aligned(requests[i].bytes, 64);
      const int64_t end_j = result->offsets[j] + Aligned(requests[j].bytes, 64);
      ASSERT_TRUE(end_i <= result->offsets[j] || end_j <= result->offsets[i]) << i << " " << j;
    }
  }
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
