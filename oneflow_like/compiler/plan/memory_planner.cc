#include "oneflow_like/compiler/plan/memory_planner.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace oneflow_like {
namespace compiler {
namespace {

// A placed buffer's bytes [offset, end).
struct Span {
  int64_t offset;
  int64_t end;
  bool operator<(const Span& other) const { return offset < other.offset; }
};

// Placed lifetimes over the compressed time axis [0, num_points), each carrying the Span of
// bytes its buffer occupies (final once placed). Each interval is stored in
// `full` of its O(log n) canonical nodes (nodes whose range it covers) and in `partial` of their
// strict ancestors. A query visits the nodes intersecting the query range: at a node only
// partially covered by the query, every `full` entry covers the node and so meets the query; at
// a node fully inside the query, `full` and `partial` entries all have points inside it. Hence
// every reported entry truly intersects (no false positives) and every intersecting entry is
// reported at least once (once at the node holding the shared point on its root path). An entry
// may be reported up to O(log n) times; repeats are harmless to the gap search.
class LifetimeIndex {
 public:
  explicit LifetimeIndex(int64_t num_points)
      : num_points_(std::max<int64_t>(num_points, 1)),
        full_(4 * num_points_),
        partial_(4 * num_points_) {}

  void Insert(int64_t begin, int64_t end, Span span) {
    Insert(1, 0, num_points_ - 1, begin, end, span);
  }

  // Appends the span of every inserted interval that meets [begin, end] (possibly repeated).
  void Query(int64_t begin, int64_t end, std::vector<Span>* out) const {
    Query(1, 0, num_points_ - 1, begin, end, out);
  }

 private:
  void Insert(int64_t node, int64_t low, int64_t high, int64_t begin, int64_t end, Span span) {
    if (begin <= low && high <= end) {
      full_[node].push_back(span);
      return;
    }
    partial_[node].push_back(span);
    const int64_t middle = low + (high - low) / 2;
    if (begin <= middle) Insert(2 * node, low, middle, begin, end, span);
    if (end > middle) Insert(2 * node + 1, middle + 1, high, begin, end, span);
  }

  void Query(int64_t node, int64_t low, int64_t high, int64_t begin, int64_t end,
             std::vector<Span>* out) const {
    out->insert(out->end(), full_[node].begin(), full_[node].end());
    if (begin <= low && high <= end) {
      out->insert(out->end(), partial_[node].begin(), partial_[node].end());
      return;
    }
    const int64_t middle = low + (high - low) / 2;
    if (begin <= middle) Query(2 * node, low, middle, begin, end, out);
    if (end > middle) Query(2 * node + 1, middle + 1, high, begin, end, out);
  }

  int64_t num_points_;
  std::vector<std::vector<Span>> full_;
  std::vector<std::vector<Span>> partial_;
};

absl::Status Validate(const std::vector<BufferRequest>& requests, int64_t alignment) {
  if (alignment < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("AssignOffsets: alignment must be >= 1, got ", alignment));
  }
  if (requests.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError("AssignOffsets: more than 2^31 - 1 buffers");
  }
  int64_t naive = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const BufferRequest& request = requests[i];
    if (request.bytes < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "AssignOffsets: buffer ", i, " has negative size ", request.bytes, " bytes"));
    }
    if (request.last_use < request.first_use) {
      return absl::InvalidArgumentError(absl::StrCat(
          "AssignOffsets: buffer ", i, " has an empty lifetime [", request.first_use, ", ",
          request.last_use, "] (last_use < first_use); hint: lifetimes are inclusive"));
    }
    const int64_t max = std::numeric_limits<int64_t>::max();
    if (request.bytes > max - (alignment - 1) ||
        (request.bytes + alignment - 1) / alignment * alignment > max - naive) {
      return absl::InvalidArgumentError(
          absl::StrCat("AssignOffsets: the aligned sizes overflow int64 at buffer ", i, " (",
                       request.bytes, " bytes)"));
    }
    naive += (request.bytes + alignment - 1) / alignment * alignment;
  }
  return absl::OkStatus();
}

int64_t AlignUp(int64_t bytes, int64_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

}  // namespace

absl::StatusOr<MemoryAssignment> AssignOffsets(const std::vector<BufferRequest>& requests,
                                               int64_t alignment) {
  if (absl::Status status = Validate(requests, alignment); !status.ok()) return status;
  const int32_t n = static_cast<int32_t>(requests.size());
  MemoryAssignment result;
  result.offsets.assign(n, 0);
  std::vector<int64_t> sizes(n);
  for (int32_t i = 0; i < n; ++i) {
    sizes[i] = AlignUp(requests[i].bytes, alignment);
    result.naive_bytes += sizes[i];
  }

  // Compress time: every endpoint becomes a point, which preserves interval intersection.
  std::vector<int64_t> points;
  points.reserve(2 * n);
  for (const BufferRequest& request : requests) {
    points.push_back(request.first_use);
    points.push_back(request.last_use);
  }
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  auto point_of = [&points](int64_t time) {
    return std::lower_bound(points.begin(), points.end(), time) - points.begin();
  };

  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    if (sizes[a] != sizes[b]) return sizes[a] > sizes[b];
    if (requests[a].first_use != requests[b].first_use) {
      return requests[a].first_use < requests[b].first_use;
    }
    return a < b;
  });

  LifetimeIndex index(static_cast<int64_t>(points.size()));
  std::vector<Span> occupied;  // bytes of placed buffers alive together with the current one
  for (int32_t item : order) {
    if (sizes[item] == 0) continue;  // occupies nothing; offset stays 0
    const int64_t begin = point_of(requests[item].first_use);
    const int64_t end = point_of(requests[item].last_use);
    occupied.clear();
    index.Query(begin, end, &occupied);
    std::sort(occupied.begin(), occupied.end());
    // Lowest gap: all offsets and sizes are multiples of `alignment`, so `candidate` is too.
    int64_t candidate = 0;
    for (const Span& span : occupied) {
      if (span.offset >= candidate + sizes[item]) break;
      candidate = std::max(candidate, span.end);
    }
    result.offsets[item] = candidate;
    result.block_bytes = std::max(result.block_bytes, candidate + sizes[item]);
    index.Insert(begin, end, Span{candidate, candidate + sizes[item]});
  }
  return result;
}

int64_t PeakLiveBytes(const std::vector<BufferRequest>& requests, int64_t alignment) {
  // (time, 0 = starts, 1 = ends, aligned size): at equal times starts come before ends, since
  // lifetimes are inclusive.
  std::vector<std::tuple<int64_t, int, int64_t>> events;
  events.reserve(2 * requests.size());
  for (const BufferRequest& request : requests) {
    const int64_t size = AlignUp(request.bytes, alignment);
    events.emplace_back(request.first_use, 0, size);
    events.emplace_back(request.last_use, 1, size);
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0;
  int64_t peak = 0;
  for (const auto& [time, kind, size] : events) {
    live += kind == 0 ? size : -size;
    peak = std::max(peak, live);
  }
  return peak;
}

}  // namespace compiler
}  // namespace oneflow_like
