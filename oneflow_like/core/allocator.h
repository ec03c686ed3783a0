// Allocator: the memory interface of a device. Implementations report the bytes currently
// allocated and the peak since construction (or the last ResetPeak), which the runtime and
// tests compare with the compiler's planned memory.
//
// Thread-safety: all methods of CpuAllocator are thread-safe.
#ifndef ONEFLOW_LIKE_CORE_ALLOCATOR_H_
#define ONEFLOW_LIKE_CORE_ALLOCATOR_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace oneflow_like {

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns memory aligned to at least kAlignment bytes, or nullptr on failure.
  // Allocate(0) returns a valid unique pointer.
  virtual void* Allocate(size_t bytes) = 0;
  // REQUIRES: `ptr` came from Allocate on this allocator with the same `bytes`.
  virtual void Deallocate(void* ptr, size_t bytes) = 0;
  virtual int64_t current_bytes() const = 0;
  virtual int64_t peak_bytes() const = 0;
  virtual void ResetPeak() = 0;
  virtual std::string name() const = 0;

  static constexpr size_t kAlignment = 64;  // a cache line; enough for AVX-512 loads
};

// Host memory, 64-byte aligned, with current/peak accounting.
class CpuAllocator final : public Allocator {
 public:
  void* Allocate(size_t bytes) override;
  void Deallocate(void* ptr, size_t bytes) override;
  int64_t current_bytes() const override { return current_.load(std::memory_order_relaxed); }
  int64_t peak_bytes() const override { return peak_.load(std::memory_order_relaxed); }
  void ResetPeak() override { peak_.store(current_bytes(), std::memory_order_relaxed); }
  std::string name() const override { return "cpu"; }

 private:
  std::atomic<int64_t> current_{0};
  std::atomic<int64_t> peak_{0};
};

// Aligned host allocation without accounting (used by tensors created without an allocator).
void* AlignedHostAlloc(size_t bytes);
void AlignedHostFree(void* ptr);

}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_ALLOCATOR_H_
