#include "oneflow_like/actor/collective_body.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "oneflow_like/core/shard_simulator.h"

namespace oneflow_like {
namespace actor {
namespace {

std::vector<int32_t> Ranks(const CollectiveParams& p) { return std::vector<int32_t>(p.ranks().begin(), p.ranks().end()); }

}  // namespace

Tensor CollectiveBody::Scratch(Tensor* cached, DataType dtype, int64_t elements) {
  if (cached->dtype() != dtype || cached->elem_count() < elements) *cached = Tensor(dtype, Shape({std::max<int64_t>(1, elements)}));
  return *cached;
}

Tensor CollectiveBody::ViewAt(const Tensor& buffer, int64_t offset, const std::vector<int64_t>& shape) {
  return Tensor::Borrow(TensorDesc{buffer.dtype(), Shape(shape)},
                        static_cast<char*>(const_cast<void*>(buffer.raw_data())) + offset * SizeOf(buffer.dtype()));
}

CollectiveBody::Geometry CollectiveBody::MakeGeometry(const CollectiveParams& params) {
  Geometry geometry;
  const RegionProto& g = params.group_region();
  for (int a = 0; a < g.begin_size(); ++a) geometry.group_shape.push_back(g.end(a) - g.begin(a));
  auto boxes = [&](const google::protobuf::RepeatedPtrField<RegionProto>& regions) {
    std::vector<Box> out;
    for (const RegionProto& r : regions) {
      Box b;
      for (int a = 0; a < r.begin_size(); ++a) {
        b.begin.push_back(r.begin(a) - g.begin(a));
        b.shape.push_back(r.end(a) - r.begin(a));
        b.volume *= b.shape.back();
      }
      out.push_back(std::move(b));
    }
    return out;
  };
  geometry.in_boxes = boxes(params.input_regions());
  geometry.out_boxes = boxes(params.output_regions());
  return geometry;
}

CollectiveBody::CollectiveBody(comm::CollectiveBackend* backend, const CollectiveParams& params, int32_t member,
                               std::string name)
    : kind_(params.kind()), member_(member), name_(std::move(name)) {
  if (params.parts_size() == 0) geometry_ = MakeGeometry(params);
  for (const CollectiveParams& part : params.parts()) parts_.push_back(MakeGeometry(part));
  const std::vector<int32_t> group = Ranks(params);
  group_size_ = static_cast<int32_t>(group.size());
  const uint64_t channel = static_cast<uint64_t>(params.global_order());
  const std::string tag = absl::StrCat("collective/", channel);
  using Connected = absl::StatusOr<std::shared_ptr<comm::Communicator>>;
  connected_ = std::async(std::launch::async, [backend, group, channel, tag]() -> Connected {
                 absl::StatusOr<std::unique_ptr<comm::Communicator>> comm = backend->ConnectChannel(group, channel, tag);
                 if (!comm.ok()) return comm.status();
                 return std::shared_ptr<comm::Communicator>(std::move(*comm));
               }).share();
}

void CollectiveBody::UseOrder(CollectiveOrder* order, int32_t call) {
  order_ = order;
  order_call_ = call;
  order->AddConnection([connected = connected_] { return connected.wait_for(std::chrono::seconds(0)) == std::future_status::ready; },
                       [connected = connected_] { connected.wait(); });
}

CollectiveBody::~CollectiveBody() {
  {
    std::lock_guard<std::mutex> lock(waiters_mu_);
    for (auto& w : waiters_) w.wait();
  }
  if (connected_.valid()) connected_.wait();
  for (char* scratch : device_scratch_) {
    if (scratch != nullptr) device_memory_->Free(device_, scratch);
  }
}

absl::StatusOr<Tensor> CollectiveBody::ScratchOn(int which, DataType dtype, int64_t elements) {
  if (device_memory_ == nullptr) return Scratch(which == 0 ? &send_scratch_ : &recv_scratch_, dtype, elements);
  const int64_t bytes = std::max<int64_t>(1, elements) * SizeOf(dtype);
  if (device_scratch_bytes_[which] < bytes) {
    if (device_scratch_[which] != nullptr) device_memory_->Free(device_, device_scratch_[which]);
    device_scratch_[which] = nullptr;
    device_scratch_bytes_[which] = 0;
    ASSIGN_OR_RETURN(device_scratch_[which], device_memory_->Allocate(device_, bytes));
    device_scratch_bytes_[which] = bytes;
  }
  return Tensor::Borrow(TensorDesc{dtype, Shape({std::max<int64_t>(1, elements)})}, device_scratch_[which]);
}

absl::Status CollectiveBody::BlockOut(const Tensor& src, const std::vector<int64_t>& offset, Tensor* out) const {
  if (device_memory_ == nullptr) {
    CopyBlockOut(src, offset, out);
    return absl::OkStatus();
  }
  return device_memory_->CopyBox(device_, src, offset, out, std::vector<int64_t>(offset.size(), 0),
                                 out->shape().dims());
}

absl::Status CollectiveBody::BlockIn(const Tensor& block, const std::vector<int64_t>& offset, Tensor* dst) const {
  if (device_memory_ == nullptr) {
    CopyBlockIn(block, offset, dst);
    return absl::OkStatus();
  }
  return device_memory_->CopyBox(device_, block, std::vector<int64_t>(offset.size(), 0), dst, offset,
                                 block.shape().dims());
}

absl::Status CollectiveBody::CopyBytes(const Tensor& from, char* to, int64_t bytes) const {
  if (bytes <= 0) return absl::OkStatus();
  if (device_memory_ != nullptr) {
    return device_memory_->CopyWithinDevice(device_, static_cast<const char*>(from.raw_data()), to, bytes);
  }
  std::memcpy(to, from.raw_data(), static_cast<size_t>(bytes));
  return absl::OkStatus();
}

absl::Status CollectiveBody::Act(ActIo& io) {
  std::promise<absl::Status> result;
  Start(io, [&](const absl::Status& s) { result.set_value(s); });
  return result.get_future().get();
}

void CollectiveBody::Start(ActIo io, std::function<void(const absl::Status&)> finished) {
  const int64_t ticket = order_ != nullptr ? order_->Ticket(order_call_, firings_) : -1;
  ++firings_;
  if (!parts_.empty()) {
    int64_t staged = 0;
    if (absl::Status s = CheckBucket(io, &staged); !s.ok()) {
      absl::Status named(s.code(), absl::StrCat(name_, ": ", s.message()));
      if (order_ == nullptr) return finished(named);
      order_->Issue(ticket, [finished, named] { finished(named); });  // its turn passes on
      return;
    }
  }
  auto run = [this, finished](ActIo io) {
    const absl::StatusOr<std::shared_ptr<comm::Communicator>>& comm = connected_.get();
    if (!comm.ok()) {
      finished(absl::Status(comm.status().code(), absl::StrCat(name_, ": ", comm.status().message())));
      return;
    }
    auto named = [this, finished](const absl::Status& s) {
      finished(s.ok() ? s : absl::Status(s.code(), absl::StrCat(name_, ": ", s.message())));
    };
    if (parts_.empty()) {
      Issue(comm->get(), std::move(io), std::move(named));
    } else {
      IssueBucket(comm->get(), std::move(io), std::move(named));
    }
  };
  auto issue = [this, run, ticket](ActIo io) {
    if (order_ == nullptr) return run(std::move(io));
    order_->Issue(ticket, [run, io = std::move(io)]() mutable { run(std::move(io)); });
  };
  // With an order: every body of the rank connected (CollectiveOrder, "Connections").
  const bool ready = order_ != nullptr ? order_->Connected()
                                       : connected_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  if (ready) {
    issue(std::move(io));
    return;
  }
  std::lock_guard<std::mutex> lock(waiters_mu_);  // the first firings: wait for the group off this thread
  waiters_.push_back(std::async(std::launch::async, [this, issue](ActIo io) {
    if (order_ != nullptr) {
      order_->WaitConnected();
    } else {
      connected_.wait();
    }
    issue(std::move(io));
  }, std::move(io)));
}

bool CollectiveBody::RowBlocks(const std::vector<Box>& boxes, const std::vector<int64_t>& group_shape) {
  int64_t row = 0;
  for (const Box& b : boxes) {
    if (b.volume == 0) continue;
    if (b.begin[0] != row) return false;
    for (size_t a = 1; a < b.shape.size(); ++a) {
      if (b.begin[a] != 0 || b.shape[a] != group_shape[a]) return false;
    }
    row += b.shape[0];
  }
  return true;
}

CollectiveBody::Box CollectiveBody::Intersect(const Box& a, const Box& b) {
  Box c;
  for (size_t d = 0; d < a.begin.size(); ++d) {
    const int64_t lo = std::max(a.begin[d], b.begin[d]);
    const int64_t hi = std::min(a.begin[d] + a.shape[d], b.begin[d] + b.shape[d]);
    c.begin.push_back(lo);
    c.shape.push_back(std::max<int64_t>(0, hi - lo));
    c.volume *= c.shape.back();
  }
  return c;
}

void CollectiveBody::Issue(comm::Communicator* comm, ActIo io, comm::CollectiveDone named) {
  const std::vector<Box>& in_boxes = geometry_.in_boxes;
  const std::vector<Box>& out_boxes = geometry_.out_boxes;
  Tensor in = io.inputs[0], out = io.outputs[0];
  const DataType dtype = in.dtype();
  auto relative = [](const Box& inner, const Box& outer) {
    std::vector<int64_t> offset;
    for (size_t d = 0; d < inner.begin.size(); ++d) offset.push_back(inner.begin[d] - outer.begin[d]);
    return offset;
  };
  switch (kind_) {
    case CollectiveParams::ALL_REDUCE:
      comm->AllReduce(in.raw_data(), out.raw_data(), out.elem_count(), dtype, named);
      return;
    case CollectiveParams::ALL_GATHER: {
      std::vector<int64_t> counts;
      for (const Box& b : in_boxes) counts.push_back(b.volume);
      if (RowBlocks(in_boxes, geometry_.group_shape)) {
        comm->AllGather(in.raw_data(), out.raw_data(), counts, dtype, named);
        return;
      }
      absl::StatusOr<Tensor> scratch = ScratchOn(1, dtype, comm::SumCounts(counts));
      if (!scratch.ok()) return named(scratch.status());
      Tensor gathered = *scratch;
      comm->AllGather(in.raw_data(), gathered.raw_data(), counts, dtype, [this, gathered, out, named](const absl::Status& s) mutable {
        absl::Status status = s;
        int64_t offset = 0;
        for (const Box& b : geometry_.in_boxes) {
          if (status.ok() && b.volume > 0) status = BlockIn(ViewAt(gathered, offset, b.shape), b.begin, &out);
          offset += b.volume;
        }
        named(status);
      });
      return;
    }
    case CollectiveParams::REDUCE_SCATTER: {
      std::vector<int64_t> counts;
      for (const Box& b : out_boxes) counts.push_back(b.volume);
      if (RowBlocks(out_boxes, geometry_.group_shape)) {
        comm->ReduceScatter(in.raw_data(), out.raw_data(), counts, dtype, named);
        return;
      }
      absl::StatusOr<Tensor> scratch = ScratchOn(0, dtype, comm::SumCounts(counts));
      if (!scratch.ok()) return named(scratch.status());
      Tensor packed = *scratch;
      int64_t offset = 0;
      for (const Box& b : out_boxes) {
        if (b.volume > 0) {
          Tensor block = ViewAt(packed, offset, b.shape);
          if (absl::Status s = BlockOut(in, b.begin, &block); !s.ok()) return named(s);
        }
        offset += b.volume;
      }
      comm->ReduceScatter(packed.raw_data(), out.raw_data(), counts, dtype, named);
      return;
    }
    case CollectiveParams::ALL_TO_ALL: {
      const Box& mine_in = in_boxes[member_];
      const Box& mine_out = out_boxes[member_];
      std::vector<int64_t> send_counts, recv_counts;
      std::vector<Box> sends, receives;
      for (size_t j = 0; j < out_boxes.size(); ++j) {
        sends.push_back(Intersect(mine_in, out_boxes[j]));
        send_counts.push_back(sends.back().volume);
        receives.push_back(Intersect(in_boxes[j], mine_out));
        recv_counts.push_back(receives.back().volume);
      }
      absl::StatusOr<Tensor> send = ScratchOn(0, dtype, comm::SumCounts(send_counts));
      if (!send.ok()) return named(send.status());
      absl::StatusOr<Tensor> receive = ScratchOn(1, dtype, comm::SumCounts(recv_counts));
      if (!receive.ok()) return named(receive.status());
      Tensor packed = *send, gathered = *receive;
      int64_t offset = 0;
      for (const Box& b : sends) {
        if (b.volume > 0) {
          Tensor block = ViewAt(packed, offset, b.shape);
          if (absl::Status s = BlockOut(in, relative(b, mine_in), &block); !s.ok()) return named(s);
        }
        offset += b.volume;
      }
      comm->AllToAll(packed.raw_data(), send_counts, gathered.raw_data(), recv_counts, dtype,
                     [this, gathered, out, receives, mine_out, relative, named](const absl::Status& s) mutable {
                       absl::Status status = s;
                       int64_t at = 0;
                       for (const Box& b : receives) {
                         if (status.ok() && b.volume > 0) {
                           status = BlockIn(ViewAt(gathered, at, b.shape), relative(b, mine_out), &out);
                         }
                         at += b.volume;
                       }
                       named(status);
                     });
      return;
    }
    default:
      named(absl::InvalidArgumentError(absl::StrCat("unknown collective kind ", kind_)));
  }
}

}  // namespace actor
}  // namespace oneflow_like
