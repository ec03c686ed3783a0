#include "oneflow_like/actor/stream_ordered.h"

#include <utility>

namespace oneflow_like {
namespace actor {
namespace {

using StreamKey = std::pair<int32_t, int32_t>;  // the backend's (device, stream) the body queues on

}  // namespace

int64_t MarkStreamOrderedEdges(const std::vector<const TaskProto*>& tasks,
                               const std::vector<std::unique_ptr<Actor>>& actors, int64_t* with_events) {
  const size_t n = actors.size();
  std::vector<bool> stream_actor(n, false);
  std::vector<StreamKey> key(n);
  for (size_t i = 0; i < n; ++i) {
    int32_t device = 0, stream = 0;
    stream_actor[i] = tasks[i]->device().type() != "cpu" && actors[i]->spec().rule == FiringRule::kAllInputs &&
                      actors[i]->OnDeviceStream(&device, &stream);
    key[i] = StreamKey{device, stream};
  }
  auto valid = [&](int64_t b) { return b >= 0 && static_cast<size_t>(b) < n; };
  auto same_stream = [&](size_t a, int64_t b) {
    return valid(b) && stream_actor[a] && stream_actor[b] && key[a] == key[b];
  };
  // Another stream of the same device, both bodies with events: ordered on the device by events.
  auto by_event = [&](size_t a, int64_t b) {
    return valid(b) && stream_actor[a] && stream_actor[b] && key[a].first == key[b].first &&
           key[a].second != key[b].second && actors[a]->HasStreamEvents() && actors[b]->HasStreamEvents();
  };
  auto early = [&](size_t a, int64_t b) { return same_stream(a, b) || by_event(a, b); };
  // Output registers whose every byte sharer is produced on the producer's stream.
  std::vector<std::vector<bool>> ordered(n);
  for (size_t i = 0; i < n; ++i) {
    const ActorSpec& spec = actors[i]->spec();
    ordered[i].assign(spec.outputs.size(), false);
    if (!stream_actor[i]) continue;
    for (size_t p = 0; p < spec.outputs.size(); ++p) {
      bool ok = true;
      for (const ByteConflict& c : spec.outputs[p].conflicts) ok = ok && same_stream(i, c.other_producer.value());
      ordered[i][p] = ok;
    }
  }
  struct {
    int64_t at_enqueue = 0, with_events = 0;
  } edges;
  std::vector<Actor::StreamHandOffs> hand_offs(n);
  for (size_t i = 0; i < n; ++i) {
    if (!stream_actor[i]) continue;
    const ActorSpec& spec = actors[i]->spec();
    Actor::StreamHandOffs& h = hand_offs[i];
    h.early_inputs.assign(spec.inputs.size(), false);
    h.input_events.assign(spec.inputs.size(), nullptr);
    h.input_return_events.assign(spec.inputs.size(), false);
    for (size_t k = 0; k < spec.inputs.size(); ++k) {
      const InputPort& in = spec.inputs[k];
      if (in.mirror != nullptr) continue;
      const int64_t producer = in.producer.actor.value();
      if (!early(i, producer) || !ordered[producer][in.producer.port]) continue;
      const OutputPort& from = actors[producer]->output(in.producer.port);
      if (same_stream(i, producer)) {
        h.early_inputs[k] = true;
        ++edges.at_enqueue;
        continue;
      }
      h.input_events[k] = &from.ready_events;  // ready at enqueue, with the producer's event
      // Returned at enqueue with an event only when no other register shares the bytes (a
      // sharer's producer would have to wait for it too); else when the act finished.
      if (from.conflicts.empty()) {
        h.early_inputs[k] = true;
        h.input_return_events[k] = true;
        ++edges.at_enqueue;
        ++edges.with_events;
      }
    }
    h.early_consumers.resize(spec.outputs.size());
    h.output_ready_events.assign(spec.outputs.size(), false);
    h.reader_events.resize(spec.outputs.size());
    for (size_t p = 0; p < spec.outputs.size(); ++p) {
      for (const LocalEndpoint& c : spec.outputs[p].local_consumers) {
        const bool at_enqueue = ordered[i][p] && early(i, c.actor.value());
        h.early_consumers[p].push_back(at_enqueue);
        edges.at_enqueue += at_enqueue ? 1 : 0;
        if (!at_enqueue || same_stream(i, c.actor.value())) continue;
        ++edges.with_events;
        h.output_ready_events[p] = true;
        if (spec.outputs[p].conflicts.empty()) {
          h.reader_events[p].push_back(&actors[c.actor.value()]->spec().inputs[c.port].return_events);
        }
      }
    }
    h.ordered_outputs = ordered[i];
  }
  for (size_t i = 0; i < n; ++i) {
    if (stream_actor[i]) actors[i]->SetStreamOrdered(hand_offs[i]);
  }
  if (with_events != nullptr) *with_events = edges.with_events;
  return edges.at_enqueue;
}

}  // namespace actor
}  // namespace oneflow_like
