#include "oneflow_like/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "oneflow_like/compiler/graph_builder.h"
#include "oneflow_like/core/sbp.h"
#include "oneflow_like/core/status.h"
#include "oneflow_like/models/synthetic_data.h"

namespace oneflow_like {
namespace train {

compiler::CompileOptions CompileOptionsFor(const TrainerOptions& options) {
  compiler::CompileOptions compile;
  compile.reuse_memory = options.reuse_memory;
  compile.compute_streams = options.compute_streams;
  compile.boxing = options.boxing;
  compile.bucket_bytes = static_cast<int64_t>(options.bucket_mb * (1 << 20));
  compile.only_rank = options.only_rank;
  return compile;
}

int IntraOpThreadsFromEnv() {
  for (const char* name : {"OL_INTRA_OP_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"}) {
    const char* value = std::getenv(name);
    int threads = 0;
    if (value != nullptr && absl::SimpleAtoi(value, &threads) && threads >= 1) return threads;
  }
  return 1;
}

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Rows [begin, begin + rows) of a row-major tensor (a copy).
Tensor Rows(const Tensor& t, int64_t begin, int64_t rows) {
  if (begin == 0 && rows == t.shape().dim(0)) return t;
  std::vector<int64_t> dims = t.shape().dims();
  dims[0] = rows;
  Tensor out(t.dtype(), Shape(dims));
  const int64_t row_bytes = t.byte_size() / std::max<int64_t>(1, t.shape().dim(0));
  std::memcpy(out.raw_data(), static_cast<const char*>(t.raw_data()) + begin * row_bytes, rows * row_bytes);
  return out;
}

std::string MiB(int64_t bytes) { return absl::StrFormat("%.1f", static_cast<double>(bytes) / (1 << 20)); }

std::string SbpText(const google::protobuf::RepeatedPtrField<NdSbpProto>& list) {
  std::string s;
  for (const NdSbpProto& p : list) {
    absl::StatusOr<NdSbp> nd = NdSbp::FromProto(p);
    absl::StrAppend(&s, s.empty() ? "" : ",", nd.ok() ? nd->ToString() : "?");
  }
  return s;
}

}  // namespace

absl::StatusOr<TrainerJob> BuildTrainerJob(const TrainerOptions& options, const OpRegistry& registry) {
  TrainerJob job;
  const int64_t pieces = std::max(1, options.micro_batches) * std::max(1, options.gradient_accumulation_steps);
  const bool gpt = options.model == Workload::kGpt;
  job.batch = options.batch > 0 ? options.batch : (gpt ? 8 : 256);
  if (options.batch < 0) return absl::InvalidArgumentError(absl::StrCat("batch must be positive, got ", options.batch));
  if (job.batch % pieces != 0) {
    return absl::InvalidArgumentError(absl::StrCat("batch (", job.batch, ") must be divisible by the pieces per step (",
                                                   "micro_batches x gradient_accumulation_steps = ", pieces, ")"));
  }
  job.piece_rows = job.batch / pieces;
  models::TrainOptions train;
  train.micro_batches = options.micro_batches;
  train.gradient_accumulation_steps = options.gradient_accumulation_steps;
  train.zero_stage = options.zero_stage;
  train.seed = options.seed;
  train.recompute = options.recompute;
  if (options.recompute && !gpt) return absl::InvalidArgumentError("recompute is supported for the gpt model only");
  absl::StatusOr<compiler::Graph> graph;
  if (gpt) {
    models::GptConfig c = options.gpt;
    c.batch = job.piece_rows;
    if (options.learning_rate > 0) train.optimizer = compiler::AdamWOptimizer(options.learning_rate, 0.01);
    graph = models::BuildGptJob(registry, c, options.layout, train);
  } else {
    models::MlpConfig c = options.mlp;
    c.batch = job.piece_rows;
    if (options.learning_rate > 0) train.optimizer = compiler::SgdOptimizer(options.learning_rate);
    graph = models::BuildMlpJob(registry, c, options.layout, train);
  }
  RETURN_IF_ERROR(graph.status());
  job.graph = std::make_unique<compiler::Graph>(*std::move(graph));
  return job;
}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const TrainerOptions& options, const OpRegistry* registry) {
  std::unique_ptr<Trainer> t(new Trainer());
  t->options_ = options;
  const bool gpt = options.model == Workload::kGpt;
  if (options.mlp_data_batches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("mlp_data_batches must be at least 1, got ", options.mlp_data_batches));
  }
  if (options.layout.device != DeviceType::kCpu &&
      (options.device_backend == nullptr || options.device_backend->type() != DeviceTypeName(options.layout.device))) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--device=", DeviceTypeName(options.layout.device),
        ": this build has no backend for that device (a CUDA build's oltrain_cuda runs cuda placements on a GPU); "
        "`tools/olplan summary|simulate --device=cuda ... --profile tools/plan/profiles/h100.txt` plans and prices "
        "the job"));
  }
  ASSIGN_OR_RETURN(TrainerJob job, BuildTrainerJob(options, *registry));
  t->batch_ = job.batch;
  t->piece_rows_ = job.piece_rows;
  if (!options.text_path.empty()) {
    if (!gpt) return absl::InvalidArgumentError("text data (--data) is for the gpt model only");
    if (options.gpt.vocab != models::TextCorpus::kVocab) {
      return absl::InvalidArgumentError(absl::StrCat("text data is byte-level: vocab must be ", models::TextCorpus::kVocab,
                                                     ", got ", options.gpt.vocab));
    }
    ASSIGN_OR_RETURN(models::TextCorpus corpus, models::TextCorpus::Load(options.text_path, options.gpt.seq_len + 1));
    t->corpus_ = std::make_unique<models::TextCorpus>(std::move(corpus));
  }
  if (options.only_rank >= 0 && !options.executor_factory) {
    return absl::InvalidArgumentError(absl::StrCat("only_rank ", options.only_rank,
                                                   " compiles one rank's plan; running every rank in this process "
                                                   "needs the whole plan (only_rank -1)"));
  }
  absl::StatusOr<compiler::Graph> graph = std::move(*job.graph);
  const compiler::CompileOptions compile = CompileOptionsFor(options);
  const double start = Now();
  ASSIGN_OR_RETURN(t->plan_, compiler::Compile(*std::move(graph), compile, &t->report_));
  t->compile_seconds_ = Now() - start;
  actor::SessionOptions session;
  session.watchdog_timeout_ms = options.watchdog_ms;
  session.record_timeline = options.record_timeline;
  session.inplace_variable_updates = options.inplace_updates;
  session.stream_ordered_handoffs = options.stream_ordered_handoffs;
  session.order_collectives = options.order_collectives;
  // In process, the ranks share the process's budget; under olrun each process is one rank.
  const int ranks_here = options.executor_factory ? 1 : std::max(1, t->plan_.world_size());
  session.intra_op_threads =
      options.intra_op_threads > 0 ? options.intra_op_threads : std::max(1, IntraOpThreadsFromEnv() / ranks_here);
  session.device_backend = options.device_backend;
  session.collective_factory = options.collective_factory;
  if (options.executor_factory) {
    ASSIGN_OR_RETURN(t->executor_, options.executor_factory(t->plan_, registry, std::move(session)));
  } else {
    ASSIGN_OR_RETURN(t->executor_, CreateLocalExecutor(t->plan_, registry, std::move(session)));
  }
  if (!gpt) {
    for (int64_t i = 0; i < options.mlp_data_batches; ++i) {
      models::MlpBatch b = models::SyntheticMlpBatch(i, t->batch_, options.mlp, options.seed);
      t->mlp_data_.emplace_back(std::move(b.inputs), std::move(b.targets));
    }
  }
  return t;
}

