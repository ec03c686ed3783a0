// Clock: the runtime's only source of time (the watchdog measures idleness with it). Injected
// through RuntimeEnv / SessionOptions, so tests can use a ManualClock and no code reads a
// global clock. Thread-safety: NowMicros is thread-safe in both implementations.
//
//   ManualClock clock;            // starts at 0
//   clock.Advance(1500);          // NowMicros() == 1500
#ifndef ONEFLOW_LIKE_ACTOR_CLOCK_H_
#define ONEFLOW_LIKE_ACTOR_CLOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>

namespace oneflow_like {
namespace actor {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic microseconds since an arbitrary origin.
  virtual int64_t NowMicros() const = 0;
};

// std::chrono::steady_clock.
class SystemClock final : public Clock {
 public:
  int64_t NowMicros() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

// Time moves only when told to.
class ManualClock final : public Clock {
 public:
  int64_t NowMicros() const override { return now_.load(); }
  void Advance(int64_t micros) { now_.fetch_add(micros); }

 private:
  std::atomic<int64_t> now_{0};
};

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_CLOCK_H_
