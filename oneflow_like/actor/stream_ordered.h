// Stream-ordered hand-offs: which register edges of a rank's device actors may be handed over
// when the producing act is enqueued on its device stream instead of when it finished
// (RuntimeEnv::stream_ordered_handoffs). A device stream runs its work in enqueue order, so a
// consumer on the same stream that enqueues after the producer reads what the producer wrote,
// and a producer on the same stream that enqueues its next write after a consumer returned the
// buffer writes after the consumer read it. The host then runs ahead of the device along a
// chain of kernels: one completion per act is no longer on the critical path.
//
// An edge qualifies when both ends are "stream actors" of the same (device, stream): a non-cpu
// task with firing rule kAllInputs whose asynchronous body queues all its work on that stream
// of the backend (ActBody::OnDeviceStream: the backend's COMPUTE, COPY and TRANSFER bodies; not
// COLLECTIVE bodies, whose library runs on streams of its own, nor device boxing, which waits).
// Per output register R of such an actor:
//   - R is stream-ordered when every register sharing bytes with R (the memory planner's reuse,
//     ByteConflict) is produced by a stream actor of the same stream; its buffer is then taken
//     at enqueue, and consumers that are stream actors of that stream hear of it at enqueue.
//     Otherwise (or for other consumers: another stream, the host, a remote rank) at finish.
//   - a consumer returns R at enqueue when R is stream-ordered (so every writer of R's bytes is
//     on the consumer's stream) and the consumer is a stream actor of that stream.
// Everything else (variable holders, accumulators, repeats, sources and sinks, mirrors of
// remote registers) keeps the finish semantics, so what the host reads, the network sends or
// another stream uses is complete when it gets it.
#ifndef ONEFLOW_LIKE_ACTOR_STREAM_ORDERED_H_
#define ONEFLOW_LIKE_ACTOR_STREAM_ORDERED_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "oneflow_like/actor/actor.h"
#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace actor {

// Marks the qualifying edges of `actors` (actors[i] runs tasks[i]; built, not started) with
// Actor::SetStreamOrdered. Returns the number of edges handed over at enqueue (ready + return).
int64_t MarkStreamOrderedEdges(const std::vector<const TaskProto*>& tasks,
                               const std::vector<std::unique_ptr<Actor>>& actors);

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_STREAM_ORDERED_H_