int64_t Trainer::items_per_step() const {
  return options_.model == Workload::kGpt ? batch_ * options_.gpt.seq_len : batch_;
}

absl::Status Trainer::FeedStep(int64_t step) {
  Tensor inputs, targets;
  const char *input_name = "x", *target_name = "target";
  if (options_.model == Workload::kGpt) {
    models::TokenBatch b = corpus_ ? corpus_->Batch(step, batch_, options_.gpt.seq_len, options_.seed)
                                   : models::SyntheticBatch(step, batch_, options_.gpt, options_.seed);
    inputs = std::move(b.inputs);
    targets = std::move(b.targets);
    input_name = "idx";
    target_name = "targets";
  } else {
    const auto& cached = mlp_data_[step % options_.mlp_data_batches];
    inputs = cached.first;
    targets = cached.second;
  }
  for (int64_t piece = 0; piece < executor_->pieces_per_step(); ++piece) {
    RETURN_IF_ERROR(executor_->Feed(input_name, Rows(inputs, piece * piece_rows_, piece_rows_)));
    RETURN_IF_ERROR(executor_->Feed(target_name, Rows(targets, piece * piece_rows_, piece_rows_)));
  }
  return absl::OkStatus();
}

absl::StatusOr<StepResult> Trainer::RunStep(bool start_next) {
  StepResult r;
  r.step = next_step_++;
  // GPT data is generated per step (cheap: a few thousand tokens); MLP data is cached. The
  // timed region is feed + run + fetch, like the torch scripts' step (data made beforehand);
  // for a step started ahead, it runs from the previous step's end (its feed overlapped that
  // step), so in a run-ahead loop the times are the intervals between step ends.
  const double start = Now();
  const bool was_started = started_through_ >= r.step;
  if (!was_started) {
    RETURN_IF_ERROR(FeedStep(r.step));
    RETURN_IF_ERROR(executor_->StartStep(r.step));
    started_through_ = r.step;
  }
  if (start_next) {
    RETURN_IF_ERROR(FeedStep(r.step + 1));
    RETURN_IF_ERROR(executor_->StartStep(r.step + 1));
    started_through_ = r.step + 1;
  }
  RETURN_IF_ERROR(executor_->FinishStep(r.step));
  ASSIGN_OR_RETURN(r.loss, executor_->MeanScalar("loss", r.step));
  const double end = Now();
  r.seconds = end - (was_started ? last_step_end_ : start);
  last_step_end_ = end;
  r.items_per_second = r.seconds > 0 ? static_cast<double>(items_per_step()) / r.seconds : 0;
  return r;
}

