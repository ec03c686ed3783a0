#include "oneflow_like/train/checkpoint_reader.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace train {
namespace {

constexpr int32_t kMaxWorldSize = 1 << 20;

std::string ShapeText(const google::protobuf::RepeatedField<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

bool HasPartialSum(const NdSbpProto& nd_sbp) {
  return std::any_of(nd_sbp.sbp().begin(), nd_sbp.sbp().end(),
                     [](const SbpProto& sbp) { return sbp.kind() == SbpProto::PARTIAL_SUM; });
}

// Field ranges of one saved variable of rank_<rank>/meta.pb at `path`.
absl::Status ValidateVariable(const CheckpointVariableProto& variable, int64_t shards_bytes, const std::string& path) {
  const auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat("corrupted file ", path, ": variable '", variable.name(), "' ", what));
  };
  if (!DataTypeProto_IsValid(variable.dtype()) || variable.dtype() == DT_INVALID) {
    return bad(absl::StrCat("has an invalid dtype ", static_cast<int>(variable.dtype())));
  }
  const int axes = variable.logical_dims_size();
  if (variable.region().begin_size() != axes || variable.region().end_size() != axes) {
    return bad(absl::StrCat("has a region of ", variable.region().begin_size(), " axes for a logical shape of ", axes));
  }
  for (int a = 0; a < axes; ++a) {
    const int64_t begin = variable.region().begin(a), end = variable.region().end(a);
    if (begin < 0 || begin > end || end > variable.logical_dims(a)) {
      return bad(absl::StrCat("has region ", BoxFromProto(variable.region()).ToString(), " outside its logical shape ",
                              ShapeText(variable.logical_dims())));
    }
  }
  const int64_t expected = BoxFromProto(variable.region()).Volume() * SizeOf(static_cast<DataType>(variable.dtype()));
  if (variable.byte_length() != expected) {
    return bad(absl::StrCat("has ", variable.byte_length(), " bytes for a region of ", expected, " bytes"));
  }
  if (variable.byte_offset() < 0 || variable.byte_offset() > shards_bytes - variable.byte_length()) {
    return bad(absl::StrCat("lies at bytes [", variable.byte_offset(), ", ", variable.byte_offset() + variable.byte_length(),
                            ") outside shards.bin's ", shards_bytes, " bytes"));
  }
  if (variable.byte_length() > 0) {
    if (variable.chunk_bytes() < 1) return bad(absl::StrCat("has chunk_bytes ", variable.chunk_bytes()));
    const int64_t chunks = (variable.byte_length() + variable.chunk_bytes() - 1) / variable.chunk_bytes();
    if (variable.chunk_crc32c_size() != chunks) {
      return bad(absl::StrCat("has ", variable.chunk_crc32c_size(), " chunk checksums for ", chunks, " chunks"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string RankDirectory(const std::string& dir, int32_t rank) { return absl::StrCat(dir, "/rank_", rank); }

absl::StatusOr<Box> ShardBox(const std::string& name, int32_t rank, const ShardInfoProto& info,
                             const Shape& shard_shape) {
  const int axes = shard_shape.num_axes();
  std::vector<int64_t> logical(info.logical_dims().begin(), info.logical_dims().end());
  if (logical.empty()) logical = shard_shape.dims();
  if (static_cast<int>(logical.size()) != axes || info.offset_size() > axes) {
    return absl::InvalidArgumentError(absl::StrCat("variable '", name, "' on rank ", rank, ": shard ",
                                                   shard_shape.ToString(), " does not match the logical shape [",
                                                   absl::StrJoin(logical, ","), "] of its shard info"));
  }
  Box box;
  for (int a = 0; a < axes; ++a) {
    const int64_t offset = a < info.offset_size() ? info.offset(a) : 0;
    box.begin.push_back(offset);
    box.end.push_back(offset + shard_shape.dim(a));
    if (offset < 0 || box.end.back() > logical[a]) {
      return absl::InvalidArgumentError(absl::StrCat("variable '", name, "' on rank ", rank, ": shard box ",
                                                     Box{box.begin, box.end}.ToString(), " exceeds axis ", a,
                                                     " of the logical shape [", absl::StrJoin(logical, ","), "]"));
    }
  }
  return box;
}

bool IsComplete(const std::string& dir) {
  absl::StatusOr<std::string> bytes = ReadWholeFile(absl::StrCat(dir, "/COMPLETE"));
  CheckpointCompleteProto complete;
  return bytes.ok() && complete.ParseFromString(*bytes) && complete.format_version() == kCheckpointFormatVersion;
}

absl::StatusOr<RankMeta> ReadRankMeta(const std::string& dir, int32_t rank, int32_t world_size,
                                      std::optional<uint32_t> expected_crc32c) {
  const std::string path = absl::StrCat(RankDirectory(dir, rank), "/meta.pb");
  absl::StatusOr<std::string> bytes = ReadWholeFile(path);
  if (absl::IsNotFound(bytes.status())) {
    return absl::InvalidArgumentError(absl::StrCat("missing file ", path, ": rank ", rank,
                                                   " did not finish saving this checkpoint (or the file was removed)"));
  }
  RETURN_IF_ERROR(bytes.status());
  RankMeta meta;
  meta.crc32c = Crc32c(bytes->data(), bytes->size());
  if (expected_crc32c.has_value() && *expected_crc32c != meta.crc32c) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "corrupted file %s: CRC-32C %08x differs from %08x recorded in COMPLETE (rank %d's metadata was damaged "
        "or rewritten after the checkpoint was completed)",
        path, meta.crc32c, *expected_crc32c, rank));
  }
  if (!meta.proto.ParseFromString(*bytes) || meta.proto.format_version() != kCheckpointFormatVersion) {
    return absl::InvalidArgumentError(absl::StrCat("corrupted file ", path, ": not a CheckpointRankProto of format version ",
                                                   kCheckpointFormatVersion, " (", bytes->size(), " bytes)"));
  }
  if (meta.proto.rank() != rank || meta.proto.world_size() != world_size) {
    return absl::InvalidArgumentError(absl::StrCat("corrupted file ", path, ": it describes rank ", meta.proto.rank(),
                                                   " of ", meta.proto.world_size(), " ranks, expected rank ", rank,
                                                   " of ", world_size));
  }
  if (meta.proto.shards_bytes() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("corrupted file ", path, ": negative shards_bytes"));
  }
  for (const CheckpointVariableProto& variable : meta.proto.variables()) {
    RETURN_IF_ERROR(ValidateVariable(variable, meta.proto.shards_bytes(), path));
  }
  return meta;
}

absl::StatusOr<CheckpointReader> CheckpointReader::Open(const std::string& dir) {
  if (!std::filesystem::is_directory(dir)) {
    return absl::InvalidArgumentError(absl::StrCat("no checkpoint directory ", dir));
  }
  const std::string complete_path = absl::StrCat(dir, "/COMPLETE");
  absl::StatusOr<std::string> bytes = ReadWholeFile(complete_path);
  if (absl::IsNotFound(bytes.status())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "incomplete checkpoint: ", dir, " has no COMPLETE marker; was it interrupted while saving? "
        "(LatestCheckpoint(root) skips such directories)"));
  }
  RETURN_IF_ERROR(bytes.status());
  CheckpointCompleteProto complete;
  if (!complete.ParseFromString(*bytes) || complete.format_version() != kCheckpointFormatVersion ||
      complete.world_size() < 1 || complete.world_size() > kMaxWorldSize ||
      complete.meta_crc32c_size() != complete.world_size()) {
    return absl::InvalidArgumentError(absl::StrCat("corrupted file ", complete_path,
                                                   ": not a CheckpointCompleteProto of format version ",
                                                   kCheckpointFormatVersion, " with one checksum per rank"));
  }
  CheckpointReader reader;
  reader.dir_ = dir;
  for (int32_t rank = 0; rank < complete.world_size(); ++rank) {
    ASSIGN_OR_RETURN(RankMeta meta, ReadRankMeta(dir, rank, complete.world_size(), complete.meta_crc32c(rank)));
    reader.ranks_.push_back(std::make_unique<CheckpointRankProto>(std::move(meta.proto)));
  }
  const CheckpointRankProto& first = *reader.ranks_.front();
  reader.meta_ = CheckpointMeta{first.step(), first.data_position(), first.layout(), first.plan_hash()};
  for (const auto& rank : reader.ranks_) {
    for (const CheckpointVariableProto& variable : rank->variables()) {
      reader.saved_[variable.name()].push_back(Saved{rank->rank(), &variable, BoxFromProto(variable.region())});
    }
  }
  return reader;
}

