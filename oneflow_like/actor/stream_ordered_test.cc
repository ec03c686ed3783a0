// MarkStreamOrderedEdges (stream_ordered.h) on hand-built actors: which edges are handed over at
// enqueue. The end-to-end check (a device that lags, the losses of a cpu run) is
// train:device_trainer_test.
#include "oneflow_like/actor/stream_ordered.h"

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace oneflow_like {
namespace actor {
namespace {

// An event of the test bodies: a name, and its record count.
class NamedEvent final : public Event {
 public:
  explicit NamedEvent(std::string name) : name(std::move(name)) {}
  bool Query() const override { return true; }
  absl::Status Synchronize() override { return absl::OkStatus(); }
  std::string name;
  int records = 0;
};

// An asynchronous body on a device stream (stream >= 0), or on none (a collective library's).
// `log` (optional) gets what it enqueues, in order: "A:wait(B.e1)", "A:start", "A:record(A.e0)";
// Start keeps `finished` for the test to call (the act is in flight until then).
class StreamBody final : public ActBody {
 public:
  StreamBody(int32_t stream, bool events, std::string name = "", std::vector<std::string>* log = nullptr,
             int32_t device = 0)
      : stream_(stream), events_(events), name_(std::move(name)), log_(log), device_(device) {}
  absl::Status Act(ActIo&) override { return absl::OkStatus(); }
  bool IsAsync() const override { return true; }
  bool OnDeviceStream(int32_t* device, int32_t* stream) const override {
    *device = device_;
    *stream = stream_;
    return stream_ >= 0;
  }
  bool HasStreamEvents() const override { return events_; }
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent() override {
    return std::unique_ptr<Event>(std::make_unique<NamedEvent>(absl::StrCat(name_, ".e", events_made_++)));
  }
  absl::Status RecordEvent(Event* event) override {
    auto* e = static_cast<NamedEvent*>(event);
    ++e->records;
    Log(absl::StrCat("record(", e->name, ")"));
    return absl::OkStatus();
  }
  absl::Status WaitEvent(const Event& event) override {
    Log(absl::StrCat("wait(", static_cast<const NamedEvent&>(event).name, ")"));
    return absl::OkStatus();
  }
  void Start(ActIo, std::function<void(const absl::Status&)> finished) override {
    Log("start");
    finished_ = std::move(finished);
  }
  void Finish() {
    auto f = std::move(finished_);
    f(absl::OkStatus());
  }

 private:
  void Log(const std::string& what) {
    if (log_ != nullptr) log_->push_back(absl::StrCat(name_, ":", what));
  }
  int32_t stream_;
  bool events_;
  std::string name_;
  std::vector<std::string>* log_;
  int32_t device_;
  int events_made_ = 0;
  std::function<void(const absl::Status&)> finished_;
};

// Keeps the messages the actors post, for the test to deliver.
class QueueHost final : public ActorHost {
 public:
  void Post(const ActorMessage& m) override { posted.push_back(m); }
  void SendRemote(Rank, const RemoteMessage&) override {}
  void ReturnMirrorBuffer(MirrorRegister*, int32_t, TaskId) override {}
  void OnActed(const Actor&, int64_t, bool, int64_t) override {}
  int64_t NowMicros() const override { return 0; }
  void OnFailed(const Actor&, const absl::Status& s) override { failures.push_back(s); }
  void OnDone(const Actor&) override {}
  std::vector<ActorMessage> posted;
  std::vector<absl::Status> failures;
};

class StreamOrderedTest : public ::testing::Test {
 protected:
  // Registers r0..; actor i produces `produces[i]` and consumes `consumes[i]`.
  struct Node {
    int32_t stream;  // -1: an asynchronous body on no stream of the backend (a collective)
    std::vector<int> produces, consumes;
    std::string device = "cuda";
    bool events = false;  // the body has stream events
    int32_t device_index = 0;
  };
  // `sharers`: (i, j) = actor i's first output shares bytes with actor j's first output.
  void Build(const std::vector<Node>& nodes, int registers, const std::vector<std::pair<int, int>>& sharers = {}) {
    actors_.clear();
    bodies_.clear();
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
      auto body = std::make_unique<StreamBody>(nodes[i].stream, nodes[i].events, std::string(1, static_cast<char>('A' + i)),
                                               &log_, nodes[i].device_index);
      bodies_.push_back(body.get());
      actors_.push_back(std::make_unique<Actor>(std::move(spec), std::move(body), &host_));
    }
    for (const TaskProto& t : tasks_) task_ptrs_.push_back(&t);
  }
  const ActorSpec& spec(int i) const { return actors_[i]->spec(); }
  // Hands the messages posted so far to their actors (not to the host's: stand-ins that never fire).
  void Deliver() {
    std::vector<ActorMessage> messages = std::move(host_.posted);
    host_.posted.clear();
    for (const ActorMessage& m : messages) {
      if (tasks_[m.actor.value()].device().type() != "cpu") actors_[m.actor.value()]->Handle(m);
    }
  }
  bool Posted(MessageKind kind, int actor) const {
    for (const ActorMessage& m : host_.posted) {
      if (m.kind == kind && m.actor.value() == actor) return true;
    }
    return false;
  }

  std::vector<RegisterLayout> layouts_;
  std::vector<TaskProto> tasks_;
  std::vector<const TaskProto*> task_ptrs_;
  std::vector<std::unique_ptr<Actor>> actors_;
  std::vector<StreamBody*> bodies_;
  std::vector<std::string> log_;
  QueueHost host_;
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

// A (stream 0) -> r0 -> B on stream 4 of the same device and C on stream 0, bodies with events;
// r0 shares no bytes. B hears of r0 at enqueue with A's event per buffer and returns it at enqueue
// with an event of its own, which A's stream waits for before writing the buffer again; C needs
// no event (one stream).
TEST_F(StreamOrderedTest, AnotherStreamOfTheDeviceIsHandedTheRegisterAtEnqueueWithEvents) {
  Build({{0, {0}, {}, "cuda", true}, {4, {}, {0}, "cuda", true}, {0, {}, {0}, "cuda", true}}, 1);
  int64_t with_events = 0;
  EXPECT_EQ(MarkStreamOrderedEdges(task_ptrs_, actors_, &with_events), 4);  // A -> B, B -> A, A -> C, C -> A
  EXPECT_EQ(with_events, 2);
  const OutputPort& r0 = spec(0).outputs[0];
  ASSERT_EQ(r0.early_consumers.size(), 2u);
  EXPECT_TRUE(r0.early_consumers[0]);
  EXPECT_TRUE(r0.early_consumers[1]);
  EXPECT_EQ(r0.ready_events.size(), 1u);  // one per buffer
  EXPECT_EQ(spec(1).inputs[0].wait_events, &r0.ready_events);
  EXPECT_TRUE(spec(1).inputs[0].return_early);
  EXPECT_EQ(spec(1).inputs[0].return_events.size(), 1u);
  ASSERT_EQ(r0.reader_events.size(), 1u);
  EXPECT_EQ(r0.reader_events[0], &spec(1).inputs[0].return_events);
  EXPECT_EQ(spec(2).inputs[0].wait_events, nullptr);  // same stream: its order suffices
  EXPECT_TRUE(spec(2).inputs[0].return_early);
  EXPECT_TRUE(spec(2).inputs[0].return_events.empty());
}

// Across streams only with events on both ends, on one device, between stream actors: a body
// without events, another device, a collective and the host keep the finish semantics.
TEST_F(StreamOrderedTest, WithoutEventsOrOnAnotherDeviceTheOtherStreamWaitsForTheFinish) {
  Build({{0, {0}, {}, "cuda", true},
         {4, {}, {0}, "cuda", false},
         {4, {}, {0}, "cuda", true, /*device_index=*/1},
         {-1, {}, {0}, "cuda", true},
         {4, {}, {0}, "cpu", true}},
        1);
  int64_t with_events = -1;
  EXPECT_EQ(MarkStreamOrderedEdges(task_ptrs_, actors_, &with_events), 0);
  EXPECT_EQ(with_events, 0);
  const OutputPort& r0 = spec(0).outputs[0];
  for (size_t k = 0; k < r0.early_consumers.size(); ++k) EXPECT_FALSE(r0.early_consumers[k]) << k;
  EXPECT_TRUE(r0.ready_events.empty());
  EXPECT_TRUE(r0.reader_events.empty());
  for (int i = 1; i < 5; ++i) {
    EXPECT_EQ(spec(i).inputs[0].wait_events, nullptr) << i;
    EXPECT_FALSE(spec(i).inputs[0].return_early) << i;
  }
}

// r0 (A, stream 0) shares bytes with r1 (C, stream 0): B on stream 4 still hears of r0 at enqueue
// with A's event, but returns it at finish (C's stream would not wait for B's event before
// overwriting the shared bytes). With the sharer on stream 4, r0 is not stream-ordered at all.
TEST_F(StreamOrderedTest, ARegisterWithByteSharersComesBackFromAnotherStreamAtFinish) {
  Build({{0, {0}, {}, "cuda", true}, {4, {}, {0}, "cuda", true}, {0, {1}, {}, "cuda", true}}, 2, {{0, 2}});
  int64_t with_events = 0;
  EXPECT_EQ(MarkStreamOrderedEdges(task_ptrs_, actors_, &with_events), 1);
  EXPECT_EQ(with_events, 1);
  EXPECT_TRUE(spec(0).outputs[0].early_consumers[0]);
  EXPECT_EQ(spec(1).inputs[0].wait_events, &spec(0).outputs[0].ready_events);
  EXPECT_FALSE(spec(1).inputs[0].return_early);
  EXPECT_TRUE(spec(1).inputs[0].return_events.empty());
  EXPECT_TRUE(spec(0).outputs[0].reader_events.empty());
  Build({{0, {0}, {}, "cuda", true}, {4, {}, {0}, "cuda", true}, {4, {1}, {}, "cuda", true}}, 2, {{0, 2}});
  EXPECT_EQ(MarkStreamOrderedEdges(task_ptrs_, actors_, &with_events), 0);
  EXPECT_FALSE(spec(0).outputs[0].early_consumers[0]);
  EXPECT_EQ(spec(1).inputs[0].wait_events, nullptr);
}

// The actors' protocol: host X -> r0 -> B (stream 0) -> r1 -> C (stream 4). B's act records its
// event after it is enqueued and hands r1 to C before it finished; C's stream waits for that
// event before C's act, which records C's event and returns r1 at once; B's next act waits for
// C's event before it overwrites r1.
TEST_F(StreamOrderedTest, TheConsumerWaitsForTheProducersEventAndTheProducerForTheConsumers) {
  Build({{0, {0}, {}, "cpu"}, {0, {1}, {0}, "cuda", true}, {4, {}, {1}, "cuda", true}}, 2);
  ASSERT_EQ(MarkStreamOrderedEdges(task_ptrs_, actors_), 2);  // r1: B -> C ready, C -> B return
  const ActorMessage r0_ready{MessageKind::kRegisterReady, ActorId(1), 0, 0, 0};
  actors_[1]->Handle(r0_ready);
  ASSERT_TRUE(actors_[1]->TryFire());
  EXPECT_TRUE(Posted(MessageKind::kRegisterReady, 2)) << "r1 handed to C at enqueue";
  EXPECT_FALSE(Posted(MessageKind::kRegisterReturned, 0)) << "r0 comes from the host: back at finish";
  Deliver();
  ASSERT_TRUE(actors_[2]->TryFire());
  EXPECT_TRUE(Posted(MessageKind::kRegisterReturned, 1)) << "r1 returned by C at enqueue";
  Deliver();
  bodies_[1]->Finish();  // B's act is done (C's is still in flight)
  Deliver();
  actors_[1]->Handle(r0_ready);
  ASSERT_TRUE(actors_[1]->TryFire());
  EXPECT_EQ(log_, (std::vector<std::string>{"B:start", "B:record(B.e0)", "C:wait(B.e0)", "C:start", "C:record(C.e0)",
                                            "B:wait(C.e0)", "B:start", "B:record(B.e0)"}));
  EXPECT_TRUE(host_.failures.empty());
}

}  // namespace
}  // namespace actor
}  // namespace oneflow_like