std::string Trainer::PlanSummary(int max_ops) const {
  std::ostringstream s;
  const bool gpt = options_.model == Workload::kGpt;
  const models::ParallelLayout& l = options_.layout;
  s << "job '" << plan_.job_name() << "' ("
    << (gpt ? absl::StrFormat("gpt %d layers x %d wide, %d heads, seq %d, vocab %d, %d params", options_.gpt.n_layer,
                              options_.gpt.n_embd, options_.gpt.n_head, options_.gpt.seq_len, options_.gpt.vocab,
                              models::GptParameterCount(options_.gpt))
            : absl::StrFormat("mlp %d x Linear %d, %d params", options_.mlp.depth, options_.mlp.width,
                              models::MlpParameterCount(options_.mlp)))
    << ")\n";
  s << "layout dp=" << l.dp << " tp=" << l.tp << " pp=" << l.pp << ": world " << plan_.world_size() << " ranks, "
    << executor_->Description() << "\n";
  if (corpus_) s << "data: " << options_.text_path << " (" << corpus_->size() << " bytes, byte-level tokens)\n";
  s << "batch " << batch_ << " per step = " << plan_.pieces_per_step() << " piece(s) x " << piece_rows_
    << "; zero_stage " << options_.zero_stage << ", recompute " << (options_.recompute ? "on" : "off")
    << ", reuse_memory " << (options_.reuse_memory ? "on" : "off")
    << (options_.compute_streams > 1 ? absl::StrCat(", compute streams ", options_.compute_streams) : "")
    << "; plan " << plan_.content_hash() << "\n";
  s << absl::StrFormat("compiled in %.2f s (", compile_seconds_);
  for (size_t i = 0; i < report_.phase_seconds.size(); ++i) {
    s << (i ? ", " : "") << report_.phase_seconds[i].first << absl::StrFormat(" %.2f", report_.phase_seconds[i].second);
  }
  s << "), " << report_.num_logical_ops << " logical ops\n";
  s << "rank  tasks  compute boxing transfer other   planned MiB  naive MiB\n";
  for (int i = 0; i < plan_.rank_plans_size(); ++i) {
    const RankPlanProto& rank = plan_.rank_plans(i);
    int compute = 0, boxing = 0, transfer = 0, other = 0;
    for (const TaskProto& task : rank.tasks()) {
      switch (task.type()) {
        case TaskProto::COMPUTE: ++compute; break;
        case TaskProto::BOXING_SLICE:
        case TaskProto::BOXING_CONCAT:
        case TaskProto::BOXING_ADD:
        case TaskProto::COLLECTIVE: ++boxing; break;
        case TaskProto::TRANSFER: ++transfer; break;
        default: ++other;
      }
    }
    int64_t planned = 0, naive = 0;
    for (const RankMemoryProto& m : plan_.memory()) {
      if (m.rank() == rank.rank()) planned = m.planned_bytes(), naive = m.naive_bytes();
    }
    s << absl::StrFormat("%4d  %5d  %7d %6d %8d %5d   %11s  %9s\n", rank.rank(), rank.tasks_size(), compute, boxing,
                         transfer, other, MiB(planned), MiB(naive));
  }
  // The biggest ops by the chosen candidate's estimated compute time.
  std::vector<const OpSbpDecisionProto*> ops;
  for (const OpSbpDecisionProto& d : plan_.sbp_decisions()) {
    if (d.chosen() >= 0 && d.chosen() < d.candidates_size()) ops.push_back(&d);
  }
  std::stable_sort(ops.begin(), ops.end(), [](const OpSbpDecisionProto* a, const OpSbpDecisionProto* b) {
    return a->candidates(a->chosen()).compute_seconds() > b->candidates(b->chosen()).compute_seconds();
  });
  if (ops.size() > static_cast<size_t>(max_ops)) ops.resize(max_ops);
  if (!ops.empty()) s << "SBP of the biggest ops (inputs -> outputs; est. compute; of N candidates):\n";
  for (const OpSbpDecisionProto* d : ops) {
    const SbpCandidateProto& c = d->candidates(d->chosen());
    s << absl::StrFormat("  %-22s %-14s %s -> %s  %.3f ms  (%d)\n", d->op_name(), d->op_type(), SbpText(c.inputs()),
                         SbpText(c.outputs()), 1e3 * c.compute_seconds(), d->candidates_size());
  }
  return s.str();
}

absl::StatusOr<std::vector<std::string>> Trainer::WriteTimeline(const std::string& dir) const {
  if (!options_.record_timeline) {
    return absl::FailedPreconditionError("trainer: the timeline was not recorded (set record_timeline)");
  }
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return absl::InvalidArgumentError(absl::StrCat("--timeline: cannot create '", dir, "': ", error.message()));
  std::vector<std::string> written;
  if (session() != nullptr) {  // every rank in this process: one trace
    const std::string path = (std::filesystem::path(dir) / "timeline.json").string();
    std::ofstream file(path);
    file << session()->TimelineJson();
    if (!file) return absl::InvalidArgumentError(absl::StrCat("--timeline: cannot write '", path, "'"));
    written.push_back(path);
    return written;
  }
  // One process per rank: each writes its own file (merge them with tools/trace_merge.py).
  for (const actor::Runtime* runtime : executor_->local_runtimes()) {
    const std::string path =
        (std::filesystem::path(dir) / absl::StrCat("timeline.rank", runtime->rank().value(), ".json")).string();
    RETURN_IF_ERROR(actor::WriteRankTimeline(*runtime, path));
    written.push_back(path);
  }
  return written;
}

}  // namespace train
}  // namespace oneflow_like
