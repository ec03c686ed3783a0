// Failure detection: silent, crashed, aborting ranks, and a dead or silent master.
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oneflow_like/comm/control_plane.h"
#include "oneflow_like/comm/control_testing.h"

namespace oneflow_like {
namespace comm {
namespace {

using ::testing::HasSubstr;
using testing_util::ClientOptions;
using testing_util::FailureRecorder;
using testing_util::JoinRank;
using testing_util::TestRank;
using testing_util::TestOptions;

// Registers rank `rank` over a raw socket, reports `step`, and returns the socket (then silent).
int RegisterFake(const ControlServer& server, int32_t rank, int64_t step) {
  const int fd = testing_util::RawConnect(server.port());
  EXPECT_GE(fd, 0);
  EXPECT_TRUE(testing_util::RawSend(fd, testing_util::HelloBytes("test-token", rank, "fake-host", 4242)));
  absl::StatusOr<ControlMessage> welcome = testing_util::RawReadMessage(fd);
  EXPECT_TRUE(welcome.ok()) << welcome.status();
  EXPECT_EQ(welcome->type, MessageType::kWelcome);
  EXPECT_EQ(welcome->code, 0) << welcome->value;
  ControlMessage heartbeat;
  heartbeat.type = MessageType::kHeartbeat;
  heartbeat.a = step;
  EXPECT_TRUE(testing_util::RawSend(fd, EncodeControlMessage(heartbeat)));
  return fd;
}

TEST(ControlFailureTest, SilentRankIsDetectedAndReportedToEveryOtherRank) {
  const ControlOptions options = TestOptions(3);
  std::unique_ptr<ControlServer> server = ControlServer::Start(options).value();
  std::unique_ptr<TestRank> rank0 = JoinRank(options, *server, 0);
  std::unique_ptr<TestRank> rank1 = JoinRank(options, *server, 1);
  ASSERT_TRUE(rank0 && rank1);
  absl::StatusOr<std::string> pending;
  std::thread getter([&] { pending = rank1->client->Get("never", 20000); });
  const int fake = RegisterFake(*server, 2, /*step=*/7);  // then stops heartbeating

  for (TestRank* rank : {rank0.get(), rank1.get()}) {
    const absl::Status failure = rank->recorder.WaitForFailure();
    EXPECT_EQ(failure.code(), absl::StatusCode::kAborted) << failure;
    EXPECT_THAT(std::string(failure.message()), HasSubstr("rank 2 (host fake-host, pid 4242) stopped answering"));
    EXPECT_THAT(std::string(failure.message()), HasSubstr("after step 7"));
    EXPECT_EQ(rank->client->health(), failure);
  }
  getter.join();
  EXPECT_EQ(pending.status().code(), absl::StatusCode::kAborted);  // released early, not at 20 s
  EXPECT_EQ(rank0->client->Set("k", "v").code(), absl::StatusCode::kAborted);
  EXPECT_EQ(rank0->recorder.count(), 1u);
  close(fake);
}

TEST(ControlFailureTest, ClosedConnectionWithoutDeregisteringFailsTheJobButACleanExitDoesNot) {
  ControlOptions options = TestOptions(3);
  // A heartbeat timeout that a loaded 2-core machine does not miss (it failed the job at 500 ms
  // once, with two builds running): the test is about the deregistration, not the heartbeat.
  options.heartbeat_timeout_ms = 1500;
  std::unique_ptr<ControlServer> server = ControlServer::Start(options).value();
  std::unique_ptr<TestRank> rank0 = JoinRank(options, *server, 0);
  std::unique_ptr<TestRank> rank1 = JoinRank(options, *server, 1);
  ASSERT_TRUE(rank0 && rank1);
  rank1.reset();  // deregisters: not a failure
  std::this_thread::sleep_for(std::chrono::milliseconds(2 * options.heartbeat_timeout_ms));
  ASSERT_TRUE(rank0->client->health().ok()) << rank0->client->health();

  close(RegisterFake(*server, 2, /*step=*/-1));  // "crashes": closes without deregistering
  const absl::Status failure = rank0->recorder.WaitForFailure();
  EXPECT_EQ(failure.code(), absl::StatusCode::kAborted) << failure;
  EXPECT_THAT(std::string(failure.message()),
              HasSubstr("rank 2 (host fake-host, pid 4242) died: the connection closed without deregistering"));
  EXPECT_THAT(std::string(failure.message()), HasSubstr("before reporting any step"));
}

TEST(ControlFailureTest, ServerGoneIsDetectedByEveryClient) {
  const ControlOptions options = TestOptions(2);
  std::unique_ptr<ControlServer> server = ControlServer::Start(options).value();
  std::unique_ptr<TestRank> rank0 = JoinRank(options, *server, 0);
  std::unique_ptr<TestRank> rank1 = JoinRank(options, *server, 1);
  ASSERT_TRUE(rank0 && rank1);
  absl::Status barrier;
  std::thread waiter([&] { barrier = rank1->client->Barrier("never", 20000); });
  server.reset();
  for (TestRank* rank : {rank0.get(), rank1.get()}) {
    const absl::Status failure = rank->recorder.WaitForFailure();
    EXPECT_EQ(failure.code(), absl::StatusCode::kUnavailable) << failure;
    EXPECT_THAT(std::string(failure.message()), HasSubstr(absl::StrCat("rank 0 (master, host ")));
    EXPECT_THAT(std::string(failure.message()), HasSubstr(absl::StrCat("pid ", getpid(), ") is gone")));
  }
  waiter.join();
  EXPECT_EQ(barrier.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(rank0->client->Add("c", 1).status().code(), absl::StatusCode::kUnavailable);
}

TEST(ControlFailureTest, SilentServerIsDetected) {
  // A fake master: welcomes the client, then never says anything again.
  int32_t port = 0;
  ScopedFd listener = ListenTcp("127.0.0.1", 0, &port).value();  // non-blocking
  std::atomic<int> accepted{-1};
  std::thread master([&] {
    pollfd entry{listener.get(), POLLIN, 0};
    if (poll(&entry, 1, 5000) != 1) return;
    const int fd = accept(listener.get(), nullptr, nullptr);
    if (fd < 0) return;
    accepted = fd;
    if (!testing_util::RawReadMessage(fd).ok()) return;
    ControlMessage welcome;
    welcome.type = MessageType::kWelcome;
    welcome.value = "fake-master";
    welcome.b = 99;
    testing_util::RawSend(fd, EncodeControlMessage(welcome));
  });
  ControlOptions options = TestOptions(2);
  options.master_port = port;
  absl::StatusOr<std::unique_ptr<ControlClient>> client = ControlClient::Connect(options, 1, "h1");
  master.join();
  ASSERT_TRUE(client.ok()) << client.status();
  FailureRecorder recorder;
  (*client)->SetFailureHandler(recorder.Handler());
  const absl::Status failure = recorder.WaitForFailure();
  EXPECT_EQ(failure.code(), absl::StatusCode::kUnavailable) << failure;
  EXPECT_THAT(std::string(failure.message()), HasSubstr("rank 0 (master, host fake-master, pid 99) stopped answering"));
  client->reset();
  close(accepted);
}

TEST(ControlFailureTest, AbortPropagatesWithTheReason) {
  const ControlOptions options = TestOptions(3);
  std::unique_ptr<ControlServer> server = ControlServer::Start(options).value();
  std::vector<std::unique_ptr<TestRank>> ranks;
  for (int32_t rank = 0; rank < 3; ++rank) ranks.push_back(JoinRank(options, *server, rank));
  ASSERT_TRUE(ranks[0] && ranks[1] && ranks[2]);
  absl::Status barrier;
  std::thread waiter([&] { barrier = ranks[0]->client->Barrier("end", 20000); });
  ranks[2]->client->ReportStep(3);
  ranks[2]->client->Abort("out of memory at layer 7");
  const std::string expected = absl::StrCat("rank 2 (host host2, pid ", getpid(), ") aborted the job after step 3: out of memory at layer 7");
  for (int rank = 0; rank < 2; ++rank) {
    const absl::Status failure = ranks[rank]->recorder.WaitForFailure();
    EXPECT_EQ(failure.code(), absl::StatusCode::kAborted) << failure;
    EXPECT_THAT(std::string(failure.message()), HasSubstr(expected));
  }
  waiter.join();
  EXPECT_EQ(barrier.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(ranks[2]->client->health().message()), HasSubstr(expected));
  EXPECT_EQ(ranks[2]->recorder.count(), 0u);  // the aborting rank knows; its handler is not called
  EXPECT_EQ(ranks[1]->client->Get("x", 10000).status().code(), absl::StatusCode::kAborted);
}

// A child process (forked before the test starts any thread) that waits for the server's port,
// registers as rank 1 under `host`, answers 'y', then sleeps until a signal ends it.
class ChildRank {
 public:
  explicit ChildRank(const std::string& host) {
    int port_pipe[2];
    int ready_pipe[2];
    if (pipe(port_pipe) != 0 || pipe(ready_pipe) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a failed parent
      int32_t port = 0;
      if (read(port_pipe[0], &port, sizeof(port)) != sizeof(port)) _exit(2);
      ControlOptions options = TestOptions(2);
      options.master_port = port;
      absl::StatusOr<std::unique_ptr<ControlClient>> client = ControlClient::Connect(options, 1, host);
      const char ready = client.ok() ? 'y' : 'n';
      if (write(ready_pipe[1], &ready, 1) != 1 || !client.ok()) _exit(3);
      while (true) pause();
    }
    port_fd_ = port_pipe[1];
    ready_fd_ = ready_pipe[0];
    close(port_pipe[0]);
    close(ready_pipe[1]);
  }
  ~ChildRank() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(port_fd_);
    close(ready_fd_);
  }
  pid_t pid() const { return pid_; }
  // Tells the child where the server is; true once it has registered.
  bool Register(int32_t port) {
    char ready = 0;
    return pid_ > 0 && write(port_fd_, &port, sizeof(port)) == sizeof(port) && read(ready_fd_, &ready, 1) == 1 &&
           ready == 'y';
  }
  void Signal(int signal_number) { kill(pid_, signal_number); }

 private:
  pid_t pid_ = -1;
  int port_fd_ = -1;
  int ready_fd_ = -1;
};

// Registers `child` as rank 1 of a fresh 2-rank job, sends it `signal_number`, and returns the
// failure rank 0 then sees.
absl::Status FailureAfterSignal(ChildRank& child, int signal_number) {
  const ControlOptions options = TestOptions(2);
  std::unique_ptr<ControlServer> server = ControlServer::Start(options).value();
  std::unique_ptr<TestRank> rank0 = JoinRank(options, *server, 0);
  if (!rank0 || !child.Register(server->port())) return absl::InternalError("the child rank did not register");
  if (!rank0->client->health().ok()) return absl::InternalError("failed before the signal");
  child.Signal(signal_number);
  return rank0->recorder.WaitForFailure();
}

// The one multi-process test: a child rank killed with SIGKILL (its sockets close at once), and
// a child rank stopped with SIGSTOP (caught by heartbeat silence), each named in the failure.
TEST(ControlFailureTest, KilledAndStoppedChildProcessesAreNamedInTheFailure) {
  ChildRank killed("killed-host");
  ChildRank stopped("stopped-host");
  ASSERT_GT(killed.pid(), 0);
  ASSERT_GT(stopped.pid(), 0);
  const absl::Status kill_failure = FailureAfterSignal(killed, SIGKILL);
  EXPECT_EQ(kill_failure.code(), absl::StatusCode::kAborted) << kill_failure;
  EXPECT_THAT(std::string(kill_failure.message()),
              HasSubstr(absl::StrCat("rank 1 (host killed-host, pid ", killed.pid(), ") died")));
  const absl::Status stop_failure = FailureAfterSignal(stopped, SIGSTOP);
  EXPECT_EQ(stop_failure.code(), absl::StatusCode::kAborted) << stop_failure;
  EXPECT_THAT(std::string(stop_failure.message()),
              HasSubstr(absl::StrCat("rank 1 (host stopped-host, pid ", stopped.pid(), ") stopped answering")));
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like
