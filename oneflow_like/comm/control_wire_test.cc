#include "oneflow_like/comm/control_wire.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oneflow_like/core/fixed_codec.h"

namespace oneflow_like {
namespace comm {
namespace {

using ::testing::HasSubstr;

ControlMessage Sample() {
  ControlMessage message;
  message.type = MessageType::kSet;
  message.request_id = 0x0102030405060708ull;
  message.code = 5;
  message.a = -3;
  message.b = int64_t{1} << 40;
  message.key = std::string("k\0ey", 4);
  message.value = "value";
  return message;
}

TEST(ControlWireTest, RoundTripsEveryField) {
  const std::string bytes = EncodeControlMessage(Sample());
  // Independent size: header 16 + fixed body 37 + strings.
  ASSERT_EQ(bytes.size(), 16u + 37u + 4u + 5u);
  absl::StatusOr<size_t> size = PeekControlFrame(bytes, 1 << 20);
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(*size, bytes.size());
  absl::StatusOr<ControlMessage> back = DecodeControlFrame(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->type, MessageType::kSet);
  EXPECT_EQ(back->request_id, 0x0102030405060708ull);
  EXPECT_EQ(back->code, 5);
  EXPECT_EQ(back->a, -3);
  EXPECT_EQ(back->b, int64_t{1} << 40);
  EXPECT_EQ(back->key, std::string("k\0ey", 4));
  EXPECT_EQ(back->value, "value");
}

TEST(ControlWireTest, PeekNeedsTheWholeHeaderAndRejectsGarbageEarly) {
  const std::string bytes = EncodeControlMessage(Sample());
  for (size_t prefix = 0; prefix < kControlFrameHeaderBytes; ++prefix) {
    absl::StatusOr<size_t> size = PeekControlFrame(bytes.substr(0, prefix), 1 << 20);
    ASSERT_TRUE(size.ok()) << prefix << ": " << size.status();
    EXPECT_EQ(*size, 0u) << prefix;
  }
  EXPECT_EQ(PeekControlFrame("G", 1 << 20).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(PeekControlFrame("GET / HTTP/1.1\r\n", 1 << 20).status().message()),
              HasSubstr("not a control-plane frame"));
}

TEST(ControlWireTest, BoundsTheBodyBeforeReadingIt) {
  std::string header;
  std::string magic_and_version = EncodeControlMessage(Sample()).substr(0, 8);
  header = magic_and_version;
  AppendFixed<uint64_t>(&header, uint64_t{1} << 40);  // a terabyte, announced
  absl::StatusOr<size_t> size = PeekControlFrame(header, 1 << 20);
  EXPECT_EQ(size.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(size.status().message()), HasSubstr("exceeds max_message_bytes"));
}

TEST(ControlWireTest, RejectsBadStringLengthsAndUnknownTypes) {
  std::string bytes = EncodeControlMessage(Sample());
  std::string lying = bytes;
  lying[16 + 1 + 8 + 4 + 8 + 8] = 100;  // key length (after type, id, code, a, b) says 100; the body holds 4
  EXPECT_THAT(std::string(DecodeControlFrame(lying).status().message()), HasSubstr("string lengths"));
  std::string unknown = bytes;
  unknown[16] = 99;
  EXPECT_THAT(std::string(DecodeControlFrame(unknown).status().message()), HasSubstr("unknown control message type 99"));
  bytes.pop_back();
  EXPECT_EQ(DecodeControlFrame(bytes).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ControlWireTest, ValidatesOptions) {
  ControlOptions options;
  EXPECT_TRUE(ValidateControlOptions(options).ok());
  options.world_size = 0;
  EXPECT_THAT(std::string(ValidateControlOptions(options).message()), HasSubstr("world_size is 0"));
  options.world_size = 2;
  options.heartbeat_timeout_ms = options.heartbeat_interval_ms;
  EXPECT_THAT(std::string(ValidateControlOptions(options).message()), HasSubstr("must exceed heartbeat_interval_ms"));
}

TEST(ControlWireTest, StatusFromWireKeepsCodeAndRejectsUnknownCodes) {
  absl::Status status = StatusFromWire(static_cast<int32_t>(absl::StatusCode::kAborted), "rank 3 died");
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(status.message(), "rank 3 died");
  EXPECT_EQ(StatusFromWire(77, "x").code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like
