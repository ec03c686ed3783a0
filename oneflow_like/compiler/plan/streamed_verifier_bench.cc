// streamed_verifier_bench: StreamedVerifier's time and memory on the per-rank parts of the
// 24-layer GPT plan (compile_bench's model and layouts), by hand, not a test:
//
//   bazel build -c opt //oneflow_like/compiler/plan:streamed_verifier_bench
//   B=bazel-bin/oneflow_like/compiler/plan/streamed_verifier_bench
//   $B write /tmp/parts512 512 [--verify-whole]   # lower the whole plan, write its parts (and time VerifyPlan)
//   $B write /tmp/parts4096 4096 --ranges          # lower 512 ranks at a time (LowerRankRange)
//   /usr/bin/time -v $B verify /tmp/parts512        # AddRank each part, Finish, CheckRank each part
//
// The parts file: per rank with work, an 8-byte length and a serialized per-rank PlanProto,
// byte for byte what LowerOptions::only_rank gives (the rank plan and memory entry of the whole
// plan). `verify` holds one part at a time.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "google/protobuf/arena.h"
#include "oneflow_like/compiler/driver/compile.h"
#include "oneflow_like/compiler/lower/lower.h"
#include "oneflow_like/compiler/plan/plan_verifier.h"
#include "oneflow_like/compiler/plan/streamed_verifier.h"
#include "oneflow_like/core/op_registry.h"
#include "oneflow_like/core/ops/builtin_ops.h"
#include "oneflow_like/models/gpt.h"

