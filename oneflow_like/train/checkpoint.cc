#include "oneflow_like/train/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "oneflow_like/core/proto/checkpoint.pb.h"
#include "oneflow_like/core/status.h"
#include "oneflow_like/core/tensor.h"
#include "oneflow_like/train/checkpoint_format.h"
#include "oneflow_like/train/checkpoint_reader.h"

namespace oneflow_like {
namespace train {
namespace {

constexpr char kComplete[] = "COMPLETE";

// One variable shard to save: what the runtime holds and where it sits.
struct ShardToSave {
  std::string name;
  Tensor data;
  const ShardInfoProto* info;
};

absl::Status MakeDirectories(const std::string& path) {
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error) return absl::InternalError(absl::StrCat("cannot create directory ", path, ": ", error.message()));
  return absl::OkStatus();
}

// Writes rank `rank`'s files from `shards` (sorted by name).
absl::Status WriteRank(int32_t rank, int32_t world_size, const CheckpointMeta& meta,
                       const std::vector<ShardToSave>& shards, const std::string& dir,
                       const CheckpointSaveOptions& options) {
  if (options.chunk_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint chunk_bytes must be positive, got ", options.chunk_bytes));
  }
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrCat("saving rank ", rank, " of a world of ", world_size, " ranks"));
  }
  if (std::filesystem::exists(absl::StrCat(dir, "/", kComplete))) {
    return absl::AlreadyExistsError(absl::StrCat("checkpoint ", dir,
                                                 " is already COMPLETE; save into a new directory "
                                                 "(CheckpointDirName(root, step)) instead of overwriting it"));
  }
  const std::string rank_dir = RankDirectory(dir, rank);
  RETURN_IF_ERROR(MakeDirectories(rank_dir));
  CheckpointRankProto proto;
  proto.set_format_version(kCheckpointFormatVersion);
  proto.set_rank(rank);
  proto.set_world_size(world_size);
  proto.set_step(meta.step);
  proto.set_data_position(meta.data_position);
  proto.set_layout(meta.layout);
  proto.set_plan_hash(meta.plan_hash);
  // shards.bin is streamed and committed first: a meta.pb always describes a whole shards.bin.
  ASSIGN_OR_RETURN(AtomicFileWriter shards_file, AtomicFileWriter::Open(absl::StrCat(rank_dir, "/shards.bin")));
  int64_t shards_bytes = 0;
  for (const ShardToSave& shard : shards) {
    for (const SbpProto& sbp : shard.info->nd_sbp().sbp()) {
      if (sbp.kind() == SbpProto::PARTIAL_SUM) {
        return absl::InvalidArgumentError(absl::StrCat(
            "cannot checkpoint variable '", shard.name, "' on rank ", rank,
            ": it is a partial sum (P) in its layout; a variable must be split (S) or broadcast (B) to be saved"));
      }
    }
    ASSIGN_OR_RETURN(Box box, ShardBox(shard.name, rank, *shard.info, shard.data.shape()));
    CheckpointVariableProto* variable = proto.add_variables();
    variable->set_name(shard.name);
    variable->set_dtype(static_cast<DataTypeProto>(shard.data.dtype()));
    *variable->mutable_logical_dims() = shard.info->logical_dims();
    if (shard.info->logical_dims().empty()) {
      for (int64_t dim : shard.data.shape().dims()) variable->add_logical_dims(dim);
    }
    *variable->mutable_nd_sbp() = shard.info->nd_sbp();
    *variable->mutable_hierarchy() = shard.info->hierarchy();
    *variable->mutable_mesh_coords() = shard.info->mesh_coords();
    *variable->mutable_region() = BoxToProto(box);
    variable->set_byte_offset(shards_bytes);
    variable->set_byte_length(shard.data.byte_size());
    variable->set_chunk_bytes(options.chunk_bytes);
    const char* data = static_cast<const char*>(shard.data.raw_data());
    for (int64_t begin = 0; begin < shard.data.byte_size(); begin += options.chunk_bytes) {
      const int64_t length = std::min(options.chunk_bytes, shard.data.byte_size() - begin);
      variable->add_chunk_crc32c(Crc32c(data + begin, static_cast<size_t>(length)));
    }
    RETURN_IF_ERROR(shards_file.Append(absl::string_view(data, static_cast<size_t>(shard.data.byte_size()))));
    shards_bytes += shard.data.byte_size();
  }
  proto.set_shards_bytes(shards_bytes);
  RETURN_IF_ERROR(shards_file.Commit());
  return WriteFileAtomically(absl::StrCat(rank_dir, "/meta.pb"), proto.SerializeAsString());
}

}  // namespace

