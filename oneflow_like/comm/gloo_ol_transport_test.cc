// Our transport under gloo (gloo_ol_transport.h), driven through gloo's own API (contexts
// connected by gloo::rendezvous::Context::connectFullMesh, unbound buffers) on members that are
// threads of this process: matching by (peer, slot) in FIFO order with messages that come before
// their receive, receives from a set of members, timeouts and aborts, a peer that closes its
// context or crashes (a process of its own) in the middle of a call, sizes that do not match,
// bounds, refused bound buffers and a wrong token.
// The collectives themselves run over it in gloo_collective_test and gloo_channel_test.
#include "oneflow_like/comm/gloo_ol_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gloo/common/error.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/hash_store.h"
#include "gloo/transport/unbound_buffer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oneflow_like {
namespace comm {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

class Latch {
 public:
  explicit Latch(int n) : left_(n) {}
  void ArriveAndWait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (--left_ == 0) all_.notify_all();
    all_.wait(lock, [&] { return left_ <= 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable all_;
  int left_;
};

// Connects `n` members over our device (tokens[r] for member r, default all "job-token";
// `options` for the rest) and runs body(r, context) on each member's thread. timeout_ms is the
// context's (every wait's default) and the connect timeout. An exception escaping a body fails
// the test.
void OnMembers(int n, int64_t timeout_ms, const std::function<void(int, std::shared_ptr<::gloo::Context>)>& body,
               std::vector<std::string> tokens = {}, OlGlooDeviceOptions base = {}) {
  if (tokens.empty()) tokens.assign(n, "job-token");
  ::gloo::rendezvous::HashStore store;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        OlGlooDeviceOptions options = base;
        options.job_token = tokens[r];
        options.connect_timeout_ms = timeout_ms;
        std::shared_ptr<::gloo::transport::Device> device = CreateOlGlooDevice(options);
        auto context = std::make_shared<::gloo::rendezvous::Context>(r, n);
        context->setTimeout(std::chrono::milliseconds(timeout_ms));
        context->connectFullMesh(store, device);
        body(r, std::move(context));
      } catch (const std::exception& e) {
        ADD_FAILURE() << "member " << r << ": " << e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
}

std::vector<char> Bytes(size_t n, int seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>((i * 131 + static_cast<size_t>(seed) * 7) % 251);
  return v;
}

// Runs `call`, which must throw a gloo exception whose message contains `expected`.
template <typename Exception>
void ExpectThrows(const std::function<void()>& call, const std::string& expected) {
  try {
    call();
    ADD_FAILURE() << "no exception; expected one saying '" << expected << "'";
  } catch (const Exception& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr(expected));
  }
}

TEST(GlooOlTransport, SendsAndReceivesMatchByPeerAndSlotInFifoOrder) {
  const size_t kLarge = size_t{1} << 20;  // written from the sender's memory, the rest copied
  const size_t kMiddle = 300 << 10;
  OnMembers(2, 20000, [&](int r, std::shared_ptr<::gloo::Context> context) {
    if (r == 0) {
      std::vector<char> a = Bytes(100, 1), b = Bytes(kLarge, 2), c1 = Bytes(kMiddle, 3), c2 = Bytes(kMiddle, 4);
      std::vector<char> d = Bytes(64, 5);
      auto ua = context->createUnboundBuffer(a.data(), a.size());
      auto ub = context->createUnboundBuffer(b.data(), b.size());
      auto uc1 = context->createUnboundBuffer(c1.data(), c1.size());
      auto uc2 = context->createUnboundBuffer(c2.data(), c2.size());
      auto ud = context->createUnboundBuffer(d.data(), d.size());
      // All before member 1 posts anything, in another order than it will post.
      ub->send(1, /*slot=*/2);
      ua->send(1, /*slot=*/1);
      uc1->send(1, /*slot=*/3);
      uc2->send(1, /*slot=*/3);
      for (auto* u : {ua.get(), ub.get(), uc1.get(), uc2.get()}) {
        int to = -1;
        ASSERT_TRUE(u->waitSend(&to));
        EXPECT_EQ(to, 1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // member 1 posts slot 4 first
      ud->send(1, /*slot=*/4);
      ASSERT_TRUE(ud->waitSend());
    } else {
      std::vector<char> d(64);
      auto ud = context->createUnboundBuffer(d.data(), d.size());
      ud->recv(0, /*slot=*/4);  // posted before its message
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the others arrive first
      std::vector<char> x(100), z(kLarge), y1(kMiddle), y2(kMiddle);
      auto ux = context->createUnboundBuffer(x.data(), x.size());
      auto uy1 = context->createUnboundBuffer(y1.data(), y1.size());
      auto uy2 = context->createUnboundBuffer(y2.data(), y2.size());
      auto uz = context->createUnboundBuffer(z.data(), z.size());
      ux->recv(0, 1);
      uy1->recv(0, 3);
      uy2->recv(0, 3);
      uz->recv(0, 2);
      for (auto* u : {ux.get(), uy1.get(), uy2.get(), uz.get(), ud.get()}) {
        int from = -1;
        ASSERT_TRUE(u->waitRecv(&from));
        EXPECT_EQ(from, 0);
      }
      EXPECT_EQ(x, Bytes(100, 1));
      EXPECT_EQ(z, Bytes(kLarge, 2));
      EXPECT_EQ(y1, Bytes(kMiddle, 3)) << "the first send of slot 3 must meet the first receive";
      EXPECT_EQ(y2, Bytes(kMiddle, 4));
      EXPECT_EQ(d, Bytes(64, 5));
    }
  });
}

TEST(GlooOlTransport, AReceiveFromASetTakesTheFirstMessageOfAnyOfThem) {
  OnMembers(3, 20000, [&](int r, std::shared_ptr<::gloo::Context> context) {
    if (r != 0) {
      std::vector<char> v = Bytes(8, r), w = Bytes(8, 10 + r);
      auto uv = context->createUnboundBuffer(v.data(), v.size());
      auto uw = context->createUnboundBuffer(w.data(), w.size());
      if (r == 2) std::this_thread::sleep_for(std::chrono::milliseconds(100));  // 1's slot-10 message waits
      uw->send(0, /*slot=*/10);
      uv->send(0, /*slot=*/9);
      ASSERT_TRUE(uw->waitSend());
      ASSERT_TRUE(uv->waitSend());
      return;
    }
    // Slot 9: a receive from {1, 2}, twice: one message of each, each delivered once.
    std::vector<char> p(8), q(8);
    auto up = context->createUnboundBuffer(p.data(), p.size());
    auto uq = context->createUnboundBuffer(q.data(), q.size());
    up->recv(std::vector<int>{1, 2}, 9);
    uq->recv(std::vector<int>{1, 2}, 9);
    int from_p = -1, from_q = -1;
    ASSERT_TRUE(up->waitRecv(&from_p));
    ASSERT_TRUE(uq->waitRecv(&from_q));
    EXPECT_EQ(std::set<int>({from_p, from_q}), std::set<int>({1, 2}));
    EXPECT_EQ(p, Bytes(8, from_p));
    EXPECT_EQ(q, Bytes(8, from_q));
    // Slot 10: member 1's message came long before member 2's; a receive from {2} waits for 2's.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::vector<char> s(8), t(8);
    auto us = context->createUnboundBuffer(s.data(), s.size());
    auto ut = context->createUnboundBuffer(t.data(), t.size());
    us->recv(std::vector<int>{2}, 10);
    int from_s = -1;
    ASSERT_TRUE(us->waitRecv(&from_s));
    EXPECT_EQ(from_s, 2);
    EXPECT_EQ(s, Bytes(8, 12));
    ut->recv(std::vector<int>{1}, 10);
    ASSERT_TRUE(ut->waitRecv());
    EXPECT_EQ(t, Bytes(8, 11));
  });
}

TEST(GlooOlTransport, AWaitPastTheTimeoutThrowsAndFailsTheContext) {
  Latch done(2);
  OnMembers(2, 20000, [&](int r, std::shared_ptr<::gloo::Context> context) {  // a generous connect
    if (r == 0) {
      std::vector<char> x(4);
      auto ux = context->createUnboundBuffer(x.data(), x.size());
      ux->recv(1, /*slot=*/5);  // member 1 never sends
      const auto start = Clock::now();
      ExpectThrows<::gloo::IoException>([&] { ux->waitRecv(nullptr, std::chrono::milliseconds(300)); },
                                        "timed out after 300 ms waiting for a receive of 4 bytes from member(s) 1");
      EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
      // The context is one failure domain, as with gloo's TCP: later operations fail at once.
      ExpectThrows<::gloo::IoException>([&] { ux->send(1, 6); }, "timed out");
      // As gloo: with nothing completed, the failure comes before an abort.
      ux->abortWaitRecv();
      ExpectThrows<::gloo::IoException>([&] { ux->waitRecv(); }, "timed out");
    }
    done.ArriveAndWait();  // member 1 stays until member 0 is done
  });
}

TEST(GlooOlTransport, AbortWaitRecvMakesTheWaitReturnFalse) {
  Latch aborted(2);
  OnMembers(2, 20000, [&](int r, std::shared_ptr<::gloo::Context> context) {
    std::vector<char> x = Bytes(16, 7);
    auto ux = context->createUnboundBuffer(x.data(), x.size());
    if (r == 1) {
      aborted.ArriveAndWait();  // member 0's first wait returned
      ux->send(0, 1);
      ASSERT_TRUE(ux->waitSend());
      return;
    }
    std::fill(x.begin(), x.end(), 0);
    ux->recv(1, 1);
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // most likely while it waits
      ux->abortWaitRecv();
    });
    EXPECT_FALSE(ux->waitRecv());  // aborted (nothing can have arrived), the receive still posted
    aborter.join();
    aborted.ArriveAndWait();
    EXPECT_TRUE(ux->waitRecv());
    EXPECT_EQ(x, Bytes(16, 7));
  });
}

// As gloo's: an abort interrupts the wait even when an operation already completed (that
// completion is left for the next wait), and interrupts that one wait only.
TEST(GlooOlTransport, AnAbortComesBeforeACompletionAndInterruptsOneWait) {
  OnMembers(2, 20000, [&](int r, std::shared_ptr<::gloo::Context> context) {
    std::vector<char> x = Bytes(16, 9), y = Bytes(4, 1);
    auto ux = context->createUnboundBuffer(x.data(), x.size());
    auto uy = context->createUnboundBuffer(y.data(), y.size());
    if (r == 1) {
      ux->send(0, 1);
      uy->send(0, 2);
      ASSERT_TRUE(ux->waitSend());
      ASSERT_TRUE(uy->waitSend());
      return;
    }
    std::fill(x.begin(), x.end(), 0);
    ux->recv(1, 1);
    uy->recv(1, 2);
    ASSERT_TRUE(uy->waitRecv());  // one link delivers in order: slot 1's receive completed too
    ux->abortWaitRecv();
    EXPECT_FALSE(ux->waitRecv()) << "the abort must come first";
    int from = -1;
    EXPECT_TRUE(ux->waitRecv(&from)) << "the completion must stay for the next wait";
    EXPECT_EQ(from, 1);
    EXPECT_EQ(x, Bytes(16, 9));
  });
}

TEST(GlooOlTransport, APeerThatClosesItsContextInTheMiddleOfACallFailsItNamingThePeer) {
  Latch posted(2), done(2);  // members 0 and 1; members 0 and 2
  OnMembers(3, 20000, [&](int r, std::shared_ptr<::gloo::Context> context) {
    std::vector<char> x(1 << 20);
    auto ux = context->createUnboundBuffer(x.data(), x.size());
    if (r == 1) {  // leaves once member 0 posted its receive: its context goes away meanwhile
      posted.ArriveAndWait();
      return;
    }
    if (r == 2) {  // stays until member 0 is done
      done.ArriveAndWait();
      return;
    }
    ux->recv(1, 3);
    posted.ArriveAndWait();
    const auto start = Clock::now();
    ExpectThrows<::gloo::IoException>([&] { ux->waitRecv(); }, "member(s) 1 closed the context while");
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(5)) << "waited for the timeout instead";
    ExpectThrows<::gloo::IoException>([&] { ux->send(2, 4); }, "member(s) 1 closed");  // later calls too
    done.ArriveAndWait();
  });
}

TEST(GlooOlTransport, APeerThatCrashesInTheMiddleOfACallFailsItNamingThePeer) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/gloo_ol_crash_XXXXXX";
  ASSERT_NE(mkdtemp(&dir[0]), nullptr);
  OlGlooDeviceOptions options;
  options.job_token = "job-token";
  options.connect_timeout_ms = 20000;
  int posted[2];  // member 0 writes a byte once its receive is posted (or exits: EOF)
  ASSERT_EQ(pipe(posted), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // member 1, a process of its own: connects, then dies closing nothing
    close(posted[1]);
    try {
      ::gloo::rendezvous::FileStore store(dir);
      std::shared_ptr<::gloo::transport::Device> device = CreateOlGlooDevice(options);
      ::gloo::rendezvous::Context context(1, 2);
      context.setTimeout(std::chrono::milliseconds(20000));
      context.connectFullMesh(store, device);
      char byte;
      if (read(posted[0], &byte, 1) != 1) _exit(3);
      _exit(0);  // no destructor runs: the kernel closes the sockets, no goodbye is said
    } catch (...) {
      _exit(2);
    }
  }
  close(posted[0]);
  ::gloo::rendezvous::FileStore store(dir);
  std::shared_ptr<::gloo::transport::Device> device = CreateOlGlooDevice(options);
  auto context = std::make_shared<::gloo::rendezvous::Context>(0, 2);
  context->setTimeout(std::chrono::milliseconds(20000));
  context->connectFullMesh(store, device);
  std::vector<char> x(64);
  auto ux = context->createUnboundBuffer(x.data(), x.size());
  ux->recv(1, 3);
  ASSERT_EQ(write(posted[1], "x", 1), 1);
  close(posted[1]);
  const auto start = Clock::now();
  ExpectThrows<::gloo::IoException>([&] { ux->waitRecv(); }, "the link to member 1 failed");
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5)) << "waited for the timeout instead";
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "member 1 failed to connect (2) or to hear (3)";
}

