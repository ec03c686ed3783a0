// The collectives' agreed issue order (actor/collective_order.h) on real training runs over
// gloo: with it, every rank hands its calls to the library in an order all ranks agree on (the
// calls of a group in one order on every member, and two groups sharing ranks in a consistent
// order), as NCCL needs; it changes no loss; and it never deadlocks, on layouts that mix every
// issue phase: per piece (tensor-parallel boxing in forward and backward), before the pieces
// (ZeRO-2's gathers of the parameters), after them (gradient buckets summed over
// micro-batches), with run-ahead (two steps in flight) and pipeline stages (whose 1F1B order
// the agreed order serializes across pieces, but never deadlocks).
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/comm/gloo_collective.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/train/trainer.h"

namespace oneflow_like {
namespace train {
namespace {

const models::GptConfig kTiny{.vocab = 64, .seq_len = 16, .n_layer = 2, .n_embd = 32, .n_head = 2, .batch = 4};

TrainerOptions TinyGpt(models::ParallelLayout layout, int micro_batches, int zero_stage) {
  TrainerOptions o;
  o.model = Workload::kGpt;
  o.gpt = kTiny;
  o.batch = kTiny.batch;
  o.layout = layout;
  o.micro_batches = micro_batches;
  o.zero_stage = zero_stage;
  o.boxing = compiler::BoxingStyle::kCollective;
  o.bucket_mb = 0.001;  // a few buckets
  o.watchdog_ms = 30000;
  return o;
}

// Three stages: three layers, `batch` divisible by micro-batches x dp, and a model whose SBP
// choices make the embedding's gradient read the tokens through a boxing (with dp, gathered
// by a PER_PIECE call; with tp, sliced on the rank).
TrainerOptions Deeper(TrainerOptions o, int batch, int vocab) {
  o.gpt = models::GptConfig{.vocab = vocab, .seq_len = 32, .n_layer = 3, .n_embd = 64, .n_head = 2, .batch = batch};
  o.batch = batch;
  return o;
}

TrainerOptions NoReuse(TrainerOptions o) {
  o.reuse_memory = false;
  return o;
}

// Per rank, the channels (global_orders) of the calls in the order they reached the library.
struct CallLog {
  std::mutex mu;
  std::map<int32_t, std::vector<uint64_t>> by_rank;
};

// Forwards to gloo, logging each call and, to shake the actors' firing order, sleeping a
// random 0-300 us first; claims NeedsIssueOrder as NCCL does (when `needs_order`).
class LoggingCommunicator final : public comm::Communicator {
 public:
  LoggingCommunicator(std::unique_ptr<comm::Communicator> inner, CallLog* log, int32_t rank, uint64_t channel)
      : inner_(std::move(inner)), log_(log), rank_(rank), channel_(channel), random_(rank * 1000 + channel) {}
  int32_t rank() const override { return inner_->rank(); }
  int32_t size() const override { return inner_->size(); }
  std::string description() const override { return inner_->description(); }
  void AllReduce(const void* in, void* out, int64_t count, DataType dtype, comm::CollectiveDone done) override {
    Note();
    inner_->AllReduce(in, out, count, dtype, std::move(done));
  }
  void AllGather(const void* in, void* out, std::vector<int64_t> counts, DataType dtype,
                 comm::CollectiveDone done) override {
    Note();
    inner_->AllGather(in, out, std::move(counts), dtype, std::move(done));
  }
  void ReduceScatter(const void* in, void* out, std::vector<int64_t> counts, DataType dtype,
                     comm::CollectiveDone done) override {
    Note();
    inner_->ReduceScatter(in, out, std::move(counts), dtype, std::move(done));
  }
  void Broadcast(void* buffer, int64_t count, DataType dtype, int32_t root, comm::CollectiveDone done) override {
    Note();
    inner_->Broadcast(buffer, count, dtype, root, std::move(done));
  }
  void AllToAll(const void* in, std::vector<int64_t> send_counts, void* out, std::vector<int64_t> recv_counts,
                DataType dtype, comm::CollectiveDone done) override {
    Note();
    inner_->AllToAll(in, std::move(send_counts), out, std::move(recv_counts), dtype, std::move(done));
  }
  void Send(const void* in, int64_t count, DataType dtype, int32_t peer, comm::CollectiveDone done) override {
    Note();
    inner_->Send(in, count, dtype, peer, std::move(done));
  }
  void Recv(void* out, int64_t count, DataType dtype, int32_t peer, comm::CollectiveDone done) override {
    Note();
    inner_->Recv(out, count, dtype, peer, std::move(done));
  }
  absl::Status Flush() override { return inner_->Flush(); }

 private:
  void Note() {
    std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 300)(random_)));
    std::lock_guard<std::mutex> lock(log_->mu);
    log_->by_rank[rank_].push_back(channel_);
  }
  std::unique_ptr<comm::Communicator> inner_;
  CallLog* log_;
  const int32_t rank_;
  const uint64_t channel_;
  std::mt19937 random_;  // calls of one channel come one at a time
};

