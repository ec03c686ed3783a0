// Strongly typed integer ids. `Rank r{3}` cannot be passed where a `DeviceId` is expected.
// Ids are trivially copyable values, ordered and hashable, so hot-path tables can be arrays
// indexed by `id.value()`.
#ifndef ONEFLOW_LIKE_CORE_IDS_H_
#define ONEFLOW_LIKE_CORE_IDS_H_

#include <cstdint>
#include <functional>
#include <ostream>

namespace oneflow_like {

template <typename Tag, typename Int = int64_t>
class StrongId {
 public:
  using ValueType = Int;
  constexpr StrongId() : value_(-1) {}  // -1 = invalid / unset
  constexpr explicit StrongId(Int v) : value_(v) {}
  constexpr Int value() const { return value_; }
  constexpr bool valid() const { return value_ >= 0; }
  friend constexpr bool operator==(StrongId a, StrongId b) { return a.value_ == b.value_; }
  friend constexpr bool operator!=(StrongId a, StrongId b) { return a.value_ != b.value_; }
  friend constexpr bool operator<(StrongId a, StrongId b) { return a.value_ < b.value_; }
  friend constexpr bool operator<=(StrongId a, StrongId b) { return a.value_ <= b.value_; }
  friend constexpr bool operator>(StrongId a, StrongId b) { return a.value_ > b.value_; }
  friend std::ostream& operator<<(std::ostream& os, StrongId id) { return os << id.value_; }
  template <typename H>
  friend H AbslHashValue(H h, StrongId id) { return H::combine(std::move(h), id.value_); }

 private:
  Int value_;
};

struct RankTag {};
struct DeviceIdTag {};
struct NodeIdTag {};
struct StreamIdTag {};
struct OpIdTag {};
struct TaskIdTag {};
struct RegisterIdTag {};
struct ActorIdTag {};

using Rank = StrongId<RankTag, int32_t>;          // a process in the job (0..world-1)
using DeviceId = StrongId<DeviceIdTag, int32_t>;  // a device index within one rank's process
using NodeId = StrongId<NodeIdTag, int32_t>;      // a machine
using StreamId = StrongId<StreamIdTag, int32_t>;  // a stream (= thread) of one device
using OpId = StrongId<OpIdTag>;                   // a logical op in a job
using TaskId = StrongId<TaskIdTag>;               // a physical task in a plan
using RegisterId = StrongId<RegisterIdTag>;       // a register (buffer group) in a plan
using ActorId = StrongId<ActorIdTag>;             // a runtime actor

}  // namespace oneflow_like

namespace std {
template <typename Tag, typename Int>
struct hash<oneflow_like::StrongId<Tag, Int>> {
  size_t operator()(oneflow_like::StrongId<Tag, Int> id) const { return std::hash<Int>()(id.value()); }
};
}  // namespace std

#endif  // ONEFLOW_LIKE_CORE_IDS_H_
