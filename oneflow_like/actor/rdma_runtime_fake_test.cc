// Two Runtimes (ranks 0 and 1 in one process) over IbverbsTransport on the fake verbs
// (comm/ibverbs_fake_verbs.cc): the runtime registers its memory blocks with the transport and
// sends each one-slot register with SendRegistered, so the consumer rank pulls the producer's
// register by RDMA READ. An all-gather of x (128 KiB per shard, pulled) followed by relu must
// give relu(x) on both ranks for several steps, and every step must pull.
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/actor/runtime.h"
#include "oneflow_like/actor/test_plan_builder.h"
#include "oneflow_like/actor/test_util.h"
#include "oneflow_like/comm/ibverbs_transport_testing.h"

namespace oneflow_like {
namespace actor {
namespace {

constexpr int64_t kRows = 32, kCols = 1024;  // per rank: 128 KiB of float32

PlanProto AllGatherRelu() {
  TestPlanBuilder b(2, 1);
  int64_t x[2];
  for (int r = 0; r < 2; ++r) x[r] = b.AddRegister(r, "x", 1, {F32(Shape{kRows, kCols})});
  for (int r = 0; r < 2; ++r) {
    b.AddMirror(r, x[1 - r]);
    const int64_t peer = b.AddRegister(r, "x.peer", 1, {F32(Shape{kRows, kCols})});
    const int64_t full = b.AddRegister(r, "x.gathered", 1, {F32(Shape{2 * kRows, kCols})});
    const int64_t y = b.AddRegister(r, "y", 1, {F32(Shape{2 * kRows, kCols})});
    b.AddSource(r, "x.source", "x", x[r]);
    b.BindInput(r, "x", x[r], Shape{2 * kRows, kCols}, {kRows * r, 0}, "S(0)");
    TaskProto* transfer = b.AddTask(r, TaskProto::TRANSFER, "x.transfer", {x[1 - r]}, {peer}, /*stream=*/1);
    transfer->mutable_transfer()->set_peer_rank(1 - r);
    TaskProto* concat = b.AddTask(r, TaskProto::BOXING_CONCAT, "x.all_gather.concat", {x[r], peer}, {full});
    for (int part : {r, 1 - r}) {
      RegionProto* region = concat->mutable_concat()->add_input_regions();
      for (int64_t d : {kRows * part, int64_t{0}}) region->add_begin(d);
      for (int64_t d : {kRows * part + kRows, kCols}) region->add_end(d);
    }
    b.AddCompute(r, "relu", "relu", {}, {full}, {y});
    b.AddSink(r, "y.sink", "y", y);
    b.BindOutput(r, "y", y, Shape{2 * kRows, kCols}, {}, "B");
  }
  return b.Build();
}

TEST(RdmaRuntimeFakeTest, AllGatherPullsRegistersByRdmaRead) {
  std::vector<comm::testing_util::Inbox> inboxes(2);  // replaced by the runtimes' receivers
  comm::IbverbsTransportOptions options;
  options.slot_bytes = 16 << 10;  // each pull takes 8 reads
  options.slots_per_peer = 4;
  options.max_message_bytes = 1 << 20;
  options.connect_timeout_ms = 20000;
  std::vector<std::unique_ptr<comm::IbverbsTransport>> transports =
      comm::testing_util::OpenAndConnect(options, &inboxes);
  ASSERT_EQ(transports.size(), 2u);
  std::unique_ptr<OpRegistry> registry = MakeBuiltinRegistry();
  CpuAllocator allocator;
  const PlanProto plan = AllGatherRelu();
  std::vector<std::unique_ptr<Runtime>> runtimes;
  for (int r = 0; r < 2; ++r) {
    RuntimeEnv env;
    env.transport = transports[r].get();
    env.allocator = &allocator;
    env.registry = registry.get();
    absl::StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(plan, r, env);
    ASSERT_TRUE(runtime.ok()) << runtime.status();
    runtimes.push_back(*std::move(runtime));
  }
  for (int step = 0; step < 3; ++step) {
    const Tensor x = Iota(Shape{2 * kRows, kCols}, -1000.0f + step, 0.03f);
    for (auto& runtime : runtimes) ASSERT_TRUE(runtime->FeedLogical("x", x).ok());
    for (auto& runtime : runtimes) ASSERT_TRUE(runtime->StartStep().ok());
    for (int spins = 0; spins < 2000 && !(runtimes[0]->StepDone() && runtimes[1]->StepDone()); ++spins) {
      ASSERT_TRUE(runtimes[0]->status().ok() && runtimes[1]->status().ok())
          << runtimes[0]->status() << " / " << runtimes[1]->status();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // hang guard: 10 s
    }
    ASSERT_TRUE(runtimes[0]->StepDone() && runtimes[1]->StepDone()) << "step " << step << " stalled";
    std::vector<float> relu = x.ToVector<float>();
    for (float& e : relu) e = std::max(e, 0.0f);
    for (int r = 0; r < 2; ++r) {
      absl::StatusOr<std::vector<Tensor>> y = runtimes[r]->TakeFetched("y");
      ASSERT_TRUE(y.ok()) << y.status();
      ASSERT_EQ(y->size(), 1u);
      EXPECT_EQ((*y)[0].ToVector<float>(), relu) << "rank " << r << " step " << step;
      EXPECT_EQ(transports[r]->messages_pulled(), step + 1) << "rank " << r;  // x of the peer, pulled
    }
  }
  for (auto& runtime : runtimes) runtime->EndStream();
  for (int spins = 0; spins < 2000 && !(runtimes[0]->Finished() && runtimes[1]->Finished()); ++spins) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(runtimes[0]->Finished() && runtimes[1]->Finished());
  runtimes.clear();
  comm::testing_util::CloseAll(&transports);
}

}  // namespace
}  // namespace actor
}  // namespace oneflow_like
