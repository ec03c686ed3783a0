// IntraOpPool: the threads one rank's kernels split their large loops over (intra-op
// parallelism), and ParallelFor (with ParallelForPerThread / ParallelForChunks), the way
// kernels use it.
//
//   IntraOpPool pool(2);                        // the calling thread + 1 worker
//   ParallelFor(&pool, rows, cols, [&](int64_t begin, int64_t end) {
//     SoftmaxRows(x, y, begin, end);            // rows [begin, end)
//   });
//
// Ownership: no globals. Whoever runs a rank's kernels owns its pool (actor::Runtime makes
// one per rank when RuntimeEnv::intra_op_threads > 1) and hands it to every kernel through
// KernelContext::intra_op_pool; null there means "run serially".
//
// ParallelFor splits [0, n) into contiguous chunks; the calling thread and the workers claim
// chunks until none is left, and it returns once every chunk ran. Loops too small to pay for
// the hand-off (n * work_per_item < the pool's min_parallel_work, by default kMinParallelWork
// = 64K elements) run inline, as do calls made while another ParallelFor holds the workers (a
// nested call, or a second stream of the same rank): the workers serve one call at a time.
//
// Determinism: a chunk only decides WHICH thread computes an item, never how. Kernels split
// element-wise loops by elements and reductions by their outputs (softmax, layer norm and
// cross-entropy by rows, never within a row; column sums by columns), so every output element
// is computed by the same code in the same order as in the serial kernel: the results are
// bit-identical for any thread count and any chunking. (Matmul is the exception: a product
// split into parts differs from the whole one in the last bits, see matmul_ops.cc.)
//
// One budget for the rank's threads: with a pool, the matmul kernels run OpenBLAS single-
// threaded inside the pool's threads (matmul_ops.cc) instead of beside OpenBLAS's own threads.
// (Both sets of threads wait for work by spinning a while; under SCHED_FIFO three spinning or
// computing threads of equal priority on two cores stay where they are, so the pool's worker
// could sit behind the kernel's own thread and never run alongside it.) An idle worker polls for
// the next call for `spin_us`, offering its core to others (sched_yield) as it polls, then
// sleeps on a condition variable.
//
// Thread-safety: ParallelFor / Run may be called from any thread, concurrently.
#ifndef ONEFLOW_LIKE_CORE_INTRA_OP_POOL_H_
#define ONEFLOW_LIKE_CORE_INTRA_OP_POOL_H_

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace oneflow_like {

// A loop of fewer elements than this runs inline (a few tens of microseconds of a simple
// kernel: more than a worker's wake-up), and a chunk holds at least a quarter of it.
constexpr int64_t kMinParallelWork = int64_t{1} << 16;

class IntraOpPool {
 public:
  // num_threads (>= 1) counts the calling thread: num_threads - 1 workers are started.
  // spin_us: how long an idle worker polls for the next call before it sleeps.
  // min_parallel_work: ParallelFor's threshold in elements (tests set 1 to split tiny loops).
  explicit IntraOpPool(int num_threads, int64_t spin_us = 1000, int64_t min_parallel_work = kMinParallelWork);
  ~IntraOpPool();  // joins the workers; REQUIRES: no call in flight
  IntraOpPool(const IntraOpPool&) = delete;
  IntraOpPool& operator=(const IntraOpPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }
  int64_t min_parallel_work() const { return min_parallel_work_; }

  // Runs fn(arg, c) for every chunk c in [0, num_chunks) on the calling thread and the workers;
  // returns when all have run. Inline (in chunk order) when the workers serve another call.
  // REQUIRES: num_chunks <= kMaxChunks.
  void Run(int64_t num_chunks, void (*fn)(void* arg, int64_t chunk), void* arg);

  static constexpr int64_t kMaxChunks = 0xFFFF;

 private:
  // claim_ packs the call's generation (high 32 bits), its chunk count and the next unclaimed
  // chunk (16 bits each), so a worker can never claim a chunk of a call it did not see start.
  static uint32_t Gen(uint64_t c) { return static_cast<uint32_t>(c >> 32); }
  static int64_t Count(uint64_t c) { return static_cast<int64_t>((c >> 16) & 0xFFFF); }
  static int64_t Next(uint64_t c) { return static_cast<int64_t>(c & 0xFFFF); }

  bool RunOneChunk(uint32_t gen);           // claims and runs one chunk of call `gen`
  uint32_t WaitForCall(uint32_t seen);      // a generation != seen (or stop)
  void WorkerLoop();

  const int64_t spin_us_;
  const int64_t min_parallel_work_;
  std::mutex call_mu_;  // held by the call that uses the workers
  void (*fn_)(void*, int64_t) = nullptr;  // the current call, written before it is published
  void* arg_ = nullptr;
  std::atomic<uint64_t> claim_{0};
  std::atomic<int64_t> done_{0};  // chunks of the current call that finished
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::mutex sleep_mu_;
  std::condition_variable wake_;
  std::vector<std::thread> workers_;
};

// Calls f(begin, end) for [0, n) in contiguous chunks of `chunk` items (the last may be
// shorter) on `pool`'s threads, however small the loop (the caller decided it is worth it);
// once inline as f(0, n) when the pool is null or there is a single chunk.
template <typename F>
void ParallelForChunks(IntraOpPool* pool, int64_t n, int64_t chunk, F&& f) {
  if (n <= 0) return;
  chunk = std::max<int64_t>(chunk, 1);
  int64_t chunks = (n + chunk - 1) / chunk;
  if (chunks > IntraOpPool::kMaxChunks) {
    chunk = (n + IntraOpPool::kMaxChunks - 1) / IntraOpPool::kMaxChunks;
    chunks = (n + chunk - 1) / chunk;
  }
  if (pool == nullptr || pool->num_threads() < 2 || chunks < 2) {
    f(int64_t{0}, n);
    return;
  }
  auto body = [&](int64_t c) { f(c * chunk, std::min(n, (c + 1) * chunk)); };
  using Body = decltype(body);
  pool->Run(chunks, [](void* arg, int64_t c) { (*static_cast<Body*>(arg))(c); }, &body);
}

// Whether a loop of n items of work_per_item elements each is worth splitting over `pool`.
inline bool WorthSplitting(const IntraOpPool* pool, int64_t n, int64_t work_per_item) {
  return pool != nullptr && pool->num_threads() >= 2 && n >= 2 &&
         n * std::max<int64_t>(work_per_item, 1) >= pool->min_parallel_work();
}

inline int64_t RoundUp(int64_t x, int64_t multiple) { return (x + multiple - 1) / multiple * multiple; }

// Calls f(begin, end) over contiguous chunks covering [0, n), on `pool`'s threads when
// WorthSplitting (n * work_per_item elements >= pool->min_parallel_work()), else once inline
// as f(0, n). A few chunks per thread, each >= a quarter of the threshold, so a thread that
// starts late (a worker waking up) takes fewer; chunk sizes are multiples of `align` (e.g. 16
// floats: one cache line, whole vector blocks).
template <typename F>
void ParallelFor(IntraOpPool* pool, int64_t n, int64_t work_per_item, F&& f, int64_t align = 1) {
  if (!WorthSplitting(pool, n, work_per_item)) {
    if (n > 0) f(int64_t{0}, n);
    return;
  }
  const int64_t work = n * std::max<int64_t>(work_per_item, 1);
  const int64_t min_chunk = std::max<int64_t>(pool->min_parallel_work() / 4, 1);
  const int64_t want = std::clamp<int64_t>(work / min_chunk, 2, 4 * int64_t{pool->num_threads()});
  ParallelForChunks(pool, n, RoundUp((n + want - 1) / want, std::max<int64_t>(align, 1)), std::forward<F>(f));
}

// As ParallelFor, but one contiguous part per thread: for loops whose parts stride through
// memory (column ranges of a row-major matrix) or repeat work per part (a GEMM packs its
// operands per call), where fewer, wider parts are faster.
template <typename F>
void ParallelForPerThread(IntraOpPool* pool, int64_t n, int64_t work_per_item, F&& f, int64_t align = 1) {
  if (!WorthSplitting(pool, n, work_per_item)) {
    if (n > 0) f(int64_t{0}, n);
    return;
  }
  const int64_t threads = pool->num_threads();
  ParallelForChunks(pool, n, RoundUp((n + threads - 1) / threads, std::max<int64_t>(align, 1)), std::forward<F>(f));
}

}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_INTRA_OP_POOL_H_
