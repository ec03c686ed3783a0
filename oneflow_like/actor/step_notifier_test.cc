// StepNotifier: a step event wakes a waiter only once the count reaches its wake_at; finished
// actors and failures (NotifyAlways) wake it whatever its wake_at; nothing is lost between
// reading count() and waiting.
#include "oneflow_like/actor/step_notifier.h"

#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace oneflow_like {
namespace actor {
namespace {

using Clock = std::chrono::steady_clock;

double WaitedMs(StepNotifier* n, int64_t seen, int64_t wake_at, std::chrono::milliseconds timeout) {
  const auto begin = Clock::now();
  n->WaitChange(seen, timeout, wake_at);
  return std::chrono::duration<double, std::milli>(Clock::now() - begin).count();
}

TEST(StepNotifierTest, StepEventsBelowWakeAtDoNotEndTheWait) {
  StepNotifier n;
  const int64_t seen = n.count();
  std::thread events([&] {
    for (int i = 0; i < 3; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      n.Notify();
    }
  });
  // wake_at is 5 events away: only the timeout ends the wait.
  EXPECT_GE(WaitedMs(&n, seen, seen + 5, std::chrono::milliseconds(300)), 250.0);
  events.join();
  EXPECT_EQ(n.count(), seen + 3);
}

TEST(StepNotifierTest, TheEventReachingWakeAtEndsTheWait) {
  StepNotifier n;
  const int64_t seen = n.count();
  std::thread events([&] {
    for (int i = 0; i < 5; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      n.Notify();
    }
  });
  EXPECT_LT(WaitedMs(&n, seen, seen + 5, std::chrono::seconds(20)), 10000.0);
  events.join();
}

TEST(StepNotifierTest, AFailureOrAFinishedActorEndsTheWaitWhateverWakeAt) {
  StepNotifier n;
  const int64_t seen = n.count();
  std::thread failure([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    n.NotifyAlways();
  });
  EXPECT_LT(WaitedMs(&n, seen, seen + 1000, std::chrono::seconds(20)), 10000.0);
  failure.join();
}

TEST(StepNotifierTest, AnEventBeforeTheWaitIsNotLost) {
  StepNotifier n;
  const int64_t seen = n.count();
  n.Notify();  // after count() was read, before the wait: the wait returns at once
  EXPECT_LT(WaitedMs(&n, seen, seen + 1, std::chrono::seconds(20)), 10000.0);
  // Without a wake_at (0) any change ends it, as before.
  const int64_t seen2 = n.count();
  std::thread one([&] { n.Notify(); });
  EXPECT_LT(WaitedMs(&n, seen2, 0, std::chrono::seconds(20)), 10000.0);
  one.join();
}

}  // namespace
}  // namespace actor
}  // namespace oneflow_like
