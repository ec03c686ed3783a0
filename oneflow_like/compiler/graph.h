// Graph: the compiler's logical graph IR. Every pass reads and rewrites one Graph.
//
// A Graph holds global (logical) tensors and the ops between them, in dense arrays indexed by
// id (TensorId, OpId: 0, 1, 2, ... in creation order) plus the *program order* of the ops,
// which is always a topological order. Iterating `tensors()`, `ops()` or `op_order()` is
// deterministic; the name maps serve lookups only.
//
//   x[64,128] (input) ----+
//                         +--> op 'y' (matmul) --> y          tensor.producer = op 'y', output 0
//   w[128,256] (variable)-+                                   x.consumers = {('y', input 0)}
//
// Sources (inputs fed by the user and variables) have no producer; every other tensor is
// output `producer_output` of op `producer`. Links are kept symmetric by AddOp/ReplaceInput;
// the verifier (verifier.h) checks them, so passes that edit nodes through mutable_op /
// mutable_tensor must keep them symmetric themselves.
//
// Lifecycle of the fields: a freshly built graph has descs only on sources and placements only
// where the user gave them. The infer pass (infer_pass.h) fills every desc and placement.
// SBP selection fills TensorNode::nd_sbp and OpNode::nd_sbp_signature. Pinned SBPs
// (pinned_*) are user constraints and never change.
//
// A Graph points into the OpRegistry it was built with (OpNode::def): the registry must
// outlive it. Graphs are copyable values. Not thread-safe.
#ifndef ONEFLOW_LIKE_COMPILER_GRAPH_H_
#define ONEFLOW_LIKE_COMPILER_GRAPH_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "oneflow_like/core/attr.h"
#include "oneflow_like/core/ids.h"
#include "oneflow_like/core/op_def.h"
#include "oneflow_like/core/op_registry.h"
#include "oneflow_like/core/proto/job.pb.h"
#include "oneflow_like/core/sbp.h"
#include "oneflow_like/core/shape.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace compiler {

struct TensorIdTag {};
using TensorId = StrongId<TensorIdTag>;  // a logical tensor in a Graph

// One use of a tensor: input `input_index` of op `op`.
struct TensorUse {
  OpId op;
  int input_index = -1;
  friend bool operator==(const TensorUse& a, const TensorUse& b) {
    return a.op == b.op && a.input_index == b.input_index;
  }
};

struct TensorNode {
  TensorId id;
  std::string name;                      // unique among tensors
  std::optional<TensorDesc> desc;        // sources: always; op outputs: set by inference
  OpId producer;                         // invalid for sources
  int producer_output = -1;              // which output of `producer`
  std::vector<TensorUse> consumers;      // every (op, input index) reading it
  std::optional<Placement> placement;    // unset until given or inferred
  std::optional<NdSbp> pinned_nd_sbp;    // user constraint on the tensor's layout
  std::optional<NdSbp> nd_sbp;           // chosen by SBP selection
  bool is_variable = false;              // a parameter or state persisting across steps
  InitializerProto initializer;          // REQUIRES is_variable (zeros unless given)
  bool is_input = false;                 // fed by the user every step
  bool is_output = false;                // fetched by the user every step
  bool frozen = false;                   // a variable without gradient and update

  bool is_source() const { return is_input || is_variable; }
};

struct OpNode {
  OpId id;
  std::string name;                      // unique among ops; appears in every error about it
  std::string type;                      // registered op type
  const OpDef* def = nullptr;            // registry entry of `type`
  AttrMap attrs;                         // validated, defaults filled in
  std::vector<TensorId> inputs;          // in the op's input order
  std::vector<TensorId> outputs;         // in the op's output order
  std::optional<Placement> placement;    // unset until given or inferred
  int stage = 0;                         // pipeline stage, 0-based
  bool recompute = false;                // recompute outputs in backward instead of keeping them
  std::map<int, NdSbp> pinned_input_nd_sbp;   // by input index: user constraints
  std::map<int, NdSbp> pinned_output_nd_sbp;  // by output index: user constraints
  std::optional<NdSbpSignature> nd_sbp_signature;  // chosen by SBP selection
};

// A variable's new value for the next step, computed by an optimizer op (or a boxing of its
// output): after every step the runtime copies `new_value` into the variable's persistent
// buffer (the Plan's variable holder task applies it before emitting the next step's value).
// Added by the optimizer pass; not part of a Job (a Job states the optimizer instead).
struct VariableUpdate {
  TensorId variable;   // a variable source
  TensorId new_value;  // an op output with the variable's dtype and shape
};

// Arguments of Graph::AddSource: a user input or a variable.
struct SourceSpec {
  std::string name;
  TensorDesc desc;
  bool is_variable = false;              // false: an input fed every step
  InitializerProto initializer;          // variables only (default: zeros)
  bool frozen = false;                   // variables only
  std::optional<Placement> placement;    // unset: the placement of the first consumer
  std::optional<NdSbp> pinned_nd_sbp;
};