class LoggingBackend final : public comm::CollectiveBackend {
 public:
  LoggingBackend(std::unique_ptr<comm::CollectiveBackend> inner, CallLog* log, int32_t rank, bool needs_order)
      : inner_(std::move(inner)), log_(log), rank_(rank), needs_order_(needs_order) {}
  std::string name() const override { return "logging(" + inner_->name() + ")"; }
  absl::StatusOr<std::unique_ptr<comm::Communicator>> Connect(const std::vector<int32_t>& group,
                                                              const std::string& tag) override {
    return inner_->Connect(group, tag);
  }
  absl::StatusOr<std::unique_ptr<comm::Communicator>> ConnectChannel(const std::vector<int32_t>& group,
                                                                     uint64_t channel, const std::string& tag) override {
    ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> inner, inner_->ConnectChannel(group, channel, tag));
    return std::unique_ptr<comm::Communicator>(
        std::make_unique<LoggingCommunicator>(std::move(inner), log_, rank_, channel));
  }
  bool NeedsIssueOrder() const override { return needs_order_; }

 private:
  std::unique_ptr<comm::CollectiveBackend> inner_;
  CallLog* log_;
  const int32_t rank_;
  const bool needs_order_;
};

struct TrainRun {
  std::vector<double> losses;
  std::map<int32_t, std::vector<uint64_t>> calls;  // per rank, in issue order
  std::map<CollectiveParams::IssuePhase, int> phases;  // the plan's collective tasks by phase
  std::set<int32_t> in_flight;                        // their issue_pieces_in_flight values
  int backward = 0;                                   // those boxing backward values
};

TrainRun Train(TrainerOptions options, bool needs_order, int steps, const OpRegistry* registry) {
  auto log = std::make_shared<CallLog>();
  options.collective_factory = [log, needs_order](comm::RendezvousStore* store, int32_t rank, int32_t world)
      -> absl::StatusOr<std::unique_ptr<comm::CollectiveBackend>> {
    ASSIGN_OR_RETURN(std::unique_ptr<comm::CollectiveBackend> gloo, comm::CreateGlooBackend(store, rank, world));
    return std::unique_ptr<comm::CollectiveBackend>(
        std::make_unique<LoggingBackend>(std::move(gloo), log.get(), rank, needs_order));
  };
  TrainRun run;
  absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(options, registry);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return run;
  for (const RankPlanProto& rank_plan : (*trainer)->plan().rank_plans()) {
    for (const TaskProto& task : rank_plan.tasks()) {
      if (task.type() != TaskProto::COLLECTIVE) continue;
      ++run.phases[task.collective().issue_phase()];
      if (task.collective().issue_phase() != CollectiveParams::PER_PIECE) continue;
      run.in_flight.insert(task.collective().issue_pieces_in_flight());
      run.backward += task.collective().issue_backward() ? 1 : 0;
    }
  }
  for (int step = 0; step < steps; ++step) {
    absl::StatusOr<StepResult> r = (*trainer)->RunStep(/*start_next=*/step + 1 < steps);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return run;
    run.losses.push_back(r->loss);
  }
  EXPECT_TRUE((*trainer)->executor()->Close().ok());
  std::lock_guard<std::mutex> lock(log->mu);
  run.calls = log->by_rank;
  return run;
}

// For every two ranks, the calls both take part in come in the same order on both (true when
// returned; each disagreement is a test failure when `expect`).
bool ExpectAgreedOrder(const std::map<int32_t, std::vector<uint64_t>>& calls, bool expect = true) {
  bool agreed = true;
  for (const auto& [a, calls_a] : calls) {
    for (const auto& [b, calls_b] : calls) {
      if (b <= a) continue;
      std::set<uint64_t> in_a(calls_a.begin(), calls_a.end()), in_b(calls_b.begin(), calls_b.end());
      std::vector<uint64_t> shared_a, shared_b;
      for (uint64_t c : calls_a) {
        if (in_b.count(c) > 0) shared_a.push_back(c);
      }
      for (uint64_t c : calls_b) {
        if (in_a.count(c) > 0) shared_b.push_back(c);
      }
      agreed = agreed && shared_a == shared_b;
      if (expect) {
        EXPECT_EQ(shared_a, shared_b) << "ranks " << a << " and " << b;
      }
    }
  }
  return agreed;
}

class CollectiveOrderTrainTest : public ::testing::Test {
 protected:
  std::unique_ptr<OpRegistry> registry_ = compiler::testing::BuiltinRegistry();
};

