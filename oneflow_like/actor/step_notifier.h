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
// No lost wake-ups: a notification after count() was read ends the wait at once. Notify costs
// an atomic increment, plus a lock and notify_all only while someone waits.
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
  void Notify() {
    count_.fetch_add(1);
    if (waiters_.load() > 0) {
      std::lock_guard<std::mutex> lock(mu_);
      cv_.notify_all();
    }
  }
  int64_t count() const { return count_.load(); }
  // Returns when count() != seen, or after `timeout`.
  void WaitChange(int64_t seen, std::chrono::microseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    waiters_.fetch_add(1);
    cv_.wait_for(lock, timeout, [&] { return count_.load() != seen; });
    waiters_.fetch_sub(1);
  }

 private:
  std::atomic<int64_t> count_{0};
  std::atomic<int32_t> waiters_{0};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_STEP_NOTIFIER_H_
