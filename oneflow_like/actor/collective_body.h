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
//
// Buckets (CollectiveParams.parts non-empty, docs/plan_format.md "Buckets"): one call over K
// tensors; part k's geometry describes input k and output slot k, all outputs being slots of
// one register.
//   ALL_REDUCE      the output slots lie at increasing addresses of the register's buffer: when
//                   every gap between consecutive slots is a whole number of elements and under
//                   kMaxBucketGapBytes, each input is copied into its slot (not when it already
//                   is that slot), the gaps are zeroed and the span from slot 0 to the end of
//                   slot K-1 is all-reduced in place, one call. Otherwise (slots out of order,
//                   large or odd gaps, an input inside the span but not its own slot) the
//                   inputs are packed into a scratch buffer, all-reduced, and unpacked.
//   REDUCE_SCATTER  output K is the staging slot: every input cut at member j's output box,
//                   member by member, part by part, row-major; one reduce_scatter with counts[j]
//                   = the sum of member j's boxes; this member's block (received into a scratch
//                   buffer, counts[member] elements) is copied into slots 0..K-1.
//
// Each task has its own communicator over its group, a channel (CollectiveBackend::ConnectChannel)
// identified by the call's global_order: on gloo the channels of one group share the group's
// context (its connections), each with a worker thread and tags of its own. It is connected in
// the background when the body is built, since every member builds its body at runtime
// creation; the first firing waits for it off the actor's thread. So collectives of one group
// never depend on the order in which their actors fire -- unless the backend needs an agreed
// issue order (NCCL: the channels of a group share one communicator): then every firing is
// handed to the library in the rank's CollectiveOrder (UseOrder), connection waits and errors
// found before the call included, so a later call never passes an earlier one.
#ifndef ONEFLOW_LIKE_ACTOR_COLLECTIVE_BODY_H_
#define ONEFLOW_LIKE_ACTOR_COLLECTIVE_BODY_H_

#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "oneflow_like/actor/act_body.h"
#include "oneflow_like/actor/collective_order.h"
#include "oneflow_like/actor/device_backend.h"
#include "oneflow_like/comm/collective.h"
#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace actor {

class CollectiveBody final : public ActBody {
 public:
  // REQUIRES: backend outlives the body; `member` is this rank's index in params.ranks().
  CollectiveBody(comm::CollectiveBackend* backend, const CollectiveParams& params, int32_t member, std::string name);
  ~CollectiveBody() override;

  // The task's registers are in `device`'s memory of `memory` (a COLLECTIVE on a cuda placement,
  // the backend's memory_type() "cuda"): the library gets device pointers, and what the body
  // moves itself (a bucket's slots and gaps, boxes cut into and pasted from scratch) goes
  // through `memory` (device_backend.h: CopyWithinDevice, ZeroDevice, CopyBox; synchronous, so
  // the library's own stream sees the data). Default: host memory. Not owned.
  void UseDeviceMemory(DeviceBackend* memory, int32_t device) {
    device_memory_ = memory;
    device_ = device;
  }

  // Issue through `order` (collective_order.h) as its call `call`: each firing waits there for
  // the rank's earlier calls in the agreed order before it goes to the library. Not owned.
  // Registers the body's connection with the order (it issues only once every body connected).
  void UseOrder(CollectiveOrder* order, int32_t call);

  bool IsAsync() const override { return true; }
  absl::Status Act(ActIo& io) override;  // synchronous fallback: Start and wait
  void Start(ActIo io, std::function<void(const absl::Status&)> finished) override;

  // An ALL_REDUCE bucket reduces its slots in place when the gaps between them are smaller.
  static constexpr int64_t kMaxBucketGapBytes = 4096;

 private:
  struct Box {
    std::vector<int64_t> begin, shape;  // relative to the group region
    int64_t volume = 1;
  };
  struct Geometry {  // of one tensor: the task's own, or one part of a bucket
    std::vector<int64_t> group_shape;
    std::vector<Box> in_boxes, out_boxes;  // per member
  };
  static Geometry MakeGeometry(const CollectiveParams& params);
  void Issue(comm::Communicator* comm, ActIo io, comm::CollectiveDone done);
  // Buckets (collective_bucket.cc). CheckBucket: the act's tensors against the parts (checked
  // before waiting for the group, so a bad plan fails at once, whatever the peers do); sets
  // *staged to the elements of a REDUCE_SCATTER's staging slot.
  absl::Status CheckBucket(const ActIo& io, int64_t* staged) const;
  void IssueBucket(comm::Communicator* comm, ActIo io, comm::CollectiveDone done);
  void BucketAllReduce(comm::Communicator* comm, ActIo io, comm::CollectiveDone done);
  void BucketReduceScatter(comm::Communicator* comm, ActIo io, comm::CollectiveDone done);
  void DeviceBucketAllReduce(comm::Communicator* comm, ActIo io, bool in_place, int64_t end, comm::CollectiveDone done);
  // Whether boxes[k] are consecutive row blocks of a region of `group_shape` in member order.
  static bool RowBlocks(const std::vector<Box>& boxes, const std::vector<int64_t>& group_shape);
  static Box Intersect(const Box& a, const Box& b);
  // `cached` grown to at least `elements` elements of `dtype` (kept between firings).
  static Tensor Scratch(Tensor* cached, DataType dtype, int64_t elements);
  // The same in the task's memory: host (Scratch), or device memory (UseDeviceMemory) kept in
  // device_scratch_[which] (0: send, 1: receive).
  absl::StatusOr<Tensor> ScratchOn(int which, DataType dtype, int64_t elements);
  // CopyBlockOut / CopyBlockIn (core/shard_simulator.h) in the task's memory.
  absl::Status BlockOut(const Tensor& src, const std::vector<int64_t>& offset, Tensor* out) const;
  absl::Status BlockIn(const Tensor& block, const std::vector<int64_t>& offset, Tensor* dst) const;
  // Bytes within the task's memory (host: memcpy).
  absl::Status CopyBytes(const Tensor& from, char* to, int64_t bytes) const;
  // A view of `buffer` at element `offset`, shaped `shape`.
  static Tensor ViewAt(const Tensor& buffer, int64_t offset, const std::vector<int64_t>& shape);

  const CollectiveParams::Kind kind_;
  const int32_t member_;
  const std::string name_;
  int32_t group_size_ = 0;
  Geometry geometry_;            // not a bucket
  std::vector<Geometry> parts_;  // a bucket: one per part
  std::shared_future<absl::StatusOr<std::shared_ptr<comm::Communicator>>> connected_;
  std::mutex waiters_mu_;
  std::vector<std::future<void>> waiters_;  // first firings waiting for the connection
  Tensor send_scratch_, recv_scratch_;        // reused between firings (one act at a time)
  DeviceBackend* device_memory_ = nullptr;    // UseDeviceMemory
  int32_t device_ = 0;
  char* device_scratch_[2] = {nullptr, nullptr};  // ScratchOn on a device (kept between firings)
  int64_t device_scratch_bytes_[2] = {0, 0};
  CollectiveOrder* order_ = nullptr;  // UseOrder
  int32_t order_call_ = 0;
  int64_t firings_ = 0;  // Start calls so far (one act at a time)
};

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_COLLECTIVE_BODY_H_
