// DialUnix's checks before anything is sent: a listener of another user id is refused, a
// missing path fails at once.
#include "oneflow_like/comm/unix_socket.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oneflow_like {
namespace comm {
namespace {

using ::testing::HasSubstr;

TEST(UnixSocketTest, AListenerOfAnotherUserIsNotDialed) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to listen as another user (nobody)";
  int up[2];
  ASSERT_EQ(pipe(up), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // nobody listens at a fresh path under /tmp
    close(up[0]);
    setenv("TMPDIR", "/tmp", 1);
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    absl::StatusOr<UnixListener> listener = UnixListener::Create("foreign");
    if (!listener.ok()) _exit(3);
    const std::string line = listener->path() + "\n";
    if (write(up[1], line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(4);
    pause();  // until killed
    _exit(0);
  }
  close(up[1]);
  std::string path;
  char c;
  while (read(up[0], &c, 1) == 1 && c != '\n') path += c;
  close(up[0]);
  if (path.empty()) {
    int status = 0;
    waitpid(child, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 2) {
      GTEST_SKIP() << "cannot become user nobody here (a user namespace without that id, e.g. Bazel's sandbox)";
    }
    FAIL() << "the child could not listen (exit status " << status << ")";
  }
  absl::StatusOr<ScopedFd> dialed = DialUnix(path, absl::Now() + absl::Seconds(10));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(dialed.status().code(), absl::StatusCode::kPermissionDenied) << dialed.status();
  EXPECT_THAT(std::string(dialed.status().message()), HasSubstr("user id 65534"));
}

TEST(UnixSocketTest, AMissingPathFailsAtOnceNotAtTheDeadline) {
  const absl::Time start = absl::Now();
  absl::StatusOr<ScopedFd> dialed = DialUnix("/tmp/ol-shm-no-such-dir/rank1.sock", start + absl::Seconds(30));
  EXPECT_EQ(dialed.status().code(), absl::StatusCode::kUnavailable) << dialed.status();
  EXPECT_THAT(std::string(dialed.status().message()), HasSubstr("no such socket"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like
