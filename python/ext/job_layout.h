// What Python reads of the OTHER ranks of a job whose process holds only its own rank's plan
// (a per-rank compile, compiler/driver/compile.h only_rank): which ranks have work and where
// every job-level tensor (input, output, variable) lives on each of them. Built from the graph
// after the global passes, so it is the same on every process and costs nothing per rank: the
// table has one entry per bound tensor (placement + chosen SBP); a rank's binding is derived on
// request, exactly as the lowering derives it (its slot and initializer excepted: those belong
// to the rank that runs it).
//
//   ASSIGN_OR_RETURN(compiler::GlobalDecisions d, compiler::RunGlobalPasses(std::move(graph), options));
//   JobLayout layout = JobLayout::FromGraph(d.graph);
//   std::optional<TensorBindingProto> b = layout.Binding("loss", /*rank=*/3);   // kind + shard
//
// job_layout_test.cc checks every rank's derived binding and the ranks against the whole plan.
// Immutable after construction (thread-safe to read).
#ifndef ONEFLOW_LIKE_PYTHON_EXT_JOB_LAYOUT_H_
#define ONEFLOW_LIKE_PYTHON_EXT_JOB_LAYOUT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "oneflow_like/compiler/graph.h"
#include "oneflow_like/core/proto/plan.pb.h"
#include "oneflow_like/core/sbp.h"
#include "oneflow_like/core/shape.h"

namespace oneflow_like {
namespace python {

class JobLayout {
 public:
  // REQUIRES: `graph` went through the global passes (inferred, SBP-annotated).
  static JobLayout FromGraph(const compiler::Graph& graph);

  // Every rank some op or bound tensor is placed on, ascending (the whole plan's `ranks`).
  const std::vector<int32_t>& ranks() const { return ranks_; }
  // The binding of tensor `name` on `rank` (tensor_name, kind, shard), as in the whole plan's
  // rank plan of `rank`; nullopt when `rank` holds none. An output that is also a source is an
  // OUTPUT (as the whole plan's last binding of the name).
  std::optional<TensorBindingProto> Binding(const std::string& name, int32_t rank) const;

 private:
  struct Entry {
    TensorBindingProto::Kind kind;
    Shape logical;
    NdSbp nd_sbp;
    Placement placement;
  };
  std::vector<int32_t> ranks_;
  std::map<std::string, Entry> entries_;
};

}  // namespace python
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_PYTHON_EXT_JOB_LAYOUT_H_
