#include "oneflow_like/train/checkpoint_format.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace train {
namespace {

constexpr std::array<uint32_t, 256> MakeCrc32cTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrc32cTable = MakeCrc32cTable();

absl::Status ErrnoError(const std::string& what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

std::string Directory(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Writes all of `bytes` to `fd` (write may write less than asked).
bool WriteAll(int fd, absl::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

uint32_t Crc32c(const void* data, size_t size, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = kCrc32cTable[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

absl::StatusOr<AtomicFileWriter> AtomicFileWriter::Open(const std::string& path) {
  std::string temporary = absl::StrCat(path, ".tmp.", ::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot create", temporary);
  return AtomicFileWriter(fd, path, std::move(temporary));
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)), temporary_(std::move(other.temporary_)) {}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temporary_.c_str());
  }
}

absl::Status AtomicFileWriter::Append(absl::string_view bytes) {
  if (fd_ < 0) return absl::InternalError(absl::StrCat("appending to ", path_, " after Commit"));
  if (!WriteAll(fd_, bytes)) return ErrnoError("cannot write", temporary_);
  return absl::OkStatus();
}

absl::Status AtomicFileWriter::Commit() {
  if (fd_ < 0) return absl::InternalError(absl::StrCat("committing ", path_, " twice"));
  const bool synced = ::fsync(fd_) == 0;
  const int saved_errno = errno;
  ::close(fd_);
  fd_ = -1;
  if (!synced || ::rename(temporary_.c_str(), path_.c_str()) != 0) {
    errno = synced ? errno : saved_errno;
    absl::Status status = ErrnoError(synced ? "cannot rename temporary to" : "cannot fsync temporary of", path_);
    ::unlink(temporary_.c_str());
    return status;
  }
  // Make the rename itself durable.
  const std::string directory = Directory(path_);
  const int dir_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return ErrnoError("cannot open directory", directory);
  const bool dir_synced = ::fsync(dir_fd) == 0;
  ::close(dir_fd);
  if (!dir_synced) return ErrnoError("cannot fsync directory", directory);
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes) {
  ASSIGN_OR_RETURN(AtomicFileWriter writer, AtomicFileWriter::Open(path));
  RETURN_IF_ERROR(writer.Append(bytes));
  return writer.Commit();
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  ASSIGN_OR_RETURN(ReadOnlyFile file, ReadOnlyFile::Open(path));
  std::string bytes(static_cast<size_t>(file.size()), '\0');
  RETURN_IF_ERROR(file.ReadAt(0, file.size(), bytes.data()));
  return bytes;
}

absl::StatusOr<ReadOnlyFile> ReadOnlyFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("missing file ", path));
    return ErrnoError("cannot open", path);
  }
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  }
  return ReadOnlyFile(fd, static_cast<int64_t>(info.st_size), path);
}

ReadOnlyFile::ReadOnlyFile(ReadOnlyFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), size_(other.size_), path_(std::move(other.path_)) {}

ReadOnlyFile& ReadOnlyFile::operator=(ReadOnlyFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
    path_ = std::move(other.path_);
  }
  return *this;
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status ReadOnlyFile::ReadAt(int64_t offset, int64_t length, char* out) const {
  if (offset < 0 || length < 0 || offset > size_ || length > size_ - offset) {
    return absl::InvalidArgumentError(absl::StrCat("truncated file ", path_, ": reading bytes [", offset, ", ",
                                                   offset + length, ") but the file has ", size_, " bytes"));
  }
  int64_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd_, out + done, static_cast<size_t>(length - done), offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("cannot read", path_);
    if (n == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("truncated file ", path_, ": it ended at byte ", offset + done, " while reading up to byte ",
                       offset + length));
    }
    done += n;
  }
  return absl::OkStatus();
}

int64_t Box::Volume() const {
  int64_t volume = 1;
  for (int a = 0; a < num_axes(); ++a) volume *= std::max<int64_t>(0, end[a] - begin[a]);
  return volume;
}

std::vector<int64_t> Box::Dims() const {
  std::vector<int64_t> dims(begin.size());
  for (int a = 0; a < num_axes(); ++a) dims[a] = end[a] - begin[a];
  return dims;
}

std::string Box::ToString() const {
  std::vector<std::string> axes;
  for (int a = 0; a < num_axes(); ++a) axes.push_back(absl::StrCat(begin[a], ":", end[a]));
  return absl::StrCat("[", absl::StrJoin(axes, ", "), "]");
}

Box BoxFromProto(const RegionProto& region) {
  return Box{std::vector<int64_t>(region.begin().begin(), region.begin().end()),
             std::vector<int64_t>(region.end().begin(), region.end().end())};
}

RegionProto BoxToProto(const Box& box) {
  RegionProto region;
  for (int a = 0; a < box.num_axes(); ++a) {
    region.add_begin(box.begin[a]);
    region.add_end(box.end[a]);
  }
  return region;
}

bool Intersect(const Box& a, const Box& b, Box* out) {
  out->begin.resize(a.begin.size());
  out->end.resize(a.begin.size());
  for (int axis = 0; axis < a.num_axes(); ++axis) {
    out->begin[axis] = std::max(a.begin[axis], b.begin[axis]);
    out->end[axis] = std::min(a.end[axis], b.end[axis]);
    if (out->begin[axis] >= out->end[axis]) return false;
  }
  return true;
}

void ForEachRun(const Box& source, const Box& target, const Box& overlap,
                const std::function<void(int64_t, int64_t, int64_t)>& fn) {
  const int n = overlap.num_axes();
  if (n == 0) {
    fn(0, 0, 1);
    return;
  }
  if (overlap.Volume() == 0) return;
  const std::vector<int64_t> s = source.Dims(), t = target.Dims(), o = overlap.Dims();
  std::vector<int64_t> source_stride(n, 1), target_stride(n, 1);
  for (int a = n - 2; a >= 0; --a) {
    source_stride[a] = source_stride[a + 1] * s[a + 1];
    target_stride[a] = target_stride[a + 1] * t[a + 1];
  }
  // Axes k+1.. are held in full by source, target and overlap: they merge into the run.
  int k = n - 1;
  int64_t run = o[k];
  while (k > 0 && o[k] == s[k] && o[k] == t[k]) {
    --k;
    run *= o[k];
  }
  std::vector<int64_t> index(k, 0);  // odometer over the overlap's axes 0..k-1
  while (true) {
    int64_t source_element = 0, target_element = 0;
    for (int a = 0; a < n; ++a) {
      const int64_t position = overlap.begin[a] + (a < k ? index[a] : 0);
      source_element += (position - source.begin[a]) * source_stride[a];
      target_element += (position - target.begin[a]) * target_stride[a];
    }
    fn(source_element, target_element, run);
    int a = k - 1;
    while (a >= 0 && ++index[a] == o[a]) index[a--] = 0;
    if (a < 0) return;
  }
}

}  // namespace train
}  // namespace oneflow_like