TEST_F(CollectiveOrderTrainTest, AgreedOrderOnEveryLayoutChangesNoLoss) {
  struct Case {
    std::string name;
    TrainerOptions options;
    std::vector<CollectiveParams::IssuePhase> phases;  // the plan has collectives of each
  };
  const std::vector<Case> cases = {
      {"dp2 x tp2", TinyGpt({.dp = 2, .tp = 2}, 1, 0), {CollectiveParams::PER_PIECE}},
      {"dp2 ZeRO-2, 2 micro-batches", TinyGpt({.dp = 2}, 2, 2),
       {CollectiveParams::BEFORE_PIECES, CollectiveParams::AFTER_PIECES}},
      {"dp2 x tp2 ZeRO-1, 2 micro-batches", TinyGpt({.dp = 2, .tp = 2}, 2, 1),
       {CollectiveParams::PER_PIECE, CollectiveParams::AFTER_PIECES}},
      {"pp2 x dp2, 2 micro-batches", TinyGpt({.dp = 2, .pp = 2}, 2, 0), {CollectiveParams::AFTER_PIECES}},
      {"pp2 x tp2, 4 micro-batches (1F1B order)", TinyGpt({.tp = 2, .pp = 2}, 4, 0), {CollectiveParams::PER_PIECE}},
      // Stage 0 keeps 3 pieces in flight: the token register, read in the backward through
      // the slice boxed for the embedding's gradient, needs 3 buffers (it had 1: hung), and
      // with dp the tokens gathered for that gradient are a backward call (they were issued
      // in a forward slot: hung).
      {"pp3 x tp2, 4 micro-batches (1F1B order, 3 in flight)", Deeper(TinyGpt({.tp = 2, .pp = 3}, 4, 0), 8, 256),
       {CollectiveParams::PER_PIECE}},
      {"pp3 x dp2, 4 micro-batches (1F1B order, 3 in flight)", Deeper(TinyGpt({.dp = 2, .pp = 3}, 4, 0), 8, 2048),
       {CollectiveParams::PER_PIECE, CollectiveParams::AFTER_PIECES}},
      {"pp2 x tp2, 4 micro-batches, no memory reuse (1F1B order)", NoReuse(TinyGpt({.tp = 2, .pp = 2}, 4, 0)),
       {CollectiveParams::PER_PIECE}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const TrainRun unordered = Train(c.options, /*needs_order=*/false, 3, registry_.get());
    const TrainRun ordered = Train(c.options, /*needs_order=*/true, 3, registry_.get());
    ASSERT_EQ(unordered.losses.size(), 3u);
    EXPECT_EQ(ordered.losses, unordered.losses);
    EXPECT_NE(unordered.losses[2], unordered.losses[0]);  // it trains
    for (CollectiveParams::IssuePhase phase : c.phases) {
      EXPECT_GT(ordered.phases.count(phase), 0u) << CollectiveParams::IssuePhase_Name(phase);
    }
    EXPECT_EQ(ordered.phases.count(CollectiveParams::UNPLACED), 0u);
    if (c.options.layout.pp > 2 && c.options.layout.dp > 1) {
      EXPECT_GT(ordered.backward, 0);  // the tokens gathered for the embedding's gradient
    }
    if (c.options.layout.pp > 1 && c.options.layout.tp > 1) {
      // 1F1B: stage 0 keeps 2 pieces in flight, stage 1 one; forward and backward calls. With
      // memory reuse as without: stage 0's forward and backward registers share no bytes
      // (registers.h, PhaseSplit; registers_test checks it), else piece 1's forward, issued
      // before piece 0's backward, could wait for it in a register's turn.
      std::set<int32_t> want;  // stage s keeps min(N, S - s) pieces in flight
      for (int s = 0; s < c.options.layout.pp; ++s) want.insert(std::min<int32_t>(c.options.micro_batches, c.options.layout.pp - s));
      EXPECT_EQ(ordered.in_flight, want);
      EXPECT_GT(ordered.backward, 0);
      EXPECT_LT(ordered.backward, ordered.phases.at(CollectiveParams::PER_PIECE));
    }
    ASSERT_EQ(ordered.calls.size(), static_cast<size_t>(c.options.layout.world()));
    ExpectAgreedOrder(ordered.calls);
    std::cout << c.name << ": without the order, the ranks " << (ExpectAgreedOrder(unordered.calls, false) ? "agreed" : "disagreed")
              << std::endl;
    // The same calls were made either way, only their order may differ.
    for (const auto& [rank, calls] : unordered.calls) {
      std::multiset<uint64_t> a(calls.begin(), calls.end());
      std::multiset<uint64_t> b(ordered.calls.at(rank).begin(), ordered.calls.at(rank).end());
      EXPECT_EQ(a, b) << "rank " << rank;
    }
  }
}

// RuntimeEnv::order_collectives on a backend that does not ask for the order (gloo) gives it too.
TEST_F(CollectiveOrderTrainTest, TheFlagOrdersGlooToo) {
  TrainerOptions options = TinyGpt({.dp = 2, .tp = 2}, 2, 1);
  options.order_collectives = true;
  const TrainRun ordered = Train(options, /*needs_order=*/false, 2, registry_.get());
  ASSERT_EQ(ordered.losses.size(), 2u);
  ExpectAgreedOrder(ordered.calls);
}

}  // namespace
}  // namespace train
}  // namespace oneflow_like