std::string CheckpointDirName(const std::string& root, int64_t step) {
  return absl::StrFormat("%s/step_%08d", root, step);
}

absl::Status SaveRankShards(const actor::Runtime& runtime, const CheckpointMeta& meta, int32_t world_size,
                            const std::string& dir, const CheckpointSaveOptions& options) {
  std::vector<ShardToSave> shards;
  for (const std::string& name : runtime.VariableNames()) {
    ASSIGN_OR_RETURN(Tensor data, runtime.ReadVariableShard(name));
    shards.push_back(ShardToSave{name, std::move(data), &runtime.FindBinding(name)->shard()});
  }
  return WriteRank(runtime.rank().value(), world_size, meta, shards, dir, options);
}

absl::Status MarkCheckpointComplete(const std::string& dir, int32_t world_size) {
  if (world_size < 1) return absl::InvalidArgumentError(absl::StrCat("world_size must be positive, got ", world_size));
  CheckpointCompleteProto complete;
  complete.set_format_version(kCheckpointFormatVersion);
  complete.set_world_size(world_size);
  for (int32_t rank = 0; rank < world_size; ++rank) {
    ASSIGN_OR_RETURN(RankMeta rank_meta, ReadRankMeta(dir, rank, world_size, /*expected_crc32c=*/std::nullopt));
    if (rank == 0) complete.set_step(rank_meta.proto.step());
    if (rank_meta.proto.step() != complete.step()) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint ", dir, ": rank ", rank, " saved step ",
                                                     rank_meta.proto.step(), " but rank 0 saved step ",
                                                     complete.step(), "; save every rank at the same step"));
    }
    complete.add_meta_crc32c(rank_meta.crc32c);
  }
  return WriteFileAtomically(absl::StrCat(dir, "/", kComplete), complete.SerializeAsString());
}

absl::StatusOr<CheckpointMeta> LoadRankShards(actor::Runtime* runtime, const std::string& dir,
                                              CheckpointLoadStats* stats) {
  ASSIGN_OR_RETURN(CheckpointReader reader, CheckpointReader::Open(dir));
  RETURN_IF_ERROR(reader.LoadInto(runtime, stats));
  return reader.meta();
}

absl::StatusOr<std::string> LatestCheckpoint(const std::string& root) {
  std::error_code error;
  std::vector<std::pair<int64_t, std::string>> candidates;
  for (std::filesystem::directory_iterator it(root, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= 5 || name.compare(0, 5, "step_") != 0) continue;
    const std::string digits = name.substr(5);
    if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    candidates.emplace_back(std::stoll(digits), it->path().string());
  }
  if (error) return absl::NotFoundError(absl::StrCat("cannot list checkpoint root ", root, ": ", error.message()));
  std::sort(candidates.begin(), candidates.end(), std::greater<>());
  for (const auto& [step, path] : candidates) {
    if (IsComplete(path)) return path;
  }
  return absl::NotFoundError(absl::StrCat("no complete checkpoint (step_<N>/COMPLETE) under ", root, " (",
                                          candidates.size(), " incomplete)"));
}

absl::Status SaveSession(const actor::Session& session, const CheckpointMeta& meta, const std::string& dir,
                         const CheckpointSaveOptions& options) {
  for (int32_t rank = 0; rank < session.world_size(); ++rank) {
    const actor::Runtime* runtime = session.runtime(rank);
    if (runtime != nullptr) {
      RETURN_IF_ERROR(SaveRankShards(*runtime, meta, session.world_size(), dir, options));
    } else {
      RETURN_IF_ERROR(WriteRank(rank, session.world_size(), meta, {}, dir, options));
    }
  }
  return MarkCheckpointComplete(dir, session.world_size());
}

absl::StatusOr<CheckpointMeta> LoadSession(actor::Session* session, const std::string& dir,
                                           CheckpointLoadStats* stats) {
  ASSIGN_OR_RETURN(CheckpointReader reader, CheckpointReader::Open(dir));
  for (int32_t rank = 0; rank < session->world_size(); ++rank) {
    actor::Runtime* runtime = session->runtime(rank);
    if (runtime != nullptr) RETURN_IF_ERROR(reader.LoadInto(runtime, stats));
  }
  return reader.meta();
}

}  // namespace train
}  // namespace oneflow_like
