#include "oneflow_like/actor/collective_order.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <random>
#include <future>
#include <thread>

#include "gtest/gtest.h"

namespace oneflow_like {
namespace actor {
namespace {

using Call = CollectiveOrder::Call;

Call Make(const std::string& name, CollectiveParams::IssuePhase phase, int64_t order, int64_t rate) {
  return Call{name, phase, order, rate};
}

TEST(CollectiveOrderTest, OneStepIsBeforeThenPiecesByGlobalOrderThenAfter) {
  auto order = CollectiveOrder::Create({Make("a", CollectiveParams::PER_PIECE, 5, 2),
                                        Make("b", CollectiveParams::BEFORE_PIECES, 7, 1),
                                        Make("c", CollectiveParams::AFTER_PIECES, 1, 1),
                                        Make("d", CollectiveParams::PER_PIECE, 2, 2)},
                                       /*pieces_per_step=*/2);
  ASSERT_TRUE(order.ok()) << order.status();
  // Slots: forwards of pieces 0 and 1 at 0 and 2 (their backwards would be 1 and 3), after: 2N.
  EXPECT_EQ((*order)->StepSequence(), (std::vector<std::string>{"b@-1", "d@0", "a@0", "d@2", "a@2", "c@4"}));
  // Firing n of a call: step n / rate, firing n % rate of the step; 6 tickets a step.
  EXPECT_EQ((*order)->Ticket(0, 0), 2);   // a, step 0 piece 0
  EXPECT_EQ((*order)->Ticket(0, 3), 10);  // a, step 1 piece 1
  EXPECT_EQ((*order)->Ticket(1, 2), 12);  // b, step 2
  EXPECT_EQ((*order)->Ticket(2, 1), 11);  // c, step 1
  EXPECT_EQ((*order)->Ticket(3, 1), 3);   // d, step 0 piece 1
}

TEST(CollectiveOrderTest, MembersWithDifferentCallsAgreeOnTheSharedOnes) {
  // Rank 0 is in groups {0,1} (orders 1, 4) and {0,2} (orders 2, 3); rank 1 only in {0,1}.
  auto rank0 = CollectiveOrder::Create({Make("g01_1", CollectiveParams::PER_PIECE, 1, 3),
                                        Make("g02_2", CollectiveParams::PER_PIECE, 2, 3),
                                        Make("g02_3", CollectiveParams::AFTER_PIECES, 3, 1),
                                        Make("g01_4", CollectiveParams::BEFORE_PIECES, 4, 1)},
                                       3);
  auto rank1 = CollectiveOrder::Create({Make("g01_4", CollectiveParams::BEFORE_PIECES, 4, 1),
                                        Make("g01_1", CollectiveParams::PER_PIECE, 1, 3)},
                                       3);
  ASSERT_TRUE(rank0.ok() && rank1.ok());
  std::vector<std::string> shared;
  for (const std::string& s : (*rank0)->StepSequence()) {
    if (s.rfind("g01", 0) == 0) shared.push_back(s);
  }
  EXPECT_EQ(shared, (*rank1)->StepSequence());
  EXPECT_EQ(shared, (std::vector<std::string>{"g01_4@-1", "g01_1@0", "g01_1@2", "g01_1@4"}));
}

// A pipeline stage that keeps 2 pieces in flight issues 1F1B: F0 F1 B0 F2 B1 F3 B2 B3 (without
// it, piece 1's forward calls would wait for piece 0's backward, which waits for the later
// stages: the stages would run one after another).
TEST(CollectiveOrderTest, PipelineStagesIssueOneForwardOneBackward) {
  Call forward = Make("fwd", CollectiveParams::PER_PIECE, 1, 4), backward = Make("bwd", CollectiveParams::PER_PIECE, 2, 4);
  forward.pieces_in_flight = backward.pieces_in_flight = 2;
  backward.backward = true;
  auto order = CollectiveOrder::Create({forward, backward}, 4);
  ASSERT_TRUE(order.ok()) << order.status();
  EXPECT_EQ((*order)->StepSequence(), (std::vector<std::string>{"fwd@0", "fwd@1", "bwd@2", "fwd@3", "bwd@4", "fwd@5",
                                                                "bwd@6", "bwd@7"}));
  // As many in flight as pieces: every forward first (GPipe); 1: forward and backward in turn.
  forward.pieces_in_flight = backward.pieces_in_flight = 4;
  auto all = CollectiveOrder::Create({forward, backward}, 4);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ((*all)->StepSequence(), (std::vector<std::string>{"fwd@0", "fwd@1", "fwd@2", "fwd@3", "bwd@4", "bwd@5",
                                                              "bwd@6", "bwd@7"}));
  forward.pieces_in_flight = backward.pieces_in_flight = 1;
  auto one = CollectiveOrder::Create({forward, backward}, 4);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ((*one)->StepSequence(), (std::vector<std::string>{"fwd@0", "bwd@1", "fwd@2", "bwd@3", "fwd@4", "bwd@5",
                                                              "fwd@6", "bwd@7"}));
  // Two stages' orders on one rank cannot both hold.
  forward.pieces_in_flight = 2;
  auto mixed = CollectiveOrder::Create({forward, backward}, 4);
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("one rank, one 1F1B order"), std::string::npos) << mixed.status();
}

TEST(CollectiveOrderTest, RefusesPlansWithoutAnAgreedPlace) {
  auto unplaced = CollectiveOrder::Create({Make("x", CollectiveParams::UNPLACED, 3, 4)}, 4);
  ASSERT_FALSE(unplaced.ok());
  EXPECT_EQ(unplaced.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unplaced.status().message().find("'x' (global_order 3)"), std::string::npos) << unplaced.status();
  EXPECT_NE(unplaced.status().message().find("summed over the step's pieces"), std::string::npos);

  auto per_piece_once = CollectiveOrder::Create({Make("y", CollectiveParams::PER_PIECE, 1, 1)}, 4);
  ASSERT_FALSE(per_piece_once.ok());
  EXPECT_NE(per_piece_once.status().message().find("fires 1 time(s) a step, not pieces_per_step = 4"),
            std::string::npos)
      << per_piece_once.status();

  auto after_per_piece = CollectiveOrder::Create({Make("z", CollectiveParams::AFTER_PIECES, 1, 4)}, 4);
  ASSERT_FALSE(after_per_piece.ok());
  EXPECT_NE(after_per_piece.status().message().find("AFTER_PIECES but it fires 4 times a step"), std::string::npos)
      << after_per_piece.status();

  auto twice = CollectiveOrder::Create({Make("p", CollectiveParams::PER_PIECE, 2, 1),
                                        Make("q", CollectiveParams::PER_PIECE, 2, 1)},
                                       1);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("task 'p' has the same global_order"), std::string::npos) << twice.status();

