// MarkStreamOrderedEdges (stream_ordered.h) on hand-built actors: which edges are handed over at
// enqueue. The end-to-end check (a device that lags, the losses of a cpu run) is
// train:device_trainer_test.
#include "oneflow_like/actor/stream_ordered.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace oneflow_like {
namespace actor {
namespace {

// An asynchronous body on a device stream (stream >= 0), or on none (a collective library's).
class StreamBody final : public ActBody {
 public:
  explicit StreamBody(int32_t stream) : stream_(stream) {}
  absl::Status Act(ActIo&) override { return absl::OkStatus(); }
  bool IsAsync() const override { return true; }
  bool OnDeviceStream(int32_t* device, int32_t* stream) const override {
    *device = 0;
    *stream = stream_;
    return stream_ >= 0;
  }

 private:
  int32_t stream_;
};

class NullHost final : public ActorHost {
 public:
  void Post(const ActorMessage&) override {}
  void SendRemote(Rank, const RemoteMessage&) override {}
  void ReturnMirrorBuffer(MirrorRegister*, int32_t, TaskId) override {}
  void OnActed(const Actor&, int64_t, bool, int64_t) override {}
  int64_t NowMicros() const override { return 0; }
  void OnFailed(const Actor&, const absl::Status&) override {}
  void OnDone(const Actor&) override {}
};

class StreamOrderedTest : public ::testing::Test {
 protected:
  // Registers r0..; actor i produces `produces[i]` and consumes `consumes[i]`.
  struct Node {
    int32_t stream;  // -1: an asynchronous body on no stream of the backend (a collective)
    std::vector<int> produces, consumes;
    std::string device = "cuda";
  };
  // `sharers`: (i, j) = actor i's first output shares bytes with actor j's first output.
  void Build(const std::vector<Node>& nodes, int registers, const std::vector<std::pair<int, int>>& sharers = {}) {
    actors_.clear();
    tasks_.clear();
    task_ptrs_.clear();
    layouts_.assign(registers, RegisterLayout{});
    std::vector<LocalEndpoint> producer(registers);
    std::vector<std::vector<LocalEndpoint>> consumers(registers);
    for (size_t i = 0; i < nodes.size(); ++i) {
      for (size_t p = 0; p < nodes[i].produces.size(); ++p)
        producer[nodes[i].produces[p]] = LocalEndpoint{ActorId(static_cast<int64_t>(i)), static_cast<int32_t>(p)};
      for (size_t p = 0; p < nodes[i].consumes.size(); ++p)
        consumers[nodes[i].consumes[p]].push_back(LocalEndpoint{ActorId(static_cast<int64_t>(i)), static_cast<int32_t>(p)});
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
      TaskProto task;
      task.set_id(static_cast<int64_t>(i));
      task.mutable_device()->set_type(nodes[i].device);
      task.set_stream_id(std::max(nodes[i].stream, 0));
      tasks_.push_back(task);
      ActorSpec spec;
      spec.id = ActorId(static_cast<int64_t>(i));
      for (int r : nodes[i].consumes) {
        InputPort in;
        in.layout = &layouts_[r];
        in.producer = producer[r];
        spec.inputs.push_back(in);
      }
      for (int r : nodes[i].produces) {
        OutputPort out;
        out.layout = &layouts_[r];
        out.local_consumers = consumers[r];
        spec.outputs.push_back(out);
      }
      for (const auto& [a, b] : sharers) {
        if (a != static_cast<int>(i)) continue;
        ByteConflict c;
        c.other_producer = ActorId(b);
        spec.outputs[0].conflicts.push_back(c);
      }
      actors_.push_back(std::make_unique<Actor>(std::move(spec), std::make_unique<StreamBody>(nodes[i].stream), &host_));
    }
    for (const TaskProto& t : tasks_) task_ptrs_.push_back(&t);
  }
  const ActorSpec& spec(int i) const { return actors_[i]->spec(); }

  std::vector<RegisterLayout> layouts_;
  std::vector<TaskProto> tasks_;
  std::vector<const TaskProto*> task_ptrs_;
  std::vector<std::unique_ptr<Actor>> actors_;
  NullHost host_;
};

// A (stream 0) -> r0 -> B (stream 0) -> r1 -> C (collective) -> r2 -> D (stream 0); r0 also to E
// on stream 1 and to F on the host.
TEST_F(StreamOrderedTest, OnlyEdgesWithinOneBackendStreamAreHandedOverAtEnqueue) {
  Build({{0, {0}, {}}, {0, {1}, {0}}, {-1, {2}, {1}}, {0, {}, {2}}, {1, {}, {0}}, {0, {}, {0}, "cpu"}}, 3);
  EXPECT_EQ(MarkStreamOrderedEdges(task_ptrs_, actors_), 2);  // A -> B ready, B -> A return
  ASSERT_EQ(spec(0).outputs[0].early_consumers.size(), 3u);  // B, E, F in consumer order
  EXPECT_TRUE(spec(0).outputs[0].stream_ordered);
  EXPECT_TRUE(spec(0).outputs[0].early_consumers[0]);   // B: same stream
  EXPECT_FALSE(spec(0).outputs[0].early_consumers[1]);  // E: stream 1
  EXPECT_FALSE(spec(0).outputs[0].early_consumers[2]);  // F: the host
  EXPECT_TRUE(spec(1).inputs[0].return_early);
  EXPECT_FALSE(spec(1).outputs[0].early_consumers[0]);  // B -> C: the collective runs elsewhere
  EXPECT_FALSE(spec(2).inputs[0].return_early);
  EXPECT_FALSE(spec(3).inputs[0].return_early);  // C -> D
  EXPECT_FALSE(spec(4).inputs[0].return_early);
}

// r0 (A -> B, both on stream 0) shares bytes with r1, produced by C: with C on another stream,
// A's output is not stream-ordered (B hears of r0 and returns it at finish); on the same, it is.
TEST_F(StreamOrderedTest, ABytesSharerOnAnotherStreamKeepsTheFinishSemantics) {
  Build({{0, {0}, {}}, {0, {}, {0}}, {1, {1}, {}}}, 2, {{0, 2}});
  EXPECT_EQ(MarkStreamOrderedEdges(task_ptrs_, actors_), 0);
  EXPECT_FALSE(spec(0).outputs[0].stream_ordered);
  EXPECT_FALSE(spec(1).inputs[0].return_early);
  Build({{0, {0}, {}}, {0, {}, {0}}, {0, {1}, {}}}, 2, {{0, 2}});
  EXPECT_EQ(MarkStreamOrderedEdges(task_ptrs_, actors_), 2);
  EXPECT_TRUE(spec(0).outputs[0].stream_ordered);
  EXPECT_TRUE(spec(1).inputs[0].return_early);
}

}  // namespace
}  // namespace actor
}  // namespace oneflow_like
