// StepNotifier: lets the thread that drives a step (Session, the multi-process rank executor)
// sleep until something it waits for may have happened, instead of polling. Runtimes given one
// (RuntimeEnv::step_notifier) notify it after every step event (a source or sink firing, a
// variable update absorbed), every actor that finishes its drain, and every failure.
//
//   StepNotifier notifier;                      // shared by the runtimes of a Session
//   while (true) {
//     const int64_t seen = notifier.count();    // read BEFORE checking the condition
//     if (runtime->StepDone()) break;
//     notifier.WaitChange(seen, std::chrono::milliseconds(10));   // the watchdog's tick
//   }
//
// No lost wake-ups: a notification after count() was read ends the wait at once (a step event
// only once the count reaches the waiter's wake_at). Notify costs an atomic increment, plus a
// lock and notify_all only while someone waits for that count.
// Thread-safety: all methods are thread-safe.
#ifndef ONEFLOW_LIKE_ACTOR_STEP_NOTIFIER_H_
#define ONEFLOW_LIKE_ACTOR_STEP_NOTIFIER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace oneflow_like {
namespace actor {

class StepNotifier {
 public:
  // A step event: wakes a waiter once the count reaches the waiter's `wake_at` (WaitChange).
  void Notify() {
    const int64_t count = count_.fetch_add(1) + 1;
    if (waiters_.load() > 0 && count >= wake_at_.load()) {
      std::lock_guard<std::mutex> lock(mu_);
      cv_.notify_all();
    }
  }
  // A finished actor or a failure: wakes every waiter whatever its `wake_at`.
  void NotifyAlways() {
    count_.fetch_add(1);
    urgent_.fetch_add(1);
    if (waiters_.load() > 0) {
      std::lock_guard<std::mutex> lock(mu_);
      cv_.notify_all();
    }
  }
  int64_t count() const { return count_.load(); }
  // Returns when count() != seen and either count() >= wake_at or NotifyAlways was called since
  // `seen` was read (approximately: a NotifyAlways just before the wait also ends it), or after
  // `timeout`. `wake_at` lets the waiter sleep through the step events that cannot complete
  // what it waits for (the driving thread of a step used to wake on each of the ~1700 events
  // of a GPT step, a lock and a futex wake-up on the actor thread each); with several waiters
  // the smallest counts.
  void WaitChange(int64_t seen, std::chrono::microseconds timeout, int64_t wake_at = 0) {
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t urgent = urgent_.load();
    if (waiters_.fetch_add(1) == 0 || wake_at < wake_at_.load()) wake_at_.store(wake_at);
    cv_.wait_for(lock, timeout, [&] {
      const int64_t count = count_.load();
      return count != seen && (count >= wake_at || urgent_.load() != urgent);
    });
    if (waiters_.fetch_sub(1) == 1) wake_at_.store(0);
  }

 private:
  std::atomic<int64_t> count_{0}, urgent_{0};
  std::atomic<int64_t> wake_at_{0};
  std::atomic<int32_t> waiters_{0};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_STEP_NOTIFIER_H_
