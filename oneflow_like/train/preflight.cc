#include "oneflow_like/train/preflight.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "oneflow_like/comm/crc32c.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace train {
namespace {

constexpr char kPrefix[] = "preflight: ";
constexpr char kMarkerKey[] = "preflight/checkpoint_marker";

std::string Mib(int64_t bytes) { return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20)); }

// Collects failures as "preflight: node N (host h, rank R): what".
class Checker {
 public:
  explicit Checker(DistributedContext* context) : context_(context), env_(context->env()) {}

  absl::Status Fail(const std::string& what) const {
    return absl::FailedPreconditionError(absl::StrCat(kPrefix, "node ", env_.node_rank, " (host ", env_.host,
                                                      ", rank ", env_.rank, "): ", what));
  }

  absl::Status CheckBinary() const {
    absl::StatusOr<std::string> mine = FileFingerprint("/proc/self/exe");
    if (!mine.ok()) return Fail(absl::StrCat("cannot read its own binary: ", mine.status().message()));
    RETURN_IF_ERROR(context_->control()->Set(absl::StrCat("preflight/binary/", env_.rank), *mine));
    ASSIGN_OR_RETURN(std::string first, context_->control()->Get("preflight/binary/0", env_.connect_timeout_ms));
    if (first != *mine) {
      return Fail(absl::StrCat("runs another trainer binary than rank 0 (", *mine, " vs ", first,
                               "): every node must run the same build"));
    }
    return absl::OkStatus();
  }

  absl::Status CheckPlan(const PlanProto& plan) const {
    const absl::Status same = context_->CheckPlan(plan);
    return same.ok() || !absl::IsFailedPrecondition(same) ? same : Fail(std::string(same.message()));
  }

  // A per-rank plan holds its own rank's memory alone: every rank publishes it for its node.
  absl::Status PublishPlannedBytes(const PlanProto& plan) const {
    if (!plan.has_per_rank()) return absl::OkStatus();
    return context_->control()->Set(absl::StrCat("preflight/planned/", env_.rank),
                                     absl::StrCat(PlannedBytesOfRanks(plan, env_.rank, 1)));
  }

  absl::StatusOr<int64_t> NodePlannedBytes(const PlanProto& plan, int32_t first) const {
    if (!plan.has_per_rank()) return PlannedBytesOfRanks(plan, first, env_.local_world_size);
    int64_t total = 0;
    for (int32_t rank = first; rank < first + env_.local_world_size; ++rank) {
      ASSIGN_OR_RETURN(std::string text,
                       context_->control()->Get(absl::StrCat("preflight/planned/", rank), env_.connect_timeout_ms));
      int64_t bytes = 0;
      if (!absl::SimpleAtoi(text, &bytes)) return Fail(absl::StrCat("rank ", rank, " published planned bytes '", text, "'"));
      total += bytes;
    }
    return total;
  }

  absl::Status CheckMemory(const PlanProto& plan) const {
    const int32_t first = env_.node_rank * env_.local_world_size;
    ASSIGN_OR_RETURN(const int64_t planned, NodePlannedBytes(plan, first));
    absl::StatusOr<int64_t> available = NodeMemoryAvailable();
    if (!available.ok()) return Fail(std::string(available.status().message()));
    if (planned > *available) {
      const char* source = std::getenv("OL_MEM_AVAILABLE_BYTES") != nullptr ? "OL_MEM_AVAILABLE_BYTES"
                                                                             : "MemAvailable in /proc/meminfo";
      return Fail(absl::StrCat("the planned memory of its ", env_.local_world_size, " rank(s) (ranks ", first, "..",
                               first + env_.local_world_size - 1, "), ", Mib(planned), ", exceeds the memory "
                               "available on the node, ", Mib(*available), " (", source,
                               "): use fewer ranks per node, more model parallelism or a smaller model"));
    }
    return absl::OkStatus();
  }

  // Rank 0: writes the marker and publishes "nonce\ndirectory". Returns the marker's path.
  absl::StatusOr<std::string> WriteMarker(const std::string& dir) const {
    std::random_device random;
    const std::string nonce = absl::StrFormat("%08x%08x", random(), random());
    RETURN_IF_ERROR(Writable(dir, ".olpreflight-" + nonce, nonce, /*keep=*/true));
    const std::string marker = (std::filesystem::path(dir) / (".olpreflight-" + nonce)).string();
    RETURN_IF_ERROR(context_->control()->Set(kMarkerKey, absl::StrCat(nonce, "\n", Absolute(dir))));
    return marker;
  }

  // Each other node's local rank 0: the directory is writable here and holds rank 0's marker.
  absl::Status CheckMarker(const std::string& dir) const {
    ASSIGN_OR_RETURN(std::string published, context_->control()->Get(kMarkerKey, env_.connect_timeout_ms));
    const std::vector<std::string> parts = absl::StrSplit(published, absl::MaxSplits('\n', 1));
    const std::string& nonce = parts[0];
    const std::string rank0_dir = parts.size() > 1 ? parts[1] : "?";
    RETURN_IF_ERROR(Writable(dir, absl::StrCat(".olpreflight-", nonce, ".node", env_.node_rank), nonce, false));
    const std::string marker = (std::filesystem::path(dir) / (".olpreflight-" + nonce)).string();
    std::ifstream in(marker);
    std::string seen;
    std::getline(in, seen);
    if (!in.is_open() || seen != nonce) {
      return Fail(absl::StrCat("the checkpoint directory ", Absolute(dir), " is not shared with node 0: rank 0's marker ",
                               marker, " is ", in.is_open() ? "different" : "missing", " here (rank 0 wrote it into ",
                               rank0_dir, "); every node must see the same directory (a shared file system)"));
    }
    return absl::OkStatus();
  }

