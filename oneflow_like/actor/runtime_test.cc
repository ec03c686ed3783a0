// One-rank plans: values through SOURCE -> COMPUTE -> SINK over several steps, and bad plans
// rejected by Runtime::Create with errors that name the culprit.
#include "oneflow_like/actor/runtime.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oneflow_like/actor/session.h"
#include "oneflow_like/actor/test_plan_builder.h"
#include "oneflow_like/comm/loopback_transport.h"
#include "oneflow_like/core/ops/builtin_ops.h"

namespace oneflow_like {
namespace actor {
namespace {

using ::testing::HasSubstr;

const TensorDesc kF23{DataType::kFloat32, Shape{2, 3}};

// The built-in ops, registered once for this test binary (an explicit object, not a global
// registry of the library).
const OpRegistry& Registry() {
  static const OpRegistry* const registry = [] {
    auto* r = new OpRegistry();
    CHECK(RegisterBuiltinOps(r).ok());
    return r;
  }();
  return *registry;
}

// x[2,3] -> relu -> y, `pieces` pieces per step.
PlanProto ReluPlan(int64_t pieces) {
  TestPlanBuilder b(1, pieces);
  const int64_t x = b.AddRegister(0, "x", 2, {kF23});
  const int64_t y = b.AddRegister(0, "y", 1, {kF23});
  b.AddSource(0, "x.source", "x", x);
  b.BindInput(0, "x", x, Shape{2, 3});
  b.AddCompute(0, "relu", "relu", {}, {x}, {y});
  b.AddSink(0, "y.sink", "y", y);
  b.BindOutput(0, "y", y, Shape{2, 3});
  return b.Build();
}

Tensor Values(std::vector<float> v) { return Tensor::FromVector<float>(Shape{2, 3}, v); }

TEST(RuntimeTest, ReluPlanRunsSeveralStepsWithCorrectValues) {
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(ReluPlan(/*pieces=*/2), &Registry());
  ASSERT_TRUE(session.ok()) << session.status();
  for (int step = 0; step < 4; ++step) {
    std::vector<std::vector<float>> fed;
    for (int piece = 0; piece < 2; ++piece) {
      std::vector<float> v;
      for (int i = 0; i < 6; ++i) v.push_back(static_cast<float>((i - 3) * (step + 1) + piece * 0.5f));
      fed.push_back(v);
      ASSERT_TRUE((*session)->Feed("x", Values(v)).ok());
    }
    ASSERT_TRUE((*session)->RunStep().ok());
    ASSERT_EQ((*session)->FetchCount("y"), 2);
    for (int piece = 0; piece < 2; ++piece) {
      absl::StatusOr<Tensor> y = (*session)->Fetch("y", piece);
      ASSERT_TRUE(y.ok()) << y.status();
      std::vector<float> expected = fed[piece];
      for (float& e : expected) e = std::max(e, 0.0f);
      EXPECT_EQ(y->ToVector<float>(), expected) << "step " << step << " piece " << piece;
    }
  }
  EXPECT_TRUE((*session)->Close().ok());
  EXPECT_TRUE((*session)->runtime(0)->Finished());
}

// x -> COPY (its own stream, as a host -> device copy would be) -> relu -> COPY back -> y, with
// 2 register slots in flight: the copies pass every piece's values through unchanged.
TEST(RuntimeTest, CopyTasksOnACopyStreamPassValuesThrough) {
  TestPlanBuilder b(1, 3);
  const int64_t x = b.AddRegister(0, "x", 2, {kF23});
  const int64_t x_dev = b.AddRegister(0, "x.device", 2, {kF23});
  const int64_t y_dev = b.AddRegister(0, "y.device", 1, {kF23});
  const int64_t y = b.AddRegister(0, "y", 1, {kF23});
  b.AddSource(0, "x.source", "x", x);
  b.BindInput(0, "x", x, Shape{2, 3});
  b.AddTask(0, TaskProto::COPY, "x.h2d", {x}, {x_dev}, /*stream=*/2)->set_stream_kind(STREAM_COPY);
  b.AddCompute(0, "relu", "relu", {}, {x_dev}, {y_dev});
  b.AddTask(0, TaskProto::COPY, "y.d2h", {y_dev}, {y}, /*stream=*/2)->set_stream_kind(STREAM_COPY);
  b.AddSink(0, "y.sink", "y", y);
  b.BindOutput(0, "y", y, Shape{2, 3});
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(b.Build(), &Registry());
  ASSERT_TRUE(session.ok()) << session.status();
  for (int step = 0; step < 2; ++step) {
    for (int piece = 0; piece < 3; ++piece) {
      ASSERT_TRUE((*session)->Feed("x", Values({-1, 2, -3, 4, -5, 6.0f + piece + 10 * step})).ok());
    }
    ASSERT_TRUE((*session)->RunStep().ok());
    for (int piece = 0; piece < 3; ++piece) {
      absl::StatusOr<Tensor> y = (*session)->Fetch("y", piece);
      ASSERT_TRUE(y.ok()) << y.status();
      EXPECT_EQ(y->ToVector<float>(), std::vector<float>({0, 2, 0, 4, 0, 6.0f + piece + 10 * step}));
    }
  }
  EXPECT_TRUE((*session)->Close().ok());
}

TEST(RuntimeTest, CopyTasksWithMismatchedDescsAreRefused) {
  TestPlanBuilder b(1, 1);
  const int64_t x = b.AddRegister(0, "x", 1, {kF23});
  const int64_t x_dev = b.AddRegister(0, "x.device", 1, {{DataType::kFloat32, Shape{3, 2}}});
  b.AddSource(0, "x.source", "x", x);
  b.BindInput(0, "x", x, Shape{2, 3});
  b.AddTask(0, TaskProto::COPY, "x.h2d", {x}, {x_dev}, /*stream=*/2);
  b.AddSink(0, "x.sink", "xd", x_dev);
  b.BindOutput(0, "xd", x_dev, Shape{3, 2});
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(b.Build(), &Registry());
  ASSERT_FALSE(session.ok());
  EXPECT_THAT(std::string(session.status().message()), HasSubstr("x.h2d"));
  EXPECT_THAT(std::string(session.status().message()), HasSubstr("payload 0"));
}

TEST(RuntimeTest, MissingFeedAndWrongShapesAreClearErrors) {
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(ReluPlan(2), &Registry());
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE((*session)->Feed("x", Values({1, 2, 3, 4, 5, 6})).ok());
  absl::Status short_feed = (*session)->RunStep();
  EXPECT_EQ(short_feed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(short_feed.message()), HasSubstr("input 'x' on rank 0 has 1 fed pieces; a step needs 2"));
  absl::Status wrong = (*session)->Feed("x", Tensor(DataType::kFloat32, Shape{3, 2}));
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(wrong.message()), HasSubstr("float32[3,2]"));
  EXPECT_EQ((*session)->Feed("nope", Values({1, 2, 3, 4, 5, 6})).code(), absl::StatusCode::kInvalidArgument);
}

// Two BOXING_CONCATs whose outputs share bytes (as a memory planner may place them): each
// output must start as zeros, so `high` does not show `low`'s rows; a concat without payload
// inputs (paced by a control input) is a zero fill.
TEST(RuntimeTest, ConcatOutputsStartAsZeros) {
  const TensorDesc f2{DataType::kFloat32, Shape{2}}, f4{DataType::kFloat32, Shape{4}};
  TestPlanBuilder b(1, 1);
  const int64_t x = b.AddRegister(0, "x", 1, {f2});
  const int64_t low = b.AddRegister(0, "low", 1, {f4});
  const int64_t low_out = b.AddRegister(0, "low.relu", 1, {f4});
  const int64_t high = b.AddRegister(0, "high", 1, {f4});
  const int64_t high_out = b.AddRegister(0, "high.relu", 1, {f4});
  const int64_t zeros = b.AddRegister(0, "zeros", 1, {f4});
  b.AddSource(0, "x.source", "x", x);
  b.BindInput(0, "x", x, Shape{2});
  TaskProto* concat_low = b.AddTask(0, TaskProto::BOXING_CONCAT, "low.concat", {x}, {low});
  TaskProto* concat_high = b.AddTask(0, TaskProto::BOXING_CONCAT, "high.concat", {x}, {high});
  for (auto [task, begin] : {std::make_pair(concat_low, 0), std::make_pair(concat_high, 2)}) {
    RegionProto* region = task->mutable_concat()->add_input_regions();
    region->add_begin(begin);
    region->add_end(begin + 2);
  }
  b.AddCompute(0, "low.relu", "relu", {}, {low}, {low_out});
  b.AddCompute(0, "high.relu", "relu", {}, {high}, {high_out});
  b.AddTask(0, TaskProto::BOXING_CONCAT, "zero_fill", {x}, {zeros})->clear_inputs();  // x: control only
  for (auto [name, id] :
       {std::make_pair("low", low_out), std::make_pair("high", high_out), std::make_pair("zeros", zeros)}) {
    b.AddSink(0, std::string(name) + ".sink", name, id);
    b.BindOutput(0, name, id, Shape{4});
  }
  PlanProto plan = b.Build();
  RankPlanProto* rank = plan.mutable_rank_plans(0);
  rank->mutable_registers(3)->mutable_memory()->set_offset(rank->registers(1).memory().offset());  // high on low
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(plan, &Registry());
  ASSERT_TRUE(session.ok()) << session.status();
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE((*session)->Feed("x", Tensor::FromVector<float>(Shape{2}, {1.0f + step, 2.0f})).ok());
    ASSERT_TRUE((*session)->RunStep().ok());
    EXPECT_EQ((*session)->Fetch("low")->ToVector<float>(), std::vector<float>({1.0f + step, 2, 0, 0}));
    EXPECT_EQ((*session)->Fetch("high")->ToVector<float>(), std::vector<float>({0, 0, 1.0f + step, 2}));
    EXPECT_EQ((*session)->Fetch("zeros")->ToVector<float>(), std::vector<float>({0, 0, 0, 0}));
  }
}

// Four registers on the same bytes, taken in turn every step (concat i -> relu i): each producer
// checks only the one before it (the first: the last), not all three others, and the turns
// still keep each concat's bytes until its relu read them.
TEST(RuntimeTest, RegistersSharingBytesCheckOnlyTheRegisterBeforeThem) {
  const TensorDesc f2{DataType::kFloat32, Shape{2}}, f8{DataType::kFloat32, Shape{8}};
  TestPlanBuilder b(1, 1);
  const int64_t x = b.AddRegister(0, "x", 1, {f2});
  b.AddSource(0, "x.source", "x", x);
  b.BindInput(0, "x", x, Shape{2});
  std::vector<int64_t> shared;
  for (int i = 0; i < 4; ++i) {
    const std::string name = absl::StrCat("c", i);
    const int64_t c = b.AddRegister(0, name, 1, {f8});
    const int64_t out = b.AddRegister(0, name + ".relu", 1, {f8});
    TaskProto* concat = b.AddTask(0, TaskProto::BOXING_CONCAT, name + ".concat", {x}, {c});
    RegionProto* region = concat->mutable_concat()->add_input_regions();
    region->add_begin(2 * i);
    region->add_end(2 * i + 2);
    b.AddCompute(0, name + ".relu", "relu", {}, {c}, {out});
    b.AddSink(0, name + ".sink", name, out);
    b.BindOutput(0, name, out, Shape{8});
    shared.push_back(c);
  }
  PlanProto plan = b.Build();
  RankPlanProto* rank = plan.mutable_rank_plans(0);
  auto entry = [&](int64_t id) -> RegisterProto* {
    for (RegisterProto& r : *rank->mutable_registers()) {
      if (r.id() == id) return &r;
    }
    return nullptr;
  };
  for (int i = 1; i < 4; ++i) entry(shared[i])->mutable_memory()->set_offset(entry(shared[0])->memory().offset());
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(plan, &Registry());
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ((*session)->runtime(0)->num_byte_sharers(), 12);  // each of 4 shares with 3
  EXPECT_EQ((*session)->runtime(0)->num_byte_checks(), 4);    // each checks 1
  for (int step = 0; step < 5; ++step) {
    ASSERT_TRUE((*session)->Feed("x", Tensor::FromVector<float>(Shape{2}, {1.0f + step, 2.0f})).ok());
    ASSERT_TRUE((*session)->RunStep().ok());
    for (int i = 0; i < 4; ++i) {
      std::vector<float> want(8, 0.0f);
      want[2 * i] = 1.0f + step;
      want[2 * i + 1] = 2.0f;
      EXPECT_EQ((*session)->Fetch(absl::StrCat("c", i))->ToVector<float>(), want) << "step " << step << " c" << i;
    }
  }
}

// Feeding while running: the pieces of step k+1 are fed while step k runs. Register counts bound
// how far the source runs ahead, so step k+1's pieces must wait in the feed queue and step k
// must see only its own pieces. Reference: relu of exactly what was fed for that step.
std::vector<float> PieceValues(int step, int piece) {
  std::vector<float> v;
  for (int i = 0; i < 6; ++i) v.push_back(static_cast<float>((i - 2) * (step + 1)) + 0.25f * piece);
  return v;
}

std::vector<float> Relu(std::vector<float> v) {
  for (float& e : v) e = std::max(e, 0.0f);
  return v;
}

// Deterministic executor: step k's messages are dispatched one at a time, and after every
// `feed_after` of them one more piece of step k+1 is fed, so feeds interleave with the step.
TEST(RuntimeTest, FeedingTheNextStepWhileAStepRunsKeepsStepsApart) {
  constexpr int kPieces = 3, kSteps = 4;
  CpuAllocator allocator;
  RuntimeEnv env;
  env.allocator = &allocator;
  env.registry = &Registry();
  env.deterministic = true;
  absl::StatusOr<std::unique_ptr<Runtime>> created = Runtime::Create(ReluPlan(kPieces), 0, env);
  ASSERT_TRUE(created.ok()) << created.status();
  Runtime& runtime = **created;
  for (int piece = 0; piece < kPieces; ++piece) ASSERT_TRUE(runtime.FeedShard("x", Values(PieceValues(0, piece))).ok());
  for (int step = 0; step < kSteps; ++step) {
    ASSERT_TRUE(runtime.StartStep().ok()) << "step " << step;
    EXPECT_EQ(runtime.StartStep().code(), absl::StatusCode::kFailedPrecondition);  // next pieces not fed yet
    int dispatched = 0, fed_next = 0;
    while (!runtime.StepDone()) {
      ASSERT_TRUE(runtime.DispatchOne()) << "stalled in step " << step;
      ++dispatched;
      if (step + 1 < kSteps && fed_next < kPieces && dispatched % 2 == 0) {
        ASSERT_TRUE(runtime.FeedShard("x", Values(PieceValues(step + 1, fed_next))).ok());
        ++fed_next;
      }
    }
    EXPECT_EQ(fed_next, step + 1 < kSteps ? kPieces : 0) << "every next-step piece was fed mid-step";
    absl::StatusOr<std::vector<Tensor>> y = runtime.TakeFetched("y");
    ASSERT_TRUE(y.ok()) << y.status();
    ASSERT_EQ(y->size(), static_cast<size_t>(kPieces));
    for (int piece = 0; piece < kPieces; ++piece) {
      EXPECT_EQ((*y)[piece].ToVector<float>(), Relu(PieceValues(step, piece))) << "step " << step << " piece " << piece;
    }
  }
  // The drain still works after the interleaving, and nothing fed is left unused.
  runtime.EndStream();
  while (runtime.DispatchOne()) {
  }
  EXPECT_TRUE(runtime.Finished());
  EXPECT_TRUE(runtime.status().ok()) << runtime.status();
}

// Threads: an on_act hook feeds step k+1's pieces when step k's source fires its first piece,
// i.e. certainly while step k runs; results equal sequential feeding.
TEST(RuntimeTest, FeedingFromAnActorThreadDuringTheStepMatchesSequentialFeeding) {
  constexpr int kPieces = 4, kSteps = 5;
  CpuAllocator allocator;
  std::atomic<Runtime*> runtime_for_hook{nullptr};
  std::atomic<int> fed_mid_step{0};
  RuntimeEnv env;
  env.allocator = &allocator;
  env.registry = &Registry();
  env.on_act = [&](const ActEvent& event) {
    // x.source's firings count pieces from 1: firing 1 + k * kPieces starts step k.
    if (*event.task_name != "x.source" || (event.firing - 1) % kPieces != 0) return;
    const int next_step = static_cast<int>((event.firing - 1) / kPieces) + 1;
    if (next_step >= kSteps) return;
    for (int piece = 0; piece < kPieces; ++piece) {
      CHECK(runtime_for_hook.load()->FeedShard("x", Values(PieceValues(next_step, piece))).ok());
    }
    fed_mid_step.fetch_add(1);
  };
  absl::StatusOr<std::unique_ptr<Runtime>> created = Runtime::Create(ReluPlan(kPieces), 0, env);
  ASSERT_TRUE(created.ok()) << created.status();
  Runtime& runtime = **created;
  runtime_for_hook.store(&runtime);
  for (int piece = 0; piece < kPieces; ++piece) ASSERT_TRUE(runtime.FeedShard("x", Values(PieceValues(0, piece))).ok());
  for (int step = 0; step < kSteps; ++step) {
    ASSERT_TRUE(runtime.StartStep().ok()) << "step " << step << ": " << runtime.status();
    for (int i = 0; i < 100000 && !runtime.StepDone(); ++i) {  // hang guard only (~10 s)
      ASSERT_TRUE(runtime.status().ok()) << runtime.status();
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    ASSERT_TRUE(runtime.StepDone()) << runtime.Report(1000);
    absl::StatusOr<std::vector<Tensor>> y = runtime.TakeFetched("y");
    ASSERT_TRUE(y.ok()) << y.status();
    ASSERT_EQ(y->size(), static_cast<size_t>(kPieces));
    for (int piece = 0; piece < kPieces; ++piece) {
      EXPECT_EQ((*y)[piece].ToVector<float>(), Relu(PieceValues(step, piece))) << "step " << step << " piece " << piece;
    }
  }
  EXPECT_EQ(fed_mid_step.load(), kSteps - 1);
  runtime.Stop();
}

absl::Status CreateError(const PlanProto& plan) {
  CpuAllocator allocator;
  RuntimeEnv env;
  env.allocator = &allocator;
  env.registry = &Registry();
  absl::StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(plan, 0, env);
  return runtime.status();
}

TEST(RuntimeTest, TaskReferencingAMissingRegisterIsRejected) {
  PlanProto plan = ReluPlan(1);
  plan.mutable_rank_plans(0)->mutable_tasks(1)->set_consumed_register_ids(0, 999);
  absl::Status status = CreateError(plan);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("task 'relu' (id 2) consumes register 999, which rank 0's plan does not contain"));
}

TEST(RuntimeTest, OtherBadPlansAreRejectedWithNames) {
  {  // an unknown op
    PlanProto plan = ReluPlan(1);
    plan.mutable_rank_plans(0)->mutable_tasks(1)->mutable_compute()->set_op_type("relux");
    EXPECT_THAT(std::string(CreateError(plan).message()), HasSubstr("task 'relu' (id 2)"));
  }
  {  // a register slot past the end of its block
    PlanProto plan = ReluPlan(1);
    plan.mutable_rank_plans(0)->mutable_registers(1)->mutable_memory()->set_offset(1 << 20);
    EXPECT_THAT(std::string(CreateError(plan).message()), HasSubstr("register 'y' (id 101), slot 0 ends at byte"));
  }
  {  // a consumer missing from the register's consumer list
    PlanProto plan = ReluPlan(1);
    plan.mutable_rank_plans(0)->mutable_registers(1)->clear_consumers();
    EXPECT_THAT(std::string(CreateError(plan).message()), HasSubstr("does not list it among its consumers"));
  }
  {  // a sink bound to nothing
    PlanProto plan = ReluPlan(1);
    plan.mutable_rank_plans(0)->mutable_tasks(2)->mutable_io()->set_tensor_name("z");
    EXPECT_THAT(std::string(CreateError(plan).message()), HasSubstr("names tensor 'z', which has no binding"));
  }
  {  // no such rank
    EXPECT_THAT(
        std::string(
            Runtime::Create(ReluPlan(1), 3, RuntimeEnv{nullptr, nullptr, &Registry(), nullptr}).status().message()),
        HasSubstr("allocator"));
    CpuAllocator allocator;
    EXPECT_THAT(
        std::string(
            Runtime::Create(ReluPlan(1), 3, RuntimeEnv{nullptr, &allocator, &Registry(), nullptr}).status().message()),
        HasSubstr("no rank plan for rank 3"));
  }
  {  // a COLLECTIVE task needs a collective backend in the environment
    PlanProto plan = ReluPlan(1);
    plan.mutable_rank_plans(0)->mutable_tasks(1)->set_type(TaskProto::COLLECTIVE);
    absl::Status status = CreateError(plan);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr("needs a collective backend"));
  }
}

