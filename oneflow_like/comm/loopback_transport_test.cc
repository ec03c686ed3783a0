#include "oneflow_like/comm/loopback_transport.h"

#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oneflow_like {
namespace comm {
namespace {

using ::testing::HasSubstr;

struct Received {
  std::mutex mu;
  std::vector<std::pair<int, std::string>> messages;  // (from, payload)
  Transport::Receiver Receiver() {
    return [this](Rank from, absl::string_view payload) {
      std::lock_guard<std::mutex> lock(mu);
      messages.emplace_back(from.value(), std::string(payload));
    };
  }
};

TEST(FrameTest, RoundTripsAndRejectsGarbage) {
  Frame frame{Rank(2), Rank(5), 17, std::string("a\0b", 3)};
  absl::StatusOr<Frame> back = DecodeFrame(EncodeFrame(frame));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->from, Rank(2));
  EXPECT_EQ(back->to, Rank(5));
  EXPECT_EQ(back->sequence, 17u);
  EXPECT_EQ(back->payload, std::string("a\0b", 3));

  EXPECT_EQ(DecodeFrame("short").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(DecodeFrame(std::string(40, 'x')).status().message()), HasSubstr("not a transport frame"));
  std::string truncated = EncodeFrame(frame);
  truncated.pop_back();
  EXPECT_THAT(std::string(DecodeFrame(truncated).status().message()), HasSubstr("declares 3 payload bytes"));
}

TEST(LoopbackTest, DeliversInOrderWithSenderRank) {
  std::unique_ptr<LoopbackHub> hub = LoopbackHub::Create(3);
  Received at1;
  hub->endpoint(Rank(1))->SetReceiver(at1.Receiver());
  ASSERT_TRUE(hub->endpoint(Rank(0))->Send(Rank(1), "first").ok());
  ASSERT_TRUE(hub->endpoint(Rank(2))->Send(Rank(1), "other").ok());
  ASSERT_TRUE(hub->endpoint(Rank(0))->Send(Rank(1), "second").ok());
  ASSERT_EQ(at1.messages.size(), 3u);
  EXPECT_EQ(at1.messages[0], std::make_pair(0, std::string("first")));
  EXPECT_EQ(at1.messages[1], std::make_pair(2, std::string("other")));
  EXPECT_EQ(at1.messages[2], std::make_pair(0, std::string("second")));
  EXPECT_EQ(hub->frames_sent(Rank(0), Rank(1)), 2u);
  EXPECT_EQ(hub->frames_sent(Rank(2), Rank(1)), 1u);
  EXPECT_EQ(hub->endpoint(Rank(2))->world_size(), 3);
  EXPECT_EQ(hub->endpoint(Rank(2))->rank(), Rank(2));
}

TEST(LoopbackTest, BadRanksAndMissingReceiverAreErrors) {
  std::unique_ptr<LoopbackHub> hub = LoopbackHub::Create(2);
  EXPECT_EQ(hub->endpoint(Rank(2)), nullptr);
  absl::Status unknown = hub->endpoint(Rank(0))->Send(Rank(7), "x");
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.message()), HasSubstr("rank 7 is outside the world [0, 2)"));
  absl::Status no_receiver = hub->endpoint(Rank(0))->Send(Rank(1), "x");
  EXPECT_EQ(no_receiver.code(), absl::StatusCode::kFailedPrecondition);
  // The failed send consumed no sequence number: the next one still arrives as frame 0.
  Received at1;
  hub->endpoint(Rank(1))->SetReceiver(at1.Receiver());
  ASSERT_TRUE(hub->endpoint(Rank(0))->Send(Rank(1), "y").ok());
  EXPECT_EQ(at1.messages.size(), 1u);
}

TEST(LoopbackTest, RawDeliveryChecksBytesAddressAndSequence) {
  std::unique_ptr<LoopbackHub> hub = LoopbackHub::Create(2);
  Received at1;
  hub->endpoint(Rank(1))->SetReceiver(at1.Receiver());
  EXPECT_EQ(hub->DeliverRaw(Rank(1), "garbage bytes").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(hub->DeliverRaw(Rank(1), EncodeFrame(Frame{Rank(9), Rank(1), 0, "p"})).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(hub->DeliverRaw(Rank(0), EncodeFrame(Frame{Rank(1), Rank(1), 0, "p"})).message()),
              HasSubstr("addressed to rank 1 arrived at rank 0"));
  // A skipped sequence number is data loss; the in-order one is accepted.
  absl::Status gap = hub->DeliverRaw(Rank(1), EncodeFrame(Frame{Rank(0), Rank(1), 1, "p"}));
  EXPECT_EQ(gap.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(gap.message()), HasSubstr("sequence 1 arrived, expected 0"));
  EXPECT_TRUE(hub->DeliverRaw(Rank(1), EncodeFrame(Frame{Rank(0), Rank(1), 0, "p"})).ok());
  EXPECT_EQ(at1.messages.size(), 1u);
  // The edge's sender side did not advance, so a real send now reuses sequence 0: detected.
  EXPECT_EQ(hub->endpoint(Rank(0))->Send(Rank(1), "q").code(), absl::StatusCode::kDataLoss);
}

TEST(LoopbackTest, ConcurrentSendersKeepPerEdgeOrder) {
  constexpr int kSenders = 3;
  constexpr int kMessages = 500;
  std::unique_ptr<LoopbackHub> hub = LoopbackHub::Create(kSenders + 1);
  Received at0;
  hub->endpoint(Rank(0))->SetReceiver(at0.Receiver());
  std::vector<std::thread> threads;
  for (int s = 1; s <= kSenders; ++s) {
    threads.emplace_back([&hub, s] {
      for (int i = 0; i < kMessages; ++i) ASSERT_TRUE(hub->endpoint(Rank(s))->Send(Rank(0), std::to_string(i)).ok());
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(at0.messages.size(), static_cast<size_t>(kSenders * kMessages));
  std::vector<int> next(kSenders + 1, 0);
  for (const auto& [from, payload] : at0.messages) {
    EXPECT_EQ(payload, std::to_string(next[from])) << "from rank " << from;
    ++next[from];
  }
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like