// Arguments of Graph::AddOp.
struct OpSpec {
  std::string name;                      // required; unique among ops
  std::string type;                      // a registered op type
  std::vector<TensorId> inputs;
  // One name per output. Non-variadic ops: exactly as many as OpDef::outputs; variadic
  // outputs (e.g. split): any number >= 1, checked against inference later.
  std::vector<std::string> output_names;
  AttrMap attrs;                         // validated; missing optional attrs get defaults
  std::optional<Placement> placement;    // unset: the placement of the inputs (inference)
  int stage = 0;
  bool recompute = false;
  std::map<int, NdSbp> pinned_input_nd_sbp;
  std::map<int, NdSbp> pinned_output_nd_sbp;
  OpId insert_before;                    // invalid: append to the program order
};

class Graph {
 public:
  // REQUIRES: `registry` outlives the graph (and all its copies).
  explicit Graph(const OpRegistry* registry) : registry_(registry) {}

  // Builds a graph from a job: tensors in the listed order, then ops in program order (op
  // outputs not listed in `tensors` are created). Errors (InvalidArgument, NotFound for an
  // unknown op type) name the op or tensor: unknown/duplicate names, use before definition,
  // bad arity or attrs, inconsistent flags or config.
  static absl::StatusOr<Graph> FromJobProto(const JobProto& job, const OpRegistry& registry);
  // Canonical form: tensors are the sources in id order, then the outputs of each op in
  // program order; ops in program order; attrs complete (defaults included); variables carry
  // their initializer. Unset descs / placements stay unset. Chosen SBPs are not part of a Job.
  JobProto ToJobProto() const;

  const OpRegistry& registry() const { return *registry_; }
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  const JobConfigProto& config() const { return config_; }
  JobConfigProto* mutable_config() { return &config_; }

  // Adds an input or variable. InvalidArgument on a duplicate or empty name or a bad desc.
  absl::StatusOr<TensorId> AddSource(SourceSpec spec);
  // Adds an op and its output tensors, links producers and consumers. Checks: the type is
  // registered (NotFound with suggestions), names are new, inputs exist, the input/output
  // counts fit the OpDef, attrs validate, pin indices are in range, stage >= 0. Errors name
  // the op ("matmul 'y': ...").
  absl::StatusOr<OpId> AddOp(OpSpec spec);
  // Makes input `index` of `op` read `tensor` instead (e.g. the output of inserted boxing),
  // updating both consumer lists. REQUIRES: `tensor` is defined before `op` in program order.
  absl::Status ReplaceInput(OpId op, int index, TensorId tensor);

  // Records that `new_value` replaces `variable` after each step. InvalidArgument if the ids
  // do not exist, `variable` is not a variable, it already has an update, or `new_value` is a
  // source. (Descs are compared by the verifier once inferred.)
  absl::Status AddVariableUpdate(TensorId variable, TensorId new_value);
  // In the order added.
  const std::vector<VariableUpdate>& variable_updates() const { return variable_updates_; }

  int64_t num_tensors() const { return static_cast<int64_t>(tensors_.size()); }
  int64_t num_ops() const { return static_cast<int64_t>(ops_.size()); }
  bool has_tensor(TensorId id) const { return id.valid() && id.value() < num_tensors(); }
  bool has_op(OpId id) const { return id.valid() && id.value() < num_ops(); }
  // REQUIRES: has_tensor(id) / has_op(id).
  const TensorNode& tensor(TensorId id) const { return tensors_[id.value()]; }
  TensorNode* mutable_tensor(TensorId id) { return &tensors_[id.value()]; }
  const OpNode& op(OpId id) const { return ops_[id.value()]; }
  OpNode* mutable_op(OpId id) { return &ops_[id.value()]; }
  const std::vector<TensorNode>& tensors() const { return tensors_; }  // by id
  const std::vector<OpNode>& ops() const { return ops_; }              // by id
  const std::vector<OpId>& op_order() const { return op_order_; }      // program order

  // Invalid id if there is no such name.
  TensorId FindTensor(absl::string_view name) const;
  OpId FindOp(absl::string_view name) const;
  // `base` if unused, else base_1, base_2, ... (for passes that create nodes).
  std::string UniqueTensorName(absl::string_view base) const;
  std::string UniqueOpName(absl::string_view base) const;

  // "tensor 'x'" / "matmul 'y'": how errors refer to nodes.
  std::string Describe(TensorId id) const;
  std::string Describe(OpId id) const;

 private:
  absl::Status CheckNewTensorName(const std::string& name, absl::string_view context) const;
  TensorId NewTensor(std::string name);

  const OpRegistry* registry_;
  std::string name_;
  JobConfigProto config_;
  std::vector<TensorNode> tensors_;
  std::vector<OpNode> ops_;
  std::vector<OpId> op_order_;
  std::vector<VariableUpdate> variable_updates_;
  absl::flat_hash_map<std::string, TensorId> tensor_by_name_;
  absl::flat_hash_map<std::string, OpId> op_by_name_;
};

// Checks the job-level config against the graph: loss and optimizer come together, the loss
// names a tensor, counts are non-negative, the learning rate is positive, stage_placements
// are valid placements with the same number of hierarchy axes.
absl::Status ValidateJobConfig(const Graph& graph);

// The pieces of one step: max(1, micro_batches) * max(1, gradient_accumulation_steps). Each
// input is fed once per piece; optimizer ops run once per step.
int64_t PiecesPerStep(const JobConfigProto& config);

// "[S(0), B]": the text-format spelling of an NdSbp (NdSbp::Parse accepts it).
std::string NdSbpText(const NdSbp& nd_sbp);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_GRAPH_H_