TEST(RuntimeTest, GarbageFromTheTransportFailsTheRuntimeNotTheProcess) {
  std::unique_ptr<comm::LoopbackHub> hub = comm::LoopbackHub::Create(2);
  CpuAllocator allocator;
  ManualClock clock;
  PlanProto two_ranks = ReluPlan(1);  // rank 0's work in a world of 2 (rank 1 only sends)
  two_ranks.set_world_size(2);
  RuntimeEnv env{hub->endpoint(Rank(0)), &allocator, &Registry(), nullptr, false, &clock};
  absl::StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(two_ranks, 0, env);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  clock.Advance(250);
  EXPECT_EQ((*runtime)->IdleMicros(), 250);  // no act yet: idle since Create, by the injected clock
  // The frame is fine, the actor message inside is not.
  ASSERT_TRUE(hub->endpoint(Rank(1))->Send(Rank(0), "not an actor message").ok());
  EXPECT_EQ((*runtime)->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string((*runtime)->status().message()), HasSubstr("rank 0: message from rank 1: actor message of"));
  EXPECT_EQ((*runtime)->StartStep().code(), absl::StatusCode::kInvalidArgument);  // failed runtimes run no steps

  // A 'returned' the runtime never asked for (register 101 = y, produced here, never sent).
  absl::StatusOr<std::unique_ptr<Runtime>> spoofed = Runtime::Create(two_ranks, 0, env);
  ASSERT_TRUE(spoofed.ok());
  ASSERT_TRUE(hub->endpoint(Rank(1))
                  ->Send(Rank(0), EncodeRemoteMessage(RemoteMessage{RemoteKind::kReturned, RegisterId(101), 0,
                                                                    TaskId(9), TaskId(2), ""}))
                  .ok());
  for (int i = 0; i < 1000 && (*spoofed)->status().ok(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ((*spoofed)->status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string((*spoofed)->status().message()), HasSubstr("returned more often than it was sent"));

  // A transport for a different world.
  std::unique_ptr<comm::LoopbackHub> big = comm::LoopbackHub::Create(3);
  EXPECT_THAT(std::string(Runtime::Create(ReluPlan(1), 0, RuntimeEnv{big->endpoint(Rank(0)), &allocator, &Registry()})
                              .status()
                              .message()),
              HasSubstr("the transport connects 3 ranks but the plan's world_size is 1"));

  absl::StatusOr<std::unique_ptr<Runtime>> other = Runtime::Create(two_ranks, 0, env);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(hub->endpoint(Rank(1))
                  ->Send(Rank(0), EncodeRemoteMessage(RemoteMessage{RemoteKind::kReady, RegisterId(555), 0, TaskId(1),
                                                                    TaskId(2), "xx"}))
                  .ok());
  EXPECT_THAT(std::string((*other)->status().message()), HasSubstr("register 555 has no mirror on this rank"));
}

}  // namespace
}  // namespace actor
}  // namespace oneflow_like
