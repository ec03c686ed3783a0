// The messages actors exchange. They are small, fixed-size and trivially copyable: a message
// names a destination actor (dense ActorId of one runtime), a port of that actor and a buffer
// index of the register behind that port. Payload bytes never travel in a local message: the
// buffer already lives in planned memory. Across ranks the runtime encodes messages with a
// payload (actor/wire.h) and sends them through the transport.
//
//   producer P (output port 0 = register R, consumers A:in0 and B:in1) fills buffer 1:
//     P -> A {kRegisterReady, actor=A, port=0, buffer=1}
//     P -> B {kRegisterReady, actor=B, port=1, buffer=1}
//   A and B, after acting:
//     A -> P {kRegisterReturned, actor=P, port=0, buffer=1}   (buffer 1 is free again after
//     B -> P {kRegisterReturned, actor=P, port=0, buffer=1}    both returns)
#ifndef ONEFLOW_LIKE_ACTOR_MESSAGE_H_
#define ONEFLOW_LIKE_ACTOR_MESSAGE_H_

#include <cstdint>
#include <string>
#include <type_traits>

#include "oneflow_like/core/ids.h"

namespace oneflow_like {
namespace actor {

enum class MessageKind : uint8_t {
  kRegisterReady = 0,     // producer -> consumer: `buffer` of input `port` is readable
  kRegisterReturned = 1,  // consumer -> producer: done with `buffer` of output `port`
  kEndOfData = 2,         // producer -> consumer: nothing more will arrive on input `port`
  kStartStep = 3,         // driver -> SOURCE actor: one more step (`value` = pieces per step)
  kEndOfStream = 4,       // driver -> SOURCE actor: no more steps; drain and finish
  kReport = 5,            // driver -> thread: describe what every actor waits for
  kStop = 6,              // driver -> thread: leave the loop
  kWake = 7,              // actor -> actor: a register sharing your bytes changed; retry firing
  kActFinished = 8,       // an asynchronous act of `actor` ended (its status is in the actor)
};
std::string MessageKindName(MessageKind kind);

struct ActorMessage {
  MessageKind kind = MessageKind::kRegisterReady;
  ActorId actor;       // destination actor (unused by kReport and kStop)
  int32_t port = 0;    // input port (ready, end of data) or output port (returned)
  int32_t buffer = 0;  // buffer index within the port's register
  int64_t value = 0;   // kStartStep: pieces per step
};
static_assert(std::is_trivially_copyable<ActorMessage>::value, "actor messages must stay trivially copyable");

// "ready(actor=3, port=0, buffer=1)"
std::string MessageToString(const ActorMessage& message);

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_MESSAGE_H_
