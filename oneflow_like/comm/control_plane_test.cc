// The control plane's services in one process: server + several clients on 127.0.0.1.
#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oneflow_like/comm/control_plane.h"
#include "oneflow_like/comm/control_testing.h"
#include "oneflow_like/core/fixed_codec.h"

namespace oneflow_like {
namespace comm {
namespace {

using ::testing::HasSubstr;
using testing_util::ClientOptions;
using testing_util::FailureRecorder;
using testing_util::TestOptions;

// A server plus one connected client per rank (host "host<rank>").
struct Job {
  explicit Job(int32_t world_size) : options(TestOptions(world_size)) {
    server = ControlServer::Start(options).value();
    for (int32_t rank = 0; rank < world_size; ++rank) {
      ranks.push_back(testing_util::JoinRank(options, *server, rank));
      clients.push_back(ranks.back() ? ranks.back()->client.get() : nullptr);
      recorders.push_back(ranks.back() ? &ranks.back()->recorder : nullptr);
    }
  }
  ControlOptions options;
  std::unique_ptr<ControlServer> server;
  std::vector<std::unique_ptr<testing_util::TestRank>> ranks;
  std::vector<ControlClient*> clients;
  std::vector<FailureRecorder*> recorders;
};

TEST(ControlPlaneTest, SetGetAndBlockingGetReleasedByALaterSet) {
  Job job(2);
  ASSERT_TRUE(job.clients[0]->Set("address/0", "10.0.0.1:7000").ok());
  absl::StatusOr<std::string> value = job.clients[1]->Get("address/0", 5000);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "10.0.0.1:7000");
  ASSERT_TRUE(job.clients[1]->Set("address/0", std::string("over\0written", 12)).ok());
  EXPECT_EQ(job.clients[0]->Get("address/0", 5000).value(), std::string("over\0written", 12));

  // rank 1 waits for a key nobody has set yet; rank 0's Set releases it.
  absl::StatusOr<std::string> late;
  std::thread waiter([&] { late = job.clients[1]->Get("late", 10000); });
  ASSERT_TRUE(job.clients[0]->Set("late", "finally").ok());
  waiter.join();
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(*late, "finally");

  absl::StatusOr<std::string> never = job.clients[0]->Get("never", 100);
  EXPECT_EQ(never.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(never.status().message()), HasSubstr("Get('never') timed out after 100 ms"));

  // Values that cannot fit in one message are refused before they reach the wire.
  const absl::Status huge = job.clients[0]->Set("huge", std::string(job.options.max_message_bytes, 'x'));
  EXPECT_EQ(huge.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(huge.message()), HasSubstr("does not fit in max_message_bytes"));
  EXPECT_TRUE(job.clients[0]->health().ok());
}

TEST(ControlPlaneTest, CountersFromManyThreadsAddUp) {
  Job job(3);
  constexpr int kThreadsPerClient = 3;
  constexpr int kAddsPerThread = 50;
  std::mutex mutex;
  std::set<int64_t> seen;
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (ControlClient* client : job.clients) {
    for (int t = 0; t < kThreadsPerClient; ++t) {
      threads.emplace_back([&, c = client] {
        for (int i = 0; i < kAddsPerThread; ++i) {
          absl::StatusOr<int64_t> value = c->Add("counter", 1);
          if (!value.ok()) {
            ++errors;
            continue;
          }
          std::lock_guard<std::mutex> lock(mutex);
          seen.insert(*value);
        }
      });
    }
  }
  for (auto& thread : threads) thread.join();
  constexpr int64_t kTotal = 3 * kThreadsPerClient * kAddsPerThread;
  EXPECT_EQ(errors.load(), 0);
  // Atomic: every caller saw a distinct value, and together they are exactly 1..kTotal.
  ASSERT_EQ(static_cast<int64_t>(seen.size()), kTotal);
  EXPECT_EQ(*seen.begin(), 1);
  EXPECT_EQ(*seen.rbegin(), kTotal);
  EXPECT_EQ(job.clients[2]->Get("counter", 1000).value(), absl::StrCat(kTotal));
  EXPECT_EQ(job.clients[0]->Add("counter", -kTotal - 5).value(), -5);

  ASSERT_TRUE(job.clients[0]->Set("text", "hello").ok());
  absl::StatusOr<int64_t> bad = job.clients[1]->Add("text", 1);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("not an integer counter"));
}

TEST(ControlPlaneTest, BarrierReleasesOnlyWhenAllArrive) {
  Job job(3);
  std::atomic<int> released{0};
  std::vector<absl::Status> results(3);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      results[rank] = job.clients[rank]->Barrier("start", 10000);
      ++released;
    });
  }
  // Ranks 0 and 1 wait; they cannot be released while rank 2 is missing, however long we look.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(released.load(), 0);
  results[2] = job.clients[2]->Barrier("start", 10000);
  for (auto& thread : threads) thread.join();
  for (const absl::Status& result : results) EXPECT_TRUE(result.ok()) << result;
  // The same name can be used again (a new generation).
  threads.clear();
  for (int rank = 0; rank < 3; ++rank) {
    threads.emplace_back([&, rank] { results[rank] = job.clients[rank]->Barrier("start", 10000); });
  }
  for (auto& thread : threads) thread.join();
  for (const absl::Status& result : results) EXPECT_TRUE(result.ok()) << result;
}

