#include "oneflow_like/comm/ibverbs_transport.h"

#include <infiniband/verbs.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oneflow_like/comm/ibverbs_transport_testing.h"

namespace oneflow_like {
namespace comm {
namespace {

using ::testing::HasSubstr;

// Asks libibverbs directly, independently of the transport. errno explains a NULL list.
struct DeviceCount {
  int count = 0;
  std::string reason;
};
DeviceCount CountRdmaDevices() {
  DeviceCount result;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&result.count);
  if (list == nullptr) {
    result.count = 0;
    result.reason = errno != 0 ? std::strerror(errno) : "empty list";
  } else {
    ibv_free_device_list(list);
    result.reason = "no devices listed";
  }
  return result;
}

IbverbsEndpointInfo SampleInfo() {
  IbverbsEndpointInfo info;
  info.from_rank = 3;
  info.to_rank = 1;
  info.lid = 0xbeef;
  for (int i = 0; i < 16; ++i) info.gid[i] = static_cast<uint8_t>(0xf0 + i);
  info.mtu = 4;
  info.qp_number = 0xabcdef;
  info.packet_sequence_number = 0x123456;
  info.ring_address = 0x7fff12345678ull;
  info.ring_rkey = 0xdeadbeef;
  info.slot_bytes = 4 << 20;
  info.slots = 8;
  return info;
}

TEST(IbverbsEndpointInfoTest, RoundTripsEveryField) {
  const IbverbsEndpointInfo info = SampleInfo();
  const std::string text = info.Encode();
  // Independent reference: the documented text layout, written out by hand.
  EXPECT_EQ(text, absl::StrCat("ibverbs-endpoint-v1 from=3 to=1 lid=48879 gid=f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff",
                               " mtu=4 qpn=11259375 psn=1193046 ring=140733498807928 rkey=3735928559",
                               " slot_bytes=4194304 slots=8"));
  absl::StatusOr<IbverbsEndpointInfo> back = IbverbsEndpointInfo::Decode(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == info);
  IbverbsEndpointInfo other = info;
  other.gid[15] = 0;
  EXPECT_FALSE(other == info);
}

TEST(IbverbsEndpointInfoTest, RejectsGarbageAndTruncation) {
  const std::string good = SampleInfo().Encode();
  auto error_of = [](absl::string_view text) {
    absl::StatusOr<IbverbsEndpointInfo> info = IbverbsEndpointInfo::Decode(text);
    EXPECT_FALSE(info.ok()) << text;
    EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument) << text;
    return std::string(info.status().message());
  };
  EXPECT_THAT(error_of(""), HasSubstr("expected \"ibverbs-endpoint-v1\""));
  EXPECT_THAT(error_of(std::string("\0\xff\x01garbage", 11)), HasSubstr("expected"));
  EXPECT_THAT(error_of(good.substr(0, good.size() / 2)), HasSubstr("11 key=value fields"));
  EXPECT_THAT(error_of(good.substr(0, good.size() - 1)),
              HasSubstr("field 11 should be \"slots=<integer in [1, 1024]>\""));
  EXPECT_THAT(error_of(good + " extra=1"), HasSubstr("11 key=value fields"));
  EXPECT_THAT(error_of(absl::StrReplaceAll(good, {{"slots=8", "slots=0"}})), HasSubstr("field 11"));
  EXPECT_THAT(error_of(absl::StrReplaceAll(good, {{"mtu=4", "mtu=6"}})),
              HasSubstr("field 5 should be \"mtu=<integer in [1, 5]>\""));
  EXPECT_THAT(error_of(absl::StrReplaceAll(good, {{"mtu=4", "mtu=0"}})), HasSubstr("field 5"));
  EXPECT_THAT(error_of(absl::StrReplaceAll(good, {{"ibverbs-endpoint-v1", "ibverbs-endpoint-v2"}})),
              HasSubstr("expected"));
  EXPECT_THAT(error_of(absl::StrReplaceAll(good, {{"from=3", "from=-3"}})), HasSubstr("field 1 should be \"from="));
  EXPECT_THAT(error_of(absl::StrReplaceAll(good, {{"lid=48879", "lid=65536"}})), HasSubstr("field 3"));
  EXPECT_THAT(error_of(absl::StrReplaceAll(good, {{"qpn=11259375", "qpn=16777216"}})), HasSubstr("field 6"));
  EXPECT_THAT(error_of(absl::StrReplaceAll(good, {{"gid=f0", "gid=zz"}})), HasSubstr("gid=<32 hex digits>"));
  EXPECT_THAT(error_of(absl::StrReplaceAll(good, {{"gid=f0", "gid="}})), HasSubstr("field 4"));
  EXPECT_THAT(error_of(absl::StrReplaceAll(good, {{"rkey=", "rkee="}})), HasSubstr("field 9 should be \"rkey="));
  EXPECT_THAT(error_of(absl::StrReplaceAll(good, {{"ring=", "ring=0x"}})), HasSubstr("field 8"));
  EXPECT_THAT(error_of(absl::StrReplaceAll(good, {{" ", "  "}})), HasSubstr("expected"));
}

TEST(IbverbsImmediateTest, PacksKindFlagAndValueIntoTheDocumentedBits) {
  // Independent reference: the bit layout documented in ibverbs_wire.h.
  EXPECT_EQ(IbverbsImmediate::Data(4096, /*last=*/false), 4096u);
  EXPECT_EQ(IbverbsImmediate::Data(4096, /*last=*/true), (1u << 30) | 4096u);
  EXPECT_EQ(IbverbsImmediate::Credit(0), 1u << 31);
  EXPECT_EQ(IbverbsImmediate::Credit(7), (1u << 31) | 7u);
  IbverbsImmediate data = IbverbsImmediate::Parse(IbverbsImmediate::Data(IbverbsImmediate::kMaxValue, true));
  EXPECT_FALSE(data.credit);
  EXPECT_TRUE(data.last);
  EXPECT_EQ(data.value, (1u << 30) - 1);
  IbverbsImmediate credit = IbverbsImmediate::Parse(IbverbsImmediate::Credit(3));
  EXPECT_TRUE(credit.credit);
  EXPECT_FALSE(credit.last);
  EXPECT_EQ(credit.value, 3u);
}

// Cuts an encoded frame into pieces of at most `piece` bytes, as Send does with slot_bytes.
std::vector<std::string> Fragments(const Frame& frame, size_t piece) {
  const std::string bytes = EncodeFrame(frame);
  std::vector<std::string> pieces;
  for (size_t offset = 0; offset < bytes.size(); offset += piece) pieces.push_back(bytes.substr(offset, piece));
  return pieces;
}

TEST(FrameAssemblerTest, ReassemblesFragmentedFramesInSequence) {
  FrameAssembler assembler(Rank(0), Rank(1), /*max_payload_bytes=*/1000);
  const std::string big(1000, 'q');
  for (uint64_t sequence = 0; sequence < 3; ++sequence) {
    const std::string payload = sequence == 1 ? big : absl::StrCat("small ", sequence);
    std::vector<std::string> pieces = Fragments(Frame{Rank(0), Rank(1), sequence, payload}, 64);
    ASSERT_EQ(pieces.size(), (EncodeFrame(Frame{}).size() + payload.size() + 63) / 64);
    for (size_t i = 0; i < pieces.size(); ++i) {
      absl::StatusOr<std::optional<Frame>> out = assembler.Add(pieces[i], i + 1 == pieces.size());
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ(out->has_value(), i + 1 == pieces.size());
      if (out->has_value()) {
        EXPECT_EQ((*out)->payload, payload);
        EXPECT_EQ((*out)->sequence, sequence);
        EXPECT_EQ((*out)->from, Rank(0));
      }
    }
  }
}

TEST(FrameAssemblerTest, RejectsGapsMisroutingGarbageAndOversizeForGood) {
  auto first_error = [](FrameAssembler& assembler, const Frame& frame) {
    absl::StatusOr<std::optional<Frame>> out = assembler.Add(EncodeFrame(frame), true);
    EXPECT_FALSE(out.ok());
    return out.status();
  };
  {
    FrameAssembler assembler(Rank(0), Rank(1), 100);
    ASSERT_TRUE(assembler.Add(EncodeFrame(Frame{Rank(0), Rank(1), 0, "a"}), true).ok());
    absl::Status gap = first_error(assembler, Frame{Rank(0), Rank(1), 2, "c"});
    EXPECT_EQ(gap.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(std::string(gap.message()), HasSubstr("sequence 2 arrived on edge 0 -> 1 which expects sequence 1"));
    // The stream stays broken: even the frame that was expected is refused.
    EXPECT_EQ(first_error(assembler, Frame{Rank(0), Rank(1), 1, "b"}), gap);
  }
  {
    FrameAssembler assembler(Rank(0), Rank(1), 100);
    EXPECT_EQ(first_error(assembler, Frame{Rank(2), Rank(1), 0, "x"}).code(), absl::StatusCode::kDataLoss);
  }
  {
    FrameAssembler assembler(Rank(0), Rank(1), 100);
    EXPECT_EQ(first_error(assembler, Frame{Rank(0), Rank(3), 0, "x"}).code(), absl::StatusCode::kDataLoss);
  }
  {
    FrameAssembler assembler(Rank(0), Rank(1), 100);
    absl::StatusOr<std::optional<Frame>> out = assembler.Add(std::string(40, '\xee'), true);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(out.status().message()), HasSubstr("not a transport frame"));
  }
  {
    FrameAssembler assembler(Rank(0), Rank(1), 100);
    ASSERT_TRUE(assembler.Add(EncodeFrame(Frame{Rank(0), Rank(1), 0, std::string(100, 'k')}), true).ok());
    std::vector<std::string> pieces = Fragments(Frame{Rank(0), Rank(1), 1, std::string(101, 'k')}, 100);
    ASSERT_EQ(pieces.size(), 2u);
    ASSERT_TRUE(assembler.Add(pieces[0], false).ok());
    absl::Status oversize = assembler.Add(pieces[1], true).status();  // refused before the last byte lands
    EXPECT_EQ(oversize.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(std::string(oversize.message()),
                HasSubstr(absl::StrCat("grows beyond ", 100 + EncodeFrame(Frame{}).size(), " bytes")));
  }
}

IbverbsTransportOptions ValidOptions(int32_t rank, int32_t world_size) {
  IbverbsTransportOptions options;
  options.rank = rank;
  options.world_size = world_size;
  return options;
}

TEST(IbverbsOptionsTest, AcceptsDefaultsAndRejectsEachBadField) {
  EXPECT_TRUE(ValidateIbverbsOptions(ValidOptions(1, 2)).ok());
  struct Case {
    void (*mutate)(IbverbsTransportOptions&);
    const char* expected;
  };
  const Case cases[] = {
      {[](IbverbsTransportOptions& o) { o.world_size = 0; }, "world_size 0"},
      {[](IbverbsTransportOptions& o) { o.rank = 2; }, "rank 2 is outside [0, 2)"},
      {[](IbverbsTransportOptions& o) { o.rank = -1; }, "rank -1"},
      {[](IbverbsTransportOptions& o) { o.port_num = 0; }, "port_num 0"},
      {[](IbverbsTransportOptions& o) { o.gid_index = -1; }, "gid_index -1"},
      {[](IbverbsTransportOptions& o) { o.slot_bytes = 63; }, "slot_bytes 63"},
      {[](IbverbsTransportOptions& o) { o.slot_bytes = 1LL << 30; }, "slot_bytes 1073741824"},
      {[](IbverbsTransportOptions& o) { o.slots_per_peer = 0; }, "slots_per_peer 0"},
      {[](IbverbsTransportOptions& o) { o.slots_per_peer = 1025; }, "slots_per_peer 1025"},
      {[](IbverbsTransportOptions& o) { o.slots_per_peer = 512; }, "1 GiB per-peer ring limit"},
      {[](IbverbsTransportOptions& o) { o.max_message_bytes = 0; }, "max_message_bytes 0"},
      {[](IbverbsTransportOptions& o) { o.connect_timeout_ms = 0; }, "connect_timeout_ms 0"},
  };
  for (const Case& c : cases) {
    IbverbsTransportOptions options = ValidOptions(1, 2);
    c.mutate(options);
    absl::Status status = ValidateIbverbsOptions(options);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.expected;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.expected));
    // Open validates before it touches any device, so bad options are InvalidArgument everywhere.
    EXPECT_EQ(IbverbsTransport::Open(options).status().code(), absl::StatusCode::kInvalidArgument) << c.expected;
  }
}

