#include "oneflow_like/models/gpt.h"

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/graph_builder.h"

namespace oneflow_like {
namespace models {
namespace {

using compiler::GraphBuilder;
using compiler::OpOptions;
using compiler::TensorRef;

absl::Status CheckConfig(const GptConfig& c, const ParallelLayout& l) {
  RETURN_IF_ERROR(CheckPositive("gpt", "vocab", c.vocab));
  RETURN_IF_ERROR(CheckPositive("gpt", "seq_len", c.seq_len));
  RETURN_IF_ERROR(CheckPositive("gpt", "n_layer", c.n_layer));
  RETURN_IF_ERROR(CheckPositive("gpt", "n_embd", c.n_embd));
  RETURN_IF_ERROR(CheckPositive("gpt", "n_head", c.n_head));
  RETURN_IF_ERROR(CheckPositive("gpt", "batch", c.batch));
  RETURN_IF_ERROR(CheckLayout("gpt", l, c.n_layer, "n_layer"));
  if (c.n_embd % c.n_head != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpt: n_embd (", c.n_embd, ") must be divisible by n_head (", c.n_head, ")"));
  }
  if (c.gelu_approximate != "none" && c.gelu_approximate != "tanh") {
    return absl::InvalidArgumentError(absl::StrCat("gpt: gelu_approximate must be \"none\" (erf, as torch) or ",
                                                   "\"tanh\", got \"", c.gelu_approximate, "\""));
  }
  return absl::OkStatus();
}

class GptWriter {
 public:
  GptWriter(const OpRegistry& registry, const GptConfig& c, const ParallelLayout& l)
      : b_(&registry, "gpt"), c_(c), l_(l) {
    const std::vector<GptParameterName> names = GptParameterNames(c);
    for (size_t i = 0; i < names.size(); ++i) stream_of_[names[i].job_name] = i;
  }

  // The same ranks' cpu (the placement itself on a CPU layout).
  static Placement Host(const Placement& p) {
    return p.device_type() == DeviceType::kCpu ? p : *Placement::Create(DeviceType::kCpu, p.ranks(), p.hierarchy());
  }

  absl::StatusOr<compiler::Graph> Write(const TrainOptions& train) {
    seed_ = train.seed;
    // Layers split as evenly as the stages allow: the first n_layer % pp stages get one more
    // (24 layers on 16 stages: 2 on stages 0-7, 1 on 8-15; not 2 on 0-11 and none on 12-14).
    const int64_t base = c_.n_layer / l_.pp, extra = c_.n_layer % l_.pp;
    auto stage_of = [&](int64_t layer) {
      return layer < extra * (base + 1) ? layer / (base + 1) : extra + (layer - extra * (base + 1)) / base;
    };
    stage_ = 0;
    StageMesh mesh0(l_, 0);
    // The data is fed on the host: on a cuda layout, COPY tasks take it to the devices.
    TensorRef idx = b_.Input("idx", {c_.batch, c_.seq_len}, DataType::kInt64, Host(mesh0.placement()), mesh0.Data());
    TensorRef wte = Param("wte", {c_.vocab, c_.n_embd}, std::nullopt, WeightInit("wte"));
    TensorRef wpe = Param("wpe", {c_.seq_len, c_.n_embd}, std::nullopt, WeightInit("wpe"));
    TensorRef x = Op("embedding", {wte, idx}, {}, "wte.lookup");
    x = Op("add", {x, wpe}, {}, "embed.add");
    for (int64_t layer = 0; layer < c_.n_layer; ++layer) {
      stage_ = std::min<int64_t>(stage_of(layer), l_.pp - 1);
      recompute_ = train.recompute;  // only the blocks' ops are recomputed
      x = Block(absl::StrCat("h", layer), x);
      recompute_ = false;
    }
    stage_ = l_.pp - 1;
    StageMesh last(l_, stage_);
    TensorRef targets =
        b_.Input("targets", {c_.batch, c_.seq_len}, DataType::kInt64, Host(last.placement()), last.Data());
    TensorRef h = LayerNorm("ln_f", x);
    TensorRef head = Param("lm_head.weight", {c_.vocab, c_.n_embd}, std::nullopt, WeightInit("lm_head.weight"));
    TensorRef logits = Op("matmul", {h, head}, {{"transpose_b", true}}, "lm_head");
    TensorRef loss = Op("sparse_softmax_cross_entropy", {logits, targets}, {}, "loss");
    b_.Output(loss);
    OptimizerProto opt = train.optimizer;
    if (opt.learning_rate() <= 0) opt = compiler::AdamWOptimizer(3e-4, 0.01);
    b_.Train(loss, opt);
    JobConfigProto* config = b_.mutable_config();
    config->set_micro_batches(train.micro_batches);
    config->set_gradient_accumulation_steps(train.gradient_accumulation_steps);
    config->set_zero_stage(train.zero_stage);
    config->set_seed(train.seed);
    RETURN_IF_ERROR(error_);
    return std::move(b_).Build();
  }

