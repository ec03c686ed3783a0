// ConnectIbverbsThroughControlPlane over the fake verbs (ibverbs_fake_verbs.cc) and a real
// in-process control server: three ranks exchange their queue-pair endpoints through the
// key-value store, connect, and then deliver ordered messages both ways; a rank whose peer never
// publishes gets a deadline error naming that peer.
#include "oneflow_like/comm/ibverbs_rendezvous.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oneflow_like/comm/control_server.h"
#include "oneflow_like/comm/control_testing.h"
#include "oneflow_like/comm/ibverbs_transport_testing.h"

namespace oneflow_like {
namespace comm {
namespace {

using ::testing::HasSubstr;

IbverbsTransportOptions Options(int32_t rank, int32_t world) {
  IbverbsTransportOptions options;
  options.rank = rank;
  options.world_size = world;
  options.slot_bytes = 4096;
  options.slots_per_peer = 4;
  options.max_message_bytes = 1 << 20;
  options.connect_timeout_ms = 20000;  // hang guard only
  return options;
}

TEST(IbverbsRendezvousTest, RanksConnectThroughTheControlPlaneAndExchangeMessages) {
  constexpr int kWorld = 3;
  const ControlOptions control = testing_util::TestOptions(kWorld);
  absl::StatusOr<std::unique_ptr<ControlServer>> server = ControlServer::Start(control);
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<testing_util::Inbox> inboxes(kWorld);
  std::vector<std::unique_ptr<testing_util::TestRank>> ranks(kWorld);
  std::vector<std::unique_ptr<IbverbsTransport>> transports(kWorld);
  std::vector<absl::Status> connected(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      ranks[r] = testing_util::JoinRank(control, **server, r);
      absl::StatusOr<std::unique_ptr<IbverbsTransport>> t = IbverbsTransport::Open(Options(r, kWorld));
      if (ranks[r] == nullptr || !t.ok()) {
        connected[r] = ranks[r] == nullptr ? absl::InternalError("join failed") : t.status();
        return;
      }
      transports[r] = std::move(t).value();
      transports[r]->SetReceiver(inboxes[r].Receiver());
      connected[r] = ConnectIbverbsThroughControlPlane(transports[r].get(), ranks[r]->client.get(), 10000);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kWorld; ++r) ASSERT_TRUE(connected[r].ok()) << "rank " << r << ": " << connected[r];
  testing_util::ExpectOrderedExchange(transports, inboxes, /*count=*/20, Options(0, kWorld).slot_bytes);
  testing_util::CloseAll(&transports);
}

TEST(IbverbsRendezvousTest, AMissingPeerIsADeadlineNamingIt) {
  const ControlOptions control = testing_util::TestOptions(2);
  absl::StatusOr<std::unique_ptr<ControlServer>> server = ControlServer::Start(control);
  ASSERT_TRUE(server.ok()) << server.status();
  std::unique_ptr<testing_util::TestRank> rank0 = testing_util::JoinRank(control, **server, 0);
  std::unique_ptr<testing_util::TestRank> rank1 = testing_util::JoinRank(control, **server, 1);  // never publishes
  ASSERT_NE(rank0, nullptr);
  ASSERT_NE(rank1, nullptr);
  absl::StatusOr<std::unique_ptr<IbverbsTransport>> t = IbverbsTransport::Open(Options(0, 2));
  ASSERT_TRUE(t.ok()) << t.status();
  testing_util::Inbox inbox;
  (*t)->SetReceiver(inbox.Receiver());
  absl::Status status = ConnectIbverbsThroughControlPlane(t->get(), rank0->client.get(), 300);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("waiting for the RDMA endpoint of rank 1"));
}

}  // namespace
}  // namespace comm
}  // namespace oneflow_like
