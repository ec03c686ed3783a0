#include "oneflow_like/compiler/autograd/training_test_util.h"

#include <algorithm>
#include <cmath>

#include "glog/logging.h"
#include "gtest/gtest.h"
#include "oneflow_like/compiler/autograd/autograd_pass.h"
#include "oneflow_like/compiler/autograd/optimizer_pass.h"
#include "oneflow_like/compiler/infer_pass.h"
#include "oneflow_like/compiler/pass.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/core/testing/op_test_util.h"

namespace oneflow_like {
namespace compiler {
namespace testing {

absl::Status RunTrainingPasses(Graph* graph, bool with_optimizer) {
  PassPipelineOptions options;
  options.verify_after_each_pass = true;
  PassPipeline pipeline(options);
  pipeline.Add<InferPass>();
  pipeline.Add<AutogradPass>();
  if (with_optimizer) {
    pipeline.Add<OptimizerPass>();
    pipeline.Add<InferPass>();
  }
  return pipeline.Run(graph).status();
}

TrainingGraphs CompileTraining(const std::string& text, const OpRegistry& registry, bool with_optimizer) {
  Graph forward = ParseAndInfer(text, registry);
  Graph training = ParseOrDie(text, registry);
  const absl::Status status = RunTrainingPasses(&training, with_optimizer);
  CHECK(status.ok()) << status;
  return TrainingGraphs{std::move(forward), std::move(training)};
}

GraphValues RandomFeeds(const Graph& graph, uint64_t seed, int64_t int_high) {
  GraphValues feeds;
  for (const TensorNode& t : graph.tensors()) {
    if (!t.is_source()) continue;
    const TensorDesc& d = *t.desc;
    const uint64_t s = seed * 1000 + static_cast<uint64_t>(t.id.value());
    feeds[t.name] = IsFloatingPoint(d.dtype) ? oneflow_like::testing::RandomTensor(d.dtype, d.shape, s, -1.0, 1.0)
                                             : oneflow_like::testing::RandomTensor(d.dtype, d.shape, s, 0,
                                                                                   static_cast<double>(int_high));
  }
  return feeds;
}

namespace {

double LossOf(const Graph& forward, const GraphValues& feeds) {
  absl::StatusOr<GraphValues> values = EvaluateGraph(forward, feeds);
  CHECK(values.ok()) << values.status();
  return values->at(forward.config().loss()).GetAsDouble(0);
}

}  // namespace

int ExpectGradientsMatchNumerical(const TrainingGraphs& graphs, const GraphValues& feeds,
                                  const NumericalGradOptions& options) {
  absl::StatusOr<GraphValues> values = EvaluateGraph(graphs.training, feeds);
  EXPECT_TRUE(values.ok()) << values.status();
  if (!values.ok()) return 0;
  const double scale = 1.0 / static_cast<double>(PiecesPerStep(graphs.training.config()));
  int compared = 0;
  for (const TensorNode& var : graphs.forward.tensors()) {
    if (!var.is_variable || var.frozen) continue;
    const TensorId grad_id = GradientOf(graphs.training, graphs.training.FindTensor(var.name));
    EXPECT_TRUE(grad_id.valid()) << "no gradient for trainable variable '" << var.name << "'";
    if (!grad_id.valid()) continue;
    const Tensor& analytic = values->at(graphs.training.tensor(grad_id).name);
    EXPECT_EQ(analytic.desc(), *var.desc) << "gradient of '" << var.name << "'";
    const int64_t n = analytic.elem_count();
    const int64_t stride = std::max<int64_t>(1, n / options.max_elements_per_variable);
    for (int64_t e = 0; e < n; e += stride) {
      GraphValues perturbed = feeds;
      Tensor value = feeds.at(var.name).Clone();
      perturbed[var.name] = value;
      const double x = value.GetAsDouble(e);
      value.SetFromDouble(e, x + options.eps);
      const double plus = LossOf(graphs.forward, perturbed);
      value.SetFromDouble(e, x - options.eps);
      const double minus = LossOf(graphs.forward, perturbed);
      const double numeric = scale * (plus - minus) / (2 * options.eps);
      const double got = analytic.GetAsDouble(e);
      EXPECT_NEAR(got, numeric, options.atol + options.rtol * std::abs(numeric))
          << "d loss / d " << var.name << "[" << e << "] (flat index)";
      ++compared;
    }
  }
  return compared;
}

}  // namespace testing
}  // namespace compiler
}  // namespace oneflow_like
