// The end-to-end trainer: options -> a model job (W1 MLP or W2 GPT, ../models) with a parallel
// layout -> Compile (compiler/driver/compile.h) -> a Session (actor/session.h: ALL ranks of the
// plan run in this one process, as threads, over a loopback transport) -> steps fed with the
// models' deterministic synthetic data, reporting the loss and the time of each step.
//
//   OpRegistry registry;  RETURN_IF_ERROR(RegisterBuiltinOps(&registry));
//   TrainerOptions options;                 // W1: 4 x Linear 1024 + ReLU, batch 256, SGD 0.01
//   options.layout = {.dp = 2};             // two ranks, batch split in halves
//   ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, Trainer::Create(options, &registry));
//   std::cout << trainer->PlanSummary();    // ranks, tasks, memory, pieces, SBP decisions
//   ASSIGN_OR_RETURN(StepResult r, trainer->RunStep());   // r.step == 0, r.loss, r.seconds
//
// Batch semantics: TrainerOptions::batch is per STEP (samples: MLP rows or GPT sequences); the
// job's shapes are per piece, so each of the pieces_per_step = micro_batches x accumulation
// pieces gets batch / pieces_per_step consecutive samples of the step's batch. The step's loss
// is the mean of the pieces' losses (the compiler scales gradients by 1 / pieces_per_step), so
// a step equals one full-batch step of the same model.
// Data: GPT step s is SyntheticBatch(s, batch, gpt, seed) (torch_gpt.py's data, bit-exact); MLP
// step s is SyntheticMlpBatch(s mod mlp_data_batches, batch, mlp, seed) (bench_mlp.py trains on
// one fixed batch: mlp_data_batches = 1).
// Errors: InvalidArgument for bad options (naming the field), anything from Compile / Session.
// Not thread-safe (one thread drives a Trainer; the Session runs its own threads).
#ifndef ONEFLOW_LIKE_TRAIN_TRAINER_H_
#define ONEFLOW_LIKE_TRAIN_TRAINER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "oneflow_like/actor/session.h"
#include "oneflow_like/train/step_executor.h"
#include "oneflow_like/compiler/driver/compile.h"
#include "oneflow_like/models/gpt.h"
#include "oneflow_like/models/mlp.h"
#include "oneflow_like/models/text_data.h"

namespace oneflow_like {
namespace train {

enum class Workload {
  kMlp,  // W1 (bench_mlp.py)
  kGpt,  // W2 gpt-tiny (bench_gpt.py / torch_gpt.py)
};

struct TrainerOptions {
  Workload model = Workload::kMlp;
  models::MlpConfig mlp;          // width/depth; its batch is ignored (see `batch`)
  models::GptConfig gpt;          // dims, init (portable), gelu (exact); its batch is ignored
  models::ParallelLayout layout;  // dp x tp x pp ranks, all in this process
  int64_t batch = 0;              // samples per step; 0 = the workload's (256 rows / 8 sequences)
  int32_t micro_batches = 0;      // pipeline micro-batches per step (0 = 1)
  int32_t gradient_accumulation_steps = 0;  // 0 = 1
  int32_t zero_stage = 0;         // 1 = ZeRO-1 optimizer-state sharding over dp; 2 = also sharded parameters
  bool reuse_memory = true;       // lifetime-based register sharing (compile.h's default)
  int32_t compute_streams = 1;    // 2: the gradients the optimizer reads on a second compute stream
  // Boxing as transfers + local adds (p2p), as collective calls (gloo), or per transition the
  // cheaper by the cost model (auto; compiler/lower/lower.h).
  compiler::BoxingStyle boxing = compiler::BoxingStyle::kPointToPoint;
  // Gradient buckets of collective boxing, MiB (compiler/lower/lower.h; 0 = one call per gradient).
  double bucket_mb = 4;
  bool inplace_updates = true;    // optimizers write variables in place (actor/inplace_updates.h)
  // Device runs: kernels hand registers over when enqueued, within a stream and across the
  // device's streams with events (actor/stream_ordered.h).
  bool stream_ordered_handoffs = true;
  // Collective boxing: issue the collectives in the plan's agreed order (actor/collective_order.h)
  // even on gloo, which does not need it (NCCL does, and always gets it).
  bool order_collectives = false;
  bool recompute = false;         // gpt: recompute the blocks' activations in backward
  double learning_rate = 0;       // 0 = the workload's: SGD 0.01 (mlp), AdamW 3e-4 wd 0.01 (gpt)
  uint64_t seed = 0;              // initialization and data
  int64_t mlp_data_batches = 1;   // distinct MLP batches cycled over steps
  int64_t watchdog_ms = 60000;    // a step with no progress for this long fails (session.h)
  bool record_timeline = false;   // record acts for TimelineJson / WriteTimeline
  // Threads per rank for the kernels (actor::RuntimeEnv::intra_op_threads; every kernel's
  // result but a split matmul's, which differs in the last bits, is bit-identical for any
  // value). 0 = the thread budget from the environment (IntraOpThreadsFromEnv), shared by the
  // ranks that run in this process.
  int intra_op_threads = 0;
  // The accelerator that runs `--device=cuda` jobs (actor/device_backend.h; a CUDA build's
  // backend, or a fake in tests). Null: cpu placements only. Not owned; outlives the trainer.
  actor::DeviceBackend* device_backend = nullptr;
  // actor::SessionOptions::collective_factory (in process and under olrun): the collective
  // backend of cuda plans (NCCL); null: gloo.
  decltype(actor::SessionOptions::collective_factory) collective_factory;
  // GPT data: empty = torch_gpt.py's synthetic batches; else a text file read byte-level
  // (models/text_data.h; requires gpt.vocab == 256), e.g. /usr/share/common-licenses/GPL-3.
  std::string text_path;
  // -1: compile the whole plan (every rank). r >= 0: compile only rank r's plan
  // (compiler::CompileOptions::only_rank): what each process of an olrun job does (oltrain), so
  // its start-up does not grow with the world size; the ranks then compare the plan's job
  // agreement instead of the whole plan's hash (plan_agreement.h). Needs an executor_factory
  // that runs rank r alone.
  int32_t only_rank = -1;
  // Runs the plan; null = every rank in this process (CreateLocalExecutor). The multi-process
  // trainer passes one that runs this process's rank only (rank_executor.h).
  std::function<absl::StatusOr<std::unique_ptr<StepExecutor>>(const PlanProto&, const OpRegistry*,
                                                              actor::SessionOptions)>
      executor_factory;
};

// The job a Trainer compiles, without compiling it (olplan prices it): the model's graph with
// the layout, and the batch after defaults (per step, and per piece).
struct TrainerJob {
  std::unique_ptr<compiler::Graph> graph;
  int64_t batch = 0;
  int64_t piece_rows = 0;
};
absl::StatusOr<TrainerJob> BuildTrainerJob(const TrainerOptions& options, const OpRegistry& registry);
// The compiler options the trainer's flags ask for (boxing, buckets, memory reuse); olplan
// compiles a job with the same ones, so it plans what oltrain would run.
compiler::CompileOptions CompileOptionsFor(const TrainerOptions& options);
// A process's thread budget for intra-op threads: OL_INTRA_OP_THREADS if set, else the BLAS
// setting (OPENBLAS_NUM_THREADS, else OMP_NUM_THREADS), else 1; at least 1. With a pool, the
// GEMMs run OpenBLAS single-threaded on the pool's threads: one budget for all kernels.
int IntraOpThreadsFromEnv();

struct StepResult {
  int64_t step = 0;
  double loss = 0;             // mean over the step's pieces
  double seconds = 0;          // wall time of feed + run + fetch (data generated before); for a
                               // step started ahead: from the previous step's end
  double items_per_second = 0; // tokens/s (gpt) or samples/s (mlp)
};

class Trainer {
 public:
  // Builds the job, compiles it and opens a Session. `registry` must outlive the trainer.
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(const TrainerOptions& options, const OpRegistry* registry);

