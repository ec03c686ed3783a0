// IbverbsTransport over the in-process fake verbs (ibverbs_fake_verbs.cc, linked statically into
// this test so it replaces libibverbs): the data path, credits, fragmentation, the completion
// thread and the error paths run here even without an RDMA device. What the fake cannot show is
// real hardware behaviour (timing, MTU, RoCE routing): ibverbs_transport_test covers that where a
// device exists.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oneflow_like/comm/ibverbs_transport.h"
#include "oneflow_like/comm/ibverbs_transport_testing.h"

namespace oneflow_like {
namespace comm {
namespace {

using ::testing::HasSubstr;
using testing_util::Inbox;

IbverbsTransportOptions SmallSlots() {
  IbverbsTransportOptions options;
  options.slot_bytes = 256;  // messages of > 2 slots are common, so are credit waits
  options.slots_per_peer = 2;
  options.max_message_bytes = 1 << 16;
  options.connect_timeout_ms = 20000;  // hang guard only
  return options;
}

TEST(IbverbsFakeTest, ThreeRanksExchangeOrderedFragmentedMessages) {
  std::vector<Inbox> inboxes(3);
  std::vector<std::unique_ptr<IbverbsTransport>> transports = testing_util::OpenAndConnect(SmallSlots(), &inboxes);
  ASSERT_EQ(transports.size(), 3u);
  testing_util::ExpectOrderedExchange(transports, inboxes, /*count=*/200, SmallSlots().slot_bytes);
  testing_util::CloseAll(&transports);
}

// SendRegistered: payloads of at least pull_min_bytes in registered memory are pulled by the
// receiver (RDMA READ in slot-sized chunks, here 256 bytes); small ones, unregistered ones and
// plain Sends are pushed; all arrive as prefix + payload, in send order, on both edges at once.
TEST(IbverbsFakeTest, PullModelKeepsOrderWithPushedMessages) {
  IbverbsTransportOptions options = SmallSlots();
  options.pull_min_bytes = 1000;
  std::vector<Inbox> inboxes(2);
  std::vector<std::unique_ptr<IbverbsTransport>> transports = testing_util::OpenAndConnect(options, &inboxes);
  ASSERT_EQ(transports.size(), 2u);
  std::vector<std::string> registered(2), unregistered(2);
  for (int r = 0; r < 2; ++r) {
    registered[r].resize(60000);
    for (size_t i = 0; i < registered[r].size(); ++i) registered[r][i] = static_cast<char>((i * 7 + r * 13) % 251);
    unregistered[r] = registered[r].substr(0, 5000);
    ASSERT_TRUE(transports[r]->RegisterMemory(registered[r].data(), registered[r].size()).ok());
  }
  // (kind, offset, length): 0 = Send, 1 = SendRegistered from registered memory, 2 = from elsewhere.
  const std::vector<std::tuple<int, size_t, size_t>> plan = {
      {1, 0, 20000}, {0, 0, 30}, {1, 100, 999}, {1, 3000, 40001}, {0, 0, 700}, {2, 0, 5000}, {1, 7, 1000}, {1, 0, 60000}};
  auto expected = [&](int r, size_t i) {
    const auto [kind, offset, length] = plan[i];
    const std::string prefix = absl::StrCat("hdr", r, "/", i, ":");
    if (kind == 0) return std::string(700 == length ? 700 : length, static_cast<char>('a' + i));
    return prefix + (kind == 1 ? registered[r] : unregistered[r]).substr(offset, length);
  };
  std::vector<std::thread> senders;
  for (int r = 0; r < 2; ++r) {
    senders.emplace_back([&, r] {
      for (size_t i = 0; i < plan.size(); ++i) {
        const auto [kind, offset, length] = plan[i];
        const std::string prefix = absl::StrCat("hdr", r, "/", i, ":");
        absl::Status sent =
            kind == 0 ? transports[r]->Send(Rank(1 - r), expected(r, i))
                      : transports[r]->SendRegistered(
                            Rank(1 - r), prefix,
                            absl::string_view((kind == 1 ? registered[r] : unregistered[r]).data() + offset, length));
        EXPECT_TRUE(sent.ok()) << sent;
      }
    });
  }
  for (std::thread& t : senders) t.join();
  for (int r = 0; r < 2; ++r) {
    std::vector<std::pair<int, std::string>> got = inboxes[1 - r].WaitFor(plan.size());
    ASSERT_EQ(got.size(), plan.size());
    for (size_t i = 0; i < plan.size(); ++i) {
      EXPECT_EQ(got[i].first, r);
      EXPECT_TRUE(got[i].second == expected(r, i)) << "rank " << r << " -> " << 1 - r << " message " << i;
    }
    EXPECT_EQ(transports[1 - r]->messages_pulled(), 4);  // 20000, 40001, 1000 and 60000 bytes
  }
  testing_util::CloseAll(&transports);
}

TEST(IbverbsWireTest, PullImmediateAndRequestRoundTrip) {
  const IbverbsImmediate pull = IbverbsImmediate::Parse(IbverbsImmediate::Pull(57));
  EXPECT_TRUE(pull.pull);
  EXPECT_FALSE(pull.credit);
  EXPECT_FALSE(pull.last);
  EXPECT_EQ(pull.value, 57u);
  EXPECT_FALSE(IbverbsImmediate::Parse(IbverbsImmediate::Data(57, true)).pull);
  EXPECT_FALSE(IbverbsImmediate::Parse(IbverbsImmediate::Credit(3)).pull);
  IbverbsPullRequest request;
  request.address = 0x7f0012345678;
  request.rkey = 77;
  request.length = 1 << 20;
  request.crc32c = 0xdeadbeef;
  request.prefix = std::string("\x01\x00hdr", 5);
  absl::StatusOr<IbverbsPullRequest> back = IbverbsPullRequest::Decode(request.Encode());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->address, request.address);
  EXPECT_EQ(back->rkey, request.rkey);
  EXPECT_EQ(back->length, request.length);
  EXPECT_EQ(back->crc32c, request.crc32c);
  EXPECT_EQ(back->prefix, request.prefix);
  EXPECT_EQ(IbverbsPullRequest::Decode("OLPR").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(IbverbsPullRequest::Decode(std::string(40, 'x')).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(IbverbsFakeTest, SingleSlotRingAndMaximumSizeMessage) {
  IbverbsTransportOptions options = SmallSlots();
  options.slots_per_peer = 1;
  options.max_message_bytes = 10000;
  std::vector<Inbox> inboxes(2);
  std::vector<std::unique_ptr<IbverbsTransport>> transports = testing_util::OpenAndConnect(options, &inboxes);
  ASSERT_EQ(transports.size(), 2u);
  const std::string biggest(10000, 'z');
  ASSERT_TRUE(transports[0]->Send(Rank(1), biggest).ok());
  ASSERT_TRUE(transports[0]->Send(Rank(1), "").ok());  // empty payloads are messages too
  absl::Status too_big = transports[0]->Send(Rank(1), biggest + "!");
  EXPECT_EQ(too_big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_big.message()), HasSubstr("exceeds max_message_bytes 10000"));
  EXPECT_EQ(transports[0]->Send(Rank(5), "x").code(), absl::StatusCode::kInvalidArgument);
  std::vector<std::pair<int, std::string>> got = inboxes[1].WaitFor(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].second, biggest);
  EXPECT_EQ(got[1].second, "");
  testing_util::CloseAll(&transports);
}

TEST(IbverbsFakeTest, LifecycleAndEndpointErrors) {
  IbverbsTransportOptions options = SmallSlots();
  options.world_size = 2;
  absl::StatusOr<std::unique_ptr<IbverbsTransport>> zero = IbverbsTransport::Open(options);
  options.rank = 1;
  absl::StatusOr<std::unique_ptr<IbverbsTransport>> one = IbverbsTransport::Open(options);
  ASSERT_TRUE(zero.ok() && one.ok());
  IbverbsTransport& t0 = **zero;
  const std::string from1 = (*one)->LocalEndpoints()[0];
  EXPECT_EQ(t0.LocalEndpoints()[0], "");

  EXPECT_EQ(t0.Send(Rank(1), "early").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(t0.Connect({"", from1}).message()), HasSubstr("SetReceiver before Connect"));
  Inbox inbox;
  t0.SetReceiver(inbox.Receiver());
  EXPECT_EQ(t0.Connect({""}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t0.Connect({"", "garbage"}).message()), HasSubstr("ibverbs endpoint info"));
  // Rank 0's own endpoint for rank 1 handed back to it, instead of rank 1's endpoint for rank 0.
  EXPECT_THAT(std::string(t0.Connect({"", t0.LocalEndpoints()[1]}).message()), HasSubstr("should come from rank 1"));
  IbverbsEndpointInfo other_geometry = *IbverbsEndpointInfo::Decode(from1);
  other_geometry.slots = 3;
  EXPECT_THAT(std::string(t0.Connect({"", other_geometry.Encode()}).message()), HasSubstr("different options"));

  // Self-sends need no connection.
  ASSERT_TRUE(t0.Send(Rank(0), "me").ok());
  EXPECT_EQ(inbox.WaitFor(1).at(0), std::make_pair(0, std::string("me")));
}

TEST(IbverbsFakeTest, ConnectTimesOutWhenThePeerNeverConnects) {
  IbverbsTransportOptions options = SmallSlots();
  options.world_size = 2;
  options.connect_timeout_ms = 200;
  absl::StatusOr<std::unique_ptr<IbverbsTransport>> zero = IbverbsTransport::Open(options);
  options.rank = 1;
  absl::StatusOr<std::unique_ptr<IbverbsTransport>> one = IbverbsTransport::Open(options);  // never connects
  ASSERT_TRUE(zero.ok() && one.ok());
  Inbox inbox;
  (*zero)->SetReceiver(inbox.Receiver());
  absl::Status connected = (*zero)->Connect({"", (*one)->LocalEndpoints()[0]});
  EXPECT_EQ(connected.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(connected.message()), HasSubstr("no hello from peer rank 1 within 200 ms"));
  EXPECT_EQ((*zero)->Connect({"", (*one)->LocalEndpoints()[0]}).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(IbverbsFakeTest, ADeadPeerBreaksTheLinkOnceNamingIt) {
  std::vector<Inbox> inboxes(2);
  std::vector<std::unique_ptr<IbverbsTransport>> transports = testing_util::OpenAndConnect(SmallSlots(), &inboxes);
  ASSERT_EQ(transports.size(), 2u);
  std::mutex mu;
  std::vector<absl::Status> errors;
  transports[0]->SetErrorHandler([&](const absl::Status& error) {
    std::lock_guard<std::mutex> lock(mu);
    errors.push_back(error);
  });
  transports[1]->SetErrorHandler(nullptr);
  transports.pop_back();  // rank 1 goes away

  ASSERT_TRUE(transports[0]->Send(Rank(1), "into the void").ok());  // handed to the link; fails later
  for (int spins = 0; spins < 1000; ++spins) {                       // hang guard only
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!errors.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  absl::Status after = transports[0]->Send(Rank(1), "again");
  EXPECT_EQ(after.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(after.message()), HasSubstr("link to peer rank 1"));
  EXPECT_THAT(std::string(after.message()), HasSubstr("transport retry counter exceeded"));
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], after);
  EXPECT_TRUE(transports[0]->Send(Rank(0), "self still works").ok());
  transports[0]->SetErrorHandler(nullptr);
}

TEST(IbverbsFakeTest, ReceiverSendingIntoAFullRingFailsInsteadOfDeadlocking) {
  IbverbsTransportOptions options = SmallSlots();
  options.slots_per_peer = 1;
  std::vector<Inbox> inboxes(2);
  std::vector<std::unique_ptr<IbverbsTransport>> transports = testing_util::OpenAndConnect(options, &inboxes);
  ASSERT_EQ(transports.size(), 2u);
  // Rank 0 replies from inside its receiver. With one slot, a reply of several fragments would need
  // credits that only the (busy) completion thread could deliver: refused, nothing sent. A
  // one-fragment reply fits the free slot and goes out.
  std::mutex mu;
  std::vector<absl::Status> replies;
  IbverbsTransport* t0 = transports[0].get();
  t0->SetReceiver([&, t0](Rank from, absl::string_view) {
    absl::Status big = t0->Send(from, std::string(3 * options.slot_bytes, 'r'));
    absl::Status small = t0->Send(from, "small reply");
    std::lock_guard<std::mutex> lock(mu);
    replies = {big, small};
  });
  ASSERT_TRUE(transports[1]->Send(Rank(0), "ping").ok());
  std::vector<std::pair<int, std::string>> got = inboxes[1].WaitFor(1);
  ASSERT_TRUE(transports[0]->Send(Rank(1), "after").ok());  // the edge is intact: no half frame
  got = inboxes[1].WaitFor(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], std::make_pair(0, std::string("small reply")));
  EXPECT_EQ(got[1], std::make_pair(0, std::string("after")));
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[0].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(replies[0].message()), HasSubstr("nothing was sent"));
  EXPECT_TRUE(replies[1].ok()) << replies[1];
  testing_util::CloseAll(&transports);
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like
