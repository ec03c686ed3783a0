// Session: runs one PlanProto with ALL its ranks inside this process (one Runtime per rank,
// connected by a loopback transport), and gives a step API over whole logical tensors.
//
//   OpRegistry registry;  RETURN_IF_ERROR(RegisterBuiltinOps(&registry));
//   ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(plan, &registry));
//   for (int step = 0; step < 3; ++step) {
//     for (int piece = 0; piece < session->pieces_per_step(); ++piece) {
//       RETURN_IF_ERROR(session->Feed("x", x[step][piece]));   // whole logical tensor
//     }
//     RETURN_IF_ERROR(session->RunStep());
//     ASSIGN_OR_RETURN(Tensor y, session->Fetch("y", /*piece=*/0));
//   }
//   ASSIGN_OR_RETURN(Tensor w, session->ReadVariable("w"));
//   RETURN_IF_ERROR(session->Close());    // end-of-data drain
//
// Feeding: Feed slices the logical tensor for every rank by its binding's ShardInfo;
// FeedShard gives one rank its shard directly. Fetching and reading variables assemble the
// ranks' shards by the binding's nd_sbp: splits are concatenated (placed at their offsets),
// broadcast copies are checked equal and taken once, partial sums are added.
// Watchdog: while waiting for a step (or the drain), if no actor of any rank acted for
// `watchdog_timeout_ms` (measured with the injected clock), the wait ends with
// DeadlineExceeded whose message names, per rank, which actors wait for which register from
// which producer. After any failure the session is broken: later calls return the error.
//
// Thread-safety: a Session is used by one thread at a time.
#ifndef ONEFLOW_LIKE_ACTOR_SESSION_H_
#define ONEFLOW_LIKE_ACTOR_SESSION_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "oneflow_like/actor/clock.h"
#include "oneflow_like/actor/runtime.h"
#include "oneflow_like/comm/collective.h"
#include "oneflow_like/comm/loopback_transport.h"

namespace oneflow_like {
namespace actor {

struct SessionOptions {
  // No act on any rank for this long ends the wait with a report (DeadlineExceeded).
  int64_t watchdog_timeout_ms = 10000;
  // Time source of the watchdog; null = a SystemClock owned by the session. Not owned.
  const Clock* clock = nullptr;
  // Optional instrumentation, called on actor threads after every act; must be thread-safe.
  std::function<void(const ActEvent&)> on_act;
  // Deterministic executor: no threads; the waiting call dispatches one pending message per
  // rank in turn (rank order) and records each in message_log(). When no message is pending
  // and the step is not done, the wait ends at once with the watchdog's report.
  bool deterministic = false;
  // Record a per-actor timeline on every rank (TimelineJson).
  bool record_timeline = false;
  // RuntimeEnv::inplace_variable_updates of every rank.
  bool inplace_variable_updates = true;
  // RuntimeEnv::stream_ordered_handoffs of every rank (device plans: hand-offs at enqueue).
  bool stream_ordered_handoffs = true;
  // RuntimeEnv::order_collectives of every rank (issue collectives in the plan's agreed order
  // even on gloo, as NCCL needs).
  bool order_collectives = false;
  // RuntimeEnv::intra_op_threads of every rank (each rank gets its own pool).
  int intra_op_threads = 1;
  // RuntimeEnv::device_backend of every rank (plans with cuda placements). Not owned.
  DeviceBackend* device_backend = nullptr;
  // The collective backend of rank r of `world` (plans with COLLECTIVE tasks), meeting through
  // `store`; null: gloo over loopback TCP. Cuda plans need one of device memory (NCCL; in
  // tests, actor/fake_device_collectives.h).
  std::function<absl::StatusOr<std::unique_ptr<comm::CollectiveBackend>>(comm::RendezvousStore* store, int32_t rank,
                                                                         int32_t world)>
      collective_factory;
};

class Session {
 public:
  // `registry` must outlive the session. Errors of any rank's Runtime::Create are returned.
  static absl::StatusOr<std::unique_ptr<Session>> Create(const PlanProto& plan, const OpRegistry* registry,
                                                         SessionOptions options = {});
  ~Session();  // stops every rank (no drain)

