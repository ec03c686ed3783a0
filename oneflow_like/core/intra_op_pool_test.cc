#include "oneflow_like/core/intra_op_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace oneflow_like {
namespace {

// The chunks f saw, sorted, must tile [0, n) with contiguous pieces.
void ExpectTiles(std::vector<std::pair<int64_t, int64_t>> chunks, int64_t n) {
  std::sort(chunks.begin(), chunks.end());
  int64_t next = 0;
  for (const auto& [begin, end] : chunks) {
    EXPECT_EQ(begin, next);
    EXPECT_LT(begin, end);
    next = end;
  }
  EXPECT_EQ(next, n);
}

std::vector<std::pair<int64_t, int64_t>> Chunks(IntraOpPool* pool, int64_t n, int64_t work, int64_t align = 1) {
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  ParallelFor(pool, n, work, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(mu);
    chunks.emplace_back(b, e);
  }, align);
  return chunks;
}

TEST(IntraOpPoolTest, ChunksTileTheRangeForAnySize) {
  IntraOpPool pool(3);
  for (int64_t n : {1, 2, 3, 7, 1023, 65536, 65537, 1000003}) {
    for (int64_t align : {1, 16}) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " align=" << align);
      std::vector<std::pair<int64_t, int64_t>> chunks = Chunks(&pool, n, 1, align);
      ExpectTiles(chunks, n);
      for (const auto& c : chunks) {
        if (c.second != n) {
          EXPECT_EQ(c.second % align, 0);
        }
      }
    }
  }
}

TEST(IntraOpPoolTest, SmallLoopsAndNullPoolRunInlineAsOneCall) {
  IntraOpPool pool(2);
  auto chunks = Chunks(&pool, kMinParallelWork - 1, 1);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0], std::make_pair(int64_t{0}, kMinParallelWork - 1));
  chunks = Chunks(nullptr, 1 << 20, 1);
  ASSERT_EQ(chunks.size(), 1u);
  IntraOpPool single(1);
  EXPECT_EQ(Chunks(&single, 1 << 20, 1).size(), 1u);
  // Rows: 8 rows of 1024 elements (8K) stay inline, 256 rows (256K) are split.
  EXPECT_EQ(Chunks(&pool, 8, 1024).size(), 1u);
  auto rows = Chunks(&pool, 256, 1024);
  EXPECT_GT(rows.size(), 1u);
  ExpectTiles(rows, 256);
  EXPECT_TRUE(Chunks(&pool, 0, 1).empty());
}

TEST(IntraOpPoolTest, WorkersTakeChunks) {
  IntraOpPool pool(2);
  std::mutex mu;
  std::set<std::thread::id> threads;
  // Every chunk waits until two threads have entered one: only a working pool gets past.
  ParallelFor(&pool, 1 << 20, 1, [&](int64_t, int64_t) {
    {
      std::lock_guard<std::mutex> lock(mu);
      threads.insert(std::this_thread::get_id());
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      std::lock_guard<std::mutex> lock(mu);
      if (threads.size() >= 2) break;
    }
  });
  EXPECT_EQ(threads.size(), 2u);
}

TEST(IntraOpPoolTest, FreshPoolsServeTheirFirstCallAndStop) {
  for (int i = 0; i < 200; ++i) {  // the first call (or the stop) may come before a worker runs
    IntraOpPool pool(3);
    if (i % 2 == 0) continue;
    std::atomic<int64_t> items{0};
    ParallelFor(&pool, 1 << 16, 1, [&](int64_t b, int64_t e) { items.fetch_add(e - b); });
    EXPECT_EQ(items.load(), 1 << 16);
  }
}

TEST(IntraOpPoolTest, ManyCallsInARowEachRunEveryChunkOnce) {
  IntraOpPool pool(4, /*spin_us=*/0);  // workers sleep between calls: exercises the wake-up
  std::vector<std::atomic<int>> hits(1 << 17);
  for (int call = 0; call < 2000; ++call) {
    const int64_t n = (call % 7 + 1) * (int64_t{1} << 14);
    ParallelFor(&pool, n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
    });
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(hits[i].exchange(0), 1) << "call " << call << " item " << i;
    }
  }
}

TEST(IntraOpPoolTest, NestedAndConcurrentCallsRunInlineWithoutDeadlock) {
  IntraOpPool pool(2);
  std::atomic<int64_t> sum{0};
  ParallelFor(&pool, 4, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      ParallelFor(&pool, 1 << 16, 1, [&](int64_t b2, int64_t e2) { sum.fetch_add(e2 - b2); });
    }
  });
  EXPECT_EQ(sum.load(), 4 << 16);

  sum = 0;
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int k = 0; k < 200; ++k) {
        ParallelFor(&pool, 1 << 17, 1, [&](int64_t b, int64_t e) { sum.fetch_add(e - b); });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(sum.load(), int64_t{4} * 200 << 17);
}

TEST(IntraOpPoolTest, DestroysIdleAndSleepingPools) {
  { IntraOpPool pool(3); }
  IntraOpPool pool(3, /*spin_us=*/0);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(pool.num_threads(), 3);
}

}  // namespace
}  // namespace oneflow_like
