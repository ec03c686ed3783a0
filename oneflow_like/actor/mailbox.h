// Mailbox: the message queue of one runtime thread. Any thread may Push (multi-producer); only
// the owner thread pops (single consumer). Messages are trivially copyable values.
//
//   Mailbox box;
//   box.Push(message);                        // any thread
//   std::vector<ActorMessage> batch;
//   box.PopAll(&batch, /*spin_polls=*/4000);  // owner: blocks until at least one message
//   if (box.TryPopAll(&batch)) { ... }        // owner: never blocks
//
// Cost model (the cross-thread hop of the runtime): Push takes the lock and signals the
// condition variable only when the owner is actually asleep on it (a flag kept under the
// lock), so pushing to a busy or spinning owner costs no system call. PopAll first polls an
// atomic "has messages" flag `spin_polls` times without the lock (a message arriving within
// those few microseconds is taken without a sleep/wake round trip), then sleeps. A batch is
// taken by swapping the whole queue under the lock. Errors: none. Thread-safety: as above.
#ifndef ONEFLOW_LIKE_ACTOR_MAILBOX_H_
#define ONEFLOW_LIKE_ACTOR_MAILBOX_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "oneflow_like/actor/message.h"

namespace oneflow_like {
namespace actor {

class Mailbox {
 public:
  // Thread-safe.
  void Push(const ActorMessage& message) {
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(message);
      has_messages_.store(true, std::memory_order_release);
      wake = sleeping_;
      sleeping_ = false;  // one signal per sleep is enough
    }
    if (wake) cv_.notify_one();
  }

  // Owner thread only: moves every queued message (in push order) into *batch (cleared
  // first). Returns whether it took any. Never blocks on an empty queue.
  bool TryPopAll(std::vector<ActorMessage>* batch) {
    batch->clear();
    if (!has_messages_.load(std::memory_order_acquire)) return false;
    std::lock_guard<std::mutex> lock(mu_);
    TakeLocked(batch);
    return !batch->empty();
  }

  // Owner thread only: like TryPopAll, but waits until at least one message arrived: it polls
  // `spin_polls` times (a plain load each; every 256th poll yields the core) before sleeping.
  // No PAUSE instruction: under KVM a PAUSE loop traps to the hypervisor (pause-loop exiting),
  // which measured worse than sleeping at once; yielding keeps a spinning thread from starving
  // a runnable one of the same core.
  void PopAll(std::vector<ActorMessage>* batch, int64_t spin_polls = 0) {
    batch->clear();
    for (int64_t poll = 1; poll <= spin_polls && !has_messages_.load(std::memory_order_acquire); ++poll) {
      if (poll % kYieldEvery == 0) std::this_thread::yield();
    }
    std::unique_lock<std::mutex> lock(mu_);
    while (queue_.empty()) {
      sleeping_ = true;
      cv_.wait(lock);
    }
    sleeping_ = false;
    TakeLocked(batch);
  }

 private:
  static constexpr int64_t kYieldEvery = 256;
  void TakeLocked(std::vector<ActorMessage>* batch) {
    batch->swap(queue_);  // queue_ keeps the batch's old (cleared) capacity
    has_messages_.store(false, std::memory_order_relaxed);
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ActorMessage> queue_;       // guarded by mu_
  bool sleeping_ = false;                 // guarded by mu_: the owner waits on cv_
  std::atomic<bool> has_messages_{false};  // written under mu_; read without it to spin
};

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_MAILBOX_H_