 private:
  StageMesh Mesh() const { return StageMesh(l_, stage_); }

  // A Linear/Embedding weight: torch_gpt.py's portable init with the parameter's stream
  // number, or N(0, 0.02).
  InitializerProto WeightInit(const std::string& name) {
    if (c_.init == GptInit::kNormal) return compiler::NormalInit(0.02);
    auto it = stream_of_.find(name);
    if (it == stream_of_.end()) {
      error_ = absl::InternalError(absl::StrCat("gpt: parameter '", name, "' is missing from GptParameterNames"));
      return InitializerProto();
    }
    return compiler::PortableInit(0.02, it->second, seed_);
  }

  // A stage-local parameter; weights by WeightInit, biases 0, LayerNorm 1 / 0 (as torch_gpt.py).
  TensorRef Param(const std::string& name, Shape shape, std::optional<NdSbp> sbp, InitializerProto init) {
    // Data parallel without tensor parallel: every parameter is replicated (B), as DDP does. Left
    // free, the SBP solver splits the MLP blocks Megatron-style inside a "dp" layout; on 2
    // processes over loopback TCP that measured ~8% slower than pure data parallel (W2).
    if (!sbp && l_.tp == 1 && l_.dp > 1) sbp = NdSbp({Sbp::Broadcast()});
    return b_.Variable(name, std::move(shape), init, DataType::kFloat32, Mesh().placement(), std::move(sbp));
  }

  TensorRef Op(const std::string& type, const std::vector<TensorRef>& inputs, AttrMap attrs, const std::string& name) {
    OpOptions o;
    o.name = name;
    o.stage = static_cast<int>(stage_);
    o.recompute = recompute_;
    o.placement = Mesh().placement();
    return b_.Op(type, inputs, std::move(attrs), std::move(o));
  }

  TensorRef LayerNorm(const std::string& name, TensorRef x) {
    TensorRef g = Param(name + ".weight", {c_.n_embd}, std::nullopt, compiler::OnesInit());
    TensorRef beta = Param(name + ".bias", {c_.n_embd}, std::nullopt, compiler::ZerosInit());
    OpOptions o;
    o.name = name;
    o.stage = static_cast<int>(stage_);
    o.recompute = recompute_;
    o.placement = Mesh().placement();
    return b_.MultiOp("layer_norm", {x, g, beta}, {{"epsilon", 1e-5}}, std::move(o))[0];
  }

  // y = x @ W^T + b for a torch-layout weight W[out, in]; `column` splits out, else in.
  TensorRef Linear(const std::string& name, TensorRef x, int64_t in, int64_t out, bool column) {
    StageMesh mesh = Mesh();
    TensorRef w = Param(name + ".weight", {out, in}, mesh.Model(column ? 0 : 1), WeightInit(name + ".weight"));
    TensorRef y = Op("matmul", {x, w}, {{"transpose_b", true}}, name);
    TensorRef bias = Param(name + ".bias", {out}, column ? mesh.Model(0) : std::nullopt, compiler::ZerosInit());
    return Op("bias_add", {y, bias}, {}, name + ".bias_add");
  }

  // [B,T,C] -> [B,H,T,hd]
  TensorRef Heads(const std::string& name, TensorRef t) {
    const int64_t hd = c_.n_embd / c_.n_head;
    t = Op("reshape", {t}, {{"shape", std::vector<int64_t>{c_.batch, c_.seq_len, c_.n_head, hd}}}, name + ".view");
    return Op("transpose", {t}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}, name + ".heads");
  }