  int64_t pieces_per_step() const { return pieces_per_step_; }
  // One piece of input `name` (call pieces_per_step() times per step).
  absl::Status Feed(const std::string& name, const Tensor& logical);
  absl::Status FeedShard(const std::string& name, int rank, const Tensor& shard);
  // Runs one step: every rank's sources fire their pieces; returns when every rank's step is
  // done, or with the first failure / the watchdog's report. FailedPrecondition while a step
  // started by StartStep is not finished.
  absl::Status RunStep();
  // RunStep in two halves, so the caller can run ahead: StartStep starts the next step on every
  // rank (at most Runtime::kMaxStepsInFlight unfinished; feed its pieces first) and returns at
  // once; FinishStep waits for the oldest unfinished step and makes its outputs the ones Fetch
  // returns. E.g. feed + StartStep step n + 1, then FinishStep step n and fetch its loss: the
  // host's fetch and feed overlap step n + 1's compute (which waits for step n's updates).
  absl::Status StartStep();
  absl::Status FinishStep();
  int64_t steps_started() const { return started_; }
  int64_t steps_finished() const { return finished_; }
  // Output `name` of piece `firing` of the last finished step (most outputs fire once per piece;
  // outputs after an ACCUMULATE once per step), assembled from the ranks' shards.
  absl::StatusOr<Tensor> Fetch(const std::string& name, int64_t firing = 0) const;
  // The raw shard of one rank.
  absl::StatusOr<Tensor> FetchShard(const std::string& name, int rank, int64_t firing = 0) const;
  // Number of firings of output `name` in the last step.
  int64_t FetchCount(const std::string& name) const;
  // The assembled current value of variable `name`.
  absl::StatusOr<Tensor> ReadVariable(const std::string& name) const;
  // Ends the stream and waits (under the watchdog) until every actor drained.
  absl::Status Close();

  Runtime* runtime(int rank) const;  // nullptr for a rank without work
  // The plan's world_size (ranks 0 .. world_size - 1, some possibly without work).
  int32_t world_size() const { return world_size_; }
  // All ranks' recorded acts as one Chrome trace ({"traceEvents": [...]}; open it in
  // chrome://tracing or Perfetto). Call between steps.
  std::string TimelineJson() const;
  // Deterministic mode: every dispatched message so far, e.g. "r0 ready -> 'relu' port 0 buffer 0".
  const std::vector<std::string>& message_log() const { return message_log_; }

 private:
  Session() = default;
  // `wake_at`: StepNotifier::WaitChange's (the notifier count below which `done` cannot hold).
  absl::Status Wait(const std::function<bool()>& done, const std::string& what, int64_t wake_at = 0);
  absl::Status Stalled(const std::string& headline);  // breaks the session with a report
  // Shards of binding `name` per rank (in rank order) -> the logical tensor.
  absl::StatusOr<Tensor> Assemble(const std::string& name, const std::vector<std::pair<int, Tensor>>& shards) const;

  SessionOptions options_;
  SystemClock system_clock_;
  StepNotifier notifier_;  // the runtimes' step events wake Wait
  const Clock* clock_ = nullptr;
  int64_t pieces_per_step_ = 1;
  int32_t world_size_ = 1;
  std::unique_ptr<comm::LoopbackHub> hub_;
  // Plans with COLLECTIVE tasks: one gloo backend per rank, meeting in this store. Declared
  // before the runtimes, so they are destroyed after them.
  std::unique_ptr<comm::InMemoryStore> collective_store_;
  std::vector<std::unique_ptr<comm::CollectiveBackend>> collective_backends_;
  std::vector<std::unique_ptr<CpuAllocator>> allocators_;
  std::vector<std::unique_ptr<Runtime>> runtimes_;  // one per entry of plan.ranks
  int64_t started_ = 0, finished_ = 0;  // steps, by StartStep / FinishStep
  // Fetched shards of the last finished step: name -> (rank, pieces).
  std::map<std::string, std::vector<std::pair<int, std::vector<Tensor>>>> fetched_;
  std::vector<std::string> message_log_;
  absl::Status broken_;
  bool closed_ = false;
};

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_SESSION_H_