TEST(IbverbsOpenTest, UnavailableWhenNoDeviceExists) {
  const DeviceCount devices = CountRdmaDevices();
  if (devices.count > 0) GTEST_SKIP() << "this machine has " << devices.count << " RDMA device(s)";
  absl::StatusOr<std::unique_ptr<IbverbsTransport>> transport = IbverbsTransport::Open(ValidOptions(0, 2));
  ASSERT_FALSE(transport.ok());
  EXPECT_EQ(transport.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(transport.status().message()),
              HasSubstr("no RDMA device found (ibv_get_device_list returned 0 devices"));
  EXPECT_THAT(std::string(transport.status().message()), HasSubstr("use the TCP transport"));
}

// Runs on a machine with an RDMA device: three transports in this process over the first device.
TEST(IbverbsEndToEndTest, OrderedMessagesIncludingFragmentedOnes) {
  const DeviceCount devices = CountRdmaDevices();
  if (devices.count == 0) {
    GTEST_SKIP() << "no RDMA device found (ibv_get_device_list returned 0 devices): " << devices.reason
                 << "; this end-to-end test needs an InfiniBand or RoCE device";
  }
  IbverbsTransportOptions options;
  options.slot_bytes = 4096;  // small slots: fragments and credit waits happen
  options.slots_per_peer = 2;
  options.max_message_bytes = 1 << 20;
  options.connect_timeout_ms = 20000;
  std::vector<testing_util::Inbox> inboxes(3);  // outlive the transports
  std::vector<std::unique_ptr<IbverbsTransport>> transports = testing_util::OpenAndConnect(options, &inboxes);
  ASSERT_EQ(transports.size(), 3u);
  testing_util::ExpectOrderedExchange(transports, inboxes, /*count=*/40, options.slot_bytes);
  EXPECT_EQ(transports[0]->Send(Rank(1), std::string((1 << 20) + 1, 'x')).code(), absl::StatusCode::kInvalidArgument);
  testing_util::CloseAll(&transports);
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like