  TensorRef Block(const std::string& p, TensorRef x) {
    const int64_t C = c_.n_embd, hd = C / c_.n_head;
    TensorRef h = LayerNorm(p + ".ln1", x);
    TensorRef qkv = Linear(p + ".qkv", h, C, 3 * C, /*column=*/true);
    OpOptions o;
    o.name = p + ".split";
    o.stage = static_cast<int>(stage_);
    o.placement = Mesh().placement();
    o.output_names = {p + ".q", p + ".k", p + ".v"};
    std::vector<TensorRef> parts =
        b_.MultiOp("split", {qkv}, {{"axis", int64_t{2}}, {"sizes", std::vector<int64_t>{C, C, C}}}, std::move(o));
    if (parts.size() != 3) return {};
    TensorRef q = Heads(p + ".q", parts[0]), k = Heads(p + ".k", parts[1]), v = Heads(p + ".v", parts[2]);
    TensorRef att = Op("matmul", {q, k}, {{"transpose_b", true}, {"alpha", 1.0 / std::sqrt(double(hd))}}, p + ".scores");
    att = Op("softmax", {att}, {{"causal", true}}, p + ".softmax");
    TensorRef y = Op("matmul", {att, v}, {}, p + ".context");
    y = Op("transpose", {y}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}, p + ".merge");
    y = Op("reshape", {y}, {{"shape", std::vector<int64_t>{c_.batch, c_.seq_len, C}}}, p + ".merge.view");
    y = Linear(p + ".proj", y, C, C, /*column=*/false);
    x = Op("add", {x, y}, {}, p + ".residual1");
    h = LayerNorm(p + ".ln2", x);
    h = Linear(p + ".fc", h, C, 4 * C, /*column=*/true);
    h = Op("gelu", {h}, {{"approximate", c_.gelu_approximate}}, p + ".gelu");
    h = Linear(p + ".fc2", h, 4 * C, C, /*column=*/false);
    return Op("add", {x, h}, {}, p + ".residual2");
  }

  GraphBuilder b_;
  GptConfig c_;
  ParallelLayout l_;
  int64_t stage_ = 0;
  uint64_t seed_ = 0;
  bool recompute_ = false;  // inside a block of a job with TrainOptions::recompute
  std::map<std::string, uint64_t> stream_of_;  // job name -> portable stream number
  absl::Status error_;                         // first internal error while writing
};

}  // namespace

absl::StatusOr<compiler::Graph> BuildGptJob(const OpRegistry& registry, const GptConfig& config,
                                            const ParallelLayout& layout, const TrainOptions& train) {
  RETURN_IF_ERROR(CheckConfig(config, layout));
  return GptWriter(registry, config, layout).Write(train);
}

std::vector<GptParameterName> GptParameterNames(const GptConfig& c) {
  std::vector<GptParameterName> names = {{"wte.weight", "wte"}, {"wpe.weight", "wpe"}};
  for (int64_t layer = 0; layer < c.n_layer; ++layer) {
    for (const char* module : {"ln1", "qkv", "proj", "ln2", "fc", "fc2"}) {
      for (const char* field : {"weight", "bias"}) {
        names.push_back({absl::StrCat("blocks.", layer, ".", module, ".", field),
                         absl::StrCat("h", layer, ".", module, ".", field)});
      }
    }
  }
  names.push_back({"ln_f.weight", "ln_f.weight"});
  names.push_back({"ln_f.bias", "ln_f.bias"});
  names.push_back({"lm_head.weight", "lm_head.weight"});
  return names;
}

int64_t GptParameterCount(const GptConfig& c) {
  const int64_t C = c.n_embd;
  const int64_t block = 2 * C /*ln1*/ + 3 * C * C + 3 * C /*qkv*/ + C * C + C /*proj*/ + 2 * C /*ln2*/ +
                        4 * C * C + 4 * C /*fc*/ + 4 * C * C + C /*fc2*/;
  return c.vocab * C + c.seq_len * C + c.n_layer * block + 2 * C + c.vocab * C;
}

}  // namespace models
}  // namespace oneflow_like
