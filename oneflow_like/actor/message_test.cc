#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oneflow_like/actor/clock.h"
#include "oneflow_like/actor/mailbox.h"
#include "oneflow_like/actor/wire.h"

namespace oneflow_like {
namespace actor {
namespace {

using ::testing::HasSubstr;

TEST(WireTest, RemoteMessagesRoundTrip) {
  RemoteMessage m{RemoteKind::kReady, RegisterId(7), 1, TaskId(3), TaskId(12), std::string("\x01\x00\x02", 3)};
  absl::StatusOr<RemoteMessage> back = DecodeRemoteMessage(EncodeRemoteMessage(m));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->kind, RemoteKind::kReady);
  EXPECT_EQ(back->register_id, RegisterId(7));
  EXPECT_EQ(back->buffer, 1);
  EXPECT_EQ(back->source_task, TaskId(3));
  EXPECT_EQ(back->destination_task, TaskId(12));
  EXPECT_EQ(back->payload, m.payload);
}

TEST(WireTest, PayloadPartsArePackedInOrderAndDecodeAsOneView) {
  const std::string a("\x05\x06", 2), b = "slot-two", c;
  RemoteMessage m{RemoteKind::kReady, RegisterId(9), 2, TaskId(4), TaskId(5), "p"};
  m.payload_parts = {a, c, b};
  EXPECT_EQ(m.payload_size(), 1 + 2 + 8);
  const std::string wire = EncodeRemoteMessage(m);
  absl::string_view payload;
  absl::StatusOr<RemoteMessage> back = DecodeRemoteMessageView(wire, &payload);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(payload, "p" + a + b);
  EXPECT_TRUE(back->payload.empty());  // a view into `wire`, not a copy
  EXPECT_EQ(payload.data(), wire.data() + (wire.size() - payload.size()));
  EXPECT_EQ(back->register_id, RegisterId(9));
  EXPECT_EQ(DecodeRemoteMessage(wire)->payload, "p" + a + b);
  EXPECT_EQ(DecodeRemoteMessageView("ab", &payload).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WireTest, GarbageIsAnErrorNotACrash) {
  EXPECT_EQ(DecodeRemoteMessage("abc").status().code(), absl::StatusCode::kInvalidArgument);
  std::string bad_kind =
      EncodeRemoteMessage(RemoteMessage{RemoteKind::kReturned, RegisterId(1), 0, TaskId(1), TaskId(2), ""});
  bad_kind[0] = 9;
  EXPECT_THAT(std::string(DecodeRemoteMessage(bad_kind).status().message()), HasSubstr("unknown actor message kind 9"));
  std::string with_payload =
      EncodeRemoteMessage(RemoteMessage{RemoteKind::kReturned, RegisterId(1), 0, TaskId(1), TaskId(2), ""}) + "x";
  EXPECT_FALSE(DecodeRemoteMessage(with_payload).ok());
  EXPECT_FALSE(DecodeRemoteMessage(
                   EncodeRemoteMessage(RemoteMessage{RemoteKind::kReady, RegisterId(1), -4, TaskId(1), TaskId(2), ""}))
                   .ok());
}

TEST(MailboxTest, DeliversEveryMessageInPushOrderAcrossThreads) {
  Mailbox box;
  constexpr int kCount = 1000;
  std::thread producer([&box] {
    for (int i = 0; i < kCount; ++i) box.Push(ActorMessage{MessageKind::kRegisterReady, ActorId(1), 0, i, 0});
  });
  std::vector<ActorMessage> batch;
  int next = 0;
  while (next < kCount) {
    box.PopAll(&batch);
    for (const ActorMessage& m : batch) EXPECT_EQ(m.buffer, next++);
  }
  producer.join();
  EXPECT_EQ(MessageToString(ActorMessage{MessageKind::kRegisterReturned, ActorId(3), 1, 2, 0}),
            "returned(actor=3, port=1, buffer=2)");
}

TEST(ClockTest, ManualClockMovesOnlyWhenTold) {
  ManualClock clock;
  EXPECT_EQ(clock.NowMicros(), 0);
  clock.Advance(1500);
  EXPECT_EQ(clock.NowMicros(), 1500);
  SystemClock system;
  const int64_t a = system.NowMicros();
  EXPECT_GE(system.NowMicros(), a);
}

}  // namespace
}  // namespace actor
}  // namespace oneflow_like