absl::Status CheckpointReader::LoadInto(actor::Runtime* runtime, CheckpointLoadStats* stats) {
  std::vector<std::pair<std::string, Tensor>> values;
  for (const std::string& name : runtime->VariableNames()) {
    ASSIGN_OR_RETURN(Tensor value, ReadVariable(*runtime, name, stats));
    values.emplace_back(name, std::move(value));
  }
  for (const auto& [name, value] : values) RETURN_IF_ERROR(runtime->WriteVariableShard(name, value));
  return absl::OkStatus();
}

absl::StatusOr<Tensor> CheckpointReader::ReadVariable(const actor::Runtime& runtime, const std::string& name,
                                                      CheckpointLoadStats* stats) {
  const int32_t rank = runtime.rank().value();
  const TensorBindingProto& binding = *runtime.FindBinding(name);
  const TensorDesc& desc = runtime.BindingDesc(name);
  if (HasPartialSum(binding.shard().nd_sbp())) {
    return absl::InvalidArgumentError(absl::StrCat("cannot load variable '", name, "' on rank ", rank,
                                                   ": it is a partial sum (P) in this plan's layout"));
  }
  ASSIGN_OR_RETURN(Box target, ShardBox(name, rank, binding.shard(), desc.shape));
  std::map<std::string, std::vector<Saved>>::const_iterator found = saved_.find(name);
  if (found == saved_.end() && IsStepCounter(name)) {
    ASSIGN_OR_RETURN(found, FindStepCounter(name, stats));
  }
  if (found == saved_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "variable '", name, "' (rank ", rank, ") is missing from checkpoint ", dir_, ", which holds ", saved_.size(),
        " variables", saved_.empty() ? "" : absl::StrCat(", e.g. '", saved_.begin()->first, "'"),
        "; was it saved from a different model?"));
  }
  std::vector<int64_t> logical(binding.shard().logical_dims().begin(), binding.shard().logical_dims().end());
  if (logical.empty()) logical = desc.shape.dims();
  for (const Saved& saved : found->second) {
    const std::vector<int64_t> saved_logical(saved.variable->logical_dims().begin(),
                                             saved.variable->logical_dims().end());
    if (saved_logical != logical || static_cast<DataType>(saved.variable->dtype()) != desc.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable '", name, "' is ", DataTypeName(static_cast<DataType>(saved.variable->dtype())),
          ShapeText(saved.variable->logical_dims()), " in checkpoint ", RankDirectory(dir_, saved.rank),
          "/meta.pb but ", DataTypeName(desc.dtype), "[", absl::StrJoin(logical, ","),
          "] in this model (logical shape or dtype mismatch: a checkpoint of a different model?)"));
    }
  }
  // One saved shard per distinct box overlapping the target (this rank's own copy if any).
  std::vector<std::pair<const Saved*, Box>> chosen;
  for (const Saved& saved : found->second) {
    Box overlap;
    if (!Intersect(saved.box, target, &overlap)) continue;
    bool duplicate = false;
    for (auto& [other, other_overlap] : chosen) {
      Box common;
      if (other->box == saved.box) {
        duplicate = true;
        if (saved.rank == rank) other = &saved;
      } else if (Intersect(other->box, saved.box, &common) && common.Volume() > 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "checkpoint ", dir_, ": the saved boxes of variable '", name, "' overlap (rank ", other->rank, " ",
            other->box.ToString(), ", rank ", saved.rank, " ", saved.box.ToString(), "); the metadata is corrupted"));
      }
    }
    if (!duplicate) chosen.emplace_back(&saved, overlap);
  }
  int64_t covered = 0;
  for (const auto& entry : chosen) covered += entry.second.Volume();
  if (covered != target.Volume()) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint ", dir_, " covers only ", covered, " of the ",
                                                   target.Volume(), " elements of variable '", name, "' on rank ",
                                                   rank, " (box ", target.ToString(),
                                                   "); some rank's shards are missing from it"));
  }
  Tensor out(desc);
  for (const auto& [saved, overlap] : chosen) RETURN_IF_ERROR(ReadOverlap(*saved, target, overlap, &out, stats));
  if (stats != nullptr) stats->bytes_needed += desc.byte_size();
  return out;
}