TEST(ControlPlaneTest, BarrierTimesOutNamingWhoArrived) {
  Job job(3);
  absl::Status alone = job.clients[1]->Barrier("lonely", 100);
  EXPECT_EQ(alone.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(alone.message()),
              HasSubstr("barrier 'lonely' timed out after 100 ms: 1 of 3 ranks arrived (missing ranks 0, 2)"));

  // Rank 2 waits long; rank 0 gives up; then rank 0 and 1 arrive and release rank 2: a timed-out
  // arrival is withdrawn, so it does not count twice.
  absl::Status patient;
  std::thread waiter([&] { patient = job.clients[2]->Barrier("later", 10000); });
  absl::Status impatient = job.clients[0]->Barrier("later", 300);
  EXPECT_EQ(impatient.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(impatient.message()), HasSubstr("of 3 ranks arrived"));
  std::thread second([&] { EXPECT_TRUE(job.clients[0]->Barrier("later", 10000).ok()); });
  EXPECT_TRUE(job.clients[1]->Barrier("later", 10000).ok());
  second.join();
  waiter.join();
  EXPECT_TRUE(patient.ok()) << patient;
  EXPECT_TRUE(job.clients[0]->health().ok());
}

TEST(ControlPlaneTest, RejectsDuplicateAndOutOfRangeRanks) {
  Job job(2);
  absl::StatusOr<std::unique_ptr<ControlClient>> duplicate =
      ControlClient::Connect(ClientOptions(job.options, *job.server), 1, "intruder");
  EXPECT_EQ(duplicate.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(duplicate.status().message()), HasSubstr("rank 1 is already registered by host host1"));

  ControlOptions bigger = ClientOptions(job.options, *job.server);
  bigger.world_size = 8;  // this process believes in a larger job than the server
  absl::StatusOr<std::unique_ptr<ControlClient>> outside = ControlClient::Connect(bigger, 5, "stray");
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(outside.status().message()), HasSubstr("rank 5 is out of range: the job has world_size 2"));
  absl::StatusOr<std::unique_ptr<ControlClient>> negative =
      ControlClient::Connect(ClientOptions(job.options, *job.server), -1, "stray");
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);

  // The job goes on.
  ASSERT_TRUE(job.clients[0]->Set("k", "v").ok());
  EXPECT_EQ(job.clients[1]->Get("k", 1000).value(), "v");
  EXPECT_TRUE(job.clients[0]->health().ok());
  EXPECT_EQ(job.recorders[1]->count(), 0u);
}