// Sends are eager: what arrives before its receive is kept, up to max_early_bytes per context;
// past it the context fails naming the sender and the sizes.
TEST(GlooOlTransport, EarlyMessagesPastTheCapFailTheContextNamingTheSender) {
  OlGlooDeviceOptions options;
  options.max_early_bytes = 100 << 10;
  Latch done(2);
  OnMembers(
      2, 20000,
      [&](int r, std::shared_ptr<::gloo::Context> context) {
        std::vector<char> x = Bytes(40 << 10, 3);
        auto ux = context->createUnboundBuffer(x.data(), x.size());
        if (r == 0) {
          for (int i = 0; i < 3; ++i) {  // 120 KiB on a slot member 1 never receives
            ux->send(1, /*slot=*/0x77);
            ASSERT_TRUE(ux->waitSend());
          }
          ux->send(1, /*slot=*/0x78);  // the one member 1 waits for, behind them on the link
          ASSERT_TRUE(ux->waitSend());
        } else {
          ExpectThrows<::gloo::IoException>(
              [&] {
                ux->recv(0, 0x78);  // throws itself if the context failed before
                ux->waitRecv();
              },
              "member 0 sent 40960 bytes in slot 0x77 before any receive for it, with 81920 bytes of earlier "
              "messages kept unreceived in 2 message(s): over the limit of 102400 bytes");
        }
        done.ArriveAndWait();
      },
      {}, options);
}

