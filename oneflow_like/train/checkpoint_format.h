// The building blocks of sharded checkpoints (checkpoint.h): checksums, crash-safe file
// writes, positional reads, and the box arithmetic that maps a saved shard onto a new one.
//
// Box arithmetic, worked example: a [4, 6] variable saved as S(1) over 2 ranks (rank 0 holds
// columns [0, 3), rank 1 columns [3, 6)) loaded as S(0) over 2 ranks. The loader's rank 1
// wants box {begin [2, 0], end [4, 6]}; its intersection with rank 0's saved box
// {[0, 0], [4, 3]} is {[2, 0], [4, 3]}, which ForEachRun visits as two runs of 3 elements:
//   source (rank 0's shard, row-major [4, 3]) element 6 -> target (shard [2, 6]) element 0,
//   source element 9 -> target element 6.
// Trailing axes that both boxes hold in full merge into one run (a row split is one run).
//
// Errors: file helpers return InvalidArgument naming the path for missing/short files and
// Internal for failed writes (with errno text). Everything here is thread-compatible.
#ifndef ONEFLOW_LIKE_TRAIN_CHECKPOINT_FORMAT_H_
#define ONEFLOW_LIKE_TRAIN_CHECKPOINT_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace train {

inline constexpr int32_t kCheckpointFormatVersion = 1;

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as in iSCSI / ext4; `crc` chains
// calls: Crc32c(b, n2, Crc32c(a, n1)) == Crc32c(a ++ b). Crc32c("123456789") == 0xE3069283.
uint32_t Crc32c(const void* data, size_t size, uint32_t crc = 0);

// Writes a file crash-safely in pieces: Append goes to a temporary "<path>.tmp.<pid>" in the
// same directory; Commit fsyncs it, renames it over `path` and fsyncs the directory, so a
// reader sees the old file or the whole new one. Destroying an uncommitted writer removes the
// temporary. Move-only.
class AtomicFileWriter {
 public:
  static absl::StatusOr<AtomicFileWriter> Open(const std::string& path);
  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&&) = delete;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

  absl::Status Append(absl::string_view bytes);
  absl::Status Commit();  // REQUIRES: called once

 private:
  AtomicFileWriter(int fd, std::string path, std::string temporary)
      : fd_(fd), path_(std::move(path)), temporary_(std::move(temporary)) {}
  int fd_ = -1;
  std::string path_;
  std::string temporary_;
};

// AtomicFileWriter in one call.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes);
// The whole file. NotFound when it does not exist (message names the path).
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// A file opened for positional reads (pread); closes on destruction. Move-only.
class ReadOnlyFile {
 public:
  static absl::StatusOr<ReadOnlyFile> Open(const std::string& path);
  ReadOnlyFile(ReadOnlyFile&& other) noexcept;
  ReadOnlyFile& operator=(ReadOnlyFile&& other) noexcept;
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;
  ~ReadOnlyFile();

  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Reads exactly `length` bytes at `offset`; InvalidArgument naming the file when it ends
  // before offset + length (a truncated file).
  absl::Status ReadAt(int64_t offset, int64_t length, char* out) const;

 private:
  ReadOnlyFile(int fd, int64_t size, std::string path) : fd_(fd), size_(size), path_(std::move(path)) {}
  int fd_ = -1;
  int64_t size_ = 0;
  std::string path_;
};

// A box of a logical tensor: [begin[a], end[a]) per axis; no axes = a scalar (one element).
struct Box {
  std::vector<int64_t> begin;
  std::vector<int64_t> end;

  int num_axes() const { return static_cast<int>(begin.size()); }
  int64_t Volume() const;  // elements; 1 for a scalar
  std::vector<int64_t> Dims() const;
  bool operator==(const Box& other) const { return begin == other.begin && end == other.end; }
  std::string ToString() const;  // "[0:2, 3:6]"
};

Box BoxFromProto(const RegionProto& region);
RegionProto BoxToProto(const Box& box);
// The intersection; false when it is empty. REQUIRES: equal num_axes.
bool Intersect(const Box& a, const Box& b, Box* out);

// Visits the intersection `overlap` of boxes `source` and `target` (both row-major shards of
// the same logical tensor) as maximal contiguous runs: fn(source_element, target_element,
// elements), offsets in elements from each shard's start. REQUIRES: overlap lies in both.
void ForEachRun(const Box& source, const Box& target, const Box& overlap,
                const std::function<void(int64_t, int64_t, int64_t)>& fn);

}  // namespace train
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_TRAIN_CHECKPOINT_FORMAT_H_