  // Runs the next step (0, 1, ...). With `start_next`, the step after it is fed and started
  // before this one is waited for (run-ahead: the host's fetch and feed overlap compute; the
  // runtime still runs it after this step's updates). The next RunStep then only finishes it.
  // Leave `start_next` false before anything that reads or writes variables (a checkpoint)
  // and on the last step. REQUIRES: with `start_next`, the next step was not started yet.
  absl::StatusOr<StepResult> RunStep(bool start_next = false);
  // A one-screen text summary: ranks, tasks per rank by kind, planned vs naive memory per
  // rank, pieces per step, compile phases, and the SBP signatures of the biggest ops.
  std::string PlanSummary(int max_ops = 6) const;
  // Writes the Chrome trace of the recorded acts into `dir` (created): `dir`/timeline.json when
  // every rank runs in this process, else one `dir`/timeline.rank<R>.json per local rank (merge
  // them with tools/trace_merge.py). Returns the paths written. FailedPrecondition unless
  // options.record_timeline.
  absl::StatusOr<std::vector<std::string>> WriteTimeline(const std::string& dir) const;

  const PlanProto& plan() const { return plan_; }
  const compiler::CompileReport& compile_report() const { return report_; }
  double compile_seconds() const { return compile_seconds_; }
  // The in-process Session (null when this process runs one rank of a multi-process job).
  actor::Session* session() const { return executor_->session(); }
  StepExecutor* executor() const { return executor_.get(); }
  // The next step RunStep runs (after a checkpoint load: the checkpoint's step + 1).
  int64_t next_step() const { return next_step_; }
  void set_next_step(int64_t step) { next_step_ = step; started_through_ = step - 1; }
  const TrainerOptions& options() const { return options_; }
  int64_t items_per_step() const;  // tokens (gpt) or samples (mlp) per step
  const char* item_unit() const { return options_.model == Workload::kGpt ? "tokens/s" : "samples/s"; }
  // The step batch size and per-piece rows after defaults.
  int64_t batch() const { return batch_; }

 private:
  Trainer() = default;
  absl::Status FeedStep(int64_t step);

  TrainerOptions options_;
  int64_t batch_ = 0;       // per step
  int64_t piece_rows_ = 0;  // per piece
  PlanProto plan_;
  compiler::CompileReport report_;
  double compile_seconds_ = 0;
  std::unique_ptr<StepExecutor> executor_;
  int64_t next_step_ = 0;
  int64_t started_through_ = -1;  // the last step fed and started
  double last_step_end_ = 0;      // when the last RunStep returned (Now())
  std::unique_ptr<models::TextCorpus> corpus_;  // when options_.text_path is set
  std::vector<std::pair<Tensor, Tensor>> mlp_data_;  // cached (inputs, targets) per distinct batch
};

}  // namespace train
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_TRAIN_TRAINER_H_