TEST(GlooOlTransport, EarlyMessagesWithinTheCapAreKept) {
  OlGlooDeviceOptions options;
  options.max_early_bytes = 100 << 10;
  std::vector<std::unique_ptr<Latch>> phases;  // two a round (a Latch is single-use)
  for (int i = 0; i < 6; ++i) phases.push_back(std::make_unique<Latch>(2));
  OnMembers(
      2, 20000,
      [&](int r, std::shared_ptr<::gloo::Context> context) {
        std::vector<char> x = Bytes(40 << 10, 4);
        auto ux = context->createUnboundBuffer(x.data(), x.size());
        for (int round = 0; round < 3; ++round) {  // 80 KiB early per round: the cap counts what is kept now
          if (r == 0) {
            ux->send(1, 0x70);
            ux->send(1, 0x70);
            ASSERT_TRUE(ux->waitSend());
            ASSERT_TRUE(ux->waitSend());
          }
          phases[2 * round]->ArriveAndWait();
          if (r == 1) {  // the messages most likely arrived: early, kept, then taken (and uncounted)
            for (int i = 0; i < 2; ++i) {
              std::fill(x.begin(), x.end(), 0);
              ux->recv(0, 0x70);
              ASSERT_TRUE(ux->waitRecv());
              EXPECT_EQ(x, Bytes(40 << 10, 4));
            }
          }
          phases[2 * round + 1]->ArriveAndWait();
        }
      },
      {}, options);
}

