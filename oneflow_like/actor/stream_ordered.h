// Stream-ordered hand-offs: which register edges of a rank's device actors may be handed over
// when the producing act is enqueued on its device stream instead of when it finished
// (RuntimeEnv::stream_ordered_handoffs). A device stream runs its work in enqueue order, so a
// consumer on the same stream that enqueues after the producer reads what the producer wrote,
// and a producer on the same stream that enqueues its next write after a consumer returned the
// buffer writes after the consumer read it. Between two streams of one device, events give the
// same order on the device (ActBody::RecordEvent / WaitEvent: cudaEventRecord /
// cudaStreamWaitEvent): the host then runs ahead of the device along a chain of kernels, across
// streams too; one completion per act is no longer on the critical path.
//
// An edge qualifies when both ends are "stream actors" of the same device: a non-cpu task with
// firing rule kAllInputs whose asynchronous body queues all its work on one stream of the
// backend (ActBody::OnDeviceStream: the backend's COMPUTE, COPY and TRANSFER bodies; not
// COLLECTIVE bodies, whose library runs on streams of its own, nor device boxing, which waits),
// on the same stream, or on two streams when both bodies have events (HasStreamEvents).
// Per output register R of such an actor:
//   - R is stream-ordered when every register sharing bytes with R (the memory planner's reuse,
//     ByteConflict) is produced by a stream actor of the same stream; its buffer is then taken
//     at enqueue, and consumers that are stream actors of that stream hear of it at enqueue.
//     Consumers that are stream actors of another stream of the device (with events) hear of it
//     at enqueue too: the producer records an event per buffer after the act that wrote it
//     (OutputPort::ready_events) and the consumer's stream waits for it before the consumer's
//     act (InputPort::wait_events). Other consumers (the host, a remote rank, another device,
//     a body without events) at finish.
//   - a consumer returns R at enqueue when R is stream-ordered and the consumer is a stream actor
//     of the same stream; or of another stream when, in addition, no register shares R's bytes:
//     it records an event after its act (InputPort::return_events) and the producer's stream
//     waits for it before writing that buffer again (OutputPort::reader_events). A consumer on
//     another stream returns R at finish when R has byte sharers (their producers do not wait
//     for the consumer's events).
// Everything else (variable holders, accumulators, repeats, sources and sinks, collectives,
// mirrors of remote registers) keeps the finish semantics, so what the host reads, the network
// sends or the collective library uses is complete when it gets it.
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
// Actor::SetStreamOrdered. Returns the number of edges handed over at enqueue (ready + return);
// `with_events` (optional): how many of them cross two streams of a device (ordered by events).
int64_t MarkStreamOrderedEdges(const std::vector<const TaskProto*>& tasks,
                               const std::vector<std::unique_ptr<Actor>>& actors, int64_t* with_events = nullptr);

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_STREAM_ORDERED_H_
