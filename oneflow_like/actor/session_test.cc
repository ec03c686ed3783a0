// Multi-rank and multi-step behaviour of Session over hand-built plans: boxing across ranks,
// a variable updated through the plan's back edge, back-pressure, REPEAT/ACCUMULATE, and the
// watchdog's report on a starved actor.
#include "oneflow_like/actor/session.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oneflow_like/actor/test_plan_builder.h"
#include "oneflow_like/actor/test_util.h"
#include "oneflow_like/core/random.h"

namespace oneflow_like {
namespace actor {
namespace {

using ::testing::HasSubstr;

InitializerProto Uniform(uint64_t seed) {
  InitializerProto init;
  init.set_kind(InitializerProto::UNIFORM);
  init.set_low(-1);
  init.set_high(1);
  init.set_seed(seed);
  return init;
}

// x[4,3] S(0) on 2 ranks. Each rank all-gathers x (its own rows + the peer's rows through a
// TRANSFER, then BOXING_CONCAT) and applies relu: y is B. The gathered x is also bound as a
// partial-sum output "twice" (both ranks hold all of x, so the sum is 2x). A variable v[4,3]
// S(0) is initialized shard by shard.
PlanProto AllGatherPlan() {
  TestPlanBuilder b(2, 1);
  int64_t x[2], peer[2], full[2], y[2], v[2];
  for (int r = 0; r < 2; ++r) x[r] = b.AddRegister(r, "x", 1, {F32(Shape{2, 3})});
  for (int r = 0; r < 2; ++r) {
    b.AddMirror(r, x[1 - r]);
    peer[r] = b.AddRegister(r, "x.peer", 1, {F32(Shape{2, 3})});
    full[r] = b.AddRegister(r, "x.gathered", 1, {F32(Shape{4, 3})});
    y[r] = b.AddRegister(r, "y", 1, {F32(Shape{4, 3})});
    v[r] = b.AddRegister(r, "v", 1, {F32(Shape{2, 3})}, /*persistent=*/true);
    b.AddSource(r, "x.source", "x", x[r]);
    b.BindInput(r, "x", x[r], Shape{4, 3}, {2 * r, 0}, "S(0)");
    b.AddSource(r, "v.source", "v", v[r]);
    b.BindVariable(r, "v", v[r], Shape{4, 3}, Uniform(7), {2 * r, 0}, "S(0)");
    TaskProto* transfer = b.AddTask(r, TaskProto::TRANSFER, "x.transfer", {x[1 - r]}, {peer[r]}, /*stream=*/1);
    transfer->mutable_transfer()->set_peer_rank(1 - r);
    TaskProto* concat = b.AddTask(r, TaskProto::BOXING_CONCAT, "x.all_gather.concat", {x[r], peer[r]}, {full[r]});
    for (int part : {r, 1 - r}) {
      RegionProto* region = concat->mutable_concat()->add_input_regions();
      for (int64_t d : {int64_t{2} * part, int64_t{0}}) region->add_begin(d);
      for (int64_t d : {int64_t{2} * part + 2, int64_t{3}}) region->add_end(d);
    }
    b.AddCompute(r, "relu", "relu", {}, {full[r]}, {y[r]});
    b.AddSink(r, "y.sink", "y", y[r]);
    b.BindOutput(r, "y", y[r], Shape{4, 3}, {}, "B");
    b.AddSink(r, "twice.sink", "twice", full[r]);
    b.BindOutput(r, "twice", full[r], Shape{4, 3}, {}, "P");
  }
  return b.Build();
}

TEST(SessionTest, TwoRankAllGatherMatchesReference) {
  std::unique_ptr<OpRegistry> registry = MakeBuiltinRegistry();
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(AllGatherPlan(), registry.get());
  ASSERT_TRUE(session.ok()) << session.status();
  for (int step = 0; step < 3; ++step) {
    const Tensor x = Iota(Shape{4, 3}, -5.0f + step, 1.0f);
    ASSERT_TRUE((*session)->Feed("x", x).ok());
    absl::Status status = (*session)->RunStep();
    ASSERT_TRUE(status.ok()) << status;
    std::vector<float> relu = x.ToVector<float>(), twice = x.ToVector<float>();
    for (float& e : relu) e = std::max(e, 0.0f);
    for (float& e : twice) e *= 2;
    absl::StatusOr<Tensor> y = (*session)->Fetch("y");
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_EQ(y->shape(), (Shape{4, 3}));
    EXPECT_EQ(y->ToVector<float>(), relu);
    EXPECT_EQ((*session)->FetchShard("y", 1)->ToVector<float>(), relu);  // every rank holds all of it
    EXPECT_EQ((*session)->Fetch("twice")->ToVector<float>(), twice);
  }
  // Each rank initialized its rows; together they are the logical uniform(-1, 1) tensor.
  Tensor expected(DataType::kFloat32, Shape{4, 3});
  FillUniform(&expected, Shape{4, 3}, {0, 0}, 7, -1, 1);
  absl::StatusOr<Tensor> v = (*session)->ReadVariable("v");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->ToVector<float>(), expected.ToVector<float>());
  EXPECT_EQ((*session)->runtime(1)->ReadVariableShard("v")->shape(), (Shape{2, 3}));
  EXPECT_TRUE((*session)->Close().ok());
}

TEST(SessionTest, TimelineHasOneEventPerActOnEveryRank) {
  std::unique_ptr<OpRegistry> registry = MakeBuiltinRegistry();
  SessionOptions options;
  options.record_timeline = true;
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(AllGatherPlan(), registry.get(), options);
  ASSERT_TRUE(session.ok()) << session.status();
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE((*session)->Feed("x", Iota(Shape{4, 3}, 0, 1)).ok());
    ASSERT_TRUE((*session)->RunStep().ok());
  }
  ASSERT_TRUE((*session)->Close().ok());
  const std::string json = (*session)->TimelineJson();
  auto count = [&json](const std::string& needle) {
    int n = 0;
    for (size_t at = json.find(needle); at != std::string::npos; at = json.find(needle, at + 1)) ++n;
    return n;
  };
  // Acts per rank and step: x.source, v.source, x.transfer, concat, relu, y.sink, twice.sink.
  EXPECT_EQ(count(R"(,"firing":)"), 2 * 2 * 7);
  EXPECT_EQ(count(R"("name":"x.transfer","cat":"TRANSFER","ph":"X")"), 4);
  // Transfers: per rank and step x goes to the peer ("ready") and comes back ("returned"); the
  // drain sends one "end of data" per rank. Every send starts a flow that a receive ends.
  EXPECT_EQ(count(R"("name":"send ready 'x'","cat":"transfer","ph":"X")"), 4);
  EXPECT_EQ(count(R"("name":"receive ready 'x'","cat":"transfer","ph":"X")"), 4);
  EXPECT_EQ(count(R"("name":"send returned 'x'","cat":"transfer","ph":"X")"), 4);
  EXPECT_EQ(count(R"("name":"receive returned 'x'","cat":"transfer","ph":"X")"), 4);
  EXPECT_EQ(count(R"("name":"send end of data 'x'","cat":"transfer","ph":"X")"), 2);
  EXPECT_EQ(count(R"("ph":"s")"), 10);
  EXPECT_EQ(count(R"("ph":"f")"), 10);
  EXPECT_EQ(count(R"("name":"thread_name","ph":"M","pid":0,"tid":10001,"args":{"name":"receives from rank 1"})"), 1);
  // Waits: a source that tries to fire before the driver starts step 2 waits for its credit (its
  // last wait, the drain, never ends): once per source at most. Whether it tries first depends on
  // the threads' timing (one run here under load failed an exact count), so only the bound is exact.
  const int credit_waits = count(R"("name":"wait: step credit","cat":"wait","ph":"X")");
  EXPECT_LE(credit_waits, 4);
  EXPECT_EQ(count(R"("name":"wait: step credit")"), credit_waits) << "every credit wait is a complete event";
  EXPECT_EQ(count(R"("name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"cpu:0/stream 1"})"), 1);
  EXPECT_EQ(json.rfind("{\"traceEvents\": [", 0), 0u);
  EXPECT_EQ(json.substr(json.size() - 3), "]}\n");
}

// Per-rank trace files: each holds only its own rank's events (pid = rank), as a whole
// {"traceEvents": [...]} document; clear errors without a timeline or with a bad path.
TEST(SessionTest, WriteRankTimelineWritesOneFilePerRank) {
  std::unique_ptr<OpRegistry> registry = MakeBuiltinRegistry();
  SessionOptions options;
  options.record_timeline = true;
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(AllGatherPlan(), registry.get(), options);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Feed("x", Iota(Shape{4, 3}, 0, 1)).ok());
  ASSERT_TRUE((*session)->RunStep().ok());
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp != nullptr ? tmp : "/tmp";
  for (int rank = 0; rank < 2; ++rank) {
    const std::string path = dir + "/trace.rank" + std::to_string(rank) + ".json";
    ASSERT_TRUE(WriteRankTimeline(*(*session)->runtime(rank), path).ok());
    std::ifstream file(path);
    const std::string json((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    EXPECT_EQ(json.rfind("{\"traceEvents\": [\n", 0), 0u);
    EXPECT_EQ(json.substr(json.size() - 4), "\n]}\n");
    const std::string mine = ",\"pid\":" + std::to_string(rank) + ",";
    const std::string other = ",\"pid\":" + std::to_string(1 - rank) + ",";
    EXPECT_NE(json.find(mine + R"("tid":0,"args":{"task":)"), std::string::npos) << json;  // an act
    EXPECT_EQ(json.find(other), std::string::npos) << "rank " << rank << "'s file has the other rank's events";
    EXPECT_NE(json.find(R"("name":"send ready 'x'")"), std::string::npos);     // x to the peer
    EXPECT_NE(json.find(R"("name":"receive ready 'x'")"), std::string::npos);  // the peer's x
    EXPECT_NE(json.find(R"("name":"process_name","ph":"M","pid":)" + std::to_string(rank)), std::string::npos);
  }
  absl::Status bad_path = WriteRankTimeline(*(*session)->runtime(0), dir + "/no/such/dir/trace.json");
  EXPECT_EQ(bad_path.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad_path.message()), HasSubstr(dir + "/no/such/dir/trace.json"));

  absl::StatusOr<std::unique_ptr<Session>> untimed = Session::Create(AllGatherPlan(), registry.get());
  ASSERT_TRUE(untimed.ok());
  absl::Status not_recorded = WriteRankTimeline(*(*untimed)->runtime(0), dir + "/untimed.json");
  EXPECT_EQ(not_recorded.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(not_recorded.message()), HasSubstr("record_timeline"));
}

// P -> S(0) reduce-scatter on 2 ranks: each rank slices its partial p[4,3] into halves, keeps
// half r, transfers the other half to the peer and adds the peer's half r to its own.
TEST(SessionTest, TwoRankReduceScatterWithSliceTransferAdd) {
  TestPlanBuilder b(2, 1);
  int64_t p[2], halves[2][2], peer[2], out[2];
  for (int r = 0; r < 2; ++r) {
    p[r] = b.AddRegister(r, "p", 1, {F32(Shape{4, 3})});
    for (int h = 0; h < 2; ++h) halves[r][h] = b.AddRegister(r, "p.half", 1, {F32(Shape{2, 3})});
  }
  for (int r = 0; r < 2; ++r) {
    b.AddMirror(r, halves[1 - r][r]);
    peer[r] = b.AddRegister(r, "p.peer_half", 1, {F32(Shape{2, 3})});
    out[r] = b.AddRegister(r, "s", 1, {F32(Shape{2, 3})});
    b.AddSource(r, "p.source", "p", p[r]);
    b.BindInput(r, "p", p[r], Shape{4, 3}, {}, "P");
    TaskProto* slice = b.AddTask(r, TaskProto::BOXING_SLICE, "p.slice", {p[r]}, {halves[r][0], halves[r][1]});
    for (int h = 0; h < 2; ++h) {
      RegionProto* region = slice->mutable_slice()->add_output_regions();
      for (int64_t d : {int64_t{2} * h, int64_t{0}}) region->add_begin(d);
      for (int64_t d : {int64_t{2} * h + 2, int64_t{3}}) region->add_end(d);
    }
    b.AddTask(r, TaskProto::TRANSFER, "p.transfer", {halves[1 - r][r]}, {peer[r]}, 1)
        ->mutable_transfer()
        ->set_peer_rank(1 - r);
    b.AddTask(r, TaskProto::BOXING_ADD, "p.add", {halves[r][r], peer[r]}, {out[r]});
    b.AddSink(r, "s.sink", "s", out[r]);
    b.BindOutput(r, "s", out[r], Shape{4, 3}, {2 * r, 0}, "S(0)");
  }
  // Rank r's half (1 - r) register has no local consumer: only the peer's TRANSFER reads it.
  std::unique_ptr<OpRegistry> registry = MakeBuiltinRegistry();
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(b.Build(), registry.get());
  ASSERT_TRUE(session.ok()) << session.status();
  for (int step = 0; step < 2; ++step) {
    const Tensor p0 = Iota(Shape{4, 3}, 1.0f + step, 1.0f), p1 = Iota(Shape{4, 3}, 100.0f, -2.0f);
    EXPECT_EQ((*session)->Feed("p", p0).code(), absl::StatusCode::kInvalidArgument);  // partial: per rank only
    ASSERT_TRUE((*session)->FeedShard("p", 0, p0).ok());
    ASSERT_TRUE((*session)->FeedShard("p", 1, p1).ok());
    absl::Status status = (*session)->RunStep();
    ASSERT_TRUE(status.ok()) << status;
    std::vector<float> expected;
    for (int i = 0; i < 12; ++i) expected.push_back(p0.data<float>()[i] + p1.data<float>()[i]);
    EXPECT_EQ((*session)->Fetch("s")->ToVector<float>(), expected);
    EXPECT_EQ((*session)->FetchShard("s", 1)->ToVector<float>(),
              std::vector<float>(expected.begin() + 6, expected.end()));
  }
  EXPECT_TRUE((*session)->Close().ok());
}

// reduce_mean over the split axis on 2 ranks: each rank's kernel must see the logical shape of
// its input (from ComputeParams.input_shards) to divide by 4, not by its 2 local rows. The
// partial results are bound as a P output, which Fetch sums.
TEST(SessionTest, ComputeShardInfoReachesTheKernel) {
  TestPlanBuilder b(2, 1);
  for (int r = 0; r < 2; ++r) {
    const int64_t x = b.AddRegister(r, "x", 1, {F32(Shape{2, 3})});
    const int64_t m = b.AddRegister(r, "m", 1, {F32(Shape{3})});
    b.AddSource(r, "x.source", "x", x);
    b.BindInput(r, "x", x, Shape{4, 3}, {2 * r, 0}, "S(0)");
    ComputeParams* params =
        b.AddCompute(r, "mean", "reduce_mean", {{"axes", std::vector<int64_t>{0}}}, {x}, {m})->mutable_compute();
    ShardInfoProto* in = params->add_input_shards();
    for (int64_t d : {4, 3}) in->add_logical_dims(d);
    for (int64_t o : {int64_t{2} * r, int64_t{0}}) in->add_offset(o);
    ShardInfoProto* out = params->add_output_shards();
    out->add_logical_dims(3);
    out->add_offset(0);
    b.AddSink(r, "m.sink", "m", m);
    b.BindOutput(r, "m", m, Shape{3}, {}, "P");
  }
  std::unique_ptr<OpRegistry> registry = MakeBuiltinRegistry();
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(b.Build(), registry.get());
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Feed("x", Iota(Shape{4, 3}, 0, 1)).ok());  // rows [0 1 2] [3 4 5] [6 7 8] [9 10 11]
  ASSERT_TRUE((*session)->RunStep().ok());
  EXPECT_EQ((*session)->Fetch("m")->ToVector<float>(), std::vector<float>({4.5f, 5.5f, 6.5f}));
  EXPECT_EQ((*session)->FetchShard("m", 0)->ToVector<float>(), std::vector<float>({0.75f, 1.25f, 1.75f}));
}

