#include "oneflow_like/compiler/lower/stream_lifetimes.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "oneflow_like/compiler/lower/registers.h"

namespace oneflow_like {
namespace compiler {
namespace lower_internal {
namespace {

bool SameDevice(const TaskProto& a, const TaskProto& b) {
  return a.rank() == b.rank() && a.device().index() == b.device().index() && a.device().type() == b.device().type();
}

// An edge within one piece: a register emitted and read once per piece, read in the piece it is
// written (not an update, which its holder reads a step later; not a holder's register).
bool SamePieceEdge(const RegisterInfo& reg) { return !reg.step_rate && !reg.held_across_steps && !reg.persistent; }

}  // namespace

StreamLifetimes ComputeStreamLifetimes(const PlanBuilder& builder, const std::vector<int64_t>& position) {
  const size_t n = builder.tasks().size();
  constexpr int64_t kNone = StreamLifetimes::kNone;
  StreamLifetimes result;
  result.acquire.assign(n, kNone);
  result.release.assign(n, kNone);
  // In the model: a task of stream 0 or 4 that runs once per piece: it reads no step-rate
  // register (a REPEAT, an optimizer) and writes none, except an ACCUMULATE, which reads every
  // piece and writes once per step (no edge leaves it within a piece).
  std::vector<bool> in_model(n, false);
  for (size_t i = 0; i < n; ++i) {
    const TaskProto& t = builder.tasks()[i].proto;
    in_model[i] = (t.stream_id() == kComputeStream || t.stream_id() == kSideComputeStream) &&
                  t.type() != TaskProto::REPEAT;
  }
  // Data edges producer -> consumer of piece-rate registers between tasks of the model on one
  // device, by producer. An edge against the task order is left out (fewer edges prove less).
  std::vector<std::vector<int64_t>> successors(n);
  for (const RegisterInfo& reg : builder.registers()) {
    const int64_t producer = builder.TaskIndex(reg.proto.producer().task_id());
    if (reg.step_rate) {
      if (builder.tasks()[producer].proto.type() != TaskProto::ACCUMULATE) in_model[producer] = false;
      for (int64_t c : reg.consumer_tasks) {
        const int64_t ci = builder.TaskIndex(c);
        if (ci >= 0) in_model[ci] = false;
      }
    }
  }
  for (const RegisterInfo& reg : builder.registers()) {
    if (!SamePieceEdge(reg)) continue;
    const int64_t producer = builder.TaskIndex(reg.proto.producer().task_id());
    if (!in_model[producer]) continue;
    for (int64_t c : reg.consumer_tasks) {
      const int64_t ci = builder.TaskIndex(c);
      if (ci <= producer || !in_model[ci]) continue;
      if (!SameDevice(builder.tasks()[producer].proto, builder.tasks()[ci].proto)) continue;
      successors[producer].push_back(ci);
    }
  }
  // Vector clocks (latest stream-0 and stream-4 position happening before or at each task),
  // in task order, which is topological for both kinds of edges.
  std::vector<int64_t> clock0(n, kNone), clock4(n, kNone);
  using StreamOf = std::tuple<int32_t, std::string, int32_t, int32_t>;  // rank, device, stream
  std::map<StreamOf, int64_t> last_on_stream;
  // Per (rank, device): its stream-0 tasks of the model as (clock4, position), in order.
  using DeviceOf = std::tuple<int32_t, std::string, int32_t>;
  std::map<DeviceOf, std::vector<std::pair<int64_t, int64_t>>> stream0;
  for (size_t i = 0; i < n; ++i) {
    if (!in_model[i]) continue;
    const TaskProto& t = builder.tasks()[i].proto;
    auto [it, fresh] = last_on_stream.try_emplace(StreamOf{t.rank(), t.device().type(), t.device().index(), t.stream_id()},
                                                  static_cast<int64_t>(i));
    if (!fresh) {
      clock0[i] = std::max(clock0[i], clock0[it->second]);
      clock4[i] = std::max(clock4[i], clock4[it->second]);
      it->second = static_cast<int64_t>(i);
    }
    if (t.stream_id() == kComputeStream) {
      clock0[i] = position[i];
      result.acquire[i] = result.release[i] = position[i];
      stream0[DeviceOf{t.rank(), t.device().type(), t.device().index()}].push_back({clock4[i], position[i]});
    } else {
      clock4[i] = position[i];
      result.acquire[i] = clock0[i];  // kNone when no stream-0 task comes before it
    }
    for (int64_t s : successors[i]) {
      clock0[s] = std::max(clock0[s], clock0[i]);
      clock4[s] = std::max(clock4[s], clock4[i]);
    }
  }
  // release of a stream-4 task: the first stream-0 task whose clock has reached it (clocks
  // grow along a stream).
  for (size_t i = 0; i < n; ++i) {
    const TaskProto& t = builder.tasks()[i].proto;
    if (!in_model[i] || t.stream_id() != kSideComputeStream) continue;
    auto found = stream0.find(DeviceOf{t.rank(), t.device().type(), t.device().index()});
    if (found == stream0.end()) continue;
    const auto& order = found->second;
    auto first = std::lower_bound(order.begin(), order.end(), std::make_pair(position[i], int64_t{-1}));
    if (first != order.end()) result.release[i] = first->second;
  }
  return result;
}

}  // namespace lower_internal
}  // namespace compiler
}  // namespace oneflow_like
