// Fault injection for the multi-process failure tests:
// OL_FAULT_INJECT="rank=R,at=PHASE[,step=S][,round=K]" makes rank R kill itself with SIGKILL (no
// cleanup, like a crashed node) at PHASE:
//   at=rendezvous  after registering with the control server, before the data links are up;
//   at=step        just before starting step S (with run-ahead, step S - 1 may still run).
// round=K: only in olrun's restart round K (OL_RESTART_ROUND, 0 when unset), e.g. round=0 kills
// the first run but lets the restarted one finish; without it, every round.
// Unset (the normal case): nothing happens. A malformed value is reported once on stderr and
// ignored. Read from the environment on every call (cheap; called once per step).
#ifndef ONEFLOW_LIKE_TRAIN_FAULT_INJECTION_H_
#define ONEFLOW_LIKE_TRAIN_FAULT_INJECTION_H_

#include <cstdint>
#include <string>

namespace oneflow_like {
namespace train {

void MaybeInjectFault(const std::string& phase, int32_t rank, int64_t step = -1);

}  // namespace train
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_TRAIN_FAULT_INJECTION_H_