 private:
  static std::string Absolute(const std::string& dir) {
    std::error_code error;
    const std::filesystem::path path = std::filesystem::absolute(dir, error);
    return error ? dir : path.lexically_normal().string();
  }

  // Creates `dir`, writes `content` to dir/name and (unless keep) removes it again.
  absl::Status Writable(const std::string& dir, const std::string& name, const std::string& content,
                        bool keep) const {
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error) {
      return Fail(absl::StrCat("cannot create the checkpoint directory ", Absolute(dir), ": ", error.message()));
    }
    const std::filesystem::path path = std::filesystem::path(dir) / name;
    {
      std::ofstream out(path, std::ios::trunc);
      out << content << "\n";
      out.flush();
      if (!out) return Fail(absl::StrCat("the checkpoint directory ", Absolute(dir), " is not writable (", path.string(), ")"));
    }
    if (!keep) std::filesystem::remove(path, error);
    return absl::OkStatus();
  }

  DistributedContext* context_;
  const DistributedEnv& env_;
};

}  // namespace

absl::StatusOr<std::string> FileFingerprint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::vector<char> buffer(1 << 20);
  uint32_t crc = 0;
  int64_t size = 0;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const std::streamsize got = in.gcount();
    if (got <= 0) break;
    crc = comm::Crc32cExtend(crc, buffer.data(), static_cast<size_t>(got));
    size += got;
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat("reading ", path, " failed"));
  return absl::StrFormat("crc32c:%08x size:%d", crc, size);
}

absl::StatusOr<int64_t> ParseMemAvailable(const std::string& meminfo) {
  std::istringstream lines(meminfo);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::vector<std::string> fields = absl::StrSplit(line.substr(13), ' ', absl::SkipEmpty());
    int64_t kib = 0;
    if (fields.empty() || !absl::SimpleAtoi(fields[0], &kib) || (fields.size() > 1 && fields[1] != "kB")) {
      return absl::InvalidArgumentError(absl::StrCat("malformed /proc/meminfo line '", line, "'"));
    }
    return kib * 1024;
  }
  return absl::NotFoundError("/proc/meminfo has no MemAvailable line (Linux >= 3.14 has one)");
}

absl::StatusOr<int64_t> NodeMemoryAvailable() {
  if (const char* text = std::getenv("OL_MEM_AVAILABLE_BYTES")) {
    int64_t bytes = 0;
    if (!absl::SimpleAtoi(text, &bytes) || bytes < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable OL_MEM_AVAILABLE_BYTES='", text, "': expected a byte count >= 0"));
    }
    return bytes;
  }
  std::ifstream in("/proc/meminfo");
  if (!in) return absl::NotFoundError("cannot read /proc/meminfo (set OL_MEM_AVAILABLE_BYTES)");
  std::stringstream text;
  text << in.rdbuf();
  return ParseMemAvailable(text.str());
}

int64_t PlannedBytesOfRanks(const PlanProto& plan, int32_t first, int32_t count) {
  int64_t total = 0;
  for (const RankMemoryProto& memory : plan.memory()) {
    if (memory.rank() < first || memory.rank() >= first + count) continue;
    if (memory.devices_size() == 0) {
      total += memory.planned_bytes();
      continue;
    }
    // Host blocks only: a GPU's blocks live in its own memory (the runtime checks them against the
    // device's free bytes before allocating, actor/device_backend.h).
    for (const DeviceMemoryProto& device : memory.devices()) {
      if (device.device().type().empty() || device.device().type() == "cpu") total += device.planned_bytes();
    }
  }
  return total;
}

bool IsPreflightFailure(const absl::Status& status) {
  return absl::string_view(status.message()).find(kPrefix) != absl::string_view::npos;
}

absl::Status RunPreflight(const PlanProto& plan, const PreflightOptions& options, DistributedContext* context) {
  const Checker check(context);
  const DistributedEnv& env = context->env();
  RETURN_IF_ERROR(check.CheckBinary());
  RETURN_IF_ERROR(check.CheckPlan(plan));
  RETURN_IF_ERROR(check.PublishPlannedBytes(plan));
  if (env.local_rank == 0) RETURN_IF_ERROR(check.CheckMemory(plan));
  std::string marker;
  if (!options.checkpoint_dir.empty()) {
    if (env.rank == 0) {
      ASSIGN_OR_RETURN(marker, check.WriteMarker(options.checkpoint_dir));
    } else if (env.local_rank == 0 && env.node_rank != 0) {
      RETURN_IF_ERROR(check.CheckMarker(options.checkpoint_dir));
    }
  }
  absl::Status all_passed = context->failure();
  if (all_passed.ok()) all_passed = context->control()->Barrier("preflight", env.connect_timeout_ms);
  if (!marker.empty()) {  // every node has looked at it (or the job failed)
    std::error_code ignored;
    std::filesystem::remove(marker, ignored);
  }
  return all_passed;
}

}  // namespace train
}  // namespace oneflow_like
