// CUDA data-movement kernels vs the CPU ops transpose, broadcast_to, slice, slice_grad, concat
// and split (float32, and int64 / float64 for the other element widths). Copies are exact.
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "oneflow_like/core/cuda/copy_kernels.h"
#include "oneflow_like/core/cuda/cuda_test_util.h"

namespace oneflow_like {
namespace cuda {
namespace testing {
namespace {

using ::oneflow_like::testing::RandomTensor;

std::string Join(const std::vector<int64_t>& v) { return "[" + absl::StrJoin(v, ",") + "]"; }

class CopyTest : public CudaKernelTest {
 protected:
  // Compares bytes exactly (any dtype): the GPU result against the CPU op's.
  void ExpectSame(const void* device, const Tensor& want, const std::string& what) {
    const Tensor got = Download(device, want.desc());
    ASSERT_EQ(got.byte_size(), want.byte_size()) << what;
    EXPECT_EQ(0, std::memcmp(got.raw_data(), want.raw_data(), static_cast<size_t>(want.byte_size()))) << what;
  }
  void* Up(const Tensor& t) { return UploadRaw(t); }
};

TEST_F(CopyTest, Transpose) {
  struct Case {
    std::vector<int64_t> dims, perm;
  };
  const Case cases[] = {{{3, 5, 7}, {2, 0, 1}}, {{3, 5, 7}, {0, 2, 1}}, {{17, 33}, {1, 0}},
                        {{1, 1}, {1, 0}},       {{2, 3, 4, 5}, {3, 1, 0, 2}}, {{3, 1, 7}, {1, 2, 0}},
                        // Widened to 16- or 8-byte words (copy_layout.h): attention's head
                        // transposes, an inner axis of 6, a size-1 axis among them.
                        {{2, 8, 3, 64}, {0, 2, 1, 3}}, {{2, 3, 8, 64}, {0, 2, 1, 3}}, {{3, 4, 5, 6}, {2, 0, 1, 3}},
                        {{4, 1, 3, 8}, {2, 1, 0, 3}}};
  for (DataType dt : {DataType::kFloat32, DataType::kInt64}) {
    for (const Case& c : cases) {
      const Tensor x = RandomTensor(dt, Shape(c.dims), 101, -100.0, 100.0);
      const Tensor want = cpu().RunOne("transpose", {x}, {{"perm", c.perm}});
      void* y = OutputRaw(want.byte_size());
      ASSERT_OK(Transpose(Up(x), c.dims, c.perm, SizeOf(dt), y, stream()));
      ExpectSame(y, want, "transpose " + x.desc().ToString() + " perm " + Join(c.perm));
    }
  }
}

TEST_F(CopyTest, BroadcastTo) {
  struct Case {
    std::vector<int64_t> from, to;
  };
  const Case cases[] = {{{5, 1}, {4, 5, 3}}, {{1, 1}, {17, 33}}, {{7}, {3, 5, 7}}, {{3, 1, 7}, {3, 5, 7}}, {{}, {2, 3}}};
  for (const Case& c : cases) {
    const Tensor x = RandomTensor(DataType::kFloat64, Shape(c.from), 102);
    const Tensor want = cpu().RunOne("broadcast_to", {x}, {{"shape", c.to}});
    void* y = OutputRaw(want.byte_size());
    ASSERT_OK(BroadcastTo(Up(x), c.from, c.to, 8, y, stream()));
    ExpectSame(y, want, "broadcast_to " + Join(c.from) + " -> " + Join(c.to));
  }
}

TEST_F(CopyTest, SliceAndSliceGrad) {
  struct Case {
    std::vector<int64_t> dims, begin, end;
  };
  const Case cases[] = {{{3, 5, 7}, {1, 0, 2}, {3, 5, 6}}, {{17, 33}, {4, 1}, {5, 33}}, {{1, 1}, {0, 0}, {1, 1}},
                        {{3, 5, 7}, {0, 2, 0}, {3, 2, 7}}};
  for (const Case& c : cases) {
    const Tensor x = RandomTensor(DataType::kFloat32, Shape(c.dims), 103);
    const AttrMap attrs = {{"begin", c.begin}, {"end", c.end}};
    const Tensor want = cpu().RunOne("slice", {x}, attrs);
    std::vector<int64_t> y_dims(c.dims.size());
    for (size_t a = 0; a < y_dims.size(); ++a) y_dims[a] = c.end[a] - c.begin[a];
    const std::string what = "slice " + x.desc().ToString() + " " + Join(c.begin) + ".." + Join(c.end);
    void* y = OutputRaw(want.byte_size());
    ASSERT_OK(Slice(Up(x), c.dims, c.begin, y_dims, 4, y, stream()));
    ExpectSame(y, want, what);

    const Tensor dy = RandomTensor(DataType::kFloat32, Shape(y_dims), 104);
    const Tensor want_dx =
        cpu().RunOne("slice_grad", {dy}, {{"like_shape", c.dims}, {"begin", c.begin}, {"end", c.end}});
    void* dx = OutputRaw(want_dx.byte_size());
    ASSERT_OK(SliceGrad(Up(dy), y_dims, c.begin, c.dims, 4, dx, stream()));
    ExpectSame(dx, want_dx, what + " grad");
  }
}

TEST_F(CopyTest, ConcatAndSplit) {
  for (int axis : {0, 1, -1}) {
    std::vector<std::vector<int64_t>> dims = {{3, 5, 7}, {3, 5, 7}, {3, 5, 7}};
    const int a = axis < 0 ? axis + 3 : axis;
    dims[1][a] = 2;
    dims[2][a] = 1;
    std::vector<Tensor> xs;
    std::vector<const void*> ptrs;
    std::vector<int64_t> sizes;
    for (size_t i = 0; i < dims.size(); ++i) {
      xs.push_back(RandomTensor(DataType::kFloat32, Shape(dims[i]), 105 + i));
      ptrs.push_back(Up(xs.back()));
      sizes.push_back(dims[i][a]);
    }
    const std::string what = "concat axis " + std::to_string(axis);
    const Tensor want = cpu().RunOne("concat", xs, {{"axis", int64_t{axis}}});
    void* y = OutputRaw(want.byte_size());
    ASSERT_OK(Concat(ptrs, dims, axis, 4, y, stream()));
    ExpectSame(y, want, what);

    const std::vector<Tensor> parts =
        cpu().RunOk("split", {want}, {{"axis", int64_t{axis}}, {"sizes", sizes}});
    ASSERT_EQ(parts.size(), dims.size());
    std::vector<void*> outs;
    for (const Tensor& p : parts) outs.push_back(OutputRaw(p.byte_size()));
    ASSERT_OK(Split(Up(want), want.shape().dims(), axis, outs, sizes, 4, stream()));
    for (size_t i = 0; i < parts.size(); ++i) ExpectSame(outs[i], parts[i], what + " split part " + std::to_string(i));
  }
}

TEST_F(CopyTest, ReshapeAndIdentityAreByteCopies) {
  const Tensor x = RandomTensor(DataType::kFloat32, Shape({3, 5, 7}), 110);
  const Tensor want = cpu().RunOne("reshape", {x}, {{"shape", std::vector<int64_t>{15, 7}}});
  void* y = OutputRaw(want.byte_size());
  ASSERT_OK(CopyBytes(y, Up(x), x.byte_size(), stream()));
  ExpectSame(y, want, "reshape");
  const Tensor same = cpu().RunOne("identity", {x});
  void* z = OutputRaw(same.byte_size());
  ASSERT_OK(CopyBytes(z, Up(x), x.byte_size(), stream()));
  ExpectSame(z, same, "identity");
}

// Host-side validation: runs without a GPU too (nothing is launched).
TEST(CopyShapes, BadArgumentsAreInvalidArgument) {
  EXPECT_EQ(Transpose(nullptr, {3, 5}, {0, 0}, 4, nullptr, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Transpose(nullptr, {3, 5}, {}, 4, nullptr, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BroadcastTo(nullptr, {3, 2}, {3, 5}, 4, nullptr, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Slice(nullptr, {3, 5}, {2, 0}, {2, 5}, 4, nullptr, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Split(nullptr, {3, 5}, 1, {nullptr, nullptr}, {2, 2}, 4, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StridedCopy({3}, 3, nullptr, {1}, nullptr, {1}, nullptr).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace testing
}  // namespace cuda
}  // namespace oneflow_like