// Rank 1 has no source: its TRANSFER pulls x from rank 0 and its sink may fire before the
// session has even started the step on rank 1. Many steps, so such early arrivals happen;
// every step must still fetch exactly its own value.
TEST(SessionTest, RankWithoutSourcesFetchesEveryStepsValue) {
  TestPlanBuilder b(2, 1);
  const int64_t x = b.AddRegister(0, "x", 1, {F32(Shape{2})});
  b.AddMirror(1, x);
  const int64_t copy = b.AddRegister(1, "x.copy", 1, {F32(Shape{2})});
  const int64_t y = b.AddRegister(1, "y", 1, {F32(Shape{2})});
  b.AddSource(0, "x.source", "x", x);
  b.BindInput(0, "x", x, Shape{2});
  b.AddTask(1, TaskProto::TRANSFER, "x.transfer", {x}, {copy}, 1)->mutable_transfer()->set_peer_rank(0);
  b.AddCompute(1, "relu", "relu", {}, {copy}, {y});
  b.AddSink(1, "y.sink", "y", y);
  b.BindOutput(1, "y", y, Shape{2});
  std::unique_ptr<OpRegistry> registry = MakeBuiltinRegistry();
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(b.Build(), registry.get());
  ASSERT_TRUE(session.ok()) << session.status();
  for (int step = 0; step < 200; ++step) {
    ASSERT_TRUE((*session)->Feed("x", Iota(Shape{2}, static_cast<float>(step), -1.0f)).ok());
    ASSERT_TRUE((*session)->RunStep().ok());
    absl::StatusOr<Tensor> fetched = (*session)->Fetch("y");
    ASSERT_TRUE(fetched.ok()) << "step " << step << ": " << fetched.status();
    EXPECT_EQ(fetched->ToVector<float>(), std::vector<float>({static_cast<float>(step), std::max(step - 1.0f, 0.0f)}));
  }
  EXPECT_TRUE((*session)->Close().ok());
}

}  // namespace
}  // namespace actor
}  // namespace oneflow_like
