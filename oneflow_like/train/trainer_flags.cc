#include "oneflow_like/train/trainer_flags.h"

#include <functional>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace train {
namespace {

absl::Status Bad(const std::string& flag, const std::string& what, const std::string& value) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": expected ", what, ", got '", value, "' (see --help)"));
}

absl::StatusOr<int64_t> Int(const std::string& flag, const std::string& value, int64_t min) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(value, &v)) return Bad(flag, "an integer", value);
  if (v < min) return Bad(flag, absl::StrCat("an integer >= ", min), value);
  return v;
}

absl::StatusOr<bool> Bool(const std::string& flag, const std::string& value) {
  if (value == "true" || value == "1" || value.empty()) return true;
  if (value == "false" || value == "0") return false;
  return Bad(flag, "true or false", value);
}

}  // namespace

std::string TrainerUsage() {
  return R"(oltrain: trains a model job end to end on oneflow_like (compile -> plan -> actors).
All ranks of the plan run inside THIS process as threads (one Runtime per rank, loopback
transport); a layout with N ranks needs no launcher, but shares this machine's cores.
Under tools/olrun (WORLD_SIZE set) this process runs one rank; ranks of the same node exchange
data through shared memory and the others over TCP (OL_TRANSPORT=shm, the default;
OL_TRANSPORT=tcp: TCP for every pair; OL_TRANSPORT=ibverbs: RDMA; OL_SHM_RING_MB=16: the ring of
each same-node edge). See docs/distributed.md for the environment variables.

Usage: oltrain [--flag=value | --flag value]...

Workload (defaults: W1 of tools/bench/peers/README.md):
  --model=mlp|gpt        mlp = W1 (Linear+ReLU stack, MSE, SGD), gpt = W2 gpt-tiny (AdamW)
  --batch=N              samples per STEP (mlp rows / gpt sequences); default 256 / 8
  --steps=N              steps to run (10)
  --warmup=N             first steps left out of the median step time (1)
  --lr=X                 learning rate; default SGD 0.01 (mlp), AdamW 3e-4 wd 0.01 (gpt)
  --seed=N               initialization and data seed (0; peers/torch_gpt.py's `seed`)
  --width=N --depth=N    mlp: Linear width (1024) and number of layers (4)
  --data_batches=N       mlp: distinct synthetic batches cycled (1 = fixed, as bench_mlp.py)
  --vocab=N --seq_len=N --n_layer=N --n_embd=N --n_head=N   gpt dims (2048, 128, 4, 256, 4)
  --init=portable|normal gpt init: portable = torch_gpt.py --init portable, bit-exact (default)
  --gelu=none|tanh       gpt gelu: none = exact erf, as torch (default)
Parallel layout (world = dp x tp x pp ranks):
  --dp=N --tp=N --pp=N   data / tensor (Megatron) / pipeline degrees (1 1 1)
  --device=cpu|cuda      every placement's device (cpu); cuda jobs compile and olplan prices
                         them (--profile tools/plan/profiles/h100.txt), running needs issue 14
  --micro_batches=N      pipeline micro-batches per step (batch is split into them)
  --grad_accum=N         gradient accumulation pieces per step
  --zero_stage=0|1|2     1: shard optimizer state over dp (ZeRO-1); 2: also store the
                         parameters sharded, all-gathered at their first forward use
                         (FSDP's SHARD_GRAD_OP; docs/distributed.md, "Sharded parameters")
  --reuse_memory[=bool]  share register bytes by lifetime (on; --reuse_memory=false: naive)
  --compute_streams=1|2  2: the weight/bias gradients run on a second compute stream beside the
                         rest of backward (two GEMMs of a layer at once; their registers are
                         live the whole step, so planned memory grows) (1)
  --boxing=p2p|collective|auto  boxing as transfers + local adds (p2p, default), as gloo
                         collective calls, or per transition the cheaper by the cost model.
                         Under olrun gloo runs over OL_GLOO_TRANSPORT=ol (default: our TCP,
                         every connection token-checked) or =gloo_tcp (gloo's own, whose ports
                         take their first connection unchecked while a group connects)
  --bucket_mb=X          collective boxing: data-parallel gradients synchronized in buckets of
                         >= X MiB, in the order backward produces them (4; 0 = one call each)
  --inplace_updates[=bool]  optimizers write variables in place, no per-step copy (on)
  --stream_ordered[=bool]  --device=cuda: kernels pass registers on when enqueued, not when
                         finished (within a stream; across the GPU's streams with CUDA
                         events), so the host runs ahead of the GPU (on)
  --order_collectives[=bool]  collective boxing: issue every rank's collectives in the plan's
                         agreed order, as NCCL needs (it always gets it); on gloo, to rehearse
                         it (off)
  --recompute[=bool]     gpt: recompute each block's activations in backward (off)
Data:
  --data=synthetic|FILE  gpt: torch_gpt.py's synthetic batches (default), or a text file read
                         byte-level (needs --vocab=256), e.g. /usr/share/common-licenses/GPL-3
Checkpoints (sharded: each rank writes its own shards; see docs/checkpoint_format.md):
  --checkpoint_dir=DIR   save into DIR/step_NNNNNNNN (at the end, and every N steps if set)
  --checkpoint_every=N   save every N steps (0 = at the end only)
  --resume[=bool]        start from the newest complete checkpoint in --checkpoint_dir
                         (saved under any parallel layout), continuing its step and data
Config files:
  --config=FILE          read the flags from a config file (configs/*.cfg, see configs/README.md);
                         flags given after it override its fields
Runtime and output:
  --timeline=DIR         record every act; write DIR/timeline.json (chrome://tracing, Perfetto);
                         under olrun each rank writes DIR/timeline.rank<R>.json (tools/trace_merge.py)
  --watchdog_ms=N        fail a step after N ms without progress (60000)
  --run_ahead[=bool]     start each step before the previous step's loss is fetched, so fetch
                         and feed overlap compute (on; off before checkpoints and at the end)
  --help                 this text
Threads: each rank splits its GEMMs (OpenBLAS then single-threaded) and its large element-wise,
softmax, norm, loss and optimizer kernels over OL_INTRA_OP_THREADS threads (default:
OPENBLAS_NUM_THREADS, else OMP_NUM_THREADS, else 1; ranks run in this process share it);
results of every kernel but matmul are bit-identical for any thread count.
Output: a plan summary, then "step S loss L time T ms R tokens/s|samples/s" per step, then
"RESULT median_ms_per_step=..." over the steps after --warmup, then "host threads over the timed
steps: ..." (each stream thread's busy share, acts a step, microseconds an act: a device stream's
thread near 100% is the host bounding the step) and, on devices, the device memory in use at
the end next to the planned peak.
)";
}

absl::StatusOr<TrainerFlags> ParseTrainerFlags(const std::vector<std::string>& args) {
  TrainerFlags f;
  TrainerOptions& o = f.options;
  using Setter = std::function<absl::Status(const std::string& flag, const std::string& value)>;
  auto integer = [](int64_t* field, int64_t min) -> Setter {
    return [field, min](const std::string& flag, const std::string& value) -> absl::Status {
      ASSIGN_OR_RETURN(*field, Int(flag, value, min));
      return absl::OkStatus();
    };
  };
  auto integer32 = [](int32_t* field, int64_t min, int64_t max) -> Setter {
    return [field, min, max](const std::string& flag, const std::string& value) -> absl::Status {
      ASSIGN_OR_RETURN(int64_t v, Int(flag, value, min));
      if (v > max) return Bad(flag, absl::StrCat("an integer in [", min, ", ", max, "]"), value);
      *field = static_cast<int32_t>(v);
      return absl::OkStatus();
    };
  };
  std::map<std::string, Setter> setters = {
      {"--model",
       [&](const std::string& flag, const std::string& v) -> absl::Status {
         if (v == "mlp") o.model = Workload::kMlp;
         else if (v == "gpt") o.model = Workload::kGpt;
         else return Bad(flag, "mlp or gpt", v);
         return absl::OkStatus();
       }},
      {"--batch", integer(&o.batch, 1)},
      {"--steps", integer(&f.steps, 0)},
      {"--warmup", integer(&f.warmup_steps, 0)},
      {"--lr",
       [&](const std::string& flag, const std::string& v) -> absl::Status {
         if (!absl::SimpleAtod(v, &o.learning_rate) || !(o.learning_rate > 0)) return Bad(flag, "a positive number", v);
         return absl::OkStatus();
       }},
      {"--seed",
       [&](const std::string& flag, const std::string& v) -> absl::Status {
         if (!absl::SimpleAtoi(v, &o.seed)) return Bad(flag, "a non-negative integer", v);
         return absl::OkStatus();
       }},
      {"--width", integer(&o.mlp.width, 1)},
      {"--depth", integer(&o.mlp.depth, 1)},
      {"--data_batches", integer(&o.mlp_data_batches, 1)},
      {"--vocab", integer(&o.gpt.vocab, 1)},
      {"--seq_len", integer(&o.gpt.seq_len, 1)},
      {"--n_layer", integer(&o.gpt.n_layer, 1)},
      {"--n_embd", integer(&o.gpt.n_embd, 1)},
      {"--n_head", integer(&o.gpt.n_head, 1)},
      {"--init",
       [&](const std::string& flag, const std::string& v) -> absl::Status {
         if (v == "portable") o.gpt.init = models::GptInit::kPortable;
         else if (v == "normal") o.gpt.init = models::GptInit::kNormal;
         else return Bad(flag, "portable or normal", v);
         return absl::OkStatus();
       }},
      {"--gelu",
       [&](const std::string& flag, const std::string& v) -> absl::Status {
         if (v != "none" && v != "tanh") return Bad(flag, "none or tanh", v);
         o.gpt.gelu_approximate = v;
         return absl::OkStatus();
       }},
      {"--dp", integer(&o.layout.dp, 1)},
      {"--tp", integer(&o.layout.tp, 1)},
      {"--pp", integer(&o.layout.pp, 1)},
      {"--device",
       [&](const std::string& flag, const std::string& v) -> absl::Status {
         if (v == "cpu") o.layout.device = DeviceType::kCpu;
         else if (v == "cuda") o.layout.device = DeviceType::kCuda;
         else return Bad(flag, "cpu or cuda", v);
         return absl::OkStatus();
       }},
      {"--micro_batches", integer32(&o.micro_batches, 0, 1 << 20)},
      {"--grad_accum", integer32(&o.gradient_accumulation_steps, 0, 1 << 20)},
      {"--zero_stage", integer32(&o.zero_stage, 0, 2)},
      {"--boxing",
       [&](const std::string& flag, const std::string& v) -> absl::Status {
         if (v == "p2p") o.boxing = compiler::BoxingStyle::kPointToPoint;
         else if (v == "collective") o.boxing = compiler::BoxingStyle::kCollective;
         else if (v == "auto") o.boxing = compiler::BoxingStyle::kAuto;
         else return Bad(flag, "p2p, collective or auto", v);
         return absl::OkStatus();
       }},
      {"--bucket_mb",
       [&](const std::string& flag, const std::string& v) -> absl::Status {
         if (!absl::SimpleAtod(v, &o.bucket_mb) || !(o.bucket_mb >= 0) || o.bucket_mb > 1 << 20) {
           return Bad(flag, "a number of MiB >= 0 (0 = no buckets)", v);
         }
         return absl::OkStatus();
       }},
      {"--reuse_memory",
       [&](const std::string& flag, const std::string& v) -> absl::Status {
         ASSIGN_OR_RETURN(o.reuse_memory, Bool(flag, v));
         return absl::OkStatus();
       }},
      {"--inplace_updates",
       [&](const std::string& flag, const std::string& v) -> absl::Status {
         ASSIGN_OR_RETURN(o.inplace_updates, Bool(flag, v));
         return absl::OkStatus();
       }},
      {"--stream_ordered",
       [&](const std::string& flag, const std::string& v) -> absl::Status {
         ASSIGN_OR_RETURN(o.stream_ordered_handoffs, Bool(flag, v));
         return absl::OkStatus();
       }},
      {"--order_collectives",
       [&](const std::string& flag, const std::string& v) -> absl::Status {
         ASSIGN_OR_RETURN(o.order_collectives, Bool(flag, v));
         return absl::OkStatus();
       }},
      {"--timeline",
       [&](const std::string& flag, const std::string& v) -> absl::Status {
         if (v.empty()) return Bad(flag, "a directory", v);
         f.timeline_dir = v;
         return absl::OkStatus();
       }},
      {"--watchdog_ms", integer(&o.watchdog_ms, 1)},
      {"--compute_streams", integer32(&o.compute_streams, 1, 2)},
      {"--recompute",
       [&](const std::string& flag, const std::string& v) -> absl::Status {
         ASSIGN_OR_RETURN(o.recompute, Bool(flag, v));
         return absl::OkStatus();
       }},
      {"--resume",
       [&](const std::string& flag, const std::string& v) -> absl::Status {
         ASSIGN_OR_RETURN(f.resume, Bool(flag, v));
         return absl::OkStatus();
       }},
      {"--run_ahead",
       [&](const std::string& flag, const std::string& v) -> absl::Status {
         ASSIGN_OR_RETURN(f.run_ahead, Bool(flag, v));
         return absl::OkStatus();
       }},
      {"--data",
       [&](const std::string& flag, const std::string& v) -> absl::Status {
         if (v.empty()) return Bad(flag, "synthetic or a file path", v);
         o.text_path = v == "synthetic" ? "" : v;
         return absl::OkStatus();
       }},
      {"--checkpoint_dir",
       [&](const std::string& flag, const std::string& v) -> absl::Status {
         if (v.empty()) return Bad(flag, "a directory", v);
         f.checkpoint_dir = v;
         return absl::OkStatus();
       }},
      {"--checkpoint_every", integer(&f.checkpoint_every, 0)},
      {"--config",
       [&](const std::string& flag, const std::string& v) -> absl::Status {
         if (v.empty()) return Bad(flag, "a config file", v);
         f.config_path = v;
         return absl::OkStatus();
       }},
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      f.help = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "' (flags start with --; see --help)"));
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    auto it = setters.find(name);
    if (it == setters.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag '", name, "' (see --help)"));
    }
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (name == "--reuse_memory" || name == "--inplace_updates" || name == "--stream_ordered" ||
               name == "--order_collectives" || name == "--recompute" || name == "--resume" || name == "--run_ahead") {
      value = "";  // bare boolean
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat(name, ": missing value (see --help)"));
    }
    RETURN_IF_ERROR(it->second(name, value));
  }
  return f;
}

}  // namespace train
}  // namespace oneflow_like
