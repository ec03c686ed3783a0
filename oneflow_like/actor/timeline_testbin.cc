// timeline_testbin (testonly): runs a 2-rank plan for two steps in one Session with timelines on
// and writes one Chrome trace per rank with WriteRankTimeline, for tools/trace_merge_test.py.
//
//   timeline_testbin OUT_DIR     -> OUT_DIR/trace.rank0.json, OUT_DIR/trace.rank1.json
//
// The plan: x[4,3] S(0) on 2 ranks; each rank sends its rows to the peer (TRANSFER), gathers
// both halves (BOXING_CONCAT) and fetches relu of the result, so the traces hold acts, waits,
// remote sends and receives (with flow events pairing them across the two files).
// Exit status 1 (message on stderr) on any error.
#include <cstdio>
#include <memory>
#include <string>

#include "oneflow_like/actor/runtime.h"
#include "oneflow_like/actor/session.h"
#include "oneflow_like/actor/test_plan_builder.h"
#include "oneflow_like/actor/test_util.h"

namespace oneflow_like {
namespace actor {
namespace {

PlanProto GatherPlan() {
  TestPlanBuilder b(2, 1);
  int64_t x[2];
  for (int r = 0; r < 2; ++r) x[r] = b.AddRegister(r, "x", 1, {F32(Shape{2, 3})});
  for (int r = 0; r < 2; ++r) {
    b.AddMirror(r, x[1 - r]);
    const int64_t peer = b.AddRegister(r, "x.peer", 1, {F32(Shape{2, 3})});
    const int64_t full = b.AddRegister(r, "x.gathered", 1, {F32(Shape{4, 3})});
    const int64_t y = b.AddRegister(r, "y", 1, {F32(Shape{4, 3})});
    b.AddSource(r, "x.source", "x", x[r]);
    b.BindInput(r, "x", x[r], Shape{4, 3}, {2 * r, 0}, "S(0)");
    TaskProto* transfer = b.AddTask(r, TaskProto::TRANSFER, "x.transfer", {x[1 - r]}, {peer}, /*stream=*/1);
    transfer->mutable_transfer()->set_peer_rank(1 - r);
    TaskProto* concat = b.AddTask(r, TaskProto::BOXING_CONCAT, "x.concat", {x[r], peer}, {full});
    for (int part : {r, 1 - r}) {
      RegionProto* region = concat->mutable_concat()->add_input_regions();
      for (int64_t d : {int64_t{2} * part, int64_t{0}}) region->add_begin(d);
      for (int64_t d : {int64_t{2} * part + 2, int64_t{3}}) region->add_end(d);
    }
    b.AddCompute(r, "relu", "relu", {}, {full}, {y});
    b.AddSink(r, "y.sink", "y", y);
    b.BindOutput(r, "y", y, Shape{4, 3}, {}, "B");
  }
  return b.Build();
}

int Main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: timeline_testbin OUT_DIR\n");
    return 1;
  }
  std::unique_ptr<OpRegistry> registry = MakeBuiltinRegistry();
  SessionOptions options;
  options.record_timeline = true;
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(GatherPlan(), registry.get(), options);
  absl::Status status = session.status();
  for (int step = 0; status.ok() && step < 2; ++step) {
    status = (*session)->Feed("x", Iota(Shape{4, 3}, -5.0f + step, 1));
    if (status.ok()) status = (*session)->RunStep();
  }
  for (int rank = 0; status.ok() && rank < 2; ++rank) {
    status = WriteRankTimeline(*(*session)->runtime(rank),
                               std::string(argv[1]) + "/trace.rank" + std::to_string(rank) + ".json");
  }
  if (!status.ok()) {
    std::fprintf(stderr, "timeline_testbin: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace actor
}  // namespace oneflow_like

int main(int argc, char** argv) { return oneflow_like::actor::Main(argc, argv); }
