#include "oneflow_like/actor/stream_ordered.h"

#include <utility>

namespace oneflow_like {
namespace actor {
namespace {

using StreamKey = std::pair<int32_t, int32_t>;  // the backend's (device, stream) the body queues on

}  // namespace

int64_t MarkStreamOrderedEdges(const std::vector<const TaskProto*>& tasks,
                               const std::vector<std::unique_ptr<Actor>>& actors) {
  const size_t n = actors.size();
  std::vector<bool> stream_actor(n, false);
  std::vector<StreamKey> key(n);
  for (size_t i = 0; i < n; ++i) {
    int32_t device = 0, stream = 0;
    stream_actor[i] = tasks[i]->device().type() != "cpu" && actors[i]->spec().rule == FiringRule::kAllInputs &&
                      actors[i]->OnDeviceStream(&device, &stream);
    key[i] = StreamKey{device, stream};
  }
  auto same_stream = [&](size_t a, int64_t b) {
    return b >= 0 && static_cast<size_t>(b) < n && stream_actor[a] && stream_actor[b] && key[a] == key[b];
  };
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
  int64_t edges = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!stream_actor[i]) continue;
    const ActorSpec& spec = actors[i]->spec();
    std::vector<bool> early_inputs(spec.inputs.size(), false);
    for (size_t k = 0; k < spec.inputs.size(); ++k) {
      const InputPort& in = spec.inputs[k];
      if (in.mirror != nullptr) continue;
      const int64_t producer = in.producer.actor.value();
      early_inputs[k] = same_stream(i, producer) && ordered[producer][in.producer.port];
      edges += early_inputs[k] ? 1 : 0;
    }
    std::vector<std::vector<bool>> early_consumers(spec.outputs.size());
    for (size_t p = 0; p < spec.outputs.size(); ++p) {
      for (const LocalEndpoint& c : spec.outputs[p].local_consumers) {
        const bool early = ordered[i][p] && same_stream(i, c.actor.value());
        early_consumers[p].push_back(early);
        edges += early ? 1 : 0;
      }
    }
    actors[i]->SetStreamOrdered(early_inputs, ordered[i], early_consumers);
  }
  return edges;
}

}  // namespace actor
}  // namespace oneflow_like
