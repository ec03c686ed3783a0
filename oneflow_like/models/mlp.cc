#include "oneflow_like/models/mlp.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/graph_builder.h"
#include "oneflow_like/core/random.h"

namespace oneflow_like {
namespace models {
namespace {

using compiler::GraphBuilder;
using compiler::OpOptions;
using compiler::TensorRef;

}  // namespace

std::vector<std::string> MlpParameterNames(const MlpConfig& config) {
  std::vector<std::string> names;
  for (int64_t i = 0; i < config.depth; ++i) {
    names.push_back(absl::StrCat("fc", i, ".weight"));
    names.push_back(absl::StrCat("fc", i, ".bias"));
  }
  return names;
}

int64_t MlpParameterCount(const MlpConfig& c) { return c.depth * (c.width * c.width + c.width); }

absl::StatusOr<compiler::Graph> BuildMlpJob(const OpRegistry& registry, const MlpConfig& c,
                                            const ParallelLayout& l, const TrainOptions& train) {
  RETURN_IF_ERROR(CheckPositive("mlp", "width", c.width));
  RETURN_IF_ERROR(CheckPositive("mlp", "depth", c.depth));
  RETURN_IF_ERROR(CheckPositive("mlp", "batch", c.batch));
  RETURN_IF_ERROR(CheckLayout("mlp", l, c.depth, "depth"));
  GraphBuilder b(&registry, "mlp");
  const int64_t per_stage = (c.depth + l.pp - 1) / l.pp;
  const double init_std = 1.0 / std::sqrt(3.0 * static_cast<double>(c.width));  // bound 1/sqrt(in)
  StageMesh first(l, 0);
  TensorRef h = b.Input("x", {c.batch, c.width}, DataType::kFloat32, first.placement(), first.Data());
  uint64_t stream = 0;
  for (int64_t i = 0; i < c.depth; ++i) {
    const int64_t stage = std::min<int64_t>(i / per_stage, l.pp - 1);
    StageMesh mesh(l, stage);
    const bool column = i % 2 == 0 && i + 1 < c.depth;  // Megatron pair: column then row
    const bool row = i % 2 == 1;
    const std::string name = absl::StrCat("fc", i);
    std::optional<NdSbp> w_sbp = column ? mesh.Model(0) : row ? mesh.Model(1) : std::nullopt;
    TensorRef w = b.Variable(name + ".weight", {c.width, c.width}, compiler::PortableInit(init_std, stream++, train.seed),
                             DataType::kFloat32, mesh.placement(), w_sbp);
    TensorRef bias = b.Variable(name + ".bias", {c.width}, compiler::PortableInit(init_std, stream++, train.seed),
                                DataType::kFloat32, mesh.placement(), column ? mesh.Model(0) : std::nullopt);
    OpOptions o;
    o.stage = static_cast<int>(stage);
    o.placement = mesh.placement();
    o.name = name;
    h = b.Op("matmul", {h, w}, {{"transpose_b", true}}, o);
    o.name = name + ".bias_add";
    h = b.Op("bias_add", {h, bias}, {}, o);
    if (i + 1 < c.depth) {
      o.name = name + ".relu";
      h = b.Op("relu", {h}, {}, o);
    }
  }
  StageMesh last(l, l.pp - 1);
  TensorRef target = b.Input("target", {c.batch, c.width}, DataType::kFloat32, last.placement(), last.Data());
  OpOptions o;
  o.stage = static_cast<int>(l.pp - 1);
  o.placement = last.placement();
  o.name = "mse.diff";
  TensorRef diff = b.Op("sub", {h, target}, {}, o);
  o.name = "mse.square";
  TensorRef square = b.Op("mul", {diff, diff}, {}, o);
  o.name = "loss";
  TensorRef loss = b.Op("reduce_mean", {square}, {}, o);
  b.Output(loss);
  OptimizerProto opt = train.optimizer;
  if (opt.learning_rate() <= 0) opt = compiler::SgdOptimizer(0.01);
  b.Train(loss, opt);
  JobConfigProto* config = b.mutable_config();
  config->set_micro_batches(train.micro_batches);
  config->set_gradient_accumulation_steps(train.gradient_accumulation_steps);
  config->set_zero_stage(train.zero_stage);
  config->set_seed(train.seed);
  return std::move(b).Build();
}

MlpBatch SyntheticMlpBatch(int64_t index, int64_t rows, const MlpConfig& config, uint64_t seed) {
  MlpBatch batch;
  Tensor* out[2] = {&batch.inputs, &batch.targets};
  for (uint64_t stream = 0; stream < 2; ++stream) {
    *out[stream] = Tensor(DataType::kFloat32, Shape{rows, config.width});
    float* data = out[stream]->data<float>();
    const uint64_t base = SplitMix64(seed * 4 + stream) + (static_cast<uint64_t>(index) << 32);
    const int64_t n = rows * config.width;
    for (int64_t i = 0; i < n; ++i) {
      const double u = static_cast<double>(SplitMix64(base + static_cast<uint64_t>(i)) >> 40) / 16777216.0;
      data[i] = static_cast<float>(2.0 * u - 1.0);
    }
  }
  return batch;
}

}  // namespace models
}  // namespace oneflow_like