TEST(ControlPlaneTest, WrongTokenGarbageAndOversizedFramesAreRefusedWhileTheJobGoesOn) {
  Job job(2);
  ::testing::internal::CaptureStderr();
  ControlOptions wrong = ClientOptions(job.options, *job.server);
  wrong.job_token = "guess";
  absl::StatusOr<std::unique_ptr<ControlClient>> intruder = ControlClient::Connect(wrong, 1, "intruder");
  EXPECT_EQ(intruder.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(intruder.status().message()), HasSubstr("wrong job token"));

  // A connection that stays open and sends half a frame must not stall anybody.
  const int stalled = testing_util::RawConnect(job.server->port());
  ASSERT_GE(stalled, 0);
  ASSERT_TRUE(testing_util::RawSend(stalled, testing_util::HelloBytes("test-token", 1, "x", 1).substr(0, 10)));

  const int garbage = testing_util::RawConnect(job.server->port());
  ASSERT_GE(garbage, 0);
  ASSERT_TRUE(testing_util::RawSend(garbage, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(testing_util::WaitForPeerClose(garbage));

  const int oversized = testing_util::RawConnect(job.server->port());
  ASSERT_GE(oversized, 0);
  std::string header = EncodeControlMessage(ControlMessage{}).substr(0, 8);
  AppendFixed<uint64_t>(&header, uint64_t{1} << 33);  // announces 8 GiB
  ASSERT_TRUE(testing_util::RawSend(oversized, header));
  EXPECT_TRUE(testing_util::WaitForPeerClose(oversized));

  // A valid frame that is not a Hello is refused too.
  const int rude = testing_util::RawConnect(job.server->port());
  ControlMessage set;
  set.type = MessageType::kSet;
  set.key = "sneaky";
  ASSERT_TRUE(testing_util::RawSend(rude, EncodeControlMessage(set)));
  EXPECT_TRUE(testing_util::WaitForPeerClose(rude));

  ASSERT_TRUE(job.clients[0]->Set("still", "working").ok());
  EXPECT_EQ(job.clients[1]->Get("still", 2000).value(), "working");
  EXPECT_FALSE(job.clients[1]->Get("sneaky", 50).ok());
  EXPECT_TRUE(job.clients[0]->health().ok());
  EXPECT_TRUE(job.clients[1]->health().ok());
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr("refused connection from 127.0.0.1:"));
  EXPECT_THAT(log, HasSubstr("wrong job token"));
  EXPECT_THAT(log, HasSubstr("not a control-plane frame"));
  EXPECT_THAT(log, HasSubstr("exceeds max_message_bytes"));
  EXPECT_THAT(log, HasSubstr("first message is Set, not Hello"));
  // The half frame never completes: the server drops it after heartbeat_timeout_ms.
  EXPECT_TRUE(testing_util::WaitForPeerClose(stalled));
  for (int fd : {stalled, garbage, oversized, rude}) close(fd);
  EXPECT_EQ(job.recorders[0]->count(), 0u);
}

TEST(ControlPlaneTest, ConnectRetriesUntilTheServerIsUpAndTimesOutOtherwise) {
  // Find a free port, then start the server on it only after the client began retrying.
  int32_t port = 0;
  absl::StatusOr<ScopedFd> probe = ListenTcp("127.0.0.1", 0, &port);
  ASSERT_TRUE(probe.ok()) << probe.status();
  probe->reset();

  ControlOptions options = TestOptions(1);
  options.master_port = port;
  options.connect_timeout_ms = 300;
  absl::StatusOr<std::unique_ptr<ControlClient>> nobody = ControlClient::Connect(options, 0, "h");
  EXPECT_EQ(nobody.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(nobody.status().message()), HasSubstr("could not reach the control server at 127.0.0.1:"));

  options.connect_timeout_ms = 10000;
  absl::StatusOr<std::unique_ptr<ControlClient>> client = absl::UnavailableError("not yet");
  std::thread connecting([&] { client = ControlClient::Connect(options, 0, "h"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  absl::StatusOr<std::unique_ptr<ControlServer>> server = ControlServer::Start(options);
  connecting.join();
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->Barrier("alone", 1000).ok());
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like
