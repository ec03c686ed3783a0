// What every rank of a job must agree on before any data moves, when each rank compiles only its
// own plan (CompileOptions::only_rank): the global decisions. JobAgreementProto (plan.proto) holds
// a digest of the graph after the global passes (ops in program order with types, attributes,
// placements, stages and SBP signatures; tensors with descs, layouts and initializers; variable
// updates; the job config) and of the options that shape the lowering (boxing, buckets, memory
// reuse, alignment, cost model, world size), plus summary fields that name what differs.
//
//   JobAgreementProto mine = MakeJobAgreement(graph, lower_options, world_size);
//   if (std::string d = AgreementDifference(mine, rank0s); !d.empty()) ... refuse, naming d
//
// AgreementDifference is "" when the digests are equal, else the differing summary fields, e.g.
// "ops 1657 vs 1521, variables 292 vs 260, variable elements 3.5e+08 vs 3.1e+08", or, when they all
// agree, "the graphs or options differ in detail (digest fnv1a64:... vs fnv1a64:...)".
// Deterministic; linear in the graph (placements included).
#ifndef ONEFLOW_LIKE_COMPILER_DRIVER_AGREEMENT_H_
#define ONEFLOW_LIKE_COMPILER_DRIVER_AGREEMENT_H_

#include <string>

#include "oneflow_like/compiler/graph.h"
#include "oneflow_like/compiler/lower/lower.h"
#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace compiler {

// REQUIRES: `graph` went through the global passes (inferred, SBP-annotated).
JobAgreementProto MakeJobAgreement(const Graph& graph, const LowerOptions& options, int32_t world_size);

// "" if `mine` and `theirs` have the same digest; else what differs, `mine` first.
std::string AgreementDifference(const JobAgreementProto& mine, const JobAgreementProto& theirs);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_DRIVER_AGREEMENT_H_
