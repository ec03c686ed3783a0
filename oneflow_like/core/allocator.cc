#include "oneflow_like/core/allocator.h"

#include <cstdlib>

namespace oneflow_like {

void* AlignedHostAlloc(size_t bytes) {
  size_t rounded = (bytes + Allocator::kAlignment - 1) / Allocator::kAlignment * Allocator::kAlignment;
  if (rounded == 0) rounded = Allocator::kAlignment;
  return std::aligned_alloc(Allocator::kAlignment, rounded);
}

void AlignedHostFree(void* ptr) { std::free(ptr); }

void* CpuAllocator::Allocate(size_t bytes) {
  void* p = AlignedHostAlloc(bytes);
  if (p == nullptr) return nullptr;
  int64_t now = current_.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed) +
                static_cast<int64_t>(bytes);
  int64_t peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  return p;
}

void CpuAllocator::Deallocate(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  AlignedHostFree(ptr);
  current_.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
}

}  // namespace oneflow_like
