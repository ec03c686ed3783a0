// CollectiveBody's buckets (collective_body.h, "Buckets"): one ALL_REDUCE or REDUCE_SCATTER
// call over the K tensors of CollectiveParams.parts.
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "oneflow_like/actor/collective_body.h"
#include "oneflow_like/core/shard_simulator.h"

namespace oneflow_like {
namespace actor {
namespace {

char* Bytes(const Tensor& t) { return static_cast<char*>(const_cast<void*>(t.raw_data())); }
intptr_t Address(const Tensor& t) { return reinterpret_cast<intptr_t>(t.raw_data()); }

int64_t Product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

}  // namespace

absl::Status CollectiveBody::CheckBucket(const ActIo& io, int64_t* staged) const {
  const bool scatter = kind_ == CollectiveParams::REDUCE_SCATTER;
  if (kind_ != CollectiveParams::ALL_REDUCE && !scatter) {
    return absl::InvalidArgumentError(
        absl::StrCat("a bucket is an ALL_REDUCE or a REDUCE_SCATTER, not ", CollectiveParams::Kind_Name(kind_)));
  }
  const size_t parts = parts_.size();
  if (io.inputs.size() != parts || io.outputs.size() != parts + (scatter ? 1 : 0)) {
    return absl::InvalidArgumentError(absl::StrCat("a bucket of ", parts, " part(s) got ", io.inputs.size(),
                                                   " input(s) and ", io.outputs.size(), " output(s)"));
  }
  const DataType dtype = io.inputs[0].dtype();
  *staged = 0;
  for (size_t k = 0; k < parts; ++k) {
    const Geometry& part = parts_[k];
    if (part.in_boxes.size() != static_cast<size_t>(group_size_) ||
        part.out_boxes.size() != static_cast<size_t>(group_size_)) {
      return absl::InvalidArgumentError(absl::StrCat("part ", k, " has ", part.in_boxes.size(), " input and ",
                                                     part.out_boxes.size(), " output box(es) for a group of ",
                                                     group_size_));
    }
    const Tensor& in = io.inputs[k];
    const Tensor& out = io.outputs[k];
    if (in.dtype() != dtype || out.dtype() != dtype || in.elem_count() != part.in_boxes[member_].volume ||
        out.elem_count() != part.out_boxes[member_].volume) {
      return absl::InvalidArgumentError(absl::StrCat("part ", k, ": input ", in.desc().ToString(), " and output ",
                                                     out.desc().ToString(), " do not fit its boxes (",
                                                     part.in_boxes[member_].volume, " and ",
                                                     part.out_boxes[member_].volume, " elements of ",
                                                     DataTypeName(dtype), ")"));
    }
    *staged += Product(part.group_shape);
  }
  if (!scatter) return absl::OkStatus();
  const Tensor& staging = io.outputs.back();
  if (staging.dtype() != dtype || staging.shape().num_axes() != 1 || staging.elem_count() != *staged) {
    return absl::InvalidArgumentError(absl::StrCat("the staging slot is ", staging.desc().ToString(), ", not ",
                                                   DataTypeName(dtype), "[", *staged, "]"));
  }
  return absl::OkStatus();
}

void CollectiveBody::IssueBucket(comm::Communicator* comm, ActIo io, comm::CollectiveDone done) {
  int64_t staged = 0;
  if (absl::Status s = CheckBucket(io, &staged); !s.ok()) return done(s);
  if (kind_ == CollectiveParams::ALL_REDUCE) return BucketAllReduce(comm, std::move(io), std::move(done));
  BucketReduceScatter(comm, std::move(io), std::move(done));
}

void CollectiveBody::BucketAllReduce(comm::Communicator* comm, ActIo io, comm::CollectiveDone done) {
  const DataType dtype = io.inputs[0].dtype();
  const int64_t element = SizeOf(dtype);
  // In place over the register's buffer when the slots follow one another with small gaps of
  // whole elements, and no input lies in that span other than as its own slot.
  const intptr_t base = Address(io.outputs[0]);
  bool in_place = true;
  int64_t end = 0;  // bytes from `base` to the end of the slots so far
  for (const Tensor& out : io.outputs) {
    const int64_t gap = static_cast<int64_t>(Address(out) - base) - end;
    in_place = in_place && gap >= 0 && gap % element == 0 && gap < kMaxBucketGapBytes;
    end += gap + out.byte_size();
  }
  for (size_t k = 0; in_place && k < io.inputs.size(); ++k) {
    const intptr_t in = Address(io.inputs[k]);
    in_place = in == Address(io.outputs[k]) || in + io.inputs[k].byte_size() <= base || in >= base + end;
  }
  if (device_memory_ != nullptr) return DeviceBucketAllReduce(comm, std::move(io), in_place, end, std::move(done));
  if (in_place) {
    char* const span = Bytes(io.outputs[0]);
    int64_t filled = 0;
    for (size_t k = 0; k < io.outputs.size(); ++k) {
      char* const slot = Bytes(io.outputs[k]);
      std::memset(span + filled, 0, static_cast<size_t>(slot - (span + filled)));  // the alignment gap
      if (slot != Bytes(io.inputs[k]) && io.inputs[k].byte_size() > 0) {
        std::memcpy(slot, io.inputs[k].raw_data(), static_cast<size_t>(io.inputs[k].byte_size()));
      }
      filled = (slot - span) + io.outputs[k].byte_size();
    }
    comm->AllReduce(span, span, end / element, dtype, std::move(done));
    return;
  }
  int64_t total = 0;
  for (const Tensor& out : io.outputs) total += out.elem_count();
  Tensor packed = Scratch(&send_scratch_, dtype, total);
  int64_t at = 0;
  for (const Tensor& in : io.inputs) {
    if (in.byte_size() > 0) std::memcpy(Bytes(packed) + at, in.raw_data(), static_cast<size_t>(in.byte_size()));
    at += in.byte_size();
  }
  comm->AllReduce(packed.raw_data(), packed.raw_data(), total, dtype,
                  [packed, outputs = std::move(io.outputs), done = std::move(done)](const absl::Status& s) {
                    int64_t from = 0;
                    for (size_t k = 0; s.ok() && k < outputs.size(); ++k) {
                      const int64_t bytes = outputs[k].byte_size();
                      if (bytes > 0) std::memcpy(Bytes(outputs[k]), Bytes(packed) + from, static_cast<size_t>(bytes));
                      from += bytes;
                    }
                    done(s);
                  });
}

// The same on device memory: the gaps zeroed and the slots filled by the device (synchronous, so
// the library's stream sees them), or the tensors packed into device scratch and copied back.
void CollectiveBody::DeviceBucketAllReduce(comm::Communicator* comm, ActIo io, bool in_place, int64_t end,
                                           comm::CollectiveDone done) {
  const DataType dtype = io.inputs[0].dtype();
  const int64_t element = SizeOf(dtype);
  DeviceBackend* memory = device_memory_;
  const int32_t device = device_;
  if (in_place) {
    char* const span = Bytes(io.outputs[0]);
    int64_t filled = 0;
    for (size_t k = 0; k < io.outputs.size(); ++k) {
      char* const slot = Bytes(io.outputs[k]);
      if (absl::Status s = memory->ZeroDevice(device, span + filled, slot - (span + filled)); !s.ok()) return done(s);
      if (slot != Bytes(io.inputs[k])) {
        if (absl::Status s = memory->CopyWithinDevice(device, Bytes(io.inputs[k]), slot, io.inputs[k].byte_size());
            !s.ok()) {
          return done(s);
        }
      }
      filled = (slot - span) + io.outputs[k].byte_size();
    }
    comm->AllReduce(span, span, end / element, dtype, std::move(done));
    return;
  }
  int64_t total_bytes = 0;
  for (const Tensor& out : io.outputs) total_bytes += out.byte_size();
  absl::StatusOr<Tensor> scratch = ScratchOn(0, dtype, total_bytes / element);
  if (!scratch.ok()) return done(scratch.status());
  char* const packed = Bytes(*scratch);
  int64_t at = 0;
  for (const Tensor& in : io.inputs) {
    if (absl::Status s = memory->CopyWithinDevice(device, Bytes(in), packed + at, in.byte_size()); !s.ok()) {
      return done(s);
    }
    at += in.byte_size();
  }
  comm->AllReduce(packed, packed, total_bytes / element, dtype,
                  [memory, device, packed, outputs = std::move(io.outputs), done = std::move(done)](const absl::Status& s) {
                    absl::Status status = s;
                    int64_t from = 0;
                    for (size_t k = 0; status.ok() && k < outputs.size(); ++k) {
                      status = memory->CopyWithinDevice(device, packed + from, Bytes(outputs[k]), outputs[k].byte_size());
                      from += outputs[k].byte_size();
                    }
                    done(status);
                  });
}

void CollectiveBody::BucketReduceScatter(comm::Communicator* comm, ActIo io, comm::CollectiveDone done) {
  const DataType dtype = io.inputs[0].dtype();
  Tensor staging = io.outputs.back();
  // Member by member, part by part: part k's input cut at member j's output box.
  std::vector<int64_t> counts(static_cast<size_t>(comm->size()), 0);
  int64_t offset = 0;
  for (size_t j = 0; j < counts.size(); ++j) {
    for (size_t k = 0; k < parts_.size(); ++k) {
      const Box& box = parts_[k].out_boxes[j];
      if (box.volume > 0) {
        const Box& mine = parts_[k].in_boxes[member_];
        std::vector<int64_t> at;
        for (size_t a = 0; a < box.begin.size(); ++a) at.push_back(box.begin[a] - mine.begin[a]);
        Tensor block = ViewAt(staging, offset, box.shape);
        if (absl::Status s = BlockOut(io.inputs[k], at, &block); !s.ok()) return done(s);
      }
      offset += box.volume;
      counts[j] += box.volume;
    }
  }
  // Received apart from the staging slot: the interface does not promise an in-place
  // reduce-scatter (comm/collective.h).
  absl::StatusOr<Tensor> received = ScratchOn(1, dtype, counts[member_]);
  if (!received.ok()) return done(received.status());
  Tensor block = *received;
  io.outputs.pop_back();
  comm->ReduceScatter(staging.raw_data(), block.raw_data(), counts, dtype,
                      [this, block, outputs = std::move(io.outputs), done = std::move(done)](const absl::Status& s) {
                        absl::Status status = s;
                        int64_t from = 0;
                        for (size_t k = 0; status.ok() && k < outputs.size(); ++k) {
                          const int64_t bytes = outputs[k].byte_size();
                          status = CopyBytes(ViewAt(block, from / SizeOf(block.dtype()), {1}), Bytes(outputs[k]), bytes);
                          from += bytes;
                        }
                        done(status);
                      });
}

}  // namespace actor
}  // namespace oneflow_like