  // One piece a step: a PER_PIECE call firing once is what every plan with one piece has.
  EXPECT_TRUE(CollectiveOrder::Create({Make("w", CollectiveParams::PER_PIECE, 0, 1)}, 1).ok());
}

TEST(CollectiveOrderTest, ClosuresRunInTicketOrderWhateverOrderTheyArrive) {
  auto order = CollectiveOrder::Create({Make("a", CollectiveParams::PER_PIECE, 0, 1)}, 1);
  ASSERT_TRUE(order.ok());
  constexpr int kTickets = 2000;
  std::vector<int> tickets(kTickets);
  for (int i = 0; i < kTickets; ++i) tickets[i] = i;
  std::shuffle(tickets.begin(), tickets.end(), std::mt19937(7));
  std::mutex mu;
  std::vector<int> ran;
  std::atomic<int> concurrent{0}, most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < kTickets; i += 4) {
        const int ticket = tickets[i];
        (*order)->Issue(ticket, [&, ticket] {
          most = std::max(most.load(), ++concurrent);
          {
            std::lock_guard<std::mutex> lock(mu);
            ran.push_back(ticket);
          }
          --concurrent;
        });
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(ran.size(), static_cast<size_t>(kTickets));
  for (int i = 0; i < kTickets; ++i) ASSERT_EQ(ran[i], i) << "position " << i;
  EXPECT_EQ(most.load(), 1);  // one closure at a time
  EXPECT_EQ((*order)->issued(), kTickets);
  EXPECT_EQ((*order)->Describe(), "");
}

TEST(CollectiveOrderTest, AClosureMaySubmitTheNextTicket) {
  auto order = CollectiveOrder::Create({Make("a", CollectiveParams::PER_PIECE, 0, 1)}, 1);
  ASSERT_TRUE(order.ok());
  std::vector<int> ran;
  std::function<void(int)> chain = [&](int ticket) {
    ran.push_back(ticket);
    if (ticket < 5) (*order)->Issue(ticket + 1, [&, ticket] { chain(ticket + 1); });
  };
  (*order)->Issue(0, [&] { chain(0); });
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST(CollectiveOrderTest, DescribeNamesTheCallItWaitsFor) {
  auto order = CollectiveOrder::Create({Make("grad_bucket0.all_reduce@r1", CollectiveParams::AFTER_PIECES, 9, 1),
                                        Make("h.all_gather@r1", CollectiveParams::PER_PIECE, 4, 2)},
                                       2);
  ASSERT_TRUE(order.ok());
  bool ran = false;
  (*order)->Issue(2, [&] { ran = true; });  // the bucket, step 0; pieces 0 and 1 not yet fired
  EXPECT_FALSE(ran);
  const std::string text = (*order)->Describe();
  EXPECT_NE(text.find("issued 0 call(s); the next is 'h.all_gather@r1' (global_order 4) step 0 piece 0"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("held back behind it: 1 ('grad_bucket0.all_reduce@r1' (global_order 9) step 0 after the pieces)"),
            std::string::npos)
      << text;
  (*order)->Issue(0, [] {});
  EXPECT_FALSE(ran);
  (*order)->Issue(1, [] {});
  EXPECT_TRUE(ran);
}

// Close (the runtime's destructor): what is held is dropped, what comes later too, and Close
// returns only once the closure running on another thread finished.
TEST(CollectiveOrderTest, CloseDropsHeldCallsAndWaitsForTheRunningOne) {
  auto order = CollectiveOrder::Create({Make("a", CollectiveParams::PER_PIECE, 0, 1)}, 1);
  ASSERT_TRUE(order.ok());
  std::atomic<bool> running{false}, finished{false}, held_ran{false}, late_ran{false};
  std::promise<void> release;
  std::thread drainer([&] {
    (*order)->Issue(0, [&] {
      running = true;
      release.get_future().wait();
      finished = true;
    });
  });
  (*order)->Issue(1, [&] { held_ran = true; });  // held behind ticket 0
  while (!running) std::this_thread::yield();
  std::thread closer([&] { (*order)->Close(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(finished);
  release.set_value();
  closer.join();
  EXPECT_TRUE(finished);  // Close returned after the running closure
  drainer.join();
  (*order)->Issue(2, [&] { late_ran = true; });
  EXPECT_FALSE(held_ran);
  EXPECT_FALSE(late_ran);
}

// Nothing is issued before every body's connection finished: Connected is false while one is
// pending, WaitConnected returns once it is set.
TEST(CollectiveOrderTest, ConnectedOnlyOnceEveryConnectionFinished) {
  auto order = CollectiveOrder::Create({Make("a", CollectiveParams::PER_PIECE, 0, 1)}, 1);
  ASSERT_TRUE(order.ok());
  std::promise<void> first, second;
  std::shared_future<void> f1 = first.get_future().share(), f2 = second.get_future().share();
  for (const std::shared_future<void>& f : {f1, f2}) {
    (*order)->AddConnection([f] { return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready; },
                            [f] { f.wait(); });
  }
  EXPECT_FALSE((*order)->Connected());
  first.set_value();
  EXPECT_FALSE((*order)->Connected());
  std::atomic<bool> waited{false};
  std::thread waiter([&] {
    (*order)->WaitConnected();
    waited = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_FALSE(waited);
  second.set_value();
  waiter.join();
  EXPECT_TRUE(waited);
  EXPECT_TRUE((*order)->Connected());
}

}  // namespace
}  // namespace actor
}  // namespace oneflow_like