bool IsStepCounter(absl::string_view name) {
  constexpr absl::string_view kCounter = "optimizer/step";
  if (!absl::StartsWith(name, kCounter)) return false;
  name.remove_prefix(kCounter.size());
  if (name.empty()) return true;
  if (name.size() < 2 || name[0] != '_') return false;
  return std::all_of(name.begin() + 1, name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

absl::StatusOr<std::map<std::string, std::vector<CheckpointReader::Saved>>::const_iterator>
CheckpointReader::FindStepCounter(const std::string& name, CheckpointLoadStats* stats) {
  auto chosen = saved_.cend();
  std::string chosen_bytes;
  for (auto it = saved_.cbegin(); it != saved_.cend(); ++it) {
    if (!IsStepCounter(it->first)) continue;
    const Saved& saved = it->second.front();
    if (saved.box.Volume() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint ", dir_, ": step counter '", it->first,
                                                     "' is not a scalar"));
    }
    Tensor value(TensorDesc{static_cast<DataType>(saved.variable->dtype()), Shape(saved.box.Dims())});
    RETURN_IF_ERROR(ReadOverlap(saved, saved.box, saved.box, &value, stats));
    const std::string bytes(static_cast<const char*>(value.raw_data()), static_cast<size_t>(value.byte_size()));
    if (chosen != saved_.cend() && bytes != chosen_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint ", dir_, ": step counters '", chosen->first, "' and '",
                                                     it->first, "' disagree, so '", name,
                                                     "' of this plan has no single value to take"));
    }
    if (chosen == saved_.cend()) {
      chosen = it;
      chosen_bytes = bytes;
    }
  }
  return chosen;
}

