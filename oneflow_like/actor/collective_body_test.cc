// CollectiveBody on 2 and 3 members (threads of this process, one gloo backend each over an
// InMemoryStore) against references computed here: single collectives, and buckets
// (CollectiveParams.parts): ALL_REDUCE over one register's slots (in place with alignment gaps,
// inputs already in their slots, the packed fallback) and REDUCE_SCATTER with uneven and 2-D
// splits through the staging slot.
#include "oneflow_like/actor/collective_body.h"

#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oneflow_like/comm/gloo_collective.h"
#include "oneflow_like/core/shard_simulator.h"

namespace oneflow_like {
namespace actor {
namespace {

using ::testing::HasSubstr;

RegionProto Region(std::vector<int64_t> begin, std::vector<int64_t> end) {
  RegionProto r;
  for (int64_t b : begin) r.add_begin(b);
  for (int64_t e : end) r.add_end(e);
  return r;
}

std::vector<int64_t> Dims(const RegionProto& r) {
  std::vector<int64_t> d;
  for (int a = 0; a < r.begin_size(); ++a) d.push_back(r.end(a) - r.begin(a));
  return d;
}

// One tensor's geometry: every input is the group region; outputs are the group region
// (`outputs` empty) or the given boxes, one per member.
CollectiveParams Part(std::vector<int64_t> logical_dims, RegionProto group, int members,
                      std::vector<RegionProto> outputs = {}) {
  CollectiveParams p;
  for (int64_t d : logical_dims) p.add_logical_dims(d);
  *p.mutable_group_region() = group;
  for (int m = 0; m < members; ++m) {
    *p.add_input_regions() = group;
    *p.add_output_regions() = outputs.empty() ? group : outputs[m];
  }
  return p;
}

// `group` cut on `axis` into consecutive blocks of `sizes`.
std::vector<RegionProto> Split(const RegionProto& group, int axis, std::vector<int64_t> sizes) {
  std::vector<RegionProto> out;
  int64_t at = group.begin(axis);
  for (int64_t size : sizes) {
    RegionProto r = group;
    r.set_begin(axis, at);
    r.set_end(axis, at + size);
    at += size;
    out.push_back(r);
  }
  return out;
}

CollectiveParams Call(CollectiveParams::Kind kind, int members, std::vector<CollectiveParams> parts) {
  CollectiveParams p;
  p.set_kind(kind);
  for (int m = 0; m < members; ++m) p.add_ranks(m);
  p.set_global_order(7);
  for (CollectiveParams& part : parts) *p.add_parts() = std::move(part);
  return p;
}

// Member r's input of part k, element i (distinct, exact in float32).
float Value(int r, size_t k, int64_t i) { return static_cast<float>((r + 1) * 1000 + k * 100 + i % 53); }

Tensor Input(int r, size_t k, const std::vector<int64_t>& dims) {
  Tensor t(DataType::kFloat32, Shape(dims));
  for (int64_t i = 0; i < t.elem_count(); ++i) t.data<float>()[i] = Value(r, k, i);
  return t;
}

// What member m's output of part k must be: the members' inputs summed, cut at its output box.
Tensor Expected(const CollectiveParams& part, size_t k, int members, int m) {
  const std::vector<int64_t> group = Dims(part.group_region());
  Tensor sum(DataType::kFloat32, Shape(group));
  for (int r = 0; r < members; ++r) {
    Tensor in = Input(r, k, group);
    for (int64_t i = 0; i < sum.elem_count(); ++i) sum.data<float>()[i] += in.data<float>()[i];
  }
  const RegionProto& box = part.output_regions(m);
  Tensor out(DataType::kFloat32, Shape(Dims(box)));
  std::vector<int64_t> at;
  for (int a = 0; a < box.begin_size(); ++a) at.push_back(box.begin(a) - part.group_region().begin(a));
  CopyBlockOut(sum, at, &out);
  return out;
}

// One register buffer (filled with 0xff bytes) and views of its slots at `offsets` (bytes).
struct Register {
  Tensor buffer;
  std::vector<Tensor> slots;
};

Register MakeRegister(const std::vector<TensorDesc>& descs, const std::vector<int64_t>& offsets) {
  int64_t bytes = 0;
  for (size_t s = 0; s < descs.size(); ++s) bytes = std::max(bytes, offsets[s] + descs[s].byte_size());
  Register reg;
  reg.buffer = Tensor(DataType::kBool, Shape({bytes}));
  char* base = static_cast<char*>(reg.buffer.raw_data());
  std::memset(base, 0xff, static_cast<size_t>(bytes));
  for (size_t s = 0; s < descs.size(); ++s) reg.slots.push_back(Tensor::Borrow(descs[s], base + offsets[s]));
  return reg;
}

// 64-byte aligned offsets, one slot after the other (as the memory planner lays slots out).
std::vector<int64_t> Aligned(const std::vector<TensorDesc>& descs) {
  std::vector<int64_t> offsets;
  int64_t at = 0;
  for (const TensorDesc& d : descs) {
    offsets.push_back(at);
    at += (d.byte_size() + 63) / 64 * 64;
  }
  return offsets;
}

// Runs act(member, backend) on `members` threads, one gloo backend each.
void OnMembers(int members, const std::function<void(int, comm::CollectiveBackend*)>& act) {
  comm::InMemoryStore store;
  std::vector<std::thread> threads;
  for (int r = 0; r < members; ++r) {
    threads.emplace_back([&, r] {
      absl::StatusOr<std::unique_ptr<comm::CollectiveBackend>> backend =
          comm::CreateGlooBackend(&store, r, members, comm::GlooOptions{"127.0.0.1", 20000});
      ASSERT_TRUE(backend.ok()) << backend.status();
      act(r, backend->get());
    });
  }
  for (std::thread& t : threads) t.join();
}

void ExpectEqual(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.shape().dims(), expected.shape().dims()) << what;
  for (int64_t i = 0; i < expected.elem_count(); ++i) {
    ASSERT_EQ(actual.data<float>()[i], expected.data<float>()[i]) << what << " element " << i;
  }
}

enum class Layout {
  kAligned,   // increasing 64-byte aligned slots, inputs elsewhere: in place
  kAliased,   // the same, each input already in its slot: in place without copies
  kReversed,  // slots at decreasing addresses: the packed fallback
  kWideGap,   // a gap over kMaxBucketGapBytes: the packed fallback
};

// An ALL_REDUCE bucket of float32 [3,5], [7] and [2,2,3] (60, 28 and 48 bytes: gaps of 4, 36
// and 16 bytes after 64-byte alignment), fired twice.
void AllReduceBucket(int members, Layout layout) {
  const std::vector<std::vector<int64_t>> shapes = {{3, 5}, {7}, {2, 2, 3}};
  std::vector<CollectiveParams> parts;
  std::vector<TensorDesc> descs;
  for (const auto& s : shapes) {
    std::vector<int64_t> zeros(s.size(), 0);
    parts.push_back(Part(s, Region(zeros, s), members));
    descs.push_back(TensorDesc{DataType::kFloat32, Shape(s)});
  }
  const CollectiveParams params = Call(CollectiveParams::ALL_REDUCE, members, parts);
  std::vector<int64_t> offsets = Aligned(descs);
  if (layout == Layout::kReversed) offsets = {128, 64, 0};
  if (layout == Layout::kWideGap) {
    for (size_t k = 1; k < offsets.size(); ++k) offsets[k] += CollectiveBody::kMaxBucketGapBytes;
  }
  const bool in_place = layout == Layout::kAligned || layout == Layout::kAliased;
  OnMembers(members, [&](int r, comm::CollectiveBackend* backend) {
    CollectiveBody body(backend, params, r, "bucket@r" + std::to_string(r));
    Register reg = MakeRegister(descs, offsets);
    for (int firing = 0; firing < 2; ++firing) {
      ActIo io;
      for (size_t k = 0; k < shapes.size(); ++k) {
        Tensor in = Input(r, k, shapes[k]);
        if (layout == Layout::kAliased) {
          std::memcpy(reg.slots[k].raw_data(), in.raw_data(), static_cast<size_t>(in.byte_size()));
          in = reg.slots[k];
        }
        io.inputs.push_back(in);
      }
      io.outputs = reg.slots;
      const absl::Status status = body.Act(io);
      ASSERT_TRUE(status.ok()) << status;
      for (size_t k = 0; k < shapes.size(); ++k) {
        ExpectEqual(reg.slots[k], Expected(parts[k], k, members, r),
                    "member " + std::to_string(r) + " part " + std::to_string(k));
      }
    }
    // The gaps between the slots: zeroed when reduced in place, untouched by the fallback.
    const unsigned char* base = static_cast<const unsigned char*>(reg.buffer.raw_data());
    for (size_t k = 0; k + 1 < descs.size(); ++k) {
      if (layout == Layout::kReversed) break;
      for (int64_t b = offsets[k] + descs[k].byte_size(); b < offsets[k + 1]; ++b) {
        ASSERT_EQ(base[b], in_place ? 0 : 0xff) << "gap byte " << b << " after slot " << k;
      }
    }
  });
}

TEST(CollectiveBodyTest, AllReduceBucketInPlaceOverTheRegister) {
  for (int members : {2, 3}) AllReduceBucket(members, Layout::kAligned);
}

TEST(CollectiveBodyTest, AllReduceBucketWithInputsAlreadyInTheirSlots) {
  for (int members : {2, 3}) AllReduceBucket(members, Layout::kAliased);
}

TEST(CollectiveBodyTest, AllReduceBucketPacksWhenTheSlotsAreNotOneSpan) {
  AllReduceBucket(3, Layout::kReversed);
  AllReduceBucket(2, Layout::kWideGap);
}

// A REDUCE_SCATTER bucket: float32[7,4] split on rows (uneven), float32[5] (uneven), the
// columns of float32[3,6] (not contiguous blocks), and rows of the column block [0:4,2:5] of
// float32[4,6] (a group region off the origin, as on a mesh).
void ReduceScatterBucket(int members) {
  using Sizes = std::vector<int64_t>;
  const bool three = members == 3;
  const RegionProto a = Region({0, 0}, {7, 4}), b = Region({0}, {5}), c = Region({0, 0}, {3, 6});
  const RegionProto d = Region({0, 2}, {4, 5});
  std::vector<CollectiveParams> parts;
  parts.push_back(Part({7, 4}, a, members, Split(a, 0, three ? Sizes{3, 2, 2} : Sizes{4, 3})));
  parts.push_back(Part({5}, b, members, Split(b, 0, three ? Sizes{2, 2, 1} : Sizes{3, 2})));
  parts.push_back(Part({3, 6}, c, members, Split(c, 1, three ? Sizes{2, 2, 2} : Sizes{3, 3})));
  parts.push_back(Part({4, 6}, d, members, Split(d, 0, three ? Sizes{2, 1, 1} : Sizes{2, 2})));
  const CollectiveParams params = Call(CollectiveParams::REDUCE_SCATTER, members, parts);
  int64_t staged = 0;
  for (const CollectiveParams& part : parts) staged += Shape(Dims(part.group_region())).elem_count();
  OnMembers(members, [&](int r, comm::CollectiveBackend* backend) {
    CollectiveBody body(backend, params, r, "bucket@r" + std::to_string(r));
    std::vector<TensorDesc> descs;
    for (const CollectiveParams& part : parts) {
      descs.push_back(TensorDesc{DataType::kFloat32, Shape(Dims(part.output_regions(r)))});
    }
    descs.push_back(TensorDesc{DataType::kFloat32, Shape({staged})});
    Register reg = MakeRegister(descs, Aligned(descs));
    for (int firing = 0; firing < 2; ++firing) {
      ActIo io;
      for (size_t k = 0; k < parts.size(); ++k) io.inputs.push_back(Input(r, k, Dims(parts[k].group_region())));
      io.outputs = reg.slots;
      const absl::Status status = body.Act(io);
      ASSERT_TRUE(status.ok()) << status;
      for (size_t k = 0; k < parts.size(); ++k) {
        ExpectEqual(reg.slots[k], Expected(parts[k], k, members, r),
                    "member " + std::to_string(r) + " part " + std::to_string(k));
      }
    }
  });
}

TEST(CollectiveBodyTest, ReduceScatterBucketUnevenAnd2DThroughTheStagingSlot) {
  ReduceScatterBucket(2);
  ReduceScatterBucket(3);
}

TEST(CollectiveBodyTest, SingleCollectivesAreUnchanged) {
  // All-reduce of float32[3,5], and reduce-scatter of float32[3,6] on columns (packed).
  const RegionProto whole = Region({0, 0}, {3, 6});
  for (const CollectiveParams::Kind kind : {CollectiveParams::ALL_REDUCE, CollectiveParams::REDUCE_SCATTER}) {
    CollectiveParams params = kind == CollectiveParams::ALL_REDUCE
                                  ? Part({3, 6}, whole, 3)
                                  : Part({3, 6}, whole, 3, Split(whole, 1, {1, 3, 2}));
    params.set_kind(kind);
    for (int m = 0; m < 3; ++m) params.add_ranks(m);
    OnMembers(3, [&](int r, comm::CollectiveBackend* backend) {
      CollectiveBody body(backend, params, r, "c@r" + std::to_string(r));
      ActIo io;
      io.inputs.push_back(Input(r, 0, {3, 6}));
      io.outputs.push_back(Tensor(DataType::kFloat32, Shape(Dims(params.output_regions(r)))));
      const absl::Status status = body.Act(io);
      ASSERT_TRUE(status.ok()) << status;
      ExpectEqual(io.outputs[0], Expected(params, 0, 3, r), CollectiveParams::Kind_Name(kind));
    });
  }
}

// Four collectives of one group (global orders 0..3), started at once in a different order on
// every member: one shared gloo context per member, each body a channel of it, results exact.
void BodiesShareTheGroupContext(int members) {
  const RegionProto whole = Region({0, 0}, {4, 6});
  std::vector<CollectiveParams> calls;
  for (int order = 0; order < 4; ++order) {
    const std::vector<int64_t> rows = members == 2 ? std::vector<int64_t>{3, 1} : std::vector<int64_t>{1, 2, 1};
    CollectiveParams params =
        order % 2 == 0 ? Part({4, 6}, whole, members) : Part({4, 6}, whole, members, Split(whole, 0, rows));
    params.set_kind(order % 2 == 0 ? CollectiveParams::ALL_REDUCE : CollectiveParams::REDUCE_SCATTER);
    for (int m = 0; m < members; ++m) params.add_ranks(m);
    params.set_global_order(order);
    calls.push_back(params);
  }
  OnMembers(members, [&](int r, comm::CollectiveBackend* backend) {
    // Declared before the bodies: their calls finish (on destruction at the latest) before these go.
    std::vector<std::promise<absl::Status>> finished(calls.size());
    std::vector<ActIo> ios(calls.size());
    std::vector<std::unique_ptr<CollectiveBody>> bodies;
    for (size_t k = 0; k < calls.size(); ++k) {
      bodies.push_back(std::make_unique<CollectiveBody>(backend, calls[k], r, "c" + std::to_string(k)));
      ios[k].inputs.push_back(Input(r, k, {4, 6}));
      ios[k].outputs.push_back(Tensor(DataType::kFloat32, Shape(Dims(calls[k].output_regions(r)))));
    }
    for (size_t i = 0; i < calls.size(); ++i) {
      const size_t k = (i + static_cast<size_t>(r)) % calls.size();  // member r starts call r first
      bodies[k]->Start(ios[k], [&finished, k](const absl::Status& s) { finished[k].set_value(s); });
    }
    for (size_t k = 0; k < calls.size(); ++k) {
      std::future<absl::Status> done = finished[k].get_future();
      ASSERT_EQ(done.wait_for(std::chrono::seconds(60)), std::future_status::ready) << "call " << k << " hangs";
      const absl::Status status = done.get();
      ASSERT_TRUE(status.ok()) << status;
      ExpectEqual(ios[k].outputs[0], Expected(calls[k], k, members, r), "call " + std::to_string(k));
    }
    EXPECT_EQ(backend->stats().contexts, 1) << "member " << r;
    EXPECT_EQ(backend->stats().channels, 4) << "member " << r;
  });
}

TEST(CollectiveBodyTest, BodiesOfOneGroupShareOneContextAndFireInAnyOrder) {
  BodiesShareTheGroupContext(2);
  BodiesShareTheGroupContext(3);
}

TEST(CollectiveBodyTest, ABucketWithTheWrongSlotsIsRefusedNamingTheTask) {
  const RegionProto whole = Region({0}, {4});
  const CollectiveParams params =
      Call(CollectiveParams::REDUCE_SCATTER, 2,
           {Part({4}, whole, 2, Split(whole, 0, {2, 2})), Part({4}, whole, 2, Split(whole, 0, {2, 2}))});
  OnMembers(2, [&](int r, comm::CollectiveBackend* backend) {
    CollectiveBody body(backend, params, r, "grads@r" + std::to_string(r));
    ActIo io;
    for (int k = 0; k < 2; ++k) io.inputs.push_back(Input(r, k, {4}));
    io.outputs = {Tensor(DataType::kFloat32, Shape({2})), Tensor(DataType::kFloat32, Shape({2}))};  // no staging slot
    absl::Status status = body.Act(io);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()),
                HasSubstr("grads@r" + std::to_string(r) + ": a bucket of 2 part(s) got 2 input(s) and 2 output(s)"));
    io.outputs.push_back(Tensor(DataType::kFloat32, Shape({7})));  // staging of 7, not 8
    status = body.Act(io);
    EXPECT_THAT(std::string(status.message()), HasSubstr("the staging slot is float32[7], not float32[8]"));
  });
}

}  // namespace
}  // namespace actor
}  // namespace oneflow_like
