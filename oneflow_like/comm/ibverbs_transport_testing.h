// Test helpers shared by ibverbs_transport_test (a real RDMA device, skipped without one) and
// ibverbs_transport_fake_test (the in-process fake verbs of ibverbs_fake_verbs.cc): a world of
// transports in one process, connected concurrently, and the ordered-exchange scenario.
#ifndef ONEFLOW_LIKE_COMM_IBVERBS_TRANSPORT_TESTING_H_
#define ONEFLOW_LIKE_COMM_IBVERBS_TRANSPORT_TESTING_H_

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "oneflow_like/comm/ibverbs_transport.h"

namespace oneflow_like {
namespace comm {
namespace testing_util {

// What one rank received, in arrival order. Outlives the transports that write into it.
struct Inbox {
  std::mutex mu;
  std::vector<std::pair<int, std::string>> messages;  // (from, payload)
  Transport::Receiver Receiver() {
    return [this](Rank from, absl::string_view payload) {
      std::lock_guard<std::mutex> lock(mu);
      messages.emplace_back(from.value(), std::string(payload));
    };
  }
  // Waits (hang guard only, up to 10 s) until `count` messages arrived; returns a copy.
  std::vector<std::pair<int, std::string>> WaitFor(size_t count) {
    for (int spins = 0; spins < 1000; ++spins) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (messages.size() >= count) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::lock_guard<std::mutex> lock(mu);
    return messages;
  }
};

// Opens `inboxes->size()` ranks from `base` (rank and world_size are set here), installs the
// inboxes' receivers and connects all ranks concurrently. Any error fails the test.
inline std::vector<std::unique_ptr<IbverbsTransport>> OpenAndConnect(IbverbsTransportOptions base,
                                                                     std::vector<Inbox>* inboxes) {
  const int32_t world = static_cast<int32_t>(inboxes->size());
  std::vector<std::unique_ptr<IbverbsTransport>> transports;
  for (int32_t r = 0; r < world; ++r) {
    base.rank = r;
    base.world_size = world;
    absl::StatusOr<std::unique_ptr<IbverbsTransport>> t = IbverbsTransport::Open(base);
    EXPECT_TRUE(t.ok()) << t.status();
    if (!t.ok()) return {};
    (*t)->SetReceiver((*inboxes)[r].Receiver());
    (*t)->SetErrorHandler([](const absl::Status& error) { ADD_FAILURE() << error; });
    transports.push_back(std::move(*t));
  }
  std::vector<std::vector<std::string>> published;
  for (auto& t : transports) published.push_back(t->LocalEndpoints());
  std::vector<absl::Status> results(world);
  std::vector<std::thread> threads;
  for (int32_t r = 0; r < world; ++r) {
    std::vector<std::string> for_me(world);
    for (int32_t p = 0; p < world; ++p) for_me[p] = published[p][r];
    threads.emplace_back([&, r, for_me] { results[r] = transports[r]->Connect(for_me); });
  }
  for (std::thread& thread : threads) thread.join();
  for (int32_t r = 0; r < world; ++r) EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
  return transports;
}

// Tears a world down without reporting the links that break while it goes.
inline void CloseAll(std::vector<std::unique_ptr<IbverbsTransport>>* transports) {
  for (auto& t : *transports) t->SetErrorHandler(nullptr);
  transports->clear();
}

// The message rank `from` sends as its i-th to anyone: some are several slots long.
inline std::string TestMessage(int from, int i, int64_t slot_bytes) {
  std::string payload = absl::StrCat("from ", from, " message ", i, " ");
  if (i % 7 == 3) payload.append(2 * slot_bytes + 100 + i, static_cast<char>('a' + i % 26));
  return payload;
}

// Ranks 0 and 2 (when present) each send `count` messages to rank 1 from their own thread while
// rank 1 sends `count` to rank 0 and one to itself; every receiver must see each sender's
// messages complete and in send order.
inline void ExpectOrderedExchange(std::vector<std::unique_ptr<IbverbsTransport>>& transports,
                                  std::vector<Inbox>& inboxes, int count, int64_t slot_bytes) {
  const int world = static_cast<int>(transports.size());
  std::vector<std::pair<int, int>> edges = {{0, 1}, {1, 0}};  // (from, to)
  if (world > 2) edges.push_back({2, 1});
  std::vector<std::thread> senders;
  for (const auto& edge : edges) {
    senders.emplace_back([&, edge] {
      for (int i = 0; i < count; ++i) {
        absl::Status sent = transports[edge.first]->Send(Rank(edge.second), TestMessage(edge.first, i, slot_bytes));
        ASSERT_TRUE(sent.ok()) << sent;
      }
    });
  }
  ASSERT_TRUE(transports[1]->Send(Rank(1), "to myself").ok());
  for (std::thread& sender : senders) sender.join();

  for (int to = 0; to < 2; ++to) {
    size_t expected = 0;
    for (const auto& edge : edges) expected += edge.second == to ? count : 0;
    expected += to == 1 ? 1 : 0;
    std::vector<std::pair<int, std::string>> got = inboxes[to].WaitFor(expected);
    ASSERT_EQ(got.size(), expected) << "rank " << to;
    std::vector<int> next(world, 0);
    for (const auto& message : got) {
      if (message.second == "to myself") {
        EXPECT_EQ(message.first, to);
        continue;
      }
      ASSERT_EQ(message.second, TestMessage(message.first, next[message.first], slot_bytes)) << "at rank " << to;
      ++next[message.first];
    }
  }
}

}  // namespace testing_util
}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_IBVERBS_TRANSPORT_TESTING_H_
