// Restart rounds on the control plane (ControlOptions::restart_round): a rank of an earlier
// round is refused by a restarted job's server naming both rounds, while a rank of the new round
// waits for the failed round's master to go away and then joins the new one on the same port.
#include <chrono>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oneflow_like/comm/control_plane.h"
#include "oneflow_like/comm/control_testing.h"

namespace oneflow_like {
namespace comm {
namespace {

using ::testing::HasSubstr;
using testing_util::ClientOptions;
using testing_util::TestOptions;

ControlOptions RoundOptions(int32_t round) {
  ControlOptions options = TestOptions(2);
  options.restart_round = round;
  return options;
}

TEST(ControlRoundTest, StaleRankOfAnEarlierRoundIsRefusedNamingBothRounds) {
  ::testing::internal::CaptureStderr();
  std::unique_ptr<ControlServer> server = ControlServer::Start(RoundOptions(1)).value();
  absl::StatusOr<std::unique_ptr<ControlClient>> stale =
      ControlClient::Connect(ClientOptions(RoundOptions(0), *server), 1, "old-node");
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(stale.status().message()),
              HasSubstr("refused rank 1 (host old-node): the rank is of restart round 0 but the job is at round 1; "
                        "hint: a stale rank of an earlier round is still running"));
  // The slot stays free for rank 1 of round 1.
  absl::StatusOr<std::unique_ptr<ControlClient>> current =
      ControlClient::Connect(ClientOptions(RoundOptions(1), *server), 1, "new-node");
  ASSERT_TRUE(current.ok()) << current.status();
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("refused connection from 127.0.0.1:"));
}

TEST(ControlRoundTest, RankOfALaterRoundWaitsForTheOldMasterToGoAway) {
  // Only a server of round 0 answers: a round-1 rank keeps retrying, then says why it gave up.
  ::testing::internal::CaptureStderr();
  auto old_server = ControlServer::Start(RoundOptions(0));
  ASSERT_TRUE(old_server.ok()) << old_server.status();
  ControlOptions next = ClientOptions(RoundOptions(1), **old_server);
  next.connect_timeout_ms = 400;
  absl::StatusOr<std::unique_ptr<ControlClient>> early = ControlClient::Connect(next, 1, "h1");
  EXPECT_EQ(early.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(early.status().message()),
              HasSubstr("rank 1 of restart round 1 found only a control server of round 0"));

  // The old master exits while the round-1 rank retries; the new master takes the same port.
  next.connect_timeout_ms = 10000;
  absl::StatusOr<std::unique_ptr<ControlClient>> joined = absl::UnavailableError("not yet");
  std::thread connecting([&] { joined = ControlClient::Connect(next, 1, "h1"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  old_server->reset();
  ControlOptions new_master = RoundOptions(1);
  new_master.master_port = next.master_port;
  absl::StatusOr<std::unique_ptr<ControlServer>> server = ControlServer::Start(new_master);
  connecting.join();
  ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE(joined.ok()) << joined.status();
  absl::StatusOr<std::unique_ptr<ControlClient>> rank0 = ControlClient::Connect(next, 0, "h0");
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  std::thread other([&] { EXPECT_TRUE((*rank0)->Barrier("round1", 5000).ok()); });
  EXPECT_TRUE((*joined)->Barrier("round1", 5000).ok());
  other.join();
}

TEST(ControlRoundTest, NegativeRoundIsInvalid) {
  ControlOptions options = RoundOptions(-1);
  EXPECT_EQ(ControlServer::Start(options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like