// gloo's contexts take no late peers: once connected, a context's port refuses connections (the
// kernel answers; nothing unauthenticated stays open for the context's life).
TEST(GlooOlTransport, AConnectedContextNoLongerListens) {
  Latch checked(2);
  OnMembers(2, 20000, [&](int r, std::shared_ptr<::gloo::Context> context) {
    const std::string endpoint = context->getPair(1 - r)->address().str();  // this member's port
    const size_t colon = endpoint.rfind(':');
    ASSERT_NE(colon, std::string::npos) << endpoint;
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(std::stoi(endpoint.substr(colon + 1))));
    inet_pton(AF_INET, endpoint.substr(0, colon).c_str(), &address.sin_addr);
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    const int connected = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    const int error = errno;
    close(fd);
    EXPECT_EQ(connected, -1) << "member " << r << " still listens on " << endpoint;
    EXPECT_EQ(error, ECONNREFUSED) << std::strerror(error);
    checked.ArriveAndWait();
    // And the context works.
    std::vector<char> in = Bytes(64, r), out(64);
    auto uin = context->createUnboundBuffer(in.data(), in.size());
    auto uout = context->createUnboundBuffer(out.data(), out.size());
    uout->recv(1 - r, 1);
    uin->send(1 - r, 1);
    ASSERT_TRUE(uin->waitSend());
    ASSERT_TRUE(uout->waitRecv());
    EXPECT_EQ(out, Bytes(64, 1 - r));
  });
}

