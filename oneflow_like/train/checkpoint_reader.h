// CheckpointReader: the load side of checkpoint.h. Opening a checkpoint directory validates
// its COMPLETE marker and every rank's meta.pb (checksums recorded in COMPLETE, field ranges,
// boxes inside the logical shape, byte ranges inside shards.bin) and indexes the saved shards
// by variable name; LoadInto then fills one Runtime's variables, reading from each saved
// shard only the checksum chunks that overlap the runtime's box, and verifying each chunk.
//
//   ASSIGN_OR_RETURN(CheckpointReader reader, CheckpointReader::Open("/ck/step_00000012"));
//   for (actor::Runtime* runtime : local_runtimes) RETURN_IF_ERROR(reader.LoadInto(runtime, nullptr));
//   trainer->set_next_step(reader.meta().step + 1);
//
// Errors as in checkpoint.h (InvalidArgument naming the file / variable / rank). Also the
// shared helpers of the save side (directory names, shard boxes, meta validation).
// Thread-compatible; LoadInto on distinct runtimes may not run concurrently (shared files).
#ifndef ONEFLOW_LIKE_TRAIN_CHECKPOINT_READER_H_
#define ONEFLOW_LIKE_TRAIN_CHECKPOINT_READER_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "oneflow_like/actor/runtime.h"
#include "oneflow_like/core/proto/checkpoint.pb.h"
#include "oneflow_like/train/checkpoint.h"
#include "oneflow_like/train/checkpoint_format.h"

namespace oneflow_like {
namespace train {

// dir + "/rank_" + rank.
std::string RankDirectory(const std::string& dir, int32_t rank);
// The box of the logical tensor a shard of shape `shard_shape` covers, from its ShardInfo.
// InvalidArgument (naming variable and rank) when it does not fit the logical shape.
absl::StatusOr<Box> ShardBox(const std::string& name, int32_t rank, const ShardInfoProto& info,
                             const Shape& shard_shape);
// Whether `dir`/COMPLETE exists and parses.
bool IsComplete(const std::string& dir);

struct RankMeta {
  CheckpointRankProto proto;
  uint32_t crc32c = 0;  // of meta.pb's bytes
};
// Reads and validates rank_<rank>/meta.pb of a `world_size`-rank checkpoint; with
// `expected_crc32c`, its bytes must have that checksum (the one COMPLETE recorded).
absl::StatusOr<RankMeta> ReadRankMeta(const std::string& dir, int32_t rank, int32_t world_size,
                                      std::optional<uint32_t> expected_crc32c);

// "optimizer/step" or "optimizer/step_<digits>": the optimizer pass's Adam step counters.
bool IsStepCounter(absl::string_view name);

class CheckpointReader {
 public:
  // InvalidArgument "incomplete checkpoint: ..." without COMPLETE; errors of ReadRankMeta.
  static absl::StatusOr<CheckpointReader> Open(const std::string& dir);

  const CheckpointMeta& meta() const { return meta_; }
  int32_t world_size() const { return static_cast<int32_t>(ranks_.size()); }
  // Reads every variable of `runtime` and writes them (all or none). `stats` may be null;
  // it is added to.
  absl::Status LoadInto(actor::Runtime* runtime, CheckpointLoadStats* stats);

 private:
  // One saved shard of one variable.
  struct Saved {
    int32_t rank;
    const CheckpointVariableProto* variable;
    Box box;
  };
  CheckpointReader() = default;
  // The runtime's shard of `name`, assembled from the saved shards.
  absl::StatusOr<Tensor> ReadVariable(const actor::Runtime& runtime, const std::string& name,
                                      CheckpointLoadStats* stats);
  // Copies the overlap of `saved` with `target` into `out`, reading and verifying only the
  // chunks the overlap touches.
  absl::Status ReadOverlap(const Saved& saved, const Box& target, const Box& overlap, Tensor* out,
                           CheckpointLoadStats* stats);
  absl::StatusOr<const ReadOnlyFile*> ShardsFile(int32_t rank);
  // For an Adam step counter of this plan that the checkpoint lacks (the compiler makes one
  // per parameter placement: "optimizer/step", "optimizer/step_1", ...; a pp2 plan has two, a
  // pp1 plan one): the checkpoint's counters, which must all hold the same value; end() if
  // it has none.
  absl::StatusOr<std::map<std::string, std::vector<Saved>>::const_iterator> FindStepCounter(
      const std::string& name, CheckpointLoadStats* stats);

  std::string dir_;
  CheckpointMeta meta_;
  std::vector<std::unique_ptr<CheckpointRankProto>> ranks_;  // stable addresses for Saved
  std::map<std::string, std::vector<Saved>> saved_;          // by variable name, in rank order
  std::map<int32_t, std::unique_ptr<ReadOnlyFile>> files_;   // opened shards.bin, by rank
};

}  // namespace train
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_TRAIN_CHECKPOINT_READER_H_