absl::Status CheckpointReader::ReadOverlap(const Saved& saved, const Box& target, const Box& overlap, Tensor* out,
                                           CheckpointLoadStats* stats) {
  const CheckpointVariableProto& variable = *saved.variable;
  const int64_t element = SizeOf(static_cast<DataType>(variable.dtype()));
  struct Run {
    int64_t source, target, elements;
  };
  std::vector<Run> runs;
  ForEachRun(saved.box, target, overlap, [&](int64_t source, int64_t target_element, int64_t elements) {
    runs.push_back(Run{source, target_element, elements});
  });
  if (runs.empty()) return absl::OkStatus();
  const int64_t chunk = variable.chunk_bytes();
  const int64_t chunks = (variable.byte_length() + chunk - 1) / chunk;
  std::vector<bool> needed(static_cast<size_t>(chunks), false);
  for (const Run& run : runs) {
    const int64_t first = run.source * element / chunk, last = ((run.source + run.elements) * element - 1) / chunk;
    for (int64_t c = first; c <= last; ++c) needed[c] = true;
  }
  const int64_t first_chunk = std::find(needed.begin(), needed.end(), true) - needed.begin();
  const int64_t span_begin = first_chunk * chunk;
  std::string buffer(static_cast<size_t>(variable.byte_length() - span_begin), '\0');
  ASSIGN_OR_RETURN(const ReadOnlyFile* file, ShardsFile(saved.rank));
  for (int64_t c = first_chunk; c < chunks;) {
    if (!needed[c]) {
      ++c;
      continue;
    }
    int64_t end = c;
    while (end < chunks && needed[end]) ++end;  // coalesce consecutive chunks into one read
    const int64_t begin_byte = c * chunk, end_byte = std::min(end * chunk, variable.byte_length());
    RETURN_IF_ERROR(file->ReadAt(variable.byte_offset() + begin_byte, end_byte - begin_byte,
                                 buffer.data() + (begin_byte - span_begin)));
    if (stats != nullptr) stats->bytes_read += end_byte - begin_byte;
    for (int64_t k = c; k < end; ++k) {
      const int64_t chunk_begin = k * chunk, chunk_end = std::min(chunk_begin + chunk, variable.byte_length());
      const uint32_t crc = Crc32c(buffer.data() + (chunk_begin - span_begin), chunk_end - chunk_begin);
      if (crc != variable.chunk_crc32c(k)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "corrupted file %s: checksum mismatch in variable '%s' of rank %d (bytes [%d, %d) of its shard, "
            "CRC-32C %08x, recorded %08x); the checkpoint is damaged, load an older one",
            file->path(), variable.name(), saved.rank, chunk_begin, chunk_end, crc, variable.chunk_crc32c(k)));
      }
    }
    c = end;
  }
  char* destination = static_cast<char*>(out->raw_data());
  for (const Run& run : runs) {
    std::memcpy(destination + run.target * element, buffer.data() + (run.source * element - span_begin),
                static_cast<size_t>(run.elements * element));
  }
  if (stats != nullptr) ++stats->shards_read;
  return absl::OkStatus();
}

absl::StatusOr<const ReadOnlyFile*> CheckpointReader::ShardsFile(int32_t rank) {
  auto found = files_.find(rank);
  if (found != files_.end()) return found->second.get();
  const std::string path = absl::StrCat(RankDirectory(dir_, rank), "/shards.bin");
  absl::StatusOr<ReadOnlyFile> file = ReadOnlyFile::Open(path);
  if (absl::IsNotFound(file.status())) {
    return absl::InvalidArgumentError(absl::StrCat("missing file ", path, " of a COMPLETE checkpoint (was it removed?)"));
  }
  RETURN_IF_ERROR(file.status());
  const int64_t expected = ranks_[rank]->shards_bytes();
  if (file->size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(file->size() < expected ? "truncated file " : "corrupted file ", path,
                                                   ": it has ", file->size(), " bytes, its meta.pb says ", expected));
  }
  auto owned = std::make_unique<ReadOnlyFile>(*std::move(file));
  const ReadOnlyFile* pointer = owned.get();
  files_[rank] = std::move(owned);
  return pointer;
}

}  // namespace train
}  // namespace oneflow_like
