#include "oneflow_like/core/tensor.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace oneflow_like {
namespace {

TEST(TensorTest, OwningTensorIsZeroedAndAligned) {
  Tensor t(DataType::kFloat32, Shape{3, 4});
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.elem_count(), 12);
  EXPECT_EQ(t.byte_size(), 48);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % Allocator::kAlignment, 0u);
  for (float v : t.ToVector<float>()) EXPECT_EQ(v, 0.0f);
  EXPECT_FALSE(Tensor().defined());
  EXPECT_TRUE(Tensor(DataType::kInt32, Shape{0, 5}).defined());  // empty but typed
}

TEST(TensorTest, FromVectorAndTypedAccess) {
  Tensor t = Tensor::FromVector<int64_t>(Shape{2, 2}, {1, -2, 3, 1LL << 40});
  EXPECT_EQ(t.dtype(), DataType::kInt64);
  EXPECT_EQ(t.data<int64_t>()[3], 1LL << 40);
  EXPECT_EQ(t.ToVector<int64_t>(), std::vector<int64_t>({1, -2, 3, 1LL << 40}));
  EXPECT_DEATH(t.data<float>(), "tensor is int64");
}

TEST(TensorTest, CopiesShareAndCloneIsDeep) {
  Tensor a = Tensor::FromVector<float>(Shape{3}, {1, 2, 3});
  Tensor shared = a;
  Tensor deep = a.Clone();
  a.data<float>()[0] = 10;
  EXPECT_EQ(shared.data<float>()[0], 10);  // same buffer
  EXPECT_EQ(deep.data<float>()[0], 1);     // independent buffer
  EXPECT_NE(deep.raw_data(), a.raw_data());
  EXPECT_EQ(deep.desc(), a.desc());
}

TEST(TensorTest, ReshapedSharesTheBuffer) {
  Tensor a = Tensor::FromVector<double>(Shape{2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor r = a.Reshaped(Shape{3, 2});
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(r.raw_data(), a.raw_data());
  r.data<double>()[5] = 50;
  EXPECT_EQ(a.data<double>()[5], 50);
  EXPECT_DEATH(a.Reshaped(Shape{4, 2}), "reshape");
}

TEST(TensorTest, BorrowedTensorWrapsCallerMemory) {
  std::vector<int32_t> storage = {7, 8, 9, 10};
  Tensor b = Tensor::Borrow(TensorDesc{DataType::kInt32, Shape{2, 2}}, storage.data());
  EXPECT_EQ(b.raw_data(), storage.data());
  b.data<int32_t>()[1] = 80;
  EXPECT_EQ(storage[1], 80);
  Tensor c = b.Clone();  // a clone of a borrowed tensor owns its memory
  storage[0] = 70;
  EXPECT_EQ(c.data<int32_t>()[0], 7);
}

TEST(TensorTest, GetAndSetAsDoubleForEveryType) {
  struct Case {
    DataType dtype;
    double in, out;
  };
  for (const Case& c : {Case{DataType::kFloat32, 0.1, static_cast<double>(0.1f)}, Case{DataType::kFloat64, 0.1, 0.1},
                        Case{DataType::kInt32, -7.0, -7.0}, Case{DataType::kInt64, 1e15, 1e15},
                        Case{DataType::kBool, 2.0, 1.0}, Case{DataType::kBool, 0.0, 0.0},
                        Case{DataType::kBFloat16, 1.0 + 1.0 / 256, 1.0},  // tie -> even
                        Case{DataType::kFloat16, -2.5, -2.5}, Case{DataType::kFloat16, 70000.0, INFINITY}}) {
    Tensor t(c.dtype, Shape{2});
    t.SetFromDouble(1, c.in);
    EXPECT_EQ(t.GetAsDouble(1), c.out) << DataTypeName(c.dtype) << " " << c.in;
    EXPECT_EQ(t.GetAsDouble(0), 0.0);
  }
}

TEST(TensorTest, AllocatorAccountingFollowsTensorLifetimes) {
  CpuAllocator alloc;
  EXPECT_EQ(alloc.current_bytes(), 0);
  {
    Tensor a(DataType::kFloat32, Shape{10}, &alloc);  // 40 bytes
    EXPECT_EQ(alloc.current_bytes(), 40);
    {
      Tensor b(DataType::kFloat64, Shape{5}, &alloc);  // 40 bytes
      Tensor b_copy = b;                                // shares: no new allocation
      Tensor b_view = b.Reshaped(Shape{1, 5});
      EXPECT_EQ(alloc.current_bytes(), 80);
      Tensor c = a.Clone(&alloc);
      EXPECT_EQ(alloc.current_bytes(), 120);
      EXPECT_EQ(alloc.peak_bytes(), 120);
    }
    EXPECT_EQ(alloc.current_bytes(), 40);  // b (all three handles) and c released
    EXPECT_EQ(alloc.peak_bytes(), 120);
    alloc.ResetPeak();
    EXPECT_EQ(alloc.peak_bytes(), 40);
    Tensor d(DataType::kInt32, Shape{2}, &alloc);
    EXPECT_EQ(alloc.peak_bytes(), 48);
  }
  EXPECT_EQ(alloc.current_bytes(), 0);
  EXPECT_EQ(alloc.peak_bytes(), 48);
  // A shared handle keeps the buffer alive after the original is gone.
  Tensor survivor;
  {
    Tensor e(DataType::kInt64, Shape{3}, &alloc);
    survivor = e;
  }
  EXPECT_EQ(alloc.current_bytes(), 24);
  survivor = Tensor();
  EXPECT_EQ(alloc.current_bytes(), 0);
  EXPECT_EQ(alloc.name(), "cpu");
}

TEST(AllocatorTest, ZeroByteAllocationsAreUniqueAndAligned) {
  CpuAllocator alloc;
  void* p = alloc.Allocate(0);
  void* q = alloc.Allocate(0);
  ASSERT_NE(p, nullptr);
  ASSERT_NE(q, nullptr);
  EXPECT_NE(p, q);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % Allocator::kAlignment, 0u);
  void* r = alloc.Allocate(3);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(r) % Allocator::kAlignment, 0u);
  EXPECT_EQ(alloc.current_bytes(), 3);
  alloc.Deallocate(p, 0);
  alloc.Deallocate(q, 0);
  alloc.Deallocate(r, 3);
  EXPECT_EQ(alloc.current_bytes(), 0);
}

}  // namespace
}  // namespace oneflow_like
