#include "oneflow_like/core/intra_op_pool.h"

#include <pthread.h>
#include <sched.h>

#include <chrono>

#include "glog/logging.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace oneflow_like {
namespace {

// A hint to the core that this thread busy-waits (x86 PAUSE).
inline void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Polls `done` until it returns true: a pause per poll, and the core offered to other threads
// (sched_yield) every 64 polls, so a poller never starves a thread of its own priority on its
// core (under SCHED_FIFO nothing else would preempt it). Gives up after `budget_us` (< 0: never).
template <typename Done>
bool Poll(Done done, int64_t budget_us) {
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 1;; ++i) {
    if (done()) return true;
    CpuRelax();
    if (i % 64 == 0) {
      sched_yield();
      if (budget_us >= 0 && std::chrono::steady_clock::now() - start > std::chrono::microseconds(budget_us)) {
        return done();
      }
    }
  }
}

}  // namespace

IntraOpPool::IntraOpPool(int num_threads, int64_t spin_us, int64_t min_parallel_work)
    : spin_us_(spin_us), min_parallel_work_(min_parallel_work) {
  CHECK_GE(num_threads, 1);
  for (int i = 1; i < num_threads; ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
    pthread_setname_np(workers_.back().native_handle(), "ol-intra-op");
  }
}

IntraOpPool::~IntraOpPool() {
  {
    std::lock_guard<std::mutex> lock(sleep_mu_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void IntraOpPool::Run(int64_t num_chunks, void (*fn)(void*, int64_t), void* arg) {
  CHECK_LE(num_chunks, kMaxChunks);
  if (num_chunks <= 0) return;
  if (workers_.empty() || num_chunks == 1 || !call_mu_.try_lock()) {
    for (int64_t c = 0; c < num_chunks; ++c) fn(arg, c);
    return;
  }
  fn_ = fn;
  arg_ = arg;
  done_.store(0, std::memory_order_relaxed);
  const uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
  claim_.store((uint64_t{gen} << 32) | (static_cast<uint64_t>(num_chunks) << 16), std::memory_order_release);
  generation_.store(gen, std::memory_order_seq_cst);
  // A worker registers as a sleeper (under sleep_mu_) before it re-checks the generation, so
  // either it sees `gen` or we see it and wake it (no lost wake-up).
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard<std::mutex> lock(sleep_mu_); }
    wake_.notify_all();
  }
  while (RunOneChunk(gen)) {
  }
  Poll([&] { return done_.load(std::memory_order_acquire) == num_chunks; }, /*budget_us=*/-1);
  call_mu_.unlock();
}

bool IntraOpPool::RunOneChunk(uint32_t gen) {
  uint64_t c = claim_.load(std::memory_order_acquire);
  while (Gen(c) == gen && Next(c) < Count(c)) {
    if (claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
      // The call cannot end (and fn_/arg_ cannot change) before this chunk is counted done.
      fn_(arg_, Next(c));
      done_.fetch_add(1, std::memory_order_release);
      return true;
    }
  }
  return false;
}

uint32_t IntraOpPool::WaitForCall(uint32_t seen) {
  auto changed = [&] { return generation_.load(std::memory_order_acquire) != seen; };
  if (!Poll(changed, spin_us_)) {
    std::unique_lock<std::mutex> lock(sleep_mu_);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    wake_.wait(lock, [&] { return generation_.load(std::memory_order_seq_cst) != seen; });
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
  }
  return generation_.load(std::memory_order_acquire);
}

void IntraOpPool::WorkerLoop() {
  // The generation at construction, not now: a call (or the stop) published before this thread
  // got here must not be taken for one already seen.
  uint32_t seen = 0;
  while (true) {
    seen = WaitForCall(seen);
    if (stop_.load(std::memory_order_acquire)) return;
    while (RunOneChunk(seen)) {
    }
  }
}

}  // namespace oneflow_like
