// GraphBuilder: a fluent C++ API to write a logical job, e.g. a linear layer trained by AdamW:
//
//   OpRegistry registry;
//   CHECK_OK(RegisterBuiltinOps(&registry));
//   GraphBuilder b(&registry, "linear");
//   Placement four(DeviceType::kCpu, {Rank(0), Rank(1), Rank(2), Rank(3)});
//   TensorRef x = b.Input("x", {64, 128}, DataType::kFloat32, four, NdSbp{Sbp::Split(0)});
//   TensorRef w = b.Variable("w", {128, 256}, NormalInit(0.02));
//   TensorRef y = b.Op("matmul", {x, w}, {{"transpose_b", false}});
//   TensorRef loss = b.Op("reduce_mean", {y});
//   b.Output(loss);
//   b.Train(loss, AdamWOptimizer(1e-3, 0.01));
//   ASSIGN_OR_RETURN(Graph graph, std::move(b).Build());
//
// Errors are sticky: the first failing call records its status (naming the op or tensor),
// every later call does nothing and returns an invalid TensorRef, and Build() returns that
// status. Ops are not inferred here; run the infer pass (infer_pass.h) on the result.
//
// Default names: an op without OpOptions::name is named after its first output name if given,
// else "<type>", "<type>_1", ...; its outputs are named like the op (one output) or
// "<op>.<output name in the OpDef>" ("ln.mean"), "<op>.<i>" for variadic outputs.
// Not thread-safe.
#ifndef ONEFLOW_LIKE_COMPILER_GRAPH_BUILDER_H_
#define ONEFLOW_LIKE_COMPILER_GRAPH_BUILDER_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "oneflow_like/compiler/graph.h"

namespace oneflow_like {
namespace compiler {

// A handle to a tensor of the graph being built.
struct TensorRef {
  TensorId id;
  bool valid() const { return id.valid(); }
};

struct OpOptions {
  std::string name;                       // "" = derived (see above)
  std::vector<std::string> output_names;  // "" = derived; sets the output count of variadic ops
  int num_outputs = 0;                    // variadic outputs without names; 0 = from the OpDef
  std::optional<Placement> placement;     // unset = the inputs' placement
  int stage = 0;
  bool recompute = false;
  std::map<int, NdSbp> input_nd_sbp;      // pins by input index
  std::map<int, NdSbp> output_nd_sbp;     // pins by output index
};

class GraphBuilder {
 public:
  // REQUIRES: `registry` outlives the builder and the graph.
  explicit GraphBuilder(const OpRegistry* registry, std::string job_name = "");

  TensorRef Input(const std::string& name, Shape shape, DataType dtype = DataType::kFloat32,
                  std::optional<Placement> placement = std::nullopt, std::optional<NdSbp> nd_sbp = std::nullopt);
  TensorRef Variable(const std::string& name, Shape shape, InitializerProto initializer,
                     DataType dtype = DataType::kFloat32, std::optional<Placement> placement = std::nullopt,
                     std::optional<NdSbp> nd_sbp = std::nullopt);
  // Marks a variable as frozen (no gradient, no update).
  void Freeze(TensorRef variable);

  // Adds an op; returns its first output.
  TensorRef Op(const std::string& type, const std::vector<TensorRef>& inputs, AttrMap attrs = {},
               OpOptions options = {});
  // Adds an op; returns all its outputs.
  std::vector<TensorRef> MultiOp(const std::string& type, const std::vector<TensorRef>& inputs,
                                 AttrMap attrs = {}, OpOptions options = {});

  // Marks a tensor as fetched by the user every step.
  void Output(TensorRef tensor);
  // Makes this a training job: minimize the scalar `loss` with `optimizer`.
  void Train(TensorRef loss, OptimizerProto optimizer);
  JobConfigProto* mutable_config() { return graph_.mutable_config(); }

  const absl::Status& status() const { return status_; }
  const Graph& graph() const { return graph_; }
  // The graph, or the first error. Also checks the job config.
  absl::StatusOr<Graph> Build() &&;

 private:
  bool Check(TensorRef t, absl::string_view what);

  Graph graph_;
  absl::Status status_;
};

// Initializers (InitializerProto).
InitializerProto ZerosInit();
InitializerProto OnesInit();
InitializerProto ConstantInit(double value);
InitializerProto UniformInit(double low, double high);
InitializerProto NormalInit(double stddev, double mean = 0.0);
// torch_gpt.py's portable init (PORTABLE_UNIFORM, types.proto): uniform with std `stddev`,
// parameter stream `stream`, generator seed `seed` (used as given).
InitializerProto PortableInit(double stddev, uint64_t stream, uint64_t seed = 0);

// Optimizers (OptimizerProto); unset optional fields take the documented defaults.
OptimizerProto SgdOptimizer(double learning_rate, double momentum = 0.0, double weight_decay = 0.0);
OptimizerProto AdamOptimizer(double learning_rate, double weight_decay = 0.0);
OptimizerProto AdamWOptimizer(double learning_rate, double weight_decay = 0.0);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_GRAPH_BUILDER_H_