namespace oneflow_like {
namespace {

double PeakRssMb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

models::ParallelLayout LayoutFor(int64_t world) {
  switch (world) {
    case 8: return {.dp = 2, .tp = 2, .pp = 2};
    case 64: return {.dp = 4, .tp = 4, .pp = 4};
    case 512: return {.dp = 8, .tp = 8, .pp = 8};
    default: return {.dp = 16, .tp = 16, .pp = 16};
  }
}

void WritePart(std::ofstream& out, const PlanProto& part) {
  const std::string bytes = part.SerializeAsString();
  const uint64_t size = bytes.size();
  out.write(reinterpret_cast<const char*>(&size), sizeof(size));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

int Write(const std::string& path, int64_t world, bool verify_whole, bool ranges) {
  OpRegistry registry;
  if (absl::Status s = RegisterBuiltinOps(&registry); !s.ok()) {
    std::fprintf(stderr, "streamed_verifier_bench: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  const models::ParallelLayout layout = LayoutFor(world);
  models::GptConfig config{.vocab = 50304, .seq_len = 1024, .n_layer = 24, .n_embd = 1024, .n_head = 16,
                           .batch = 2 * layout.dp};
  models::TrainOptions train;
  train.micro_batches = 4;
  absl::StatusOr<compiler::Graph> graph = models::BuildGptJob(registry, config, layout, train);
  if (!graph.ok()) return std::fprintf(stderr, "%s\n", graph.status().ToString().c_str()), 1;
  compiler::CompileOptions options;
  options.verify_plan = false;
  auto start = std::chrono::steady_clock::now();
  if (ranges) {  // the parts 512 ranks at a time, never the whole plan
    absl::StatusOr<compiler::GlobalDecisions> decisions = compiler::RunGlobalPasses(*std::move(graph), options);
    if (!decisions.ok()) return std::fprintf(stderr, "%s\n", decisions.status().ToString().c_str()), 1;
    compiler::LowerOptions lower = compiler::LowerOptionsFor(options);
    lower.world_size = static_cast<int32_t>(world);
    std::ofstream out(path, std::ios::binary);
    int64_t tasks = 0;
    for (int32_t first = 0; first < world; first += 512) {
      lower.only_rank = first;
      lower.num_ranks = static_cast<int32_t>(std::min<int64_t>(512, world - first));
      absl::StatusOr<std::vector<PlanProto>> range = compiler::LowerRankRange(decisions->graph, lower);
      if (!range.ok()) return std::fprintf(stderr, "%s\n", range.status().ToString().c_str()), 1;
      for (const PlanProto& part : *range) {
        if (part.rank_plans_size() == 0) continue;
        tasks += part.rank_plans(0).tasks_size();
        WritePart(out, part);
      }
      std::fprintf(stderr, "lowered ranks %d.. (%lld tasks, %.0f s)\n", first, static_cast<long long>(tasks),
                   Since(start));
    }
    return out ? 0 : 1;
  }
  absl::StatusOr<PlanProto> whole = compiler::Compile(*std::move(graph), options);
  if (!whole.ok()) return std::fprintf(stderr, "%s\n", whole.status().ToString().c_str()), 1;
  std::fprintf(stderr, "compiled %lld ranks in %.1f s (peak %.0f MB)\n", static_cast<long long>(world), Since(start),
               PeakRssMb());
  if (verify_whole) {
    start = std::chrono::steady_clock::now();
    const absl::Status status = compiler::VerifyPlan(*whole);
    std::fprintf(stderr, "VerifyPlan on the whole plan: %s in %.1f s (peak %.0f MB)\n", status.ToString().c_str(),
                 Since(start), PeakRssMb());
  }
  std::ofstream out(path, std::ios::binary);
  int64_t tasks = 0;
  for (int i = 0; i < whole->rank_plans_size(); ++i) {
    PlanProto part;
    part.set_job_name(whole->job_name());
    part.set_world_size(whole->world_size());
    part.set_pieces_per_step(whole->pieces_per_step());
    part.add_ranks(whole->ranks(i));
    part.add_rank_plans()->Swap(whole->mutable_rank_plans(i));
    *part.add_memory() = whole->memory(i);
    part.mutable_per_rank()->set_rank(whole->ranks(i));
    tasks += part.rank_plans(0).tasks_size();
    WritePart(out, part);
  }
  std::fprintf(stderr, "wrote %d parts, %lld tasks, to %s\n", whole->rank_plans_size(), static_cast<long long>(tasks),
               path.c_str());
  return out ? 0 : 1;
}

// Calls `each` on every part of the file, one at a time.
absl::Status ForEachPart(const std::string& path, const std::function<absl::Status(const PlanProto&)>& each) {
  std::ifstream in(path, std::ios::binary);
  uint64_t size = 0;
  std::string bytes;
  while (in.read(reinterpret_cast<char*>(&size), sizeof(size))) {
    bytes.resize(size);
    in.read(bytes.data(), static_cast<std::streamsize>(size));
    // On an arena: a part's millions of small objects freed at once, not one by one (glibc
    // malloc spends most of the time consolidating them otherwise).
    google::protobuf::Arena arena;
    PlanProto* part = google::protobuf::Arena::CreateMessage<PlanProto>(&arena);
    if (!part->ParseFromString(bytes)) return absl::DataLossError("a part does not parse");
    absl::Status status = each(*part);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

int Verify(const std::string& path) {
  std::unique_ptr<compiler::StreamedVerifier> verifier;
  int64_t parts = 0;
  auto start = std::chrono::steady_clock::now();
  absl::Status status = ForEachPart(path, [&](const PlanProto& part) {
    if (verifier == nullptr) {
      verifier = std::make_unique<compiler::StreamedVerifier>(part.world_size(), part.pieces_per_step(),
                                                              compiler::PlanVerifierOptions{});
    }
    ++parts;
    return verifier->AddRank(part);
  });
  const double add = Since(start);
  std::fprintf(stderr, "AddRank x %lld: %s, %.1f s (peak %.0f MB)\n", static_cast<long long>(parts),
               status.ToString().c_str(), add, PeakRssMb());
  if (!status.ok() || verifier == nullptr) return 1;
  start = std::chrono::steady_clock::now();
  status = verifier->Finish();
  std::fprintf(stderr, "Finish: %s, %.1f s (peak %.0f MB)\n", status.ToString().c_str(), Since(start), PeakRssMb());
  if (!status.ok()) return 1;
  start = std::chrono::steady_clock::now();
  status = ForEachPart(path, [&](const PlanProto& part) { return verifier->CheckRank(part); });
  std::fprintf(stderr, "CheckRank x %lld: %s, %.1f s (peak %.0f MB)\n", static_cast<long long>(parts),
               status.ToString().c_str(), Since(start), PeakRssMb());
  return status.ok() ? 0 : 1;
}

}  // namespace
}  // namespace oneflow_like

int main(int argc, char** argv) {
  if (argc >= 4 && std::strcmp(argv[1], "write") == 0) {
    const bool verify_whole = argc >= 5 && std::strcmp(argv[4], "--verify-whole") == 0;
    const bool ranges = argc >= 5 && std::strcmp(argv[4], "--ranges") == 0;
    return oneflow_like::Write(argv[2], std::atoll(argv[3]), verify_whole, ranges);
  }
  if (argc >= 3 && std::strcmp(argv[1], "verify") == 0) return oneflow_like::Verify(argv[2]);
  std::fprintf(stderr, "usage: streamed_verifier_bench write FILE WORLD [--verify-whole | --ranges] | verify FILE\n");
  return 2;
}