TEST(GlooOlTransport, TheMeshesTransportKeepsNoSparesAndFewStrangers) {
  OlGlooDeviceOptions options;
  options.job_token = "t";
  const TcpTransportOptions tcp = OlGlooMeshOptions(options, 1, 3);
  EXPECT_EQ(tcp.rank, 1);
  EXPECT_EQ(tcp.world_size, 3);
  EXPECT_FALSE(tcp.keep_spare_payloads) << "gloo's contexts never take spare payloads back";
  EXPECT_TRUE(tcp.close_listener_after_connect);
  EXPECT_EQ(tcp.max_pending_connections, options.max_pending_connections);
  EXPECT_GT(tcp.max_pending_connections, 0);
}

TEST(GlooOlTransport, AMessageOfAnotherSizeThanItsReceiveIsRefused) {
  for (bool early : {true, false}) {
    SCOPED_TRACE(early ? "message before the receive" : "receive before the message");
    Latch done(2);
    OnMembers(2, 20000, [&](int r, std::shared_ptr<::gloo::Context> context) {
      if (r == 0) {
        std::vector<char> x = Bytes(8, 1);
        auto ux = context->createUnboundBuffer(x.data(), x.size());
        if (!early) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        ux->send(1, 7);
        ux->waitSend();
      } else {
        std::vector<char> y(32, 0x55);
        auto uy = context->createUnboundBuffer(y.data(), y.size());
        if (early) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        const std::string expected = "member 0 sent 8 bytes in slot 0x7 where a receive of 16 bytes was posted";
        ExpectThrows<::gloo::IoException>(
            [&] {
              uy->recv(0, 7, /*offset=*/8, /*nbytes=*/16);
              uy->waitRecv();
            },
            expected);
        EXPECT_EQ(y, std::vector<char>(32, 0x55)) << "nothing may be written";
      }
      done.ArriveAndWait();
    });
  }
}

TEST(GlooOlTransport, OffsetsAndLengthsMustFitTheBuffer) {
  OnMembers(2, 20000, [&](int r, std::shared_ptr<::gloo::Context> context) {
    std::vector<char> x(32);
    auto ux = context->createUnboundBuffer(x.data(), x.size());
    const int peer = 1 - r;
    ExpectThrows<::gloo::EnforceNotMet>([&] { ux->send(peer, 1, 30, 8); },
                                        "send of 8 bytes at offset 30 does not fit a buffer of 32 bytes");
    ExpectThrows<::gloo::EnforceNotMet>([&] { ux->recv(peer, 1, 33); }, "receive at offset 33 of a buffer of 32 bytes");
    ExpectThrows<::gloo::EnforceNotMet>([&] { ux->send(5, 1); }, "send to member 5 outside the context of 2");
    // Bound buffers are not implemented: refused, saying so.
    ExpectThrows<::gloo::EnforceNotMet>([&] { context->getPair(peer)->createSendBuffer(0, x.data(), x.size()); },
                                        "bound buffers");
    // The context still works: an exchange with unspecified lengths.
    std::vector<char> in = Bytes(32, r), out(32);
    auto uin = context->createUnboundBuffer(in.data(), in.size());
    auto uout = context->createUnboundBuffer(out.data(), out.size());
    uout->recv(peer, 2);
    uin->send(peer, 2);
    ASSERT_TRUE(uin->waitSend());
    ASSERT_TRUE(uout->waitRecv());
    EXPECT_EQ(out, Bytes(32, peer));
  });
}

TEST(GlooOlTransport, AMemberWithAnotherTokenCannotConnect) {
  std::atomic<int> failed{0};
  ::gloo::rendezvous::HashStore store;
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      OlGlooDeviceOptions options;
      options.job_token = r == 0 ? "job-token" : "another-job";
      options.connect_timeout_ms = 1000;
      std::shared_ptr<::gloo::transport::Device> device = CreateOlGlooDevice(options);
      auto context = std::make_shared<::gloo::rendezvous::Context>(r, 2);
      context->setTimeout(std::chrono::milliseconds(1000));
      try {
        context->connectFullMesh(store, device);
      } catch (const ::gloo::IoException& e) {
        ++failed;
        EXPECT_THAT(std::string(e.what()), HasSubstr("ol gloo transport, member " + std::to_string(r)));
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed.load(), 2);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like
