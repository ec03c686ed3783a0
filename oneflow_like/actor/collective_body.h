// CollectiveBody: the act of a COLLECTIVE task (one member of one collective call of the plan)
// through the collective interface (comm/collective.h). Asynchronous: Start packs the input as
// the library wants it, issues the call and returns; the communicator's thread unpacks into the
// output and reports the end of the act, so a collective never blocks an actor thread.
//
// Geometry (CollectiveParams, docs/plan_format.md; VerifyPlan checked it): boxes in the logical
// coordinates of the boxed tensor, one per member on each side, inside the group region.
//   ALL_REDUCE      all_reduce of the whole slot
//   ALL_GATHER      all_gather of the members' boxes, then each box placed at its offset
//                   (straight into the output when the boxes are consecutive rows)
//   REDUCE_SCATTER  the input cut into the members' output boxes, reduce_scatter
//   ALL_TO_ALL      member j gets the intersection of every input box with its output box
// Each task has its own communicator over its group (connected in the background when the body
// is built, since every member builds its body at runtime creation; the first firing waits for
// it off the actor's thread), so collectives of one group never depend on the order in which
// their actors fire.
#ifndef ONEFLOW_LIKE_ACTOR_COLLECTIVE_BODY_H_
#define ONEFLOW_LIKE_ACTOR_COLLECTIVE_BODY_H_

#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "oneflow_like/actor/act_body.h"
#include "oneflow_like/comm/collective.h"
#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace actor {

class CollectiveBody final : public ActBody {
 public:
  // REQUIRES: backend outlives the body; `member` is this rank's index in params.ranks().
  CollectiveBody(comm::CollectiveBackend* backend, const CollectiveParams& params, int32_t member, std::string name);
  ~CollectiveBody() override;

  bool IsAsync() const override { return true; }
  absl::Status Act(ActIo& io) override;  // synchronous fallback: Start and wait
  void Start(ActIo io, std::function<void(const absl::Status&)> finished) override;

 private:
  struct Box {
    std::vector<int64_t> begin, shape;  // relative to the group region
    int64_t volume = 1;
  };
  void Issue(comm::Communicator* comm, ActIo io, std::function<void(const absl::Status&)> finished);
  // Whether boxes[k] are consecutive row blocks of the group region in member order.
  bool RowBlocks(const std::vector<Box>& boxes) const;
  static Box Intersect(const Box& a, const Box& b);

  const CollectiveParams::Kind kind_;
  const int32_t member_;
  const std::string name_;
  std::vector<int64_t> group_shape_;
  std::vector<Box> in_boxes_, out_boxes_;
  std::shared_future<absl::StatusOr<std::shared_ptr<comm::Communicator>>> connected_;
  std::mutex waiters_mu_;
  std::vector<std::future<void>> waiters_;  // first firings waiting for the connection
  Tensor send_scratch_, recv_scratch_;        // reused between firings (one act at a time)
};

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_COLLECTIVE_BODY_H_
